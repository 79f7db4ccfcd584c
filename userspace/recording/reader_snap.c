// SPDX-License-Identifier: GPL-2.0
/* Snapshots from a recording: the state at an instant (recording_state.c) as the published
 * snapshot every view reads, with the failures and loss counters of then. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
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
	}
}

/* Each counter's last row at or before at: the losses, and the tracer's other numbers. */
static void read_counters(struct recording *r, struct snapshot *snap, uint64_t at)
{
	static const char *const tables[] = { "losses", "tracer_stats" };

	for (int t = 0; t < 2; t++) {
		char sql[160];
		sqlite3_stmt *st;

		snprintf(sql, sizeof(sql), "SELECT name, value, max(time_ns) FROM %s WHERE"
			 " time_ns <= ?1 GROUP BY name", tables[t]);
		if (rec_prepare(r, &st, sql))
			continue;
		sqlite3_bind_int64(st, 1, (int64_t)at);
		while (sqlite3_step(st) == SQLITE_ROW) {
			const char *name = (const char *)sqlite3_column_text(st, 0);
			uint64_t v = (uint64_t)sqlite3_column_int64(st, 1);
			size_t n = t ? recdb_stat_count() : loss_count();

			for (size_t i = 0; name && i < n; i++) {
				if (t == 0 && !strcmp(name, loss_name(i)))
					loss_set(snap, i, v);
				else if (t == 1 && !strcmp(name, recdb_stat_name(i)))
					recdb_stat_set(snap, i, v);
			}
		}
		sqlite3_finalize(st);
	}
}

struct snapshot *rstate_snapshot(struct recording *r, const struct rstate *s)
{
	struct snapshot *snap = xcalloc(1, sizeof(*snap));

	snap->refs = 1;
	snap->wants = SNAP_FAILURES;
	snprintf(snap->nvml.reason, sizeof(snap->nvml.reason), "not in recordings");
	snap->time_ns = s->at;
	snap->procs = xcalloc(s->n ? s->n : 1, sizeof(*snap->procs));
	snap->nprocs = s->n;
	for (size_t i = 0; i < s->n; i++)
		copy_proc(r, s, &s->procs[i], &snap->procs[i]);
	if (snap->nprocs > 1)
		qsort(snap->procs, snap->nprocs, sizeof(*snap->procs), snap_proc_cmp);
	read_counters(r, snap, s->at);
	if (rec_load_failures(r, snap, s->since, s->at))
		snap->error = -EIO;	/* the numbers may be incomplete */
	return snap;
}

struct snapshot *recording_snapshot_window(struct recording *r, uint64_t since_ns,
					   uint64_t at_ns)
{
	struct snapshot *snap;
	struct rstate s;

	if (rstate_load(r, since_ns, at_ns, &s)) {
		snap = xcalloc(1, sizeof(*snap));
		snap->refs = 1;
		snap->time_ns = at_ns;
		snap->error = -EIO;
		return snap;
	}
	snap = rstate_snapshot(r, &s);
	rstate_free(&s);
	return snap;
}

struct snapshot *recording_snapshot_at(struct recording *r, uint64_t wall_ns)
{
	return recording_snapshot_window(r, r->start_ns, wall_ns);
}
