// SPDX-License-Identifier: GPL-2.0
/* Snapshots from a recording: the state at an instant (recording_state.c) as the published
 * snapshot every view reads, with the failures and loss counters of then. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "model/owners.h"
#include "output/report.h"
#include "probes/table.h"
#include "recording/reader_int.h"
#include "recording/schema.h"

/* Sites, and PyTorch's tensor sites apart (as the live model publishes them), their sums in
 * out->tensor. */
static void copy_sites(struct recording *r, const struct rproc *rp, struct snap_proc *out)
{
	out->sites = xcalloc(rp->nsites ? rp->nsites : 1, sizeof(*out->sites));
	out->tensor_sites = xcalloc(rp->nsites ? rp->nsites : 1, sizeof(*out->tensor_sites));
	for (size_t i = 0; i < rp->nsites; i++) {
		const struct rsite *s = &rp->sites[i];
		bool tensor = probe_is_tensor(s->api);
		struct snap_site *to;

		if (!s->seen)
			continue;	/* made after this instant */
		to = tensor ? &out->tensor_sites[out->ntensor_sites++] : &out->sites[out->nsites++];
		*to = (struct snap_site){
			.api = s->api, .kind = s->kind, .stack_id = s->key,
			.py_stack_id = s->py_key, .gpu = s->gpu, .st = s->st,
			.stack = snap_stack_get(rec_stack_of(r, s->stack_row)),
		};
		if (!tensor) {	/* a recording keeps the bytes per device in its sites */
			if (gm_kind_is_gpu(s->kind))
				out->st.gpu_bytes[gm_gpu_slot(s->gpu)] += s->st.current_bytes;
			continue;
		}
		out->tensor.current_bytes += s->st.current_bytes;
		out->tensor.current_allocs += s->st.current_allocs;
		out->tensor.alloc_count += s->st.alloc_count;
		out->tensor.free_count += s->st.free_count;
		out->tensor.alloc_bytes_total += s->st.alloc_bytes_total;
	}
	if (out->nsites > 1)
		qsort(out->sites, out->nsites, sizeof(*out->sites), snap_site_cmp);
	if (out->ntensor_sites > 1)
		qsort(out->tensor_sites, out->ntensor_sites, sizeof(*out->tensor_sites),
		      snap_site_cmp);
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static void copy_proc(struct recording *r, const struct rstate *s, const struct rproc *rp,
		      struct snap_proc *out)
{
	const struct rec_ident *id = rp->ident;

	out->serial = id->id;
	out->pid = id->pid;
	out->ns_pid = id->ns_pid;
	out->valid = id->valid;
	out->alive = !id->end_ns || id->end_ns > s->at;
	out->end_ns = out->alive ? s->at : id->end_ns;
	if (!out->alive && id->has_exit) {
		out->exit_code = id->exit_code;
		out->valid |= SP_EXIT_CODE;
	}
	memcpy(out->comm, id->comm, sizeof(out->comm));
	out->cmdline = dup_or_null(id->cmdline);
	out->cgroup = dup_or_null(id->cgroup);
	out->user = dup_or_null(id->user);
	out->container = id->container;
	if (rp->has_stats) {
		out->valid |= SP_STATS;
		out->st = rp->st;
		out->st.first_seen_ns = id->start_ns;
		copy_sites(r, rp, out);
		snap_proc_libraries(out);
	}
}

static const char *const counter_tables[] = { "losses", "tracer_stats" };

/* Each counter's last row at or before at: the losses, and the tracer's other numbers. */
static void counters_read(struct recording *r, struct rec_counters *c, uint64_t at)
{
	size_t nloss = loss_count(), n = nloss + recdb_stat_count();

	if (!c->v) {
		c->v = xcalloc(n, sizeof(*c->v));
		c->has = xcalloc(n, sizeof(*c->has));
	}
	memset(c->has, 0, n * sizeof(*c->has));
	c->at = at;
	c->until = UINT64_MAX;
	for (size_t t = 0; t < ARRAY_SIZE(counter_tables); t++) {
		size_t from = t ? nloss : 0, to = t ? n : nloss;
		uint64_t next;
		char sql[160];
		sqlite3_stmt *st;

		snprintf(sql, sizeof(sql), "SELECT name, value, max(time_ns) FROM %s WHERE"
			 " time_ns <= ?1 GROUP BY name", counter_tables[t]);
		if (rec_prepare(r, &st, sql))
			continue;
		sqlite3_bind_int64(st, 1, (int64_t)at);
		while (sqlite3_step(st) == SQLITE_ROW) {
			const char *name = (const char *)sqlite3_column_text(st, 0);

			for (size_t i = from; name && i < to; i++) {
				if (!strcmp(name, t ? recdb_stat_name(i - from) : loss_name(i))) {
					c->v[i] = (uint64_t)sqlite3_column_int64(st, 1);
					c->has[i] = true;
				}
			}
		}
		sqlite3_finalize(st);
		snprintf(sql, sizeof(sql), "SELECT min(time_ns) FROM %s WHERE time_ns > ?1",
			 counter_tables[t]);
		next = rec_query_u64(r, sql, at, UINT64_MAX);
		if (next < c->until)
			c->until = next;
	}
}

static void counters_apply(const struct rec_counters *c, struct snapshot *snap)
{
	size_t nloss = loss_count(), n = nloss + recdb_stat_count();

	for (size_t i = 0; i < n; i++) {
		if (!c->has[i])
			continue;
		if (i < nloss)
			loss_set(snap, i, c->v[i]);
		else
			recdb_stat_set(snap, i - nloss, c->v[i]);
	}
}

void rec_counters_free(struct rec_counters *c)
{
	free(c->v);
	free(c->has);
	*c = (struct rec_counters){ 0 };
}

struct snapshot *rstate_snapshot(struct recording *r, const struct rstate *s,
				 unsigned int wants, struct rec_counters *counters)
{
	struct snapshot *snap = xcalloc(1, sizeof(*snap));
	struct rec_counters now = { 0 };

	snap->refs = 1;
	snap->wants = wants & SNAP_FAILURES;
	snprintf(snap->nvml.reason, sizeof(snap->nvml.reason), "not in recordings");
	snprintf(snap->amd.reason, sizeof(snap->amd.reason), "not in recordings");
	snap->time_ns = s->at;
	snap->procs = xcalloc(s->n ? s->n : 1, sizeof(*snap->procs));
	snap->nprocs = s->n;
	for (size_t i = 0; i < s->n; i++)
		copy_proc(r, s, &s->procs[i], &snap->procs[i]);
	if (snap->nprocs > 1)
		qsort(snap->procs, snap->nprocs, sizeof(*snap->procs), snap_proc_cmp);
	if (!counters)
		counters = &now;
	if (!counters->v || s->at < counters->at || s->at >= counters->until)
		counters_read(r, counters, s->at);
	counters_apply(counters, snap);
	rec_counters_free(&now);
	if ((wants & SNAP_FAILURES) && rec_load_failures(r, snap, s->since, s->at))
		snap->error = -EIO;	/* the numbers may be incomplete */
	return snap;
}

static struct snapshot *read_error(uint64_t at_ns)
{
	struct snapshot *snap = xcalloc(1, sizeof(*snap));

	snap->refs = 1;
	snap->time_ns = at_ns;
	snap->error = -EIO;
	return snap;
}

struct snapshot *recording_snapshot_window(struct recording *r, uint64_t since_ns,
					   uint64_t at_ns)
{
	struct snapshot *snap;
	struct rstate s;

	if (rstate_load(r, since_ns, at_ns, &s))
		return read_error(at_ns);
	snap = rstate_snapshot(r, &s, SNAP_FAILURES, NULL);
	rstate_free(&s);
	return snap;
}

struct snapshot *recording_snapshot_next(struct recording *r, struct rec_cursor **c,
					 uint64_t since_ns, uint64_t at_ns, unsigned int wants)
{
	const struct rstate *s = rec_cursor_move(r, c, since_ns, at_ns);

	return s ? rstate_snapshot(r, s, wants, &(*c)->counters) : read_error(at_ns);
}

struct snapshot *recording_snapshot_at(struct recording *r, uint64_t wall_ns)
{
	return recording_snapshot_window(r, r->start_ns, wall_ns);
}
