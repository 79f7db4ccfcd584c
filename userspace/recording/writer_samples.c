// SPDX-License-Identifier: GPL-2.0
/* Samples: each published snapshot is a row of `samples` (a tick), and a row of
 * process_samples, site_samples, losses or tracer_stats for each process, site or counter
 * whose numbers changed since its last row; a value at a time is its last row at or before. */
#include <string.h>
#include "base/util.h"
#include "output/report.h"
#include "recording/schema.h"
#include "recording/writer_int.h"

static void counter_row(struct recorder *r, enum rec_stmt which, const char *name,
			uint64_t tick, uint64_t value)
{
	sqlite3_stmt *st = r->st[which];

	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, (int64_t)tick);
	sqlite3_bind_int64(st, 3, (int64_t)value);
	rec_step(r, which);
}

static void write_counters(struct recorder *r, const struct snapshot *snap, uint64_t tick)
{
	size_t nloss = loss_count(), nstat = recdb_stat_count();

	if (!r->loss_last)
		r->loss_last = xcalloc(nloss + nstat, sizeof(*r->loss_last));
	for (size_t i = 0; i < nloss + nstat; i++) {
		bool loss = i < nloss;
		uint64_t v = loss ? loss_value(snap, i) + (r->loss_before ? r->loss_before[i] : 0)
				  : recdb_stat_get(snap, i - nloss);

		if (r->loss_written && v == r->loss_last[i])
			continue;
		r->loss_last[i] = v;
		counter_row(r, loss ? ST_LOSS : ST_TRACER_STAT,
			    loss ? loss_name(i) : recdb_stat_name(i - nloss), tick, v);
		if (loss && loss_is_kernel(i) && r->opt.pins_id) {
			/* The pins' own count too: an agent that adopts them goes on from it
			 * (losses_before). */
			char raw[128];

			rec_kernel_prefix(raw, sizeof(raw), r->opt.pins_id);
			strncat(raw, loss_name(i), sizeof(raw) - strlen(raw) - 1);
			counter_row(r, ST_TRACER_STAT, raw, tick, loss_value(snap, i));
		}
	}
	r->loss_written = true;
}

static void site_sample(struct recorder *r, struct rec_site *s, const struct snap_site *ss,
			uint64_t tick)
{
	sqlite3_stmt *st = r->st[ST_SITE_SAMPLE];
	const struct gm_site_stats *v = &ss->st;

	if (s->written && !memcmp(&s->last, v, sizeof(*v)))
		return;
	s->last = *v;
	s->written = true;
	sqlite3_bind_int64(st, 1, (int64_t)s->id);
	sqlite3_bind_int64(st, 2, (int64_t)tick);
	sqlite3_bind_int64(st, 3, (int64_t)v->current_bytes);
	sqlite3_bind_int64(st, 4, (int64_t)v->current_allocs);
	sqlite3_bind_int64(st, 5, (int64_t)v->alloc_count);
	sqlite3_bind_int64(st, 6, (int64_t)v->free_count);
	sqlite3_bind_int64(st, 7, (int64_t)v->alloc_bytes_total);
	sqlite3_bind_int64(st, 8, (int64_t)v->failed_count);
	rec_step(r, ST_SITE_SAMPLE);
}

static void proc_sample(struct recorder *r, struct rec_proc *rp, const struct snap_proc *p,
			uint64_t tick)
{
	sqlite3_stmt *st = r->st[ST_PROC_SAMPLE];
	struct rec_proc_numbers n = {
		.current_bytes = p->st.current_bytes, .current_allocs = p->st.current_allocs,
		.peak_bytes = p->st.peak_bytes, .alloc_count = p->st.alloc_count,
		.free_count = p->st.free_count, .alloc_bytes_total = p->st.alloc_bytes_total,
		.failed_count = p->st.failed_count, .tensor_bytes = p->tensor.current_bytes,
		.tensor_allocs = p->tensor.current_allocs,
		.tensor_peak_bytes = p->st.tensor_peak_bytes,
	};

	memcpy(n.by_kind, p->st.by_kind, sizeof(n.by_kind));
	if (rp->written && !memcmp(&rp->last, &n, sizeof(n)))
		return;
	rp->last = n;
	rp->written = true;
	sqlite3_bind_int64(st, 1, (int64_t)rp->id);
	sqlite3_bind_int64(st, 2, (int64_t)tick);
	sqlite3_bind_int64(st, 3, (int64_t)n.current_bytes);
	sqlite3_bind_int64(st, 4, (int64_t)n.current_allocs);
	sqlite3_bind_int64(st, 5, (int64_t)n.peak_bytes);
	sqlite3_bind_int64(st, 6, (int64_t)n.alloc_count);
	sqlite3_bind_int64(st, 7, (int64_t)n.free_count);
	sqlite3_bind_int64(st, 8, (int64_t)n.alloc_bytes_total);
	sqlite3_bind_int64(st, 9, (int64_t)n.failed_count);
	for (int k = 0; k < GM_KIND_MEMORY_COUNT; k++)	/* a column per memory kind */
		sqlite3_bind_int64(st, 10 + k, (int64_t)n.by_kind[k]);
	sqlite3_bind_int64(st, 10 + GM_KIND_MEMORY_COUNT, (int64_t)n.tensor_bytes);
	sqlite3_bind_int64(st, 11 + GM_KIND_MEMORY_COUNT, (int64_t)n.tensor_allocs);
	sqlite3_bind_int64(st, 12 + GM_KIND_MEMORY_COUNT, (int64_t)n.tensor_peak_bytes);
	rec_step(r, ST_PROC_SAMPLE);
}

static void process_rows(struct recorder *r, const struct snapshot *snap,
			 const struct snap_proc *p, uint64_t tick)
{
	struct rec_proc *rp = rec_proc_of_snapshot(r, snap, p);

	rp->seen_gen = r->gen;
	if (rp->deleted)
		return;
	rec_proc_identity(r, rp, p);
	if (!p->alive && rp->open)	/* gone without an exit record (a sweep found it) */
		rec_proc_close(r, rp, snapshot_wall_ns(snap, p->end_ns),
			       p->valid & SP_EXIT_CODE, p->exit_code);
	if (!(p->valid & SP_STATS))
		return;
	proc_sample(r, rp, p, tick);
	for (size_t j = 0; j < p->nsites + p->ntensor_sites; j++) {
		const struct snap_site *ss = j < p->nsites ? &p->sites[j]
							    : &p->tensor_sites[j - p->nsites];
		struct rec_site *s = rec_site_of(r, rp, ss->stack_id, ss->py_stack_id, ss->api,
						 ss->kind, ss->gpu, ss->stack);

		site_sample(r, s, ss, tick);
	}
}

void rec_write_samples(struct recorder *r, const struct snapshot *snap)
{
	uint64_t tick = snapshot_wall_ns(snap, snap->time_ns);
	sqlite3_stmt *st = r->st[ST_TICK];

	r->gen++;
	sqlite3_bind_int64(st, 1, (int64_t)tick);
	sqlite3_bind_int64(st, 2, (int64_t)r->session_id);
	rec_step(r, ST_TICK);
	for (size_t i = 0; i < snap->nprocs && !r->err; i++)
		process_rows(r, snap, &snap->procs[i], tick);
	write_counters(r, snap, tick);
}
