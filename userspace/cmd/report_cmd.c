// SPDX-License-Identifier: GPL-2.0
/* gpumem report FILE.db [snapshot|leaks|oom|sites]: opens the recording, resolves --at,
 * --since and --until against its span, and hands what it reads to the live views'
 * formatters (views/), which print it as they print the live state. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "analysis.h"
#include "common.h"
#include "history.h"
#include "rec_time.h"
#include "recording.h"
#include "report.h"
#include "report_cmd.h"
#include "sites.h"
#include "util.h"

#define FAILURE_SNAPSHOT_NS 50000000ull	/* a burst of failures shares one snapshot, as live */

struct window {
	uint64_t since, until;
};

/* "2026-01-31 03:12:00" in local time, for messages. */
static const char *local_time(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	return buf;
}

/* --since and --until are clipped to the recording; an --at outside it is an error. */
static int resolve(const char *text, uint64_t deflt, uint64_t start, uint64_t end,
		   const char *name, uint64_t *out)
{
	char a[32], b[32];
	struct rec_time t;

	*out = deflt;
	if (!text)
		return 0;
	rec_time_parse(text, &t);	/* checked when the options were parsed */
	*out = rec_time_resolve(&t, start, end);
	if (*out >= start && *out <= end)
		return 0;
	if (strcmp(name, "at")) {
		*out = *out < start ? start : end;
		return 0;
	}
	p_err("--at %s is outside the recording, which runs from %s to %s", text,
	      local_time(start, a, sizeof(a)), local_time(end, b, sizeof(b)));
	return -ERANGE;
}

static int window_of(const struct options *o, struct recording *rec, struct window *w)
{
	const char *until = o->until ? o->until : o->at;
	uint64_t start, end;

	recording_span(rec, &start, &end);
	if (resolve(o->since, start, start, end, "since", &w->since) ||
	    resolve(until, end, start, end, o->until ? "until" : "at", &w->until))
		return -ERANGE;
	if (w->since > w->until) {
		p_err("--since is after --%s", o->until ? "until" : "at");
		return -ERANGE;
	}
	return 0;
}

static int report_snapshot(struct session *s, struct recording *rec, const struct window *w)
{
	struct snapshot *snap = recording_snapshot_window(rec, w->since, w->until);
	int err = snap->error ? -1 : snapshot_view.finish(s, snap);

	snapshot_put(snap);
	return err;
}

static int report_leaks(struct session *s, struct recording *rec, const struct window *w)
{
	struct snapshot *snap;
	int err;

	s->hist = history_new();
	s->history_sample_s = recording_sample_interval(rec, w->until);
	snap = recording_history(rec, w->since, w->until, s->hist);
	err = snap->error ? -1 : leaks_view.finish(s, snap);
	snapshot_put(snap);
	history_free(s->hist);
	s->hist = NULL;
	return err;
}

struct oom_walk {
	struct session *s;
	struct recording *rec;
	const struct window *w;
	struct snapshot *snap;	/* the state at the last failure shown */
};

static int show_failure(void *ctx, const struct snap_event *se, const struct rec_event_extra *x)
{
	struct oom_walk *ow = ctx;

	(void)x;
	if (!ow->snap || se->wall_ns - ow->snap->time_ns >= FAILURE_SNAPSHOT_NS) {
		snapshot_put(ow->snap);
		ow->snap = recording_snapshot_window(ow->rec, ow->w->since, se->wall_ns);
	}
	oom_view.on_failure(ow->s, se, ow->snap);
	return ferror(ow->s->out) ? -EIO : 0;
}

static int report_oom(struct session *s, struct recording *rec, const struct window *w)
{
	struct oom_walk ow = { .s = s, .rec = rec, .w = w };
	struct snapshot *end;
	int err;

	err = recording_for_each_event(rec, w->since, w->until, 1u << GM_REC_ALLOC_FAILED,
				       show_failure, &ow);
	snapshot_put(ow.snap);
	end = recording_snapshot_window(rec, w->since, w->until);
	if (!err)
		err = oom_view.finish(s, end);
	snapshot_put(end);
	return err;
}

static int report_sites(struct session *s, struct recording *rec, const struct window *w)
{
	struct rec_sites rs;
	int err = recording_sites(rec, w->since, w->until, &rs);

	if (!err)
		err = sites_report(s, &rs, w->since, w->until);
	recording_sites_free(&rs);
	return err;
}

static const struct {
	const char *name;
	int (*run)(struct session *s, struct recording *rec, const struct window *w);
} views[] = {
	{ "snapshot", report_snapshot },
	{ "leaks", report_leaks },
	{ "oom", report_oom },
	{ "sites", report_sites },
};

static int run_view(const struct options *o, size_t v, struct recording *rec)
{
	struct rec_filter filter = { .pids = o->pids, .npids = o->npids, .sel = o->selections,
				     .nsel = o->nselections };
	struct session s = { .opt = o, .out = stdout };
	struct window w;
	int err;

	recording_set_filter(rec, &filter);
	if (window_of(o, rec, &w))
		return 1;
	err = views[v].run(&s, rec, &w);
	json_frames_cache_free();
	recording_set_filter(rec, NULL);
	if (fflush(stdout) || ferror(stdout)) {
		p_err("cannot write the report to standard output: %s", strerror(errno));
		return 1;
	}
	return err ? 1 : 0;
}

int report_run(const struct options *o)
{
	const char *name = o->nargs > 1 ? o->args[1] : "snapshot";
	struct recording *rec;
	size_t v;
	int rc;

	for (v = 0; v < ARRAY_SIZE(views) && strcmp(name, views[v].name); v++)
		;
	if (v == ARRAY_SIZE(views)) {
		p_err("report shows snapshot, leaks, oom or sites, not '%s'", name);
		return 2;
	}
	if (recording_open(o->args[0], &rec))
		return 1;
	rc = run_view(o, v, rec);
	recording_close(rec);
	return rc;
}
