// SPDX-License-Identifier: GPL-2.0
/* `gpumem export`: feeds an exporter (export/) from the live session — its call events, its
 * snapshots every -i seconds when the format samples, and the final snapshot at the end of
 * CMD, --duration or Ctrl-C — or from a recording (FILE.db) the same way. */
#include <stdlib.h>
#include "common.h"
#include "export.h"
#include "recording.h"
#include "report.h"
#include "util.h"

#define EXPORT_SAMPLE_S_DEFAULT 1.0

struct export_run {
	struct exporter x;
	bool ended;	/* end() was called: nothing is left to free but this */
};

static double sample_interval(const struct options *o)
{
	const struct exporter_ops *ops = exporter_find(o->format);

	if (!ops || !ops->wants_samples)
		return 0;
	return o->interval_s > 0 ? o->interval_s : EXPORT_SAMPLE_S_DEFAULT;
}

static int export_begin(struct session *s)
{
	struct export_run *run = xcalloc(1, sizeof(*run));

	run->x.ops = exporter_find(s->opt->format);
	run->x.path = s->opt->output;
	run->x.start_wall_ns = realtime_ns();
	run->x.sample_s = sample_interval(s->opt);
	if (run->x.ops->begin(&run->x)) {
		free(run);
		return 1;
	}
	s->view_state = run;
	return 0;
}

static void export_event(struct session *s, const struct snap_event *e)
{
	struct export_run *run = s->view_state;

	if (run->x.ops->on_event)
		run->x.ops->on_event(&run->x, e);
}

static void export_report(struct session *s, const struct snapshot *snap)
{
	struct export_run *run = s->view_state;

	if (run->x.ops->on_snapshot)
		run->x.ops->on_snapshot(&run->x, snap, false);
}

static int export_finish(struct session *s, const struct snapshot *snap)
{
	struct export_run *run = s->view_state;

	if (run->x.ops->on_snapshot)
		run->x.ops->on_snapshot(&run->x, snap, true);
	text_lost(stderr, snap);	/* what the export could not see */
	run->ended = true;
	return run->x.ops->end(&run->x) ? -1 : 0;
}

static void export_end(struct session *s)
{
	struct export_run *run = s->view_state;

	if (run && !run->ended)
		run->x.ops->end(&run->x);
	free(run);
	s->view_state = NULL;
}

/* A recording fed to an exporter as a live run would feed it: its events in time order, a
 * snapshot every -i seconds between them (for the formats that sample), the state at its end
 * last. */
struct rec_feed {
	struct exporter *x;
	struct recording *rec;
	uint64_t next_ns, step_ns;	/* the next periodic snapshot; 0 step: none */
};

static void feed_samples_until(struct rec_feed *f, uint64_t wall_ns)
{
	for (; f->step_ns && f->next_ns <= wall_ns; f->next_ns += f->step_ns) {
		struct snapshot *snap = recording_snapshot_at(f->rec, f->next_ns);

		if (!snap)
			continue;
		f->x->ops->on_snapshot(f->x, snap, false);
		snapshot_put(snap);
	}
}

static int feed_event(void *ctx, const struct snap_event *e, const struct rec_event_extra *xx)
{
	struct rec_feed *f = ctx;

	(void)xx;
	feed_samples_until(f, e->wall_ns);
	if (f->x->ops->on_event)
		f->x->ops->on_event(f->x, e);
	return 0;
}

static int export_from(const struct options *o, struct recording *rec, struct exporter *x)
{
	struct rec_feed f = { .x = x, .rec = rec };
	uint64_t start, end;
	struct snapshot *last;
	int err;

	recording_span(rec, &start, &end);
	x->start_wall_ns = start;
	x->sample_s = sample_interval(o);
	if (x->sample_s > 0 && x->ops->on_snapshot) {
		f.step_ns = (uint64_t)(x->sample_s * 1e9);
		f.next_ns = start + f.step_ns;
	}
	if (x->ops->begin(x))
		return 1;
	err = recording_for_each_event(rec, start, end, 0, feed_event, &f);
	feed_samples_until(&f, end);
	last = recording_snapshot_at(rec, end);
	if (last && x->ops->on_snapshot)
		x->ops->on_snapshot(x, last, true);
	if (last)
		text_lost(stderr, last);	/* what the recording could not see */
	snapshot_put(last);
	if (x->ops->end(x) || err)
		return 1;
	return 0;
}

int export_recording(const struct options *o)
{
	struct rec_filter filter = { .pids = o->pids, .npids = o->npids, .sel = o->selections,
				     .nsel = o->nselections };
	struct exporter x = { .ops = exporter_find(o->format), .path = o->output };
	struct recording *rec;
	int rc;

	if (recording_open(o->args[0], &rec))
		return 1;
	recording_set_filter(rec, &filter);
	rc = export_from(o, rec, &x);
	recording_close(rec);
	return rc;
}

const struct view_ops export_view = {
	.name = "export",
	.writes_own_files = true,
	.report_interval = sample_interval,
	.begin = export_begin,
	.on_event = export_event,
	.on_report = export_report,
	.finish = export_finish,
	.end = export_end,
};
