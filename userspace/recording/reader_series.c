// SPDX-License-Identifier: GPL-2.0
/* A recording over a window: the series of its samples fed to a history (what the live leaks
 * view judges), and every call site's numbers over the window (report sites). */
#include <stdlib.h>
#include <string.h>
#include "analysis/history.h"
#include "base/util.h"
#include "recording/reader_int.h"
#include "recording/schema.h"

/* The last HIST_CAP sample times of [since, until], oldest first; returns how many. */
static size_t window_ticks(struct recording *r, uint64_t since, uint64_t until, uint64_t *out)
{
	sqlite3_stmt *st;
	size_t n = 0;

	if (rec_prepare(r, &st, "SELECT time_ns FROM samples WHERE time_ns >= ?1 AND"
			" time_ns <= ?2 ORDER BY time_ns DESC LIMIT ?3"))
		return 0;
	sqlite3_bind_int64(st, 1, (int64_t)since);
	sqlite3_bind_int64(st, 2, (int64_t)until);
	sqlite3_bind_int(st, 3, HIST_CAP);
	while (n < HIST_CAP && sqlite3_step(st) == SQLITE_ROW)
		out[n++] = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	for (size_t i = 0; i < n / 2; i++) {
		uint64_t t = out[i];

		out[i] = out[n - 1 - i];
		out[n - 1 - i] = t;
	}
	return n;
}

struct snapshot *recording_history(struct recording *r, uint64_t since, uint64_t until,
				   struct history *h)
{
	uint64_t *ticks = xcalloc(HIST_CAP, sizeof(*ticks));
	size_t n = window_ticks(r, since, until, ticks);
	struct rec_cursor *c = NULL;
	struct snapshot *snap;

	for (size_t i = 0; i < n; i++) {
		if (ticks[i] == until)
			continue;	/* the last one is observed below */
		snap = recording_snapshot_next(r, &c, since, ticks[i], 0);
		history_observe(h, snap);
		snapshot_put(snap);
	}
	rec_cursor_free(c);
	free(ticks);
	snap = recording_snapshot_window(r, since, until);
	history_observe(h, snap);
	return snap;
}

/* ---- sites over a window ---- */

static uint64_t pack_site(const struct rsite *s)
{
	return (uint64_t)(uint32_t)s->key << 32 | (uint64_t)(s->gpu & 0xff) << 24 |
	       (uint64_t)(s->api & 0xffff) << 8 | (s->kind & 0xff);
}

/* The process row (below 2^32) with the site's Python stack above it: Python lines that reach
 * one native stack are sites apart (PyTorch's tensor sites all share the allocator's). */
static uint64_t site_owner(uint64_t process_row, int32_t py_key)
{
	return process_row | (uint64_t)(uint32_t)(py_key < 0 ? 0 : py_key + 1) << 32;
}

static void raise_peak(struct idmap *peaks, uint64_t site_row, uint64_t bytes)
{
	struct idmap_slot *p = idmap_find(peaks, site_row, 0);

	if (!p)
		idmap_put(peaks, site_row, 0, bytes, 0);
	else if (bytes > p->v)
		p->v = bytes;
}

/* The highest sample of each site in (since, until]. */
static void sample_peaks(struct recording *r, uint64_t since, uint64_t until, struct idmap *peaks)
{
	sqlite3_stmt *st;

	if (rec_prepare(r, &st, "SELECT site_id, max(current_bytes) FROM site_samples WHERE"
			" time_ns > ?1 AND time_ns <= ?2 GROUP BY site_id"))
		return;
	sqlite3_bind_int64(st, 1, (int64_t)since);
	sqlite3_bind_int64(st, 2, (int64_t)until);
	while (sqlite3_step(st) == SQLITE_ROW)
		raise_peak(peaks, (uint64_t)sqlite3_column_int64(st, 0),
			   (uint64_t)sqlite3_column_int64(st, 1));
	sqlite3_finalize(st);
}

/* The samples and the allocations and frees of (since, until] in time order, on a running
 * count per site from its bytes at since (in running): a sample sets it, an allocation adds,
 * a free takes away. Exact when every event was recorded. */
static void event_peaks(struct recording *r, uint64_t since, uint64_t until, struct idmap *running,
			struct idmap *peaks)
{
	sqlite3_stmt *st;

	if (rec_prepare(r, &st, "SELECT time_ns, 0, site_id, current_bytes FROM"
			" site_samples WHERE time_ns > ?1 AND time_ns <= ?2 UNION ALL SELECT"
			" time_ns, type, site_id, size FROM events WHERE time_ns > ?1 AND"
			" time_ns <= ?2 AND type IN (1, 2) AND site_id IS NOT NULL AND id BETWEEN ?3"
			" AND ?4 ORDER BY 1, 2"))
		return;
	sqlite3_bind_int64(st, 1, (int64_t)since);
	sqlite3_bind_int64(st, 2, (int64_t)until);
	if (rec_bind_event_ids(r, st, 3, since, until)) {
		sqlite3_finalize(st);
		return;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		uint64_t site = (uint64_t)sqlite3_column_int64(st, 2);
		uint64_t n = (uint64_t)sqlite3_column_int64(st, 3);
		int what = sqlite3_column_int(st, 1);
		struct idmap_slot *v = idmap_find(running, site, 0);

		if (!v)
			v = idmap_put(running, site, 0, 0, 0);
		if (what == 0)
			v->v = n;
		else if (what == RECDB_EV_ALLOC)
			v->v += n;
		else
			v->v = v->v > n ? v->v - n : 0;
		raise_peak(peaks, site, v->v);
	}
	sqlite3_finalize(st);
}

/* The window's calls: each count at until less the count at since. */
static void window_counts(struct rsite *s, const struct rsite *before)
{
	if (before) {
		s->st.alloc_count -= before->st.alloc_count < s->st.alloc_count ?
				     before->st.alloc_count : s->st.alloc_count;
		s->st.free_count -= before->st.free_count < s->st.free_count ?
				    before->st.free_count : s->st.free_count;
		s->st.alloc_bytes_total -= before->st.alloc_bytes_total < s->st.alloc_bytes_total ?
					   before->st.alloc_bytes_total : s->st.alloc_bytes_total;
		s->st.failed_count -= before->st.failed_count < s->st.failed_count ?
				      before->st.failed_count : s->st.failed_count;
	}
	s->seen = s->seen && (s->st.current_bytes || s->st.alloc_count || s->st.free_count ||
			      s->st.failed_count);
}

/* Peaks of every site of `end`, keyed by (process row, site key) for the snapshot's sites. */
static void site_peaks(struct recording *r, struct rstate *start, struct rstate *end,
		       bool exact, struct idmap *by_key)
{
	struct idmap peaks = { 0 }, running = { 0 };

	for (size_t i = 0; i < end->n; i++) {
		for (size_t j = 0; j < end->procs[i].nsites; j++) {
			struct rsite *s = &end->procs[i].sites[j];
			struct idmap_slot *b = idmap_find(&start->site_rows, s->id, 0);
			const struct rsite *before = b ? &start->procs[b->v].sites[b->v2] : NULL;

			raise_peak(&peaks, s->id, s->st.current_bytes);
			if (before && before->seen) {
				raise_peak(&peaks, s->id, before->st.current_bytes);
				idmap_put(&running, s->id, 0, before->st.current_bytes, 0);
			}
			window_counts(s, before && before->seen ? before : NULL);
		}
	}
	sample_peaks(r, start->at, end->at, &peaks);
	if (exact)
		event_peaks(r, start->at, end->at, &running, &peaks);
	for (size_t i = 0; i < end->n; i++)
		for (size_t j = 0; j < end->procs[i].nsites; j++) {
			const struct rsite *s = &end->procs[i].sites[j];

			idmap_put(by_key, site_owner(end->procs[i].ident->id, s->py_key),
				  pack_site(s),
				  idmap_find(&peaks, s->id, 0)->v, 0);
		}
	idmap_free(&peaks);
	idmap_free(&running);
}

static void fill_rows(struct rec_sites *out, const struct idmap *by_key)
{
	const struct snapshot *snap = out->at_until;
	size_t n = 0;

	for (size_t i = 0; i < snap->nprocs; i++)
		n += snap->procs[i].nsites + snap->procs[i].ntensor_sites;
	out->rows = xcalloc(n ? n : 1, sizeof(*out->rows));
	for (size_t i = 0; i < snap->nprocs; i++) {
		const struct snap_proc *p = &snap->procs[i];

		/* PyTorch's tensor sites too: rows whose kind says "tensor". */
		for (size_t j = 0; j < p->nsites + p->ntensor_sites; j++) {
			const struct snap_site *ss = j < p->nsites ? &p->sites[j]
								    : &p->tensor_sites[j - p->nsites];
			struct rsite key = { .key = ss->stack_id, .api = ss->api,
					     .kind = ss->kind, .gpu = ss->gpu };
			struct idmap_slot *peak = idmap_find(by_key,
							     site_owner(p->serial, ss->py_stack_id),
							     pack_site(&key));

			out->rows[out->n++] = (struct rec_site_summary){
				.p = p, .ss = ss,
				.peak_bytes = peak ? peak->v : ss->st.current_bytes,
			};
		}
	}
}

int recording_sites(struct recording *r, uint64_t since, uint64_t until, struct rec_sites *out)
{
	struct rstate start, end;
	struct idmap by_key = { 0 };
	int err;

	*out = (struct rec_sites){ 0 };
	err = rstate_load(r, since, since, &start);
	if (err)
		return err;
	err = rstate_load(r, since, until, &end);
	if (err) {
		rstate_free(&start);
		return err;
	}
	out->peaks_exact = recording_exact_at(r, since) && recording_exact_at(r, until);
	site_peaks(r, &start, &end, out->peaks_exact, &by_key);
	out->at_until = rstate_snapshot(r, &end, SNAP_FAILURES, NULL);
	fill_rows(out, &by_key);
	idmap_free(&by_key);
	rstate_free(&start);
	rstate_free(&end);
	return out->at_until->error;
}

void recording_sites_free(struct rec_sites *s)
{
	snapshot_put(s->at_until);
	free(s->rows);
	*s = (struct rec_sites){ 0 };
}
