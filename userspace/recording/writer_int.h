/* SPDX-License-Identifier: GPL-2.0 */
/* The recorder's insides, shared by its files (export/sqlite*.c only): what it has written,
 * by process, site, stack and live allocation, and its prepared statements. */
#ifndef GPUMEM_SQLITE_INT_H
#define GPUMEM_SQLITE_INT_H

#include <inttypes.h>
#include <stdio.h>
#include <sqlite3.h>
#include "recording/idmap.h"
#include "recording/writer.h"

enum rec_stmt {
	ST_EVENT,
	ST_EVENTS,	/* REC_EVENT_BATCH events in one insert */
	ST_PROC_NEW,
	ST_PROC_IDENTITY,
	ST_PROC_END,
	ST_SITE_NEW,
	ST_SITE_STACK,
	ST_STACK_FIND,
	ST_STACK_NEW,
	ST_FRAME_NEW,
	ST_STACK_TOUCH,
	ST_TICK,
	ST_PROC_SAMPLE,
	ST_SITE_SAMPLE,
	ST_LOSS,
	ST_TRACER_STAT,
	ST_SPAN,
	ST_COUNT,
};

/* Events are inserted REC_EVENT_BATCH rows at a time: a statement's run costs about as much as
 * the B-tree work of its row (1,150 ns a row alone here, 860-960 in inserts of 16 or 32). */
#define REC_EVENT_BATCH 16
#define REC_EVENT_COLS 16

/* An event's row waiting for its batch: its columns' values, a bit of null_mask for each NULL. */
struct rec_event_row {
	int64_t v[REC_EVENT_COLS];
	uint32_t null_mask;
};
#define REC_ROW_ALL_NULL ((1u << REC_EVENT_COLS) - 1)	/* a statement's parameters at first */

/* The events of ids first..last and their times: a row of event_spans, written (again) at each
 * commit while open, closed at REC_SPAN_EVENTS events. A time's events are found through them. */
#define REC_SPAN_EVENTS 4096
struct rec_span {
	uint64_t first, last, min_ns, max_ns;
	bool unwritten;		/* holds events its row does not cover yet */
};

struct rec_site {
	uint64_t id;
	uint64_t stack_row;	/* 0: no stack */
	bool written;		/* a sample row was written: last holds it */
	struct gm_site_stats last;
};

/* The numbers of a process sample, compared to decide whether a row is due. */
struct rec_proc_numbers {
	uint64_t current_bytes, current_allocs, peak_bytes, alloc_count, free_count,
		alloc_bytes_total, failed_count, by_kind[GM_KIND_COUNT], tensor_bytes,
		tensor_allocs, tensor_peak_bytes;
};

struct rec_proc {
	uint64_t id;
	int pid;
	uint64_t serial;	/* the session's process serial; 0: not matched to a snapshot yet */
	bool open;		/* its end is not known yet */
	bool deleted;		/* retention removed its row: nothing more is written for it */
	uint64_t end_ns;
	uint64_t seen_gen;	/* the last snapshot it was in */
	uint64_t live;		/* live allocations of it in the live map */
	unsigned int identity;	/* snap_proc valid bits of the identity written, + names */
	bool written;
	struct rec_proc_numbers last;
	struct rec_site **sites;
	size_t nsites;
};

/* The live-allocation map's key is the process row << REC_LIVE_SPACE_BITS | its address space
 * (a kind, or GM_KIND_COUNT for tensors). */
#define REC_LIVE_SPACE_BITS 4
_Static_assert(GM_KIND_COUNT < (1 << REC_LIVE_SPACE_BITS), "every space fits its bits");
#define REC_NAMES_WRITTEN (1u << 31)	/* identity: the OCI names were written */

/* tracer_stats' rows of an agent's kernel loss counters as they were, where `losses` has
 * the recording's totals: "kernel.PINS.NAME", PINS the pins' identity (recorder_opts.pins_id),
 * NAME the loss's. Each set of pins its own rows: retention keeps each one's last. */
static inline void rec_kernel_prefix(char *buf, size_t len, uint64_t pins_id)
{
	snprintf(buf, len, "kernel.%" PRIu64 ".", pins_id);
}

struct recorder {
	sqlite3 *db;
	struct recorder_opts opt;
	char *path, *command;
	int err;		/* the first write error (SQLite's code); then nothing is written */
	bool in_txn;
	uint64_t session_id;
	uint64_t last_commit_ns, next_retention_ns;
	uint64_t calls_since_clock;
	uint64_t next_event_id, next_proc_id, next_site_id, next_stack_id;
	uint64_t gen;		/* snapshots seen */
	sqlite3_stmt *st[ST_COUNT];
	struct idmap by_pid;	/* pid -> open rec_proc */
	struct idmap by_serial;	/* serial -> rec_proc */
	struct idmap unmatched;	/* pid -> closed rec_proc not matched to a snapshot yet */
	struct rec_proc **procs;	/* every one in memory */
	size_t nprocs, procs_cap;
	struct idmap sites;	/* (process id, stack key|api|kind) -> rec_site */
	struct idmap stacks;	/* snap_stack pointer (a reference held) -> row id, used */
	struct idmap live;	/* (process id << 1 | space, address) -> alloc event id, site id */
	bool live_sweep_due;	/* a process with live allocations ended */
	uint64_t *loss_last;	/* loss counters and tracer stats as last written */
	/* What the sessions before counted of each loss, added to this one's: its counters
	 * began at zero, or (an agent's pins, adopted) at what the file counted of them. The
	 * file's losses are the recording's, every session's. */
	uint64_t *loss_before;
	bool loss_written;
	struct rec_event_row pending[REC_EVENT_BATCH];	/* events not inserted yet */
	size_t npending;
	/* What ST_EVENTS's parameters and ST_EVENT's hold from their last run: bindings outlive
	 * sqlite3_reset, and only the columns that differ are bound again (half or more of an
	 * event's, in a loop: a bind costs about as much as a column's part of the insert). */
	struct rec_event_row held[REC_EVENT_BATCH], held_one;
	struct rec_span span;	/* first == 0: none open */
};

/* sqlite.c */
bool rec_step(struct recorder *r, enum rec_stmt which);	/* runs and resets; false: failed */
/* Inserts the events waiting for their batch: before a commit and before anything that reads
 * or deletes events. */
void rec_events_flush(struct recorder *r);
/* Flushes the events and writes the open span's row: the file then has every event so far. */
void rec_events_settle(struct recorder *r);
void rec_fail(struct recorder *r, const char *what);
void rec_bind_text(sqlite3_stmt *st, int col, const char *s);	/* NULL (or "") binds NULL */
/* sqlite_rows.c: the rows every event and sample refers to */
struct rec_proc *rec_proc_of_event(struct recorder *r, const struct gm_call_event *e,
				   uint64_t wall_ns);
struct rec_proc *rec_proc_of_snapshot(struct recorder *r, const struct snapshot *snap,
				      const struct snap_proc *p);
void rec_proc_close(struct recorder *r, struct rec_proc *p, uint64_t end_ns, bool has_code,
		    int code);
void rec_proc_identity(struct recorder *r, struct rec_proc *rp, const struct snap_proc *p);
/* gpu: the site's (snap_site.gpu, gm_site_gpu). */
struct rec_site *rec_site_of(struct recorder *r, struct rec_proc *p, int32_t stack_key,
			     int32_t py_stack_id, uint32_t api, uint32_t kind, uint32_t gpu,
			     struct snap_stack *stack);
uint64_t rec_stack_row(struct recorder *r, struct snap_stack *st);
void rec_stacks_flush(struct recorder *r, uint64_t now_wall, bool clear);
void rec_prune(struct recorder *r);
void rec_forget_all(struct recorder *r);	/* the memory, not the rows */
/* sqlite_samples.c */
void rec_write_samples(struct recorder *r, const struct snapshot *snap);
/* sqlite_retention.c */
void rec_retention(struct recorder *r, uint64_t now_wall);

#endif
