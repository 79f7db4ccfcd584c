// SPDX-License-Identifier: GPL-2.0
/* Time series of bytes, allocations and frees, kept per process and per call site between
 * refreshes, and the numbers read off them: growth fit, rates, sparkline bins, step rate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/history.h"
#include "base/util.h"
#include "model/snapshot.h"

struct history {
	struct hist_series **v;	/* sorted by key */
	size_t n, cap;
};

struct history *history_new(void)
{
	return xcalloc(1, sizeof(struct history));
}

static void series_free(struct hist_series *s)
{
	free(s->s);
	free(s);
}

void history_free(struct history *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n; i++)
		series_free(h->v[i]);
	free(h->v);
	free(h);
}

static int key_cmp(const struct hist_key *a, const struct hist_key *b)
{
	if (a->serial != b->serial)
		return a->serial < b->serial ? -1 : 1;
	if (a->stack_id != b->stack_id)
		return a->stack_id < b->stack_id ? -1 : 1;
	if (a->py_stack_id != b->py_stack_id)
		return a->py_stack_id < b->py_stack_id ? -1 : 1;
	if (a->api != b->api)
		return a->api < b->api ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (a->gpu != b->gpu)
		return a->gpu < b->gpu ? -1 : 1;
	return 0;
}

/* Index of key, or where it would go. */
static size_t lower_bound(const struct history *h, const struct hist_key *key)
{
	size_t lo = 0, hi = h->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (key_cmp(&h->v[mid]->key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct hist_series *history_find(const struct history *h, const struct hist_key *key)
{
	size_t i = lower_bound(h, key);

	return i < h->n && !key_cmp(&h->v[i]->key, key) ? h->v[i] : NULL;
}

struct hist_series *history_get(struct history *h, const struct hist_key *key)
{
	size_t i = lower_bound(h, key);
	struct hist_series *s;

	if (i < h->n && !key_cmp(&h->v[i]->key, key))
		return h->v[i];
	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 64;
		h->v = xrealloc(h->v, h->cap * sizeof(*h->v));
	}
	memmove(&h->v[i + 1], &h->v[i], (h->n - i) * sizeof(*h->v));
	s = xcalloc(1, sizeof(*s));
	s->key = *key;
	h->v[i] = s;
	h->n++;
	return s;
}

size_t history_count(const struct history *h)
{
	return h->n;
}

struct hist_key hist_key_proc(const struct snap_proc *p)
{
	return (struct hist_key){ .serial = p->serial, .stack_id = HIST_PROCESS };
}

struct hist_key hist_key_site(const struct snap_proc *p, const struct snap_site *ss)
{
	return (struct hist_key){ .serial = p->serial, .stack_id = ss->stack_id,
				  .py_stack_id = ss->py_stack_id, .api = ss->api,
				  .kind = ss->kind, .gpu = ss->gpu };
}

static int serial_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Drops the series of every process not in the sorted serials. */
static void forget_absent(struct history *h, const uint64_t *serials, size_t n)
{
	size_t kept = 0;

	for (size_t i = 0; i < h->n; i++) {
		if (bsearch(&h->v[i]->key.serial, serials, n, sizeof(*serials), serial_cmp))
			h->v[kept++] = h->v[i];
		else
			series_free(h->v[i]);
	}
	h->n = kept;
}

void history_observe(struct history *h, const struct snapshot *snap)
{
	uint64_t *serials = xcalloc(snap->nprocs ? snap->nprocs : 1, sizeof(*serials));

	for (size_t i = 0; i < snap->nprocs; i++) {
		const struct snap_proc *p = &snap->procs[i];
		uint64_t t = p->alive ? snap->time_ns : p->end_ns;
		struct hist_key k = hist_key_proc(p);

		serials[i] = p->serial;
		if (!(p->valid & SP_STATS))
			continue;
		history_add(history_get(h, &k), t, p->st.current_bytes, p->st.alloc_count,
			    p->st.free_count);
		for (size_t j = 0; j < p->nsites + p->ntensor_sites; j++) {
			const struct snap_site *ss =
				j < p->nsites ? &p->sites[j] : &p->tensor_sites[j - p->nsites];

			k = hist_key_site(p, ss);
			history_add(history_get(h, &k), t, ss->st.current_bytes, ss->st.alloc_count,
				    ss->st.free_count);
		}
	}
	qsort(serials, snap->nprocs, sizeof(*serials), serial_cmp);
	forget_absent(h, serials, snap->nprocs);
	free(serials);
}

static const struct hist_sample *at(const struct hist_series *s, unsigned int i)
{
	return &s->s[(s->head + i) % s->cap];
}

const struct hist_sample *history_last(const struct hist_series *s)
{
	return s->count ? at(s, s->count - 1) : NULL;
}

/* Doubles the ring (a process that ends after a few samples keeps a few), oldest first. */
static void grow(struct hist_series *s)
{
	unsigned int cap = s->cap ? 2 * s->cap : 4;
	struct hist_sample *v = xcalloc(cap > HIST_CAP ? HIST_CAP : cap, sizeof(*v));

	for (unsigned int i = 0; i < s->count; i++)
		v[i] = s->s[(s->head + i) % s->cap];
	free(s->s);
	s->s = v;
	s->cap = cap > HIST_CAP ? HIST_CAP : cap;
	s->head = 0;
}

void history_add(struct hist_series *s, uint64_t t_ns, uint64_t bytes, uint64_t allocs,
		 uint64_t frees)
{
	const struct hist_sample *last = history_last(s);
	struct hist_sample *slot;

	if (last && t_ns <= last->t_ns)
		return;
	if (s->count == s->cap && s->cap < HIST_CAP)
		grow(s);
	if (s->count == s->cap) {
		slot = &s->s[s->head];
		s->head = (s->head + 1) % s->cap;
	} else {
		slot = &s->s[(s->head + s->count) % s->cap];
		s->count++;
	}
	*slot = (struct hist_sample){ .t_ns = t_ns, .bytes = bytes, .allocs = allocs,
				      .frees = frees };
}

/* Index of the first sample at or after t. */
static unsigned int first_from(const struct hist_series *s, uint64_t t)
{
	unsigned int i = 0;

	while (i < s->count && at(s, i)->t_ns < t)
		i++;
	return i;
}

void history_fit(const struct hist_series *s, uint64_t now_ns, double window_s,
		 struct hist_fit *out)
{
	uint64_t from = now_ns > (uint64_t)(window_s * 1e9) ? now_ns - (uint64_t)(window_s * 1e9) : 0;
	unsigned int first = first_from(s, from), mid;
	double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0, n, t0, sst, sse;
	const struct hist_sample *a, *b;

	memset(out, 0, sizeof(*out));
	if (first >= s->count)
		return;
	out->n = s->count - first;
	a = at(s, first);
	b = at(s, s->count - 1);
	t0 = (double)a->t_ns;
	out->span_s = (double)(b->t_ns - a->t_ns) / 1e9;
	out->growth = (double)b->bytes - (double)a->bytes;
	out->allocs = b->allocs - a->allocs;
	out->r2 = 1;
	if (out->n < 2 || out->span_s <= 0)
		return;
	out->alloc_rate = (double)(b->allocs - a->allocs) / out->span_s;
	out->free_rate = (double)(b->frees - a->frees) / out->span_s;
	mid = first_from(s, a->t_ns + (b->t_ns - a->t_ns) / 2);
	out->recent_growth = (double)b->bytes - (double)at(s, mid)->bytes;
	for (unsigned int i = first; i < s->count; i++) {
		double x = ((double)at(s, i)->t_ns - t0) / 1e9, y = (double)at(s, i)->bytes;

		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
		syy += y * y;
	}
	n = out->n;
	if (n * sxx - sx * sx <= 0)
		return;
	out->slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
	sst = syy - sy * sy / n;
	sse = sst - out->slope * (sxy - sx * sy / n);
	out->r2 = sst > 0 ? 1 - (sse > 0 ? sse : 0) / sst : 1;
}

uint64_t history_bins(const struct hist_series *s, uint64_t now_ns, double window_s,
		      uint64_t *bins, unsigned int nbins)
{
	uint64_t span = (uint64_t)(window_s * 1e9), from = now_ns > span ? now_ns - span : 0;
	uint64_t max = 0, carry = 0;
	unsigned int i = 0, b;

	memset(bins, 0, nbins * sizeof(*bins));
	/* What was held when the window began: the last sample before it. */
	while (i < s->count && at(s, i)->t_ns < from)
		carry = at(s, i++)->bytes;
	for (b = 0; b < nbins; b++) {
		uint64_t end = from + span * (b + 1) / nbins;
		bool any = false;

		while (i < s->count && at(s, i)->t_ns <= end) {
			uint64_t v = at(s, i++)->bytes;

			if (!any || v > bins[b])
				bins[b] = v;
			any = true;
			carry = v;
		}
		if (!any)
			bins[b] = carry;
		if (bins[b] > max)
			max = bins[b];
	}
	return max;
}

double history_step_rate(const double *rates, size_t n)
{
	double fmin = 0;

	for (size_t i = 0; i < n; i++)
		if (rates[i] > 0 && (fmin == 0 || rates[i] < fmin))
			fmin = rates[i];
	if (fmin == 0)
		return 0;
	for (int k = 1; k <= 4; k++) {
		double f0 = fmin / k;
		bool fits = true;

		for (size_t i = 0; i < n && fits; i++) {
			double m;

			if (rates[i] <= 0)
				continue;
			m = rates[i] / f0;
			fits = fabs(m - round(m)) <= STEP_RATE_TOLERANCE + 0.03 * m;
		}
		if (fits)
			return f0;
	}
	return fmin;
}
