// SPDX-License-Identifier: GPL-2.0
/* The state of a recording at an instant: each process's and site's last sample at or before
 * it (samples are written when a number changed, so the last row is the value then), and,
 * when every event was recorded, the allocations, frees and failures after that sample
 * replayed onto it: exact to the event, as the live model would have published it. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "probes/table.h"
#include "recording/reader_int.h"
#include "recording/schema.h"

static const char proc_sample_sql[] =
	"SELECT current_bytes, current_allocs, peak_bytes, alloc_count, free_count,"
	" alloc_bytes_total, failed_count, device_bytes, managed_bytes, host_bytes, async_bytes,"
	" vmm_bytes, tensor_peak_bytes FROM process_samples WHERE process_id = ?1 AND time_ns <= ?2"
	" ORDER BY time_ns DESC LIMIT 1";

static const char sites_sql[] =
	"SELECT s.id, s.stack_key, s.api, s.kind, s.stack_id, ss.current_bytes,"
	" ss.current_allocs, ss.alloc_count, ss.free_count, ss.alloc_bytes_total,"
	" ss.failed_count, s.py_stack_id, s.gpu FROM sites s LEFT JOIN site_samples ss"
	" ON ss.site_id = s.id AND"
	" ss.time_ns = (SELECT max(time_ns) FROM site_samples WHERE site_id = s.id AND"
	" time_ns <= ?2) WHERE s.process_id = ?1 ORDER BY s.id";

/* In the order of the rows (the ring's, the times' nearly so: no sort of the window); a
 * process's current numbers are its latest event's by time, then id, as in the order of time. */
static const char replay_sql[] =
	"SELECT process_id, type, kind, size, process_bytes, site_id, layer, process_tensor_bytes,"
	" time_ns, id FROM events"
	" WHERE time_ns > ?1 AND time_ns <= ?2 AND type IN (1, 2, 3) AND id BETWEEN ?3 AND ?4"
	" ORDER BY id";

static uint64_t col_u64(sqlite3_stmt *st, int col)
{
	return (uint64_t)sqlite3_column_int64(st, col);
}

static void read_proc_sample(sqlite3_stmt *st, struct rproc *p)
{
	struct gm_proc_stats *v = &p->st;

	v->current_bytes = col_u64(st, 0);
	v->current_allocs = col_u64(st, 1);
	v->peak_bytes = col_u64(st, 2);
	v->alloc_count = col_u64(st, 3);
	v->free_count = col_u64(st, 4);
	v->alloc_bytes_total = col_u64(st, 5);
	v->failed_count = col_u64(st, 6);
	for (int k = 0; k < GM_KIND_MEMORY_COUNT; k++)	/* what a recording keeps */
		v->by_kind[k] = col_u64(st, 7 + k);
	v->tensor_peak_bytes = col_u64(st, 7 + GM_KIND_MEMORY_COUNT);
	p->has_stats = true;
}

/* A site's device column (NULL: host memory or not known) as snap_site.gpu has it. */
static uint32_t gpu_of_column(sqlite3_stmt *st, int col)
{
	int gpu;

	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return 0;
	gpu = sqlite3_column_int(st, col);
	return gpu >= 0 && gpu < GM_MAX_GPUS ? (uint32_t)gpu + 1 : 0;
}

static void read_site(sqlite3_stmt *st, struct rsite *s)
{
	s->id = col_u64(st, 0);
	s->key = sqlite3_column_int(st, 1);
	s->api = (uint32_t)sqlite3_column_int(st, 2);
	s->kind = (uint32_t)sqlite3_column_int(st, 3);
	s->stack_row = col_u64(st, 4);
	s->py_key = sqlite3_column_type(st, 11) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 11);
	s->gpu = gpu_of_column(st, 12);
	s->seen = sqlite3_column_type(st, 5) != SQLITE_NULL;
	s->st = (struct gm_site_stats){
		.current_bytes = col_u64(st, 5), .current_allocs = col_u64(st, 6),
		.alloc_count = col_u64(st, 7), .free_count = col_u64(st, 8),
		.alloc_bytes_total = col_u64(st, 9), .failed_count = col_u64(st, 10),
	};
}

static void load_sites(struct rstate *s, size_t pi, sqlite3_stmt *st)
{
	struct rproc *p = &s->procs[pi];
	size_t cap = 0;

	while (sqlite3_step(st) == SQLITE_ROW) {
		if (p->nsites == cap) {
			cap = cap ? 2 * cap : 8;
			p->sites = xrealloc(p->sites, cap * sizeof(*p->sites));
		}
		read_site(st, &p->sites[p->nsites]);
		idmap_put(&s->site_rows, p->sites[p->nsites].id, 0, pi, p->nsites);
		p->nsites++;
	}
}

/* Each process's and site's last sample at or before the tick. */
static int load_samples(struct recording *r, struct rstate *s, struct rec_ident **ids)
{
	sqlite3_stmt *ps, *ss;

	if (rec_prepare(r, &ps, proc_sample_sql))
		return -EIO;
	if (rec_prepare(r, &ss, sites_sql)) {
		sqlite3_finalize(ps);
		return -EIO;
	}
	for (size_t i = 0; i < s->n; i++) {
		struct rproc *p = &s->procs[i];

		p->ident = ids[i];
		idmap_put(&s->by_row, ids[i]->id, 0, i + 1, 0);
		sqlite3_bind_int64(ps, 1, (int64_t)ids[i]->id);
		sqlite3_bind_int64(ps, 2, (int64_t)s->tick);
		if (s->tick && sqlite3_step(ps) == SQLITE_ROW)
			read_proc_sample(ps, p);
		sqlite3_reset(ps);
		sqlite3_bind_int64(ss, 1, (int64_t)ids[i]->id);
		sqlite3_bind_int64(ss, 2, (int64_t)s->tick);
		load_sites(s, i, ss);
		sqlite3_reset(ss);
	}
	sqlite3_finalize(ps);
	sqlite3_finalize(ss);
	return 0;
}

static uint64_t sub_floor(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void replay_one(struct rstate *s, sqlite3_stmt *st)
{
	struct idmap_slot *ps = idmap_find(&s->by_row, col_u64(st, 0), 0);
	struct idmap_slot *ss = idmap_find(&s->site_rows, col_u64(st, 5), 0);
	int type = sqlite3_column_int(st, 1);
	uint64_t size = col_u64(st, 3), t = col_u64(st, 8), id = col_u64(st, 9), bytes;
	struct rsite *site;
	struct rproc *p;
	bool tensor;

	if (!ps)
		return;		/* a process the filter leaves out */
	p = &s->procs[ps->v - 1];
	site = ss && ss->v == ps->v - 1 ? &p->sites[ss->v2] : NULL;
	p->replayed = p->has_stats = true;
	bytes = col_u64(st, 4);
	tensor = sqlite3_column_int(st, 6) == GM_LAYER_TENSOR;
	p->st.peak_bytes = max_u64(p->st.peak_bytes, bytes);
	if (tensor)
		p->st.tensor_peak_bytes = max_u64(p->st.tensor_peak_bytes, col_u64(st, 7));
	if (t > p->last_ns || (t == p->last_ns && id > p->last_id)) {
		p->last_ns = t;
		p->last_id = id;
		p->st.current_bytes = bytes;
	}
	if (tensor && (t > p->tensor_ns || (t == p->tensor_ns && id > p->tensor_id))) {
		p->tensor_ns = t;
		p->tensor_id = id;
		p->st.tensor_bytes = col_u64(st, 7);
	}
	if (type == RECDB_EV_ALLOC_FAILED)
		p->st.failed_count++;
	if (!site)
		return;
	site->seen = true;
	if (type == RECDB_EV_ALLOC) {
		site->st.current_bytes += size;
		site->st.current_allocs++;
		site->st.alloc_count++;
		site->st.alloc_bytes_total += size;
	} else if (type == RECDB_EV_FREE) {
		site->st.current_bytes = sub_floor(site->st.current_bytes, size);
		site->st.current_allocs = sub_floor(site->st.current_allocs, 1);
		site->st.free_count++;
	} else {
		site->st.failed_count++;
	}
}

/* A process's counts and per-kind bytes are the sums of its sites, as the live model has
 * them; its current and peak GPU bytes and failures are its own. */
static void sum_sites(struct rproc *p)
{
	struct gm_proc_stats *st = &p->st;

	st->current_allocs = st->alloc_count = st->free_count = st->alloc_bytes_total = 0;
	memset(st->by_kind, 0, sizeof(st->by_kind));
	for (size_t i = 0; i < p->nsites; i++) {
		const struct rsite *ss = &p->sites[i];

		if (probe_is_tensor(ss->api))
			continue;	/* inside the others: the snapshot sums them apart */
		st->alloc_count += ss->st.alloc_count;
		st->free_count += ss->st.free_count;
		st->alloc_bytes_total += ss->st.alloc_bytes_total;
		if (ss->kind < GM_KIND_COUNT)
			st->by_kind[ss->kind] += ss->st.current_bytes;
		if (gm_kind_is_gpu(ss->kind))
			st->current_allocs += ss->st.current_allocs;
	}
}

/* The events of (from, to] onto the state. */
static int replay(struct recording *r, struct rstate *s, uint64_t from, uint64_t to)
{
	sqlite3_stmt *st;
	int rc;

	if (rec_prepare(r, &st, replay_sql))
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)from);
	sqlite3_bind_int64(st, 2, (int64_t)to);
	if (rec_bind_event_ids(r, st, 3, from, to)) {
		sqlite3_finalize(st);
		return -EIO;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		replay_one(s, st);
	sqlite3_finalize(st);
	for (size_t i = 0; i < s->n; i++)
		if (s->procs[i].replayed)
			sum_sites(&s->procs[i]);
	return rc == SQLITE_DONE ? 0 : -EIO;	/* cut short: the state is not of `to` */
}

static uint64_t last_tick(struct recording *r, uint64_t at)
{
	return rec_query_u64(r, "SELECT max(time_ns) FROM samples WHERE time_ns <= ?1", at, 0);
}

int rstate_load(struct recording *r, uint64_t since, uint64_t at, struct rstate *s)
{
	struct rec_ident **ids = NULL;
	ssize_t n;
	int err;

	*s = (struct rstate){ .since = since, .at = at, .tick = last_tick(r, at) };
	n = rec_idents_between(r, since, at, &ids);
	if (n < 0)
		return -EIO;
	s->n = (size_t)n;
	s->procs = xcalloc(s->n ? s->n : 1, sizeof(*s->procs));
	err = load_samples(r, s, ids);
	free(ids);
	if (!err && recording_exact_at(r, at))
		err = replay(r, s, s->tick, at);
	if (err)
		rstate_free(s);
	return err;
}

void rstate_free(struct rstate *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->procs[i].sites);
	free(s->procs);
	idmap_free(&s->by_row);
	idmap_free(&s->site_rows);
	*s = (struct rstate){ 0 };
}

/* ---- a cursor: one window's states at instants that only go forward ---- */

/* The next instant after the state where loading it again is needed. */
static uint64_t stale_after(struct recording *r, const struct rstate *s)
{
	static const char *const after_tick[] = {
		"SELECT min(time_ns) FROM process_samples WHERE time_ns > ?1",
		"SELECT min(time_ns) FROM site_samples WHERE time_ns > ?1",
	};
	static const char *const after_at[] = {
		"SELECT min(start_ns) FROM processes WHERE start_ns > ?1",
		"SELECT min(start_ns) FROM sessions WHERE start_ns > ?1",
	};
	uint64_t t = UINT64_MAX;

	for (size_t i = 0; i < 2; i++) {
		t = min_u64(t, rec_query_u64(r, after_tick[i], s->tick, UINT64_MAX));
		t = min_u64(t, rec_query_u64(r, after_at[i], s->at, UINT64_MAX));
	}
	return t;
}

static uint64_t next_event(struct recording *r, uint64_t after)
{
	/* No later than the earliest end of a span that ends after it. */
	uint64_t bound = rec_query_u64(r, "SELECT min(max_time_ns) FROM event_spans WHERE"
				       " max_time_ns > ?1", after, 0);
	sqlite3_stmt *st;
	uint64_t t = UINT64_MAX;

	if (!bound || rec_prepare(r, &st, "SELECT min(time_ns) FROM events WHERE time_ns > ?1"
				  " AND id BETWEEN ?3 AND ?4"))
		return UINT64_MAX;
	sqlite3_bind_int64(st, 1, (int64_t)after);
	if (!rec_bind_event_ids(r, st, 3, after, bound) && sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) != SQLITE_NULL)
		t = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return t;
}

const struct rstate *rec_cursor_move(struct recording *r, struct rec_cursor **cp,
				     uint64_t since, uint64_t at)
{
	struct rec_cursor *c = *cp;

	if (!c)
		c = *cp = xcalloc(1, sizeof(*c));
	if (c->loaded && since == c->s.since && at >= c->s.at && at < c->stale_at) {
		/* An idle stretch (no event since) costs nothing. */
		if (at >= c->next_event) {
			if (recording_exact_at(r, at) && replay(r, &c->s, c->s.at, at)) {
				rstate_free(&c->s);	/* half moved: loaded again next time */
				c->loaded = false;
				return NULL;
			}
			c->next_event = next_event(r, at);
		}
		c->s.at = at;
		return &c->s;
	}
	if (c->loaded)
		rstate_free(&c->s);
	c->loaded = false;
	if (rstate_load(r, since, at, &c->s))
		return NULL;
	c->loaded = true;
	c->stale_at = stale_after(r, &c->s);
	c->next_event = next_event(r, at);
	return &c->s;
}

void rec_cursor_free(struct rec_cursor *c)
{
	if (!c)
		return;
	if (c->loaded)
		rstate_free(&c->s);
	rec_counters_free(&c->counters);
	free(c);
}
