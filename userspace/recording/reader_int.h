/* SPDX-License-Identifier: GPL-2.0 */
/* The reader's insides, shared by recording/reader*.c only: the open file, its named stacks,
 * and the state of its processes and sites at an instant, before it becomes a snapshot. */
#ifndef GPUMEM_RECORDING_INT_H
#define GPUMEM_RECORDING_INT_H

#include <sqlite3.h>
#include <sys/types.h>
#include "recording/idmap.h"
#include "recording/reader.h"

/* What a recording may make a reader hold per string and per stack: as live ones are cut. */
#define REC_TEXT_MAX 4095
#define REC_MAX_FRAMES 512

struct recording {
	sqlite3 *db;
	char *path;
	const struct rec_filter *filter;
	uint64_t start_ns, end_ns;
	struct idmap stacks;	/* stack row -> snap_stack (a reference held) */
	struct idmap idents;	/* process row -> struct rec_ident (for events) */
};

/* What the processes table says of one process. */
struct rec_ident {
	uint64_t id;
	int pid, ns_pid;
	unsigned int valid;	/* SP_COMM, SP_CMDLINE, SP_CGROUP, SP_NS_PID, SP_USER */
	char comm[GM_COMM_LEN + 1];
	char *cmdline, *cgroup, *user;
	struct container_info container;
	uint64_t start_ns, end_ns;	/* end_ns 0: not ended */
	bool has_exit;
	int exit_code;
};

struct rsite {
	uint64_t id;
	int32_t key;		/* the kernel's stack id */
	int32_t py_key;		/* its Python stack id; -1: none */
	uint32_t api, kind;
	uint32_t gpu;		/* snap_site's */
	uint64_t stack_row;
	struct gm_site_stats st;
	bool seen;		/* a sample or an event says it existed by then */
};

struct rproc {
	struct rec_ident *ident;	/* owned by the recording's idents */
	struct gm_proc_stats st;
	bool has_stats, replayed;
	/* The replayed events its current bytes and tensor bytes are of: the latest by time. */
	uint64_t last_ns, last_id, tensor_ns, tensor_id;
	struct rsite *sites;
	size_t nsites;
};

/* The processes and sites at one instant: the last sample at or before it, and the events
 * after that sample replayed when every event was recorded. */
struct rstate {
	uint64_t since, at, tick;	/* tick: the sample it starts from (0: none) */
	struct rproc *procs;
	size_t n;
	struct idmap by_row;	/* process row -> index + 1 */
	struct idmap site_rows;	/* site row -> process index, site index */
};

/* recording.c */
bool rec_filter_passes(const struct recording *r, const struct rec_ident *id);
struct rec_ident *rec_ident_of(struct recording *r, uint64_t process_id);
/* The processes (that pass the filter) that lived at some point of [since, at], by row;
 * returns how many (*out to free), or -1. */
ssize_t rec_idents_between(struct recording *r, uint64_t since, uint64_t at,
			   struct rec_ident ***out);
struct snap_stack *rec_stack_of(struct recording *r, uint64_t stack_row);	/* borrowed */
int rec_prepare(struct recording *r, sqlite3_stmt **st, const char *sql);
/* recording_events.c: the failures of [since, at] into snap (first and last kept) */
int rec_load_failures(struct recording *r, struct snapshot *snap, uint64_t since, uint64_t at);
/* The loss and tracer counters as their last rows at or before `at` give them: the same up to
 * (not at) `until`, the next row's time. */
struct rec_counters {
	uint64_t at, until;
	uint64_t *v;	/* loss_count() losses, then recdb_stat_count() numbers */
	bool *has;	/* a row gave v[i] */
};

/* A window's states at instants that only go forward (recording_snapshot_next). */
struct rec_cursor {
	struct rstate s;
	bool loaded;
	/* The first instant past s.at where more than events changes the state: the next
	 * process or site sample (written when a number changed, so a tick with none changes
	 * nothing the events have not), process start or session start. Up to it, the state
	 * moves by its events. */
	uint64_t stale_at;
	uint64_t next_event;	/* the first event's time after s.at (UINT64_MAX: none) */
	struct rec_counters counters;	/* those of the last state's instant */
};

/* recording.c: one number a query of one bound parameter gives; deflt where it gives none */
uint64_t rec_query_u64(struct recording *r, const char *sql, uint64_t arg, uint64_t deflt);
/* Binds parameters param and param + 1 of st to the first and last ids of the events of
 * [since, until] (a superset: the spans that hold them), for "id BETWEEN ?n AND ?n+1"; the
 * events table has no index on time (docs/recording.md, event_spans). -EIO: the spans could
 * not be read (said), and st is bound to no events. */
int rec_bind_event_ids(struct recording *r, sqlite3_stmt *st, int param, uint64_t since,
		       uint64_t until);
/* recording_state.c */
int rstate_load(struct recording *r, uint64_t since, uint64_t at, struct rstate *out);
void rstate_free(struct rstate *s);
/* The state of [since, at] where the cursor (made at the first call) holds one of an earlier
 * instant of the same window: moved by the events between when nothing else changed, loaded
 * again when a sample, process or session came between. NULL on a read error. */
const struct rstate *rec_cursor_move(struct recording *r, struct rec_cursor **c,
				     uint64_t since, uint64_t at);
/* recording_snap.c; wants: enum snap_want (the failures with SNAP_FAILURES); counters: those
 * read before, kept and read again where stale (NULL: read now) */
struct snapshot *rstate_snapshot(struct recording *r, const struct rstate *s,
				 unsigned int wants, struct rec_counters *counters);
void rec_counters_free(struct rec_counters *c);

#endif
