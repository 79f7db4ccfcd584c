// SPDX-License-Identifier: GPL-2.0
/* The recording source (report FILE.db, export FILE.db): the window --at, --since and --until
 * ask for, its events in time order (those the sink takes), the history of its samples, and
 * the state at any instant of it, fed to the sink as the live source feeds it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "analysis/history.h"
#include "base/util.h"
#include "recording/reader.h"
#include "recording/rec_time.h"
#include "session/session_int.h"

struct replay {
	struct recording *rec;
	struct rec_filter filter;
	uint64_t since, until;	/* the window, wall-clock */
	struct snapshot *at_until;	/* the history's state at until (a sink that keeps one) */
	struct rec_cursor *cursor;	/* the reports' states on the way there */
};

static struct replay *replay_of(struct session *s)
{
	return s->src_state;
}

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

static int window_of(const struct options *o, struct replay *r)
{
	const char *until = o->until ? o->until : o->at;
	uint64_t start, end;

	recording_span(r->rec, &start, &end);
	if (resolve(o->since, start, start, end, "since", &r->since) ||
	    resolve(until, end, start, end, o->until ? "until" : "at", &r->until))
		return -ERANGE;
	if (r->since > r->until) {
		p_err("--since is after --%s", o->until ? "until" : "at");
		return -ERANGE;
	}
	return 0;
}

static int replay_open(struct session *s)
{
	const struct options *o = s->opt;
	struct replay *r = xcalloc(1, sizeof(*r));

	s->src_state = r;
	r->filter = (struct rec_filter){ .pids = o->pids, .npids = o->npids,
					 .sel = o->selections, .nsel = o->nselections };
	if (recording_open(o->replay_path, &r->rec))
		return 1;
	recording_set_filter(r->rec, &r->filter);
	if (window_of(o, r))
		return 1;
	s->sink.recording = r->rec;
	s->sink.since_ns = r->since;
	s->sink.until_ns = r->until;
	s->sink.start_wall_ns = r->since;
	if (s->hist) {	/* its own samples make the history, not the sink's interval */
		s->samples_from_source = true;
		s->sink.history_sample_s = recording_sample_interval(r->rec, r->until);
	}
	return 0;
}

static void replay_start(struct session *s)
{
	s->clock_ns = replay_of(s)->since;
}

static int feed(void *ctx, const struct snap_event *e, const struct rec_event_extra *x)
{
	struct session *s = ctx;

	(void)x;
	if (session_stopping(s))
		return 1;
	session_advance(s, e->wall_ns);
	if (session_stopping(s))	/* stopped by a report on the way: the output ends there */
		return 1;
	session_event(s, e);
	return ferror(s->sink.out) ? -EIO : 0;
}

/* The whole window in one step: the history of its samples, its events, then the clock at
 * its end. */
static int replay_step(struct session *s)
{
	struct replay *r = replay_of(s);
	unsigned int types = s->ops->on_event ? 0 : 1u << GM_REC_ALLOC_FAILED;
	int err = 0;

	if (s->hist)
		r->at_until = recording_history(r->rec, r->since, r->until, s->hist);
	if (s->ops->on_event || s->ops->on_failure)
		err = recording_for_each_event(r->rec, r->since, r->until, types, feed, s);
	if (err < 0)
		return -1;
	session_advance(s, r->until);
	s->status = 0;
	if (session_signal() && s->clock_ns < r->until) {
		/* What was reached is still written: said, and the status says it is partial. */
		p_info("stopped %.3f s into the recording's %.3f s: the output ends there",
		       (s->clock_ns - r->since) / 1e9, (r->until - r->since) / 1e9);
		s->status = 128 + session_signal();
	}
	return 1;
}

static int replay_stop(struct session *s, int rc)
{
	(void)s;
	return rc;
}

static struct snapshot *replay_publish(struct session *s, unsigned int wants)
{
	struct replay *r = replay_of(s);

	if (r->at_until && s->clock_ns == r->until)
		return snapshot_get(r->at_until);
	if (s->clock_ns == r->until)	/* the last: whole, failures and all */
		return recording_snapshot_window(r->rec, r->since, s->clock_ns);
	return recording_snapshot_next(r->rec, &r->cursor, r->since, s->clock_ns, wants);
}

static void replay_close(struct session *s)
{
	struct replay *r = replay_of(s);

	if (!r)
		return;
	snapshot_put(r->at_until);
	rec_cursor_free(r->cursor);
	if (r->rec) {
		recording_set_filter(r->rec, NULL);
		recording_close(r->rec);
	}
	free(r);
	s->src_state = NULL;
}

const struct source_ops replay_source = {
	.name = "recording",
	.live = false,
	.open = replay_open,
	.start = replay_start,
	.step = replay_step,
	.stop = replay_stop,
	.publish = replay_publish,
	.close = replay_close,
};
