// SPDX-License-Identifier: GPL-2.0
/* `gpumem export`: feeds an exporter (export/) from the live session — its call events, its
 * snapshots every -i seconds when the format samples, and the final snapshot at the end of
 * CMD, --duration or Ctrl-C — and says where reading a recording will come in. */
#include <stdlib.h>
#include "common.h"
#include "export.h"
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

int export_recording(const struct options *o)
{
	p_err("cannot export %s: reading a recording needs `record`/`report` support, which this "
	      "gpumem does not have yet; export a live run instead (-c CMD, -d S or Ctrl-C)",
	      o->args[0]);
	return 1;
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
