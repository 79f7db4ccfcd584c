// SPDX-License-Identifier: GPL-2.0
/* One run: load and attach, start or find the targets, dispatch ring-buffer records to the
 * model, publish the model's snapshots when they are due and hand them to the view, stop on
 * Ctrl-C, --duration or the end of CMD, detach everything. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "discover.h"
#include "history.h"
#include "nvml.h"
#include "oci.h"
#include "pin.h"
#include "report.h"
#include "procs.h"
#include "select.h"
#include "session.h"
#include "state.h"
#include "util.h"

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_requested = 1;
	stop_signal = sig;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
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

#define FAILURE_SNAPSHOT_NS 50000000ull	/* a burst of failures shares one snapshot */

/* A snapshot of the model now, with what the session adds (discovery), observed by the
 * history when the view keeps one. */
static struct snapshot *publish(struct session *s, unsigned int wants)
{
	struct snapshot *snap = state_publish(s->state, wants);

	if (snap->error)
		p_err("cannot read the BPF maps: %s", strerror(-snap->error));
	discovery_get_stats(s->disc, &snap->disc);
	snap->nfiles = discovery_get_files(s->disc, &snap->files);
	if (s->hist && !(wants & SNAP_LOSSES_ONLY))
		history_observe(s->hist, snap);
	return snap;
}

/* The snapshot a failure is shown with: the process's sites at this instant. */
static const struct snapshot *failure_snapshot(struct session *s)
{
	uint64_t now = now_ns();

	if (!s->last_failure_snap || now - s->last_failure_snap_ns >= FAILURE_SNAPSHOT_NS) {
		snapshot_put(s->last_failure_snap);
		s->last_failure_snap = publish(s, SNAP_DEVICES);
		s->last_failure_snap_ns = now;
	}
	return s->last_failure_snap;
}

static void on_call(struct session *s, const struct gm_call_event *e)
{
	const struct view_ops *v = s->opt->view;
	struct snap_event se;

	if (e->type == GM_REC_ALLOC_FAILED)
		state_on_failure(s->state, e);
	if (!v->on_event && !(v->on_failure && e->type == GM_REC_ALLOC_FAILED))
		return;
	state_describe_event(s->state, e, &se);
	if (v->on_event)
		v->on_event(s, &se);
	if (v->on_failure && e->type == GM_REC_ALLOC_FAILED)
		v->on_failure(s, &se, failure_snapshot(s));
	snap_event_release(&se);
}

static void on_exit_record(struct session *s, const struct gm_call_event *e)
{
	struct gm_call_event ev = *e;
	struct snap_event se;

	ev.error = exit_status(e->error);	/* the kernel's wait status */
	state_on_process_exit(s->state, &ev);
	if (!s->opt->view->on_event)
		return;
	state_describe_event(s->state, &ev, &se);
	s->opt->view->on_event(s, &se);
	snap_event_release(&se);
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

static int on_record(void *ctx, const void *data, size_t size)
{
	struct session *s = ctx;
	__u32 type = size >= sizeof(type) ? *(const __u32 *)data : 0;
	size_t need = record_size(type);

	if (!need)
		p_err("unknown ring-buffer record type %u (size %zu): BPF object and binary differ?",
		      type, size);
	if (!need || size < need) {
		state_on_bad_record(s->state);
		return 0;
	}
	switch (type) {
	case GM_REC_PROCESS_NEW:
		state_on_process_new(s->state, data);
		if (s->opt->tracer.hold_new_procs)	/* held by the BPF side (if still holding) */
			tracer_release(s->tracer, (int)((const struct gm_call_event *)data)->pid);
		break;
	case GM_REC_PROCESS_EXIT:
		on_exit_record(s, data);
		break;
	case GM_REC_EXEC:
		state_on_exec(s->state, data);
		state_on_exec_python(s->state, data);
		discovery_on_file_event(s->disc, data);
		break;
	case GM_REC_LIB_OPEN:
		state_on_lib_open_python(s->state, data);	/* before a hold there ends */
		discovery_on_file_event(s->disc, data);
		break;
	case GM_REC_STACK_COPY:
		state_on_stack_copy(s->state, data);
		break;
	case GM_REC_PY_STACK:
		state_on_py_stack(s->state, data);
		if (((const struct gm_py_stack_event *)data)->held)
			tracer_release(s->tracer, (int)((const struct gm_py_stack_event *)data)->pid);
		break;
	case GM_REC_EXIT_VMA:
		state_on_exit_vma(s->state, data);
		break;
	default:
		on_call(s, data);
		break;
	}
	return 0;
}

void session_report_now(struct session *s, unsigned int wants)
{
	struct snapshot *snap = publish(s, s->opt->view->report_wants | wants);

	if (s->opt->view->on_report)
		s->opt->view->on_report(s, snap);
	snapshot_put(snap);
}

void session_set_report_interval(struct session *s, double seconds)
{
	s->report_s = seconds;
	s->next_report = now_ns() + (uint64_t)(seconds * 1e9);
}

void session_request_stop(struct session *s)
{
	s->stop = true;
}

const struct history *session_history(const struct session *s)
{
	return s->hist;
}

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
static void scan_command(struct session *s, const char *cmd)
{
	const char *path = getenv("PATH");
	char buf[4096];
	char *copy, *dir, *save = NULL;

	discovery_scan_dirs(s->disc, getenv("LD_LIBRARY_PATH"));
	if (strchr(cmd, '/')) {
		discovery_add(s->disc, cmd);
		return;
	}
	copy = xstrdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		snprintf(buf, sizeof(buf), "%s/%s", dir, cmd);
		if (access(buf, X_OK) == 0) {
			discovery_add(s->disc, buf);
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

static void drain(struct session *s)
{
	while (tracer_poll(s->tracer, 0) > 0)
		;
	state_reap(s->state);
}

/* A reader sees no exit records and an agent may have missed some (it was down, or the ring
 * buffer was full): processes gone without one are looked for now and then. */
#define SWEEP_READER_NS 1000000000ull
#define SWEEP_AGENT_NS 5000000000ull

static void sweep_due(struct session *s)
{
	bool reader = tracer_is_reader(s->tracer);
	uint64_t now = now_ns();

	if (!reader && !s->opt->tracer.pin_dir)
		return;
	if (now < s->next_sweep)
		return;
	s->next_sweep = now + (reader ? SWEEP_READER_NS : SWEEP_AGENT_NS);
	if (state_sweep_vanished(s->state))
		state_reap(s->state);
}

static double view_interval(double (*fn)(const struct options *), const struct options *o)
{
	return fn ? fn(o) : 0;
}

/* Samples (for the history) and reports, each when due; a report is a sample too. */
static void publish_due(struct session *s)
{
	const struct view_ops *v = s->opt->view;
	double sample_s = view_interval(v->sample_interval, s->opt);
	uint64_t now = now_ns();

	if (s->report_s > 0 && now >= s->next_report) {
		session_report_now(s, 0);
		while (s->next_report <= now)
			s->next_report += (uint64_t)(s->report_s * 1e9);
		s->next_sample = now + (uint64_t)(sample_s * 1e9);
	} else if (sample_s > 0 && now >= s->next_sample) {
		snapshot_put(publish(s, v->sample_wants));
		while (s->next_sample <= now)
			s->next_sample += (uint64_t)(sample_s * 1e9);
	}
}

#define STOP_GRACE_NS 5000000000ull	/* a command that ignores SIGTERM is killed after this */

/* Interrupted with CMD still running: it got the terminal's signal too (else gpumem sends it
 * SIGTERM); its events are read while it ends, and one that will not end is killed. */
static int stop_child(struct session *s)
{
	uint64_t deadline = now_ns() + STOP_GRACE_NS;
	int status = 0;

	if (stop_signal != SIGINT)
		kill(s->child, stop_signal ? stop_signal : SIGTERM);
	while (waitpid(s->child, &status, WNOHANG) != s->child) {
		if (now_ns() >= deadline) {
			p_err("%s did not end %.0f s after it was told to: killed",
			      s->opt->cmd_argv[0], STOP_GRACE_NS / 1e9);
			kill(s->child, SIGKILL);
			waitpid(s->child, &status, 0);
			break;
		}
		tracer_heartbeat(s->tracer);
		tracer_poll(s->tracer, 100);
		state_reap(s->state);
	}
	s->child = 0;
	drain(s);
	return exit_status(status);
}

static int run_loop(struct session *s)
{
	const struct options *o = s->opt;
	const struct view_ops *v = o->view;
	uint64_t deadline = o->duration_s > 0 ? s->start_mono_ns + (uint64_t)(o->duration_s * 1e9) : 0;
	uint64_t tick = (uint64_t)(v->tick_s * 1e9), next_tick = s->start_mono_ns;
	int status = 0, err;

	while (!stop_requested && !s->stop) {
		tracer_heartbeat(s->tracer);
		err = tracer_poll(s->tracer, 100);
		if (err < 0) {
			p_err("reading the ring buffer failed: %s", strerror(-err));
			return 1;
		}
		fflush(s->out);	/* what a batch printed is out within a poll (100 ms) */
		state_reap(s->state);
		sweep_due(s);
		state_purge(s->state, false);
		if (s->child > 0 && waitpid(s->child, &status, WNOHANG) == s->child) {
			s->child = 0;
			drain(s);
			return exit_status(status);
		}
		if (deadline && now_ns() >= deadline)
			break;
		publish_due(s);
		if (v->on_tick && tick && now_ns() >= next_tick) {
			v->on_tick(s);
			next_tick = now_ns() + tick;
		}
	}
	if (s->child > 0)
		return stop_child(s);
	drain(s);
	return 0;
}

static int start_targets(struct session *s, int *release_fd)
{
	const struct options *o = s->opt;
	int err;

	*release_fd = -1;
	for (size_t i = 0; i < o->npids; i++) {
		err = tracer_add_target(s->tracer, o->pids[i]);
		if (err) {
			p_err("cannot follow PID %d: %s", o->pids[i], strerror(-err));
			return err;
		}
		discovery_scan_process(s->disc, o->pids[i]);
	}
	if (!o->cmd_argv)
		return 0;
	err = spawn_held(o->cmd_argv, &s->child, release_fd);
	if (err) {
		p_err("cannot start %s: %s", o->cmd_argv[0], strerror(-err));
		return err;
	}
	err = tracer_add_target(s->tracer, s->child);
	if (err) {
		p_err("cannot follow %s: %s", o->cmd_argv[0], strerror(-err));
		return err;
	}
	scan_command(s, o->cmd_argv[0]);
	return 0;
}

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
	int err;

	if (wants_agent(s->opt) && tracer_open_reader(s->opt->pin_dir, &s->tracer) == 0)
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
		err = tracer_open(&topts, on_record, s, &s->tracer);
	}
	selection_free(topts.cgroup_dirs, topts.ncgroup_dirs);
	return err;
}

/* One line on stderr once every probe is on: people and scripts know tracing has begun. */
static void announce(struct session *s)
{
	struct discovery_stats ds;

	if (tracer_is_reader(s->tracer)) {
		fprintf(stderr, "gpumem: reading the state of the agent on %s (PID %d); attaching "
			"nothing; %s\n", s->opt->pin_dir, tracer_agent_pid(s->tracer),
			s->opt->duration_s > 0 ? "until the duration ends or Ctrl-C" : "Ctrl-C to stop");
		return;
	}
	discovery_get_stats(s->disc, &ds);
	fprintf(stderr, "gpumem: tracing: %u probes on %u CUDA files%s; %s\n", ds.probes, ds.files,
		tracer_watches_opens(s->tracer) ? ", watching for new ones" : "",
		s->opt->cmd_argv ? "running the command" : s->opt->duration_s > 0
			? "until the duration ends or Ctrl-C" : "Ctrl-C to stop");
}

/* The model, and the history of its snapshots when the view reads one. */
static void open_model(struct session *s)
{
	const struct options *o = s->opt;
	struct model_maps maps = tracer_model_maps(s->tracer);
	struct state_opts so = { .all_frames = o->all_frames, .no_demangle = o->no_demangle,
				 .keep_ended = o->keep_ended, .keep_ended_s = o->keep_ended_s,
				 .keep_failures = o->keep_failures,
				 .read_only = tracer_is_reader(s->tracer),
				 .by_address = o->by_address,
				 .no_python = o->tracer.no_python };

	s->state = state_new(&maps, &so);
	s->state->exit_wants = o->view->exit_wants;
	s->oci = oci_cache_new((const char *const *)o->bundle_dirs, o->nbundle_dirs, 0);
	s->state->oci = s->oci;
	if (o->view->keeps_history)
		s->hist = history_new();
}

/* Starts the clocks of samples and reports once tracing has begun. */
static void start_clocks(struct session *s)
{
	const struct view_ops *v = s->opt->view;

	s->start_mono_ns = now_ns();
	s->report_s = view_interval(v->report_interval, s->opt);
	/* At start: after one tick, as a screen starts (what CMD prints first is not drawn over). */
	s->next_report = s->start_mono_ns + (uint64_t)((v->report_at_start ? v->tick_s : s->report_s) *
						       1e9);
	s->next_sample = s->start_mono_ns + (uint64_t)(view_interval(v->sample_interval, s->opt) * 1e9);
}

/* The view's final report from the last snapshot; a write error is an error. */
static int finish(struct session *s, int rc)
{
	const struct view_ops *v = s->opt->view;
	struct snapshot *snap;
	int err = 0;

	if (!v->finish)
		return rc;
	snap = publish(s, v->report_wants);
	errno = 0;
	if (v->finish(s, snap)) {
		s->write_errno = errno;	/* what the failed write said */
		err = 1;
	}
	err = err || snap->error;
	snapshot_put(snap);
	if (s->failed)
		return 1;
	return rc ? rc : err ? 1 : 0;
}

/* -o FILE: never through a symlink (another user's link must not make root write its target);
 * created 0644, truncated. stdout without -o. */
static FILE *open_output(const char *path)
{
	FILE *f;
	int fd;

	if (!path)
		return stdout;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0) {
		if (errno == ELOOP)
			p_err("cannot write %s: it is a symbolic link, which -o does not follow",
			      path);
		else
			p_err("cannot write %s: %s", path, strerror(errno));
		return NULL;
	}
	f = fdopen(fd, "w");
	if (!f) {
		p_err("cannot write %s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	/* Fully buffered: the session flushes after each batch of ring-buffer records, so a
	 * stream of events costs one write per batch, not one per line. */
	setvbuf(f, NULL, _IOFBF, 1 << 16);
	return f;
}

/* Every write error of the report is an error, stdout's too (a full disk, a closed pipe). */
static int close_output(FILE *f, const char *path, int write_errno)
{
	int err = 0;

	errno = 0;
	if (fflush(f) || ferror(f))
		err = write_errno ? write_errno : errno ? errno : EIO;
	if (f != stdout && fclose(f) && !err)
		err = errno;
	if (!err)
		return 0;
	p_err("cannot write the report to %s: %s", path ? path : "standard output",
	      strerror(err));
	return -err;
}

/* An agent that adopted pinned state: what queued in the ring buffer while no agent read
 * it, then the processes that ended unseen meanwhile, reaped. */
static void adopt(struct session *s)
{
	size_t living, ended;
	uint64_t orphans;

	drain(s);
	snapshot_put(state_publish(s->state, 0));
	state_sweep_vanished(s->state);
	state_reap(s->state);
	orphans = state_purge_orphans(s->state);
	state_count(s->state, &living, &ended);
	fprintf(stderr, "gpumem: adopted the pinned state in %s: %zu processes are traced, %zu "
		"ended while no agent ran (%" PRIu64 " allocation entries of ended processes "
		"deleted)\n", s->opt->pin_dir, living, ended, orphans);
}

int session_run(const struct options *o)
{
	struct session s = { .opt = o };
	int release_fd = -1, rc = 1;
	char go = 1;

	if (o->reset)
		return pin_reset(o->pin_dir) ? 1 : 0;
	if (check_pids(o))
		return 1;
	s.out = o->view->writes_own_files ? stdout : open_output(o->output);
	if (!s.out)
		return 1;
	install_signals();
	if (open_tracer(&s))
		return 1;
	open_model(&s);
	s.disc = discovery_new(s.tracer);
	if (!tracer_is_reader(s.tracer)) {
		for (size_t i = 0; i < o->nlibs; i++)
			if (discovery_add_required(s.disc, o->libs[i]))
				goto out;
		discovery_scan_system(s.disc);
	}
	if (start_targets(&s, &release_fd))
		goto out_kill;
	if (o->view->begin && o->view->begin(&s))
		goto out_kill;
	if (tracer_adopted(s.tracer))
		adopt(&s);
	start_clocks(&s);
	announce(&s);
	if (release_fd >= 0) {
		if (write(release_fd, &go, 1) != 1)
			p_err("cannot release %s: %s", o->cmd_argv[0], strerror(errno));
		close(release_fd);
		release_fd = -1;
	}
	rc = run_loop(&s);
	/* No process may stay held: stop holding, then answer the holds still queued. */
	tracer_stop_watching(s.tracer);
	drain(&s);
	rc = finish(&s, rc);
	if (o->tracer.pin_dir)
		state_purge(s.state, true);	/* the pins outlive this agent: leave nothing stale */
	if (o->view->end)
		o->view->end(&s);
	goto out;

out_kill:
	if (s.child > 0) {
		close(release_fd);	/* the held child exits without running CMD */
		waitpid(s.child, NULL, 0);
	}
out:
	snapshot_put(s.last_failure_snap);
	json_frames_cache_free();
	nvml_close();
	discovery_free(s.disc);
	history_free(s.hist);
	state_free(s.state);
	oci_cache_free(s.oci);
	tracer_close(s.tracer);
	if (close_output(s.out, s.out == stdout ? NULL : o->output, s.write_errno))
		rc = rc ? rc : 1;
	return rc;
}
