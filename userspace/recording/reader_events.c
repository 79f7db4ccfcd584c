// SPDX-License-Identifier: GPL-2.0
/* The recorded events read back as the ring buffer's call events, with their process's name
 * and container and their stacks named: one at a time to a callback, and the failures a
 * snapshot carries (the first and the last kept, as the live model keeps them). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "model/model.h"
#include "recording/reader_int.h"
#include "recording/schema.h"

/* The columns event_from_row reads, in its order. */
#define EVENT_COLUMNS "e.id, e.time_ns, e.process_id, e.type, e.tid, e.api, e.layer, e.kind," \
	" e.addr, e.size, e.error, e.process_bytes, e.stack_id, e.alloc_id, s.stack_key," \
	" s.stack_id, e.process_tensor_bytes"
#define EVENT_FROM " FROM events e LEFT JOIN sites s ON s.id = e.site_id"

static uint64_t col_u64(sqlite3_stmt *st, int col)
{
	return (uint64_t)sqlite3_column_int64(st, col);
}

static void event_from_row(sqlite3_stmt *st, const struct rec_ident *id,
			   struct gm_call_event *ev)
{
	*ev = (struct gm_call_event){
		.type = (__u32)sqlite3_column_int(st, 3), .pid = (__u32)id->pid,
		.tid = (__u32)sqlite3_column_int(st, 4), .time_ns = col_u64(st, 1),
		.addr = col_u64(st, 8), .size = col_u64(st, 9), .process_bytes = col_u64(st, 11),
		.error = sqlite3_column_int(st, 10), .api = (__u16)sqlite3_column_int(st, 5),
		.kind = (__u8)sqlite3_column_int(st, 7), .layer = (__u8)sqlite3_column_int(st, 6),
		.stack_id = -1, .tensor_bytes = col_u64(st, 16),
	};
	/* The site's key in the kernel (allocations and failures: the event's own stack). */
	if (ev->type != RECDB_EV_FREE && sqlite3_column_type(st, 14) != SQLITE_NULL)
		ev->stack_id = sqlite3_column_int(st, 14);
	memcpy(ev->comm, id->comm, sizeof(ev->comm));	/* id->comm is one byte longer */
}

static int prepare_events(struct recording *r, sqlite3_stmt **st, uint64_t since,
			  uint64_t until, unsigned int types)
{
	char sql[512];

	bool failures = types == 1u << RECDB_EV_ALLOC_FAILED;

	/* Failures alone: the partial index on them; else the ids of the time's spans. */
	snprintf(sql, sizeof(sql), "SELECT " EVENT_COLUMNS EVENT_FROM " WHERE e.time_ns >= ?1 AND"
		 " e.time_ns <= ?2%s ORDER BY e.time_ns, e.id",
		 failures ? " AND e.type = 3" : " AND e.id BETWEEN ?3 AND ?4");
	if (rec_prepare(r, st, sql))
		return -EIO;
	sqlite3_bind_int64(*st, 1, (int64_t)since);
	sqlite3_bind_int64(*st, 2, (int64_t)until);
	if (!failures && rec_bind_event_ids(r, *st, 3, since, until)) {
		sqlite3_finalize(*st);
		return -EIO;
	}
	return 0;
}

int recording_for_each_event(struct recording *r, uint64_t since, uint64_t until,
			     unsigned int types, recording_event_fn fn, void *ctx)
{
	sqlite3_stmt *st;
	int rc = 0;

	if (prepare_events(r, &st, since, until, types))
		return -EIO;
	while (!rc && sqlite3_step(st) == SQLITE_ROW) {
		struct rec_ident *id = rec_ident_of(r, col_u64(st, 2));
		struct gm_call_event ev;
		struct snap_event se;
		struct rec_event_extra x;

		if (!id || !rec_filter_passes(r, id))
			continue;
		if (types && (sqlite3_column_int(st, 3) & ~31 ||
			      !(types & (1u << sqlite3_column_int(st, 3)))))
			continue;	/* not asked for (or no type of ours) */
		event_from_row(st, id, &ev);
		se = (struct snap_event){ .ev = &ev, .stack = rec_stack_of(r, col_u64(st, 12)),
					  .stack_id = ev.stack_id, .py_stack_id = ev.py_stack_id,
					  .container = &id->container, .wall_ns = ev.time_ns };
		x = (struct rec_event_extra){
			.event_id = col_u64(st, 0), .process_id = id->id,
			.alloc_id = col_u64(st, 13),
		};
		if (ev.type == RECDB_EV_FREE)
			x.alloc_site = rec_stack_of(r, col_u64(st, 15));
		rc = fn(ctx, &se, &x);
	}
	sqlite3_finalize(st);
	return rc;
}

struct failure_fill {
	struct snapshot *snap;
	size_t first, kept;	/* the first `first` are kept, then a ring of the last */
	size_t seen;
};

static int keep_failure(void *ctx, const struct snap_event *se, const struct rec_event_extra *x)
{
	struct failure_fill *f = ctx;
	size_t keep = STATE_KEEP_FAILURES_DEFAULT, slot;
	struct snap_failure *out;

	(void)x;
	if (f->seen < keep)
		slot = f->seen;
	else
		slot = keep + (f->seen - keep) % keep;	/* the ring of the most recent */
	f->seen++;
	out = &f->snap->failures[slot];
	snap_stack_put(out->stack);
	*out = (struct snap_failure){ .ev = *se->ev, .stack = snap_stack_get(se->stack),
				      .container = *se->container, .has_container = true };
	f->kept = f->seen < 2 * keep ? f->seen : 2 * keep;
	return 0;
}

/* The ring's oldest first: the last ones in time order after the first ones. */
static void order_ring(struct failure_fill *f)
{
	size_t keep = STATE_KEEP_FAILURES_DEFAULT, head;
	struct snap_failure *tmp;

	if (f->seen <= 2 * keep)
		return;
	head = (f->seen - keep) % keep;	/* where the next would have gone: the oldest */
	tmp = xcalloc(keep, sizeof(*tmp));
	for (size_t i = 0; i < keep; i++)
		tmp[i] = f->snap->failures[keep + (head + i) % keep];
	memcpy(&f->snap->failures[keep], tmp, keep * sizeof(*tmp));
	free(tmp);
}

/* The snapshot's failures between since and at: the first and the last kept, the others
 * counted in failure_records_dropped, as the live model does with --keep-failures' default. */
int rec_load_failures(struct recording *r, struct snapshot *snap, uint64_t since, uint64_t at)
{
	struct failure_fill f = { .snap = snap };
	int err;

	snap->failures = xcalloc(2 * STATE_KEEP_FAILURES_DEFAULT, sizeof(*snap->failures));
	err = recording_for_each_event(r, since, at, 1u << RECDB_EV_ALLOC_FAILED, keep_failure, &f);
	order_ring(&f);
	snap->nfailures = f.kept;
	snap->lost[SNAP_LOST_FAILURES_DROPPED] = f.seen - f.kept;
	return err;
}
