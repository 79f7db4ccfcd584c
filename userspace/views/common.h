/* SPDX-License-Identifier: GPL-2.0 */
/* The views: each formats the snapshots (and events) the session hands it, as text or JSON. */
#ifndef GPUMEM_VIEWS_COMMON_H
#define GPUMEM_VIEWS_COMMON_H

#include "session.h"

extern const struct view_ops snapshot_view;
extern const struct view_ops trace_view;
extern const struct view_ops top_view;
extern const struct view_ops leaks_view;
extern const struct view_ops oom_view;
extern const struct view_ops serve_view;
extern const struct view_ops export_view;
extern const struct view_ops record_view;

/* export FILE.db: an export from a recording; returns the exit status. */
int export_recording(const struct options *o);

/* The recorder of record -o FILE.db and serve --record FILE.db, from the options, and what
 * those views hand it; a failed write ends the run, which then exits 1. NULL r: nothing. */
struct recorder;
int record_open(struct session *s, struct recorder **out);
void record_on_event(struct session *s, struct recorder *r, const struct snap_event *se);
void record_on_snapshot(struct session *s, struct recorder *r, const struct snapshot *snap);
void record_on_tick(struct session *s, struct recorder *r);
/* Records last (when not NULL) and closes; returns -1 when any write failed. */
int record_close(struct session *s, struct recorder *r, const struct snapshot *last);

#endif
