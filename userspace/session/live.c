// SPDX-License-Identifier: GPL-2.0
/* The live source: load and attach (or read a running agent's maps), start or find the
 * targets, dispatch ring-buffer records to the model and its events to the sink, detach
 * everything at the end. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "base/util.h"
#include "discover/discover.h"
#include "discover/select.h"
#include "host/nvml.h"
#include "host/oci.h"
#include "host/procs.h"
#include "loader/tracer.h"
#include "model/model.h"
#include "session/session_int.h"

/* Failures held until their frames can be named (on_call), at most, and for how long. */
#define LIVE_MAX_WAITING 256
#define LIVE_WAIT_NS 500000000ull

struct waiting_failure {
	struct gm_call_event ev;
	uint64_t since_ns;
};

struct live {
	struct tracer *tracer;
	struct discovery *disc;
	struct state *state;
	struct oci_cache *oci;	/* pod and container names, lent to the model */
	pid_t child;
	int release_fd;		/* -c CMD waits on it until the probes are on */
	uint64_t next_sweep;	/* reader or agent: the next look for processes gone unseen */
	struct waiting_failure waiting[LIVE_MAX_WAITING];	/* in their order */
	unsigned int nwaiting;
};

static struct live *live_of(struct session *s)
{
	return s->src_state;
}

/* The shell's convention: the exit code, or 128 + the signal that ended it. */
static int exit_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

/* ---- ring-buffer records ---- */

static bool sink_wants(const struct session *s, __u32 type)
{
	return s->ops->on_event || (s->ops->on_failure && type == GM_REC_ALLOC_FAILED);
}

static void deliver(struct session *s, const struct gm_call_event *e)
{
	struct snap_event se;

	state_describe_event(live_of(s)->state, e, &se);
	if (e->type == GM_REC_ALLOC_FAILED)
		s->clock_ns = now_ns();	/* its snapshot is of this instant */
	session_event(s, &se);
	snap_event_release(&se);
}

static void on_call_now(struct session *s, const struct gm_call_event *e)
{
	if (e->type == GM_REC_ALLOC_FAILED)
		state_on_failure(live_of(s)->state, e);
	if (sink_wants(s, e->type))
		deliver(s, e);
}

/* The failures held so far, in their order, up to the first whose frames cannot be named yet
 * (all: every one). */
static void on_waiting_failures(struct session *s, bool all)
{
	struct live *l = live_of(s);
	uint64_t now;
	unsigned int done = 0;

	if (!l->nwaiting)
		return;		/* after every poll: most often none */
	now = now_ns();
	while (done < l->nwaiting) {
		struct waiting_failure *w = &l->waiting[done];

		if (!all && now - w->since_ns < LIVE_WAIT_NS &&
		    !state_event_named(l->state, &w->ev))
			break;
		on_call_now(s, &w->ev);
		done++;
	}
	l->nwaiting -= done;
	memmove(l->waiting, l->waiting + done, l->nwaiting * sizeof(*l->waiting));
}

/* A failure, where no sink streams every event, waits (half a second at most) until its
 * frames can be named: a failure often ends its process, whose maps can no longer be read
 * then, and the frames of a library it loaded since they were read are named only by the
 * module map of its exit, a few records on. A stream takes each event at once, in order. */
static void on_call(struct session *s, const struct gm_call_event *e)
{
	struct live *l = live_of(s);

	if (e->type == GM_REC_ALLOC_FAILED && !s->ops->on_event) {
		if (l->nwaiting == LIVE_MAX_WAITING)
			on_waiting_failures(s, true);
		l->waiting[l->nwaiting++] = (struct waiting_failure){ .ev = *e,
								      .since_ns = now_ns() };
		return;
	}
	on_call_now(s, e);
}

static void on_exit_record(struct session *s, const struct gm_call_event *e)
{
	struct gm_call_event ev = *e;

	ev.error = exit_status(e->error);	/* the kernel's wait status */
	state_on_process_exit(live_of(s)->state, &ev);
	ev.size = 0;	/* the process's CPU time: the model's, no size of an event */
	discovery_sweep_soon(live_of(s)->disc);
	if (s->ops->on_event)
		deliver(s, &ev);
}

/* An exec ended the image that made the calls: another image runs under the pid now. */
static void on_exec_end_record(struct session *s, const struct gm_call_event *e)
{
	state_on_process_exec(live_of(s)->state, e);
	discovery_sweep_soon(live_of(s)->disc);
}

/* The size each record type must have at least. */
static size_t record_size(__u32 type)
{
	switch (type) {
	case GM_REC_ALLOC:
	case GM_REC_FREE:
	case GM_REC_UNKNOWN_FREE:
	case GM_REC_ALLOC_FAILED:
	case GM_REC_PROCESS_NEW:
	case GM_REC_PROCESS_EXIT:
	case GM_REC_PROCESS_EXEC:
		return sizeof(struct gm_call_event);
	case GM_REC_EXEC:
	case GM_REC_LIB_OPEN:
		return sizeof(struct gm_file_event);
	case GM_REC_STACK_COPY:
		return sizeof(struct gm_stack_event);
	case GM_REC_PY_STACK:
		return sizeof(struct gm_py_stack_event);
	case GM_REC_EXIT_VMA:
		return sizeof(struct gm_vma_event);
	}
	return 0;
}

/* What the model and discovery learn from a record that is no call event. */
static void on_process_record(struct session *s, __u32 type, const void *data)
{
	struct live *l = live_of(s);

	switch (type) {
	case GM_REC_PROCESS_NEW:
		state_on_process_new(l->state, data);
		if (((const struct gm_call_event *)data)->held)
			tracer_release(l->tracer, (int)((const struct gm_call_event *)data)->pid);
		break;
	case GM_REC_EXEC:
		state_on_exec(l->state, data);
		discovery_on_file_event(l->disc, data);
		break;
	case GM_REC_LIB_OPEN:
		state_on_lib_open_python(l->state, data);	/* before a hold there ends */
		discovery_on_file_event(l->disc, data);
		break;
	case GM_REC_STACK_COPY:
		state_on_stack_copy(l->state, data);
		break;
	case GM_REC_PY_STACK:
		state_on_py_stack(l->state, data);
		if (((const struct gm_py_stack_event *)data)->held)
			tracer_release(l->tracer, (int)((const struct gm_py_stack_event *)data)->pid);
		break;
	case GM_REC_EXIT_VMA:
		state_on_exit_vma(l->state, data);
		break;
	}
}

static int on_record(void *ctx, const void *data, size_t size)
{
	struct session *s = ctx;
	__u32 type = size >= sizeof(type) ? *(const __u32 *)data : 0;
	size_t need = record_size(type);

	if (!need)
		p_err("unknown ring-buffer record type %u (size %zu): BPF object and binary differ?",
		      type, size);
	if (!need || size < need) {
		state_on_bad_record(live_of(s)->state);
		return 0;
	}
	switch (type) {
	case GM_REC_PROCESS_EXIT:
		on_exit_record(s, data);
		break;
	case GM_REC_PROCESS_EXEC:
		on_exec_end_record(s, data);
		break;
	case GM_REC_PROCESS_NEW:
	case GM_REC_EXEC:
	case GM_REC_LIB_OPEN:
	case GM_REC_STACK_COPY:
	case GM_REC_PY_STACK:
	case GM_REC_EXIT_VMA:
		on_process_record(s, type, data);
		break;
	default:
		on_call(s, data);
		break;
	}
	return 0;
}

static struct snapshot *live_publish(struct session *s, unsigned int wants)
{
	struct live *l = live_of(s);
	struct snapshot *snap = state_publish(l->state, wants);

	if (snap->error)
		p_err("cannot read the BPF maps: %s", strerror(-snap->error));
	discovery_get_stats(l->disc, &snap->disc);
	snap->lost[SNAP_LOST_FILES_NOT_ATTACHED] = snap->disc.not_attached;
	snap->lost[SNAP_LOST_UNHELD_LATE] = snap->disc.unheld_late +
					    tracer_holds_let_go(l->tracer);
	snap->nfiles = discovery_get_files(l->disc, &snap->files);
	if (wants & SNAP_COST) {
		snap->trap_ns = tracer_trap_ns(l->tracer);
		snap->trap_known = snap->trap_ns >= 0;
		snap->bpf_run_ns = tracer_bpf_run_ns(l->tracer);
		snap->bpf_run_known = snap->bpf_run_ns >= 0;
	}
	return snap;
}

/* ---- targets ---- */

/* Starts CMD held before exec: it runs only when release() writes to the pipe. */
static int spawn_held(char **argv, pid_t *pid, int *release_fd)
{
	int fds[2];
	char go;

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	*pid = fork();
	if (*pid < 0)
		return -errno;
	if (*pid == 0) {
		close(fds[1]);
		if (read(fds[0], &go, 1) != 1)
			_exit(127);	/* gpumem failed before release */
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		p_err("cannot run %s: %s", argv[0], strerror(errno));
		_exit(127);
	}
	close(fds[0]);
	*release_fd = fds[1];
	return 0;
}

/* Where execvp will find CMD, to look for a runtime linked into it. */
static void scan_command(struct live *l, const char *cmd)
{
	const char *path = getenv("PATH");
	char buf[4096];
	char *copy, *dir, *save = NULL;

	discovery_scan_dirs(l->disc, getenv("LD_LIBRARY_PATH"));
	if (strchr(cmd, '/')) {
		discovery_add(l->disc, cmd);
		return;
	}
	copy = xstrdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		snprintf(buf, sizeof(buf), "%s/%s", dir, cmd);
		if (access(buf, X_OK) == 0) {
			discovery_add(l->disc, buf);
			break;
		}
	}
	free(copy);
}

/* A kernel thread has no executable: it runs no CUDA code, and following it is a mistake. */
static bool is_kernel_thread(int pid)
{
	char link[64], target[16];

	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	return readlink(link, target, sizeof(target)) < 0 && errno == ENOENT && proc_exists(pid);
}

static int check_pids(const struct options *o)
{
	for (size_t i = 0; i < o->npids; i++) {
		if (kill(o->pids[i], 0) && errno == ESRCH) {
			p_err("no process with PID %d", o->pids[i]);
			return -ESRCH;
		}
		if (is_kernel_thread(o->pids[i])) {
			p_err("PID %d is a kernel thread: it runs no CUDA code", o->pids[i]);
			return -EINVAL;
		}
	}
	return 0;
}

static int start_targets(const struct options *o, struct live *l)
{
	int err;

	for (size_t i = 0; i < o->npids; i++) {
		err = tracer_add_target(l->tracer, o->pids[i]);
		if (err) {
			p_err("cannot follow PID %d: %s", o->pids[i], strerror(-err));
			return err;
		}
		discovery_scan_process(l->disc, o->pids[i]);
	}
	if (!o->cmd_argv)
		return 0;
	err = spawn_held(o->cmd_argv, &l->child, &l->release_fd);
	if (err) {
		p_err("cannot start %s: %s", o->cmd_argv[0], strerror(-err));
		return err;
	}
	err = tracer_add_target(l->tracer, l->child);
	if (err) {
		p_err("cannot follow %s: %s", o->cmd_argv[0], strerror(-err));
		return err;
	}
	scan_command(l, o->cmd_argv[0]);
	return 0;
}

/* ---- opening ---- */

/* Whether this run reads a running agent's state rather than attaching probes. */
static bool wants_agent(const struct options *o)
{
	return o->view->reads_agent && !o->no_agent && o->pin_dir && !o->cmd_argv && !o->npids &&
	       !o->nselections && !o->nlibs;
}

/* Loads the BPF side, with the cgroups that --cgroup/--container/--pod select; or opens a
 * running agent's maps. */
static int open_tracer(struct session *s)
{
	struct tracer_opts topts = s->opt->tracer;
	struct live *l = live_of(s);
	int err;

	if (wants_agent(s->opt) && tracer_open_reader(s->opt->pin_dir, &l->tracer) == 0)
		return 0;
	err = select_cgroups(s->opt->selections, s->opt->nselections, &topts.cgroup_dirs,
			     &topts.ncgroup_dirs);
	if (err)
		return err;
	if (topts.ncgroup_dirs > GM_MAX_CGROUP_FILTERS) {
		p_err("the selections match %zu cgroups; gpumem filters on at most %d",
		      topts.ncgroup_dirs, GM_MAX_CGROUP_FILTERS);
		err = -E2BIG;
	} else {
		err = tracer_open(&topts, on_record, s, &l->tracer);
	}
	selection_free(topts.cgroup_dirs, topts.ncgroup_dirs);
	return err;
}

/* The model, with what the sink wants of a process at its end. */
static void open_model(struct session *s)
{
	const struct options *o = s->opt;
	struct live *l = live_of(s);
	struct model_maps maps = tracer_model_maps(l->tracer);
	struct state_opts so = { .all_frames = o->all_frames, .no_demangle = o->no_demangle,
				 .keep_ended = o->keep_ended, .keep_ended_s = o->keep_ended_s,
				 .keep_failures = o->keep_failures,
				 .read_only = tracer_is_reader(l->tracer),
				 .by_address = o->by_address,
				 .no_python = o->tracer.no_python };

	l->state = state_new(&maps, &so);
	state_set_exit_wants(l->state, s->ops->exit_wants);
	l->oci = oci_cache_new((const char *const *)o->bundle_dirs, o->nbundle_dirs, 0);
	state_set_oci(l->state, l->oci);
}

static int live_open(struct session *s)
{
	const struct options *o = s->opt;
	struct live *l = xcalloc(1, sizeof(*l));
	struct discovery_attacher at;

	l->release_fd = -1;
	s->src_state = l;
	if (check_pids(o) || open_tracer(s))
		return 1;
	open_model(s);
	at = tracer_attacher(l->tracer);
	l->disc = discovery_new(&at, o->max_files ? o->max_files : DISCOVERY_FILES_DEFAULT);
	if (!tracer_is_reader(l->tracer)) {
		/* A write to an attached file wakes the loop: its probes go at once. */
		if (tracer_wake_on(l->tracer, discovery_watch_fd(l->disc)))
			p_debug("writes to attached files are seen only at their next open");
		for (size_t i = 0; i < o->nlibs; i++)
			if (discovery_add_required(l->disc, o->libs[i]))
				return 1;
		discovery_scan_system(l->disc);
	}
	if (start_targets(o, l))
		return 1;
	s->sink.start_wall_ns = realtime_ns();
	s->sink.pins_id = tracer_pins_id(l->tracer);
	return 0;
}

/* ---- running ---- */

static bool file_in_use(void *ctx, uint64_t kdev, uint64_t ino)
{
	return discovery_attached(ctx, kdev, ino);
}

/* The records that came within timeout_ms, then the failures that can be named now. */
static int poll_records(struct session *s, int timeout_ms)
{
	int n = tracer_poll(live_of(s)->tracer, timeout_ms);

	on_waiting_failures(s, false);
	return n;
}

/* Every record there is, and every failure held. */
static void drain(struct session *s)
{
	while (poll_records(s, 0) > 0)
		;
	on_waiting_failures(s, true);
	state_reap(live_of(s)->state);
}

/* An agent that adopted pinned state: what queued in the ring buffer while no agent read
 * it, then the processes that ended unseen meanwhile, reaped. */
static void adopt(struct session *s)
{
	struct live *l = live_of(s);
	size_t living, ended;
	uint64_t orphans;
	int stale;

	drain(s);
	snapshot_put(state_publish(l->state, 0));
	state_sweep_vanished(l->state);
	state_reap(l->state);
	orphans = state_purge_orphans(l->state);
	state_count(l->state, &living, &ended);
	/* Start-up found every file a process maps: the earlier agent's others go. */
	stale = tracer_unpin_stale_files(l->tracer, file_in_use, l->disc);
	fprintf(stderr, "gpumem: adopted the pinned state in %s: %zu processes are traced, %zu "
		"ended while no agent ran (%" PRIu64 " allocation entries of ended processes "
		"deleted; %d pins of files no process maps removed)\n", s->opt->pin_dir, living,
		ended, orphans, stale);
}

/* One line on stderr once every probe is on: people and scripts know tracing has begun. */
static void announce(struct session *s)
{
	const struct options *o = s->opt;
	struct live *l = live_of(s);
	struct discovery_stats ds;

	if (tracer_is_reader(l->tracer)) {
		fprintf(stderr, "gpumem: reading the state of the agent on %s (PID %d); attaching "
			"nothing; %s\n", o->pin_dir, tracer_agent_pid(l->tracer),
			o->duration_s > 0 ? "until the duration ends or Ctrl-C" : "Ctrl-C to stop");
		return;
	}
	discovery_get_stats(l->disc, &ds);
	fprintf(stderr, "gpumem: tracing: %u probes on %u CUDA files%s; %s\n", ds.probes, ds.files,
		tracer_watches_opens(l->tracer) ? ", watching for new ones" : "",
		o->cmd_argv ? "running the command" : o->duration_s > 0
			? "until the duration ends or Ctrl-C" : "Ctrl-C to stop");
}

static void live_start(struct session *s)
{
	struct live *l = live_of(s);
	char go = 1;

	if (tracer_adopted(l->tracer))
		adopt(s);
	s->clock_ns = now_ns();
	announce(s);
	if (l->release_fd >= 0) {
		if (write(l->release_fd, &go, 1) != 1)
			p_err("cannot release %s: %s", s->opt->cmd_argv[0], strerror(errno));
		close(l->release_fd);
		l->release_fd = -1;
	}
}

/* A reader sees no exit records and an agent may have missed some (it was down, or the ring
 * buffer was full): processes gone without one are looked for now and then. */
#define SWEEP_READER_NS 1000000000ull
#define SWEEP_AGENT_NS 5000000000ull

static void sweep_due(struct session *s)
{
	struct live *l = live_of(s);
	bool reader = tracer_is_reader(l->tracer);
	uint64_t now = now_ns();

	if (!reader && !s->opt->tracer.pin_dir)
		return;
	if (now < l->next_sweep)
		return;
	l->next_sweep = now + (reader ? SWEEP_READER_NS : SWEEP_AGENT_NS);
	if (state_sweep_vanished(l->state))
		state_reap(l->state);
}

static int live_step(struct session *s)
{
	struct live *l = live_of(s);
	int status = 0, err;

	tracer_heartbeat(l->tracer);
	err = poll_records(s, 100);
	if (err < 0) {
		p_err("reading the ring buffer failed: %s", strerror(-err));
		return -1;
	}
	fflush(s->sink.out);	/* what a batch printed is out within a poll (100 ms) */
	state_reap(l->state);
	sweep_due(s);
	if (!tracer_is_reader(l->tracer)) {
		if (tracer_woken(l->tracer))
			discovery_on_writes(l->disc);
		discovery_sweep(l->disc);
		tracer_resume_orphans(l->tracer);
		tracer_holds_let_go(l->tracer);
	}
	state_purge(l->state, false);
	s->clock_ns = now_ns();
	if (l->child > 0 && waitpid(l->child, &status, WNOHANG) == l->child) {
		l->child = 0;
		drain(s);
		s->status = exit_status(status);
		return 1;
	}
	return 0;
}

#define STOP_GRACE_NS 5000000000ull	/* a command that ignores SIGTERM is killed after this */

/* Interrupted with CMD still running: it got the terminal's signal too (else gpumem sends it
 * SIGTERM); its events are read while it ends, and one that will not end is killed. */
static int stop_child(struct session *s)
{
	struct live *l = live_of(s);
	uint64_t deadline = now_ns() + STOP_GRACE_NS;
	int status = 0, sig = session_signal();

	if (sig != SIGINT)
		kill(l->child, sig ? sig : SIGTERM);
	while (waitpid(l->child, &status, WNOHANG) != l->child) {
		if (now_ns() >= deadline) {
			p_err("%s did not end %.0f s after it was told to: killed",
			      s->opt->cmd_argv[0], STOP_GRACE_NS / 1e9);
			kill(l->child, SIGKILL);
			waitpid(l->child, &status, 0);
			break;
		}
		tracer_heartbeat(l->tracer);
		poll_records(s, 100);
		if (tracer_woken(l->tracer))	/* else its readable watch makes the poll spin */
			discovery_on_writes(l->disc);
		state_reap(l->state);
	}
	l->child = 0;
	drain(s);
	return exit_status(status);
}

static int live_stop(struct session *s, int rc)
{
	struct live *l = live_of(s);

	if (l->child > 0)
		rc = stop_child(s);
	drain(s);
	/* No process may stay held: stop holding, then answer the holds still queued. */
	tracer_stop_watching(l->tracer);
	drain(s);
	return rc;
}

static void live_close(struct session *s)
{
	struct live *l = live_of(s);

	if (!l)
		return;
	if (l->child > 0) {
		close(l->release_fd);	/* the held child exits without running CMD */
		waitpid(l->child, NULL, 0);
	}
	if (l->state && s->opt->tracer.pin_dir)
		state_purge(l->state, true);	/* the pins outlive this agent: leave nothing stale */
	nvml_close();
	discovery_free(l->disc);
	state_free(l->state);
	oci_cache_free(l->oci);
	tracer_close(l->tracer);
	free(l);
	s->src_state = NULL;
}

const struct source_ops live_source = {
	.name = "live",
	.live = true,
	.open = live_open,
	.start = live_start,
	.step = live_step,
	.stop = live_stop,
	.publish = live_publish,
	.close = live_close,
};
