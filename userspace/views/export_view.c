// SPDX-License-Identifier: GPL-2.0
/* `gpumem export`: the sink that feeds an exporter (export/) — the call events, the snapshots
 * every -i seconds when the format samples, the final snapshot — from the live source or a
 * recording (FILE.db) alike. */
#include <stdlib.h>
#include "base/util.h"
#include "export/exporters.h"
#include "output/report.h"
#include "views/common.h"

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

static int export_begin(struct sink *s)
{
	struct export_run *run = xcalloc(1, sizeof(*run));

	run->x.ops = exporter_find(s->opt->format);
	run->x.path = s->opt->output;
	run->x.start_wall_ns = s->start_wall_ns;	/* the run's, or the recording's window's */
	run->x.sample_s = sample_interval(s->opt);
	if (run->x.ops->begin(&run->x)) {
		free(run);
		return 1;
	}
	s->state = run;
	return 0;
}

static void export_event(struct sink *s, const struct snap_event *e)
{
	struct export_run *run = s->state;

	if (run->x.ops->on_event)
		run->x.ops->on_event(&run->x, e);
}

static void export_report(struct sink *s, const struct snapshot *snap)
{
	struct export_run *run = s->state;

	if (run->x.ops->on_snapshot)
		run->x.ops->on_snapshot(&run->x, snap, false);
}

static int export_finish(struct sink *s, const struct snapshot *snap)
{
	struct export_run *run = s->state;

	if (run->x.ops->on_snapshot)
		run->x.ops->on_snapshot(&run->x, snap, true);
	text_lost(stderr, snap);	/* what the export could not see */
	run->ended = true;
	return run->x.ops->end(&run->x) ? -1 : 0;
}

static void export_end(struct sink *s)
{
	struct export_run *run = s->state;

	if (run && !run->ended)
		run->x.ops->end(&run->x);
	free(run);
	s->state = NULL;
}

const struct sink_ops export_view = {
	.name = "export",
	.writes_own_files = true,
	.replays_reports = true,	/* a recording's samples are the export's, as live */
	.report_interval = sample_interval,
	.begin = export_begin,
	.on_event = export_event,
	.on_report = export_report,
	.finish = export_finish,
	.end = export_end,
};
