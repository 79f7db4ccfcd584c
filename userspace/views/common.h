/* SPDX-License-Identifier: GPL-2.0 */
/* The sinks of the commands: each writes the snapshots (and events) the session hands it, as
 * text, JSON, a recording, metrics or an exported file. */
#ifndef GPUMEM_VIEWS_COMMON_H
#define GPUMEM_VIEWS_COMMON_H

#include "views/sink.h"

extern const struct sink_ops snapshot_view;
extern const struct sink_ops trace_view;
extern const struct sink_ops top_view;
extern const struct sink_ops leaks_view;
extern const struct sink_ops oom_view;
extern const struct sink_ops serve_view;
extern const struct sink_ops export_view;
extern const struct sink_ops record_view;
extern const struct sink_ops sites_view;	/* report FILE.db sites: a recording's only */

/* A stream's loss lines (trace, oom): a line whenever a loss counter moved (checked at each
 * report) and once at the end, {"time_ns":N, "event":"lost", "final":B, "lost":{...}} in
 * JSON, so that the stream says what it is missing. */
struct json_writer;
struct loss_lines {
	struct snapshot *printed;	/* the counters at the last line that carried them */
};
bool loss_lines_moved(const struct loss_lines *l, const struct snapshot *snap);
bool loss_lines_due(const struct loss_lines *l, const struct snapshot *snap);	/* moved, some */
void loss_lines_json(struct loss_lines *l, struct json_writer *w, const struct snapshot *snap,
		     bool final);
void loss_lines_said(struct loss_lines *l, const struct snapshot *snap);	/* said otherwise */
/* A line: JSON with w (NULL: no memory, s->failed), text on stderr. */
void loss_lines_print(struct loss_lines *l, struct sink *s, struct json_writer *w,
		      const struct snapshot *snap, bool final);
double loss_lines_interval(const struct options *o);	/* a check each second */
void loss_lines_end(struct loss_lines *l);

/* The recorder of record -o FILE.db and serve --record FILE.db, from the options, and what
 * those views hand it; a failed write ends the run, which then exits 1. NULL r: nothing. */
struct recorder;
int record_open(struct sink *s, struct recorder **out);
void record_on_event(struct sink *s, struct recorder *r, const struct snap_event *se);
void record_on_snapshot(struct sink *s, struct recorder *r, const struct snapshot *snap);
void record_on_tick(struct sink *s, struct recorder *r);
/* Records last (when not NULL) and closes; returns -1 when any write failed. */
int record_close(struct sink *s, struct recorder *r, const struct snapshot *last);

#endif
