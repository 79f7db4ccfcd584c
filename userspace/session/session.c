// SPDX-License-Identifier: GPL-2.0
/* One run: a source (live tracing, or a recording) feeds one sink through one loop: call
 * events and failures as they come, samples and reports when due on the source's clock, the
 * final report at the end of CMD, --duration, the recording or Ctrl-C. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "analysis/analysis.h"
#include "analysis/history.h"
#include "base/outfile.h"
#include "base/util.h"
#include "loader/tracer.h"
#include "output/report.h"
#include "session/session.h"
#include "session/session_int.h"

#define FAILURE_SNAPSHOT_NS 50000000ull	/* a burst of failures shares one snapshot */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	gm_stop_requested = 1;
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

int session_signal(void)
{
	return stop_signal;
}

bool session_stopping(const struct session *s)
{
	return gm_stop_requested || s->stop;
}

struct snapshot *session_publish(struct session *s, unsigned int wants)
{
	struct snapshot *snap = s->src->publish(s, wants);

	if (s->hist && !(wants & SNAP_LOSSES_ONLY))
		history_observe(s->hist, snap);
	/* Before any sink holds it: the forecasts are part of what it says. */
	for (size_t i = 0; s->hist && (wants & SNAP_FORECAST) && i < snap->nprocs; i++)
		if (snap->procs[i].valid & SP_STATS)
			proc_oom_forecast(snap, s->hist, &snap->procs[i], &snap->procs[i].forecast);
	return snap;
}

/* The snapshot a failure is shown with: the process's sites at this instant. */
static const struct snapshot *failure_snapshot(struct session *s)
{
	uint64_t now = s->clock_ns;

	if (!s->last_failure_snap || now - s->last_failure_snap_ns >= FAILURE_SNAPSHOT_NS) {
		snapshot_put(s->last_failure_snap);
		s->last_failure_snap = session_publish(s, SNAP_DEVICES);
		s->last_failure_snap_ns = now;
	}
	return s->last_failure_snap;
}

void session_event(struct session *s, const struct snap_event *se)
{
	if (s->ops->on_event)
		s->ops->on_event(&s->sink, se);
	if (s->ops->on_failure && se->ev->type == GM_REC_ALLOC_FAILED)
		s->ops->on_failure(&s->sink, se, failure_snapshot(s));
}

/* ---- samples and reports, on the source's clock ---- */

static double interval_of(double (*fn)(const struct options *), const struct options *o)
{
	return fn ? fn(o) : 0;
}

static void report_now(struct session *s, unsigned int wants)
{
	struct snapshot *snap = session_publish(s, s->ops->report_wants | wants);

	if (s->ops->on_report)
		s->ops->on_report(&s->sink, snap);
	snapshot_put(snap);
}

void session_advance(struct session *s, uint64_t now)
{
	double sample_s = s->samples_from_source ? 0 : interval_of(s->ops->sample_interval, s->opt);
	uint64_t report_ns = (uint64_t)(s->report_s * 1e9);

	if (!s->src->live) {
		/* A recording: every report due, each at its own instant (an export's samples).
		 * Stopped, the clock stays at the last instant reached: the output ends there. */
		for (; s->ops->replays_reports && report_ns && s->next_report <= now;
		     s->next_report += report_ns) {
			if (session_stopping(s))
				return;
			s->clock_ns = s->next_report;
			report_now(s, 0);
		}
		if (!session_stopping(s))
			s->clock_ns = now;
		return;
	}
	s->clock_ns = now;
	if (report_ns && now >= s->next_report) {
		report_now(s, 0);
		while (s->next_report <= now)
			s->next_report += report_ns;
		s->next_sample = now + (uint64_t)(sample_s * 1e9);
	} else if (sample_s > 0 && now >= s->next_sample) {
		snapshot_put(session_publish(s, s->ops->sample_wants));
		while (s->next_sample <= now)
			s->next_sample += (uint64_t)(sample_s * 1e9);
	}
}

/* A recording's reports are replayed at each interval of its window (an export's samples), an
 * idle stretch at about a million a second: past this many the run is long (a day at -i 0.001,
 * or a file whose session claims to start in 1970), which is said at once with the way to
 * shorten it; Ctrl-C ends it with what was reached written. */
#define REPLAYED_REPORTS_SAID 1000000

/* Starts the clocks of samples and reports, from the source's start. */
static void start_clocks(struct session *s)
{
	const struct sink_ops *v = s->ops;
	double first, span_s = (s->sink.until_ns - s->sink.since_ns) / 1e9;	/* a recording's */

	s->start_ns = s->clock_ns;
	s->report_s = interval_of(v->report_interval, s->opt);
	if (!s->src->live && v->replays_reports && s->report_s > 0 &&
	    span_s / s->report_s > REPLAYED_REPORTS_SAID)
		p_info("the recording's window is %.0f s long: %.0f samples, one every %.3f s "
		       "(-i, --since and --until make fewer; Ctrl-C ends the export there)", span_s,
		       span_s / s->report_s, s->report_s);
	first = v->report_at_start ? v->tick_s : s->report_s;
	/* At start: after one tick, as a screen starts (what CMD prints first is not drawn over). */
	s->next_report = s->start_ns + (uint64_t)(first * 1e9);
	s->next_sample = s->start_ns + (uint64_t)(interval_of(v->sample_interval, s->opt) * 1e9);
}

/* ---- the sink's control of the session ---- */

static void control_report_now(void *ctx, unsigned int wants)
{
	report_now(ctx, wants);
}

static void control_set_report_interval(void *ctx, double seconds)
{
	struct session *s = ctx;

	s->report_s = seconds;
	s->next_report = s->clock_ns + (uint64_t)(seconds * 1e9);
}

static void control_request_stop(void *ctx)
{
	((struct session *)ctx)->stop = true;
}

static const struct sink_control control = {
	.report_now = control_report_now,
	.set_report_interval = control_set_report_interval,
	.request_stop = control_request_stop,
};

/* ---- the loop ---- */

static int run_loop(struct session *s)
{
	const struct sink_ops *v = s->ops;
	const struct options *o = s->opt;
	bool live = s->src->live;
	uint64_t deadline = live && o->duration_s > 0 ?
				    s->start_ns + (uint64_t)(o->duration_s * 1e9) : 0;
	uint64_t tick = live ? (uint64_t)(v->tick_s * 1e9) : 0, next_tick = s->start_ns;
	int r;

	while (!session_stopping(s)) {
		r = s->src->step(s);
		if (r < 0)
			return 1;
		if (r > 0)
			return s->status;
		if (deadline && s->clock_ns >= deadline)
			break;
		session_advance(s, s->clock_ns);
		if (v->on_tick && tick && now_ns() >= next_tick) {
			v->on_tick(&s->sink);
			next_tick = now_ns() + tick;
		}
	}
	return 0;
}

/* The sink's final report from the last snapshot; a write error is an error. */
static int finish(struct session *s, int rc)
{
	struct snapshot *snap;
	int err = 0;

	if (!s->ops->finish)
		return rc;
	snap = session_publish(s, s->ops->report_wants);
	errno = 0;
	if (snap->error && !s->src->live) {
		err = 1;	/* a recording that cannot be read gives no report */
	} else if (s->ops->finish(&s->sink, snap)) {
		s->write_errno = errno;	/* what the failed write said */
		err = 1;
	}
	err = err || snap->error;
	snapshot_put(snap);
	if (s->sink.failed)
		return 1;
	return rc ? rc : err ? 1 : 0;
}

/* The report's buffer: a stream of events (trace, ~1 KiB of JSON an event) is written in
 * writes of this size, not of stdio's default (st_blksize, 4 KiB: a write of 4 KiB at an
 * offset a flush left unaligned costs ext4 the zeroing of two partial blocks). Static: glibc
 * ignores setvbuf's size without a buffer given, and the FILE may outlive the session (stdout). */
static char out_buf[1 << 18];

/* -o FILE (base/outfile.h) or stdout, fully buffered unless stdout is a terminal: the session
 * flushes after each batch of ring-buffer records (a poll, 100 ms at most), so a stream of
 * events costs a write per batch, not per line. */
static FILE *open_output(const char *path)
{
	FILE *f = path ? outfile_create(path) : stdout;

	if (f && (path || !isatty(STDOUT_FILENO)))
		setvbuf(f, out_buf, _IOFBF, sizeof(out_buf));
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

int session_run(const struct options *o)
{
	struct session s = { .opt = o, .ops = o->view,
			     .src = o->replay_path ? &replay_source : &live_source };
	int rc;

	if (o->reset)
		return tracer_reset_pins(o->pin_dir) ? 1 : 0;
	s.sink = (struct sink){ .opt = o, .ctl = &control, .ctl_ctx = &s };
	s.sink.out = s.ops->writes_own_files ? stdout : open_output(o->output);
	if (!s.sink.out)
		return 1;
	install_signals();
	if (s.ops->keeps_history)
		s.sink.hist = s.hist = history_new();
	rc = s.src->open(&s);
	if (rc)
		goto out;
	if (s.ops->begin && s.ops->begin(&s.sink)) {
		rc = 1;
		goto out;
	}
	s.src->start(&s);
	start_clocks(&s);
	rc = run_loop(&s);
	rc = s.src->stop(&s, rc);
	rc = finish(&s, rc);
	if (s.ops->end)
		s.ops->end(&s.sink);
out:
	snapshot_put(s.last_failure_snap);
	frames_cache_free();
	s.src->close(&s);
	history_free(s.hist);
	if (close_output(s.sink.out, s.sink.out == stdout ? NULL : o->output, s.write_errno))
		rc = rc ? rc : 1;
	return rc;
}
