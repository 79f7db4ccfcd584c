// SPDX-License-Identifier: GPL-2.0
/* A stream's loss lines (trace, oom): the stream says what it is missing, whenever a loss
 * counter moved and once at its end. */
#include "output/report.h"
#include "views/common.h"

/* Whether any of the loss counters (report.c's list: what json_lost writes) is not zero. The
 * counters that describe the run (nested calls, holds, releases by a context's teardown) are
 * not losses: a line for them would say nothing was lost. */
static bool losses_any(const struct snapshot *snap)
{
	for (size_t i = 0; i < loss_count(); i++)
		if (loss_value(snap, i))
			return true;
	return false;
}

bool loss_lines_moved(const struct loss_lines *l, const struct snapshot *snap)
{
	if (!l->printed)
		return true;
	for (size_t i = 0; i < loss_count(); i++)
		if (loss_value(snap, i) != loss_value(l->printed, i))
			return true;
	return false;
}

bool loss_lines_due(const struct loss_lines *l, const struct snapshot *snap)
{
	return losses_any(snap) && loss_lines_moved(l, snap);
}

void loss_lines_json(struct loss_lines *l, struct json_writer *w, const struct snapshot *snap,
		     bool final)
{
	jw_object_begin(w);
	jw_kv_u64(w, "time_ns", snapshot_wall_ns(snap, snap->time_ns));
	jw_kv_string(w, "event", "lost");
	jw_kv_bool(w, "final", final);
	jw_key(w, "lost");
	json_lost(w, snap);
	jw_object_end(w);
	jw_newline(w);
	loss_lines_said(l, snap);
}

void loss_lines_print(struct loss_lines *l, struct sink *s, struct json_writer *w,
		      const struct snapshot *snap, bool final)
{
	if (!s->opt->json) {
		text_lost(stderr, snap);
		loss_lines_said(l, snap);
	} else if (!w) {
		s->failed = true;	/* no memory for the writer */
	} else {
		loss_lines_json(l, w, snap, final);
	}
}

double loss_lines_interval(const struct options *o)
{
	(void)o;
	return 1.0;
}

void loss_lines_said(struct loss_lines *l, const struct snapshot *snap)
{
	snapshot_put(l->printed);
	l->printed = snapshot_get((struct snapshot *)snap);
}

void loss_lines_end(struct loss_lines *l)
{
	snapshot_put(l->printed);
	l->printed = NULL;
}
