// SPDX-License-Identifier: GPL-2.0
/* One run: load and attach, start or find the targets, dispatch ring-buffer records to the
 * model and the view, stop on Ctrl-C, --duration or the end of CMD, detach everything. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "gpumem.skel.h"
#include "discover.h"
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

static int on_record(void *ctx, const void *data, size_t size)
{
	struct session *s = ctx;
	const struct gm_call_event *e = data;
	const struct view_ops *v = s->opt->view;
	__u32 type;

	if (size < sizeof(type)) {
		s->bad_records++;
		return 0;
	}
	type = *(const __u32 *)data;
	switch (type) {
	case GM_REC_ALLOC:
	case GM_REC_FREE:
	case GM_REC_UNKNOWN_FREE:
	case GM_REC_ALLOC_FAILED:
		if (size < sizeof(*e))
			break;
		if (type == GM_REC_ALLOC_FAILED)
			state_on_failure(s->state, e);
		if (v->on_call)
			v->on_call(s, e);
		return 0;
	case GM_REC_PROCESS_NEW:
		if (size < sizeof(*e))
			break;
		state_on_process_new(s->state, e);
		if (s->opt->tracer.hold_new_procs)
			kill((pid_t)e->pid, SIGCONT);	/* held by the BPF side (if still holding) */
		return 0;
	case GM_REC_PROCESS_EXIT: {
		struct gm_call_event ev;

		if (size < sizeof(*e))
			break;
		ev = *e;
		ev.error = exit_status(e->error);	/* the kernel's wait status */
		state_on_process_exit(s->state, &ev);
		if (v->on_exit)
			v->on_exit(s, &ev);
		return 0;
	}
	case GM_REC_EXEC:
	case GM_REC_LIB_OPEN:
		if (size < sizeof(struct gm_file_event))
			break;
		if (type == GM_REC_EXEC)
			state_on_exec(s->state, (int)((const struct gm_file_event *)data)->pid);
		discovery_on_file_event(s->disc, data);
		return 0;
	case GM_REC_STACK_COPY:
		if (size < sizeof(struct gm_stack_event))
			break;
		state_on_stack_copy(s->state, data);
		return 0;
	case GM_REC_EXIT_VMA:
		if (size < sizeof(struct gm_vma_event))
			break;
		state_on_exit_vma(s->state, data);
		return 0;
	default:
		p_err("unknown ring-buffer record type %u (size %zu): BPF object and binary differ?",
		      type, size);
		break;
	}
	s->bad_records++;
	return 0;
}

void session_counters(struct session *s, uint64_t out[GM_CNT_COUNT])
{
	tracer_counters(s->tracer, out);
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

static int check_pids(const struct options *o)
{
	for (size_t i = 0; i < o->npids; i++) {
		if (kill(o->pids[i], 0) && errno == ESRCH) {
			p_err("no process with PID %d", o->pids[i]);
			return -ESRCH;
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


static int run_loop(struct session *s)
{
	const struct options *o = s->opt;
	uint64_t deadline = o->duration_s > 0 ? s->start_mono_ns + (uint64_t)(o->duration_s * 1e9) : 0;
	double tick_s = o->view->tick_s > 0 ? o->view->tick_s : o->interval_s > 0 ? o->interval_s : 2.0;
	uint64_t interval = (uint64_t)(tick_s * 1e9);
	uint64_t next_tick = s->start_mono_ns + interval;
	int status = 0, err;

	while (!stop_requested) {
		err = tracer_poll(s->tracer, 100);
		if (err < 0) {
			p_err("reading the ring buffer failed: %s", strerror(-err));
			return 1;
		}
		state_reap(s->state);
		if (s->child > 0 && waitpid(s->child, &status, WNOHANG) == s->child) {
			s->child = 0;
			drain(s);
			return exit_status(status);
		}
		if (deadline && now_ns() >= deadline)
			break;
		if (o->view->tick && now_ns() >= next_tick) {
			o->view->tick(s);
			next_tick += interval;
		}
	}
	if (s->child > 0) {
		/* Interrupted: CMD got the terminal's signal too; wait for its end. */
		if (stop_signal != SIGINT)
			kill(s->child, stop_signal ? stop_signal : SIGTERM);
		waitpid(s->child, &status, 0);
		s->child = 0;
		drain(s);
		return exit_status(status);
	}
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

/* Loads the BPF side, with the cgroups that --cgroup/--container/--pod select. */
static int open_tracer(struct session *s)
{
	struct tracer_opts topts = s->opt->tracer;
	int err;

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

	discovery_get_stats(s->disc, &ds);
	fprintf(stderr, "gpumem: tracing: %u probes on %u CUDA files%s; %s\n", ds.probes, ds.files,
		tracer_watches_opens(s->tracer) ? ", watching for new ones" : "",
		s->opt->cmd_argv ? "running the command" : s->opt->duration_s > 0
			? "until the duration ends or Ctrl-C" : "Ctrl-C to stop");
}

int session_run(const struct options *o)
{
	struct session s = { .opt = o };
	struct state_fds fds;
	int release_fd = -1, rc = 1;
	char go = 1;

	if (check_pids(o))
		return 1;
	s.out = stdout;
	if (o->output) {
		s.out = fopen(o->output, "w");
		if (!s.out) {
			p_err("cannot write %s: %s", o->output, strerror(errno));
			return 1;
		}
		setvbuf(s.out, NULL, _IOLBF, 0);
	}
	install_signals();
	if (open_tracer(&s))
		return 1;
	fds.procs = bpf_map__fd(tracer_skel(s.tracer)->maps.procs);
	fds.sites = bpf_map__fd(tracer_skel(s.tracer)->maps.sites);
	fds.allocs = bpf_map__fd(tracer_skel(s.tracer)->maps.allocs);
	fds.stacks = bpf_map__fd(tracer_skel(s.tracer)->maps.stacks);
	s.state = state_new(&fds);
	s.disc = discovery_new(tracer_skel(s.tracer), tracer_uses_multi(s.tracer));
	for (size_t i = 0; i < o->nlibs; i++)
		if (discovery_add_required(s.disc, o->libs[i]))
			goto out;
	discovery_scan_system(s.disc);
	if (start_targets(&s, &release_fd))
		goto out_kill;
	s.start_mono_ns = now_ns();
	s.mono_to_real_ns = realtime_ns() - s.start_mono_ns;
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
	if (o->view->finish && o->view->finish(&s))
		rc = rc ? rc : 1;
	goto out;

out_kill:
	if (s.child > 0) {
		close(release_fd);	/* the held child exits without running CMD */
		waitpid(s.child, NULL, 0);
	}
out:
	discovery_free(s.disc);
	state_free(s.state);
	tracer_close(s.tracer);
	if (s.out != stdout && fclose(s.out)) {
		p_err("cannot write %s: %s", o->output, strerror(errno));
		rc = rc ? rc : 1;
	}
	return rc;
}
