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

/* export FILE.db: an export from a recording; returns the exit status. */
int export_recording(const struct options *o);

#endif
