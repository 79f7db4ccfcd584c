/* SPDX-License-Identifier: GPL-2.0 */
/* The flight recorder: published snapshots and per-allocation events into an SQLite file
 * (WAL, a commit at least twice a second), with symbolized stacks stored once. Used by
 * `gpumem record` (views/record.c) and `gpumem serve --record` (views/serve.c). */
#ifndef GPUMEM_EXPORT_SQLITE_H
#define GPUMEM_EXPORT_SQLITE_H

#include <stdbool.h>
#include <stdint.h>
#include "model/snapshot.h"

struct recorder_opts {
	const char *path;
	bool replace;		/* record: a new file over an old recording; serve: appends */
	double sample_interval_s;	/* kept in the session row: how often samples come */
	double retention_s;	/* rows older than this are deleted as it goes; 0: all kept */
	uint32_t sample_events;	/* 1 allocation in N kept (its free with it); 0 or 1: all */
	const char *command;	/* what gpumem was asked to do, for the session row */
	/* An agent's: the identity of the pins whose kernel counters it counts with
	 * (tracer_pins_id). What a session before counted of them is the recording's already;
	 * 0: counters made for this session, from zero. */
	uint64_t pins_id;
};

struct recorder;

/* Opens (or creates) the recording and starts its session; prints why and returns -errno. */
int recorder_open(const struct recorder_opts *o, struct recorder **out);
/* One sample: each process and site whose numbers changed, the loss counters that did. */
int recorder_on_snapshot(struct recorder *r, const struct snapshot *snap);
/* An allocation, free, failure, unknown free or process end (allocations, frees and unknown
 * frees sampled by their address when --sample-events is set). */
int recorder_on_event(struct recorder *r, const struct snap_event *e);
/* Commits what is due and deletes what is past the retention; call it every tick. */
int recorder_tick(struct recorder *r);
/* Commits, closes the session and the file. Returns 0, or -EIO when any write failed (the
 * first failure was printed when it happened). */
int recorder_close(struct recorder *r);
/* Whether a write failed: the recording is then stopped, and the run should end. */
bool recorder_failed(const struct recorder *r);

#endif
