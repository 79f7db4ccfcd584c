/* SPDX-License-Identifier: GPL-2.0 */
/* The model's second source: a recording (gpumem record, serve --record) read back into the
 * snapshots, events and sample series the live tracer gives, so every output reads it the
 * same way. Times are wall-clock nanoseconds since the epoch; in the snapshots it builds,
 * time_ns and every other CLOCK_MONOTONIC field hold wall-clock times (mono_to_real_ns 0). */
#ifndef GPUMEM_RECORDING_H
#define GPUMEM_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "discover/select.h"
#include "model/snapshot.h"

struct recording;
struct history;

/* Which processes a reader sees: any of the pids (none: all), and in a container or pod
 * each selection matches ("container": an id prefix, "pod": the UID; none: all). */
struct rec_filter {
	const int *pids;
	size_t npids;
	const struct selection *sel;
	size_t nsel;
};

/* Opens a recording to read (prints why and returns -errno when it cannot). */
int recording_open(const char *path, struct recording **out);
void recording_close(struct recording *r);
/* What the reader shows from now on (the filter is copied by reference: keep it alive). */
void recording_set_filter(struct recording *r, const struct rec_filter *f);
/* The recording's first and last instants: its first session's start (or where retention
 * cut it) and its last sample, event or session end. */
void recording_span(const struct recording *r, uint64_t *start_ns, uint64_t *end_ns);
/* Seconds between the samples of the session recording at t (its -i). */
double recording_sample_interval(struct recording *r, uint64_t t);
/* Whether every allocation and free was recorded at t (no --sample-events): then the state
 * between two samples is replayed from the events, exact to the event. */
bool recording_exact_at(struct recording *r, uint64_t t);

/* The state at wall_ns, as the live snapshot has it: every process seen from the start on
 * (those ended by then with "alive": false and their final numbers), its sites with named
 * frames, the failures, the loss counters. A new reference (snapshot_put). */
struct snapshot *recording_snapshot_at(struct recording *r, uint64_t wall_ns);
/* The same, with only the processes and failures seen from since_ns on. */
struct snapshot *recording_snapshot_window(struct recording *r, uint64_t since_ns,
					   uint64_t at_ns);
/* Snapshots of one window at instants that only go forward (a replay's reports, a history's
 * samples): each costs what happened since the last one (its events; any sample, process or
 * session start between loads the state again), not the window again. The cursor is made at
 * the first call (*c NULL); rec_cursor_free lets it go. The failures only with SNAP_FAILURES
 * in wants. */
struct rec_cursor;
struct snapshot *recording_snapshot_next(struct recording *r, struct rec_cursor **c,
					 uint64_t since_ns, uint64_t at_ns, unsigned int wants);
void rec_cursor_free(struct rec_cursor *c);

/* The recorded events between since and until (both included), in time order, as snap_events
 * with their stacks named; event types: a mask of 1 << GM_REC_* (0: all). fn returns non-zero
 * to stop, which is returned. A free's allocating site is in alloc_site (or NULL). */
struct rec_event_extra {
	uint64_t event_id;	/* the row's id */
	uint64_t process_id;	/* its process row (a snapshot's serial) */
	uint64_t alloc_id;	/* a free: its allocation's event row; 0: not recorded */
	const struct snap_stack *alloc_site;	/* a free: the stack of the site that allocated */
};
typedef int (*recording_event_fn)(void *ctx, const struct snap_event *e,
				  const struct rec_event_extra *x);
int recording_for_each_event(struct recording *r, uint64_t since, uint64_t until,
			     unsigned int types, recording_event_fn fn, void *ctx);

/* Feeds h with the samples taken between since and until (the last HIST_CAP of them) and the
 * state at until, as the live history observes each published snapshot. Returns the state at
 * until (a new reference), which leaks_judge reads with h. */
struct snapshot *recording_history(struct recording *r, uint64_t since, uint64_t until,
				   struct history *h);

/* Every call site over a window: what it held at the end, its peak in the window, and the
 * calls it made in it. */
struct rec_site_summary {
	const struct snap_proc *p;	/* in the snapshot at until */
	const struct snap_site *ss;	/* current_* at until; counts are of the window */
	uint64_t peak_bytes;
};
struct rec_sites {
	struct snapshot *at_until;	/* owns the processes and sites the rows point into */
	struct rec_site_summary *rows;	/* by process, then what each holds, largest first */
	size_t n;
	bool peaks_exact;	/* replayed from every event; else the samples' highest */
};
int recording_sites(struct recording *r, uint64_t since, uint64_t until, struct rec_sites *out);
void recording_sites_free(struct rec_sites *s);

#endif
