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
