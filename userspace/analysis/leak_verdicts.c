// SPDX-License-Identifier: GPL-2.0
/* Leak verdicts: each site's growth fitted over a sliding window (or judged on its lifetime
 * totals while the window is short), the loop's step found from the sites' allocation rates,
 * growth per step, and suspects ranked first. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/analysis.h"
#include "base/util.h"

static const char *const verdict_names[] = {
	[LEAK_GROWING] = "growing", [LEAK_STEADY] = "steady", [LEAK_FREED] = "freed",
};

const char *leak_verdict_name(enum leak_verdict v)
{
	return v < ARRAY_SIZE(verdict_names) ? verdict_names[v] : "?";
}

static double lifetime_s(const struct snap_proc *p)
{
	return p->end_ns > p->st.first_seen_ns ? (double)(p->end_ns - p->st.first_seen_ns) / 1e9 : 0;
}

static void judge_site(const struct history *h, struct proc_verdict *pv, struct site_verdict *sv)
{
	const struct snap_site *ss = sv->ss;
	struct hist_key k = hist_key_site(pv->p, ss);
	const struct hist_series *series = history_find(h, &k);
	double life = lifetime_s(pv->p);

	if (series)
		history_fit(series, pv->now, GROWTH_WINDOW_S, &sv->fit);
	sv->lifetime = sv->fit.n < LEAKS_MIN_SAMPLES || sv->fit.span_s < LEAKS_MIN_SPAN_S;
	if (sv->lifetime) {
		/* Everything it ever allocated, still held, over several calls: it only grew. */
		sv->rate = life > 0 ? (double)ss->st.current_bytes / life : 0;
		sv->verdict = ss->st.alloc_count >= 3 && ss->st.free_count == 0 ? LEAK_GROWING
										: LEAK_STEADY;
	} else {
		const struct hist_fit *f = &sv->fit;

		/* A slope the line does not fit (a plateau sampled mid-cycle) is no rate. */
		sv->rate = f->r2 >= LEAKS_MIN_R2 ? f->slope : 0;
		sv->verdict = f->slope > 0 && f->r2 >= LEAKS_MIN_R2 && f->growth > 0 &&
					      f->recent_growth > 0
				      ? LEAK_GROWING
				      : LEAK_STEADY;
	}
	if (!ss->st.current_bytes)
		sv->verdict = LEAK_FREED;
	/* A site that is not growing has no growth rate: the slope of a one-off allocation in
	 * the window is no rate of anything. */
	if (sv->verdict != LEAK_GROWING)
		sv->rate = 0;
}

/* A site that allocates and frees about as often (a step's scratch): what repeats with the
 * loop. A site that only keeps (a leak, a segment taken now and then) may grow on its own
 * clock. */
static bool churns(const struct proc_verdict *pv, const struct site_verdict *sv)
{
	if (pv->step_lifetime)
		return 2 * sv->ss->st.free_count >= sv->ss->st.alloc_count;
	return 2 * sv->fit.free_rate >= sv->fit.alloc_rate;
}

/* An allocation rate a site recurs at (at least 3 calls), 0 if none. */
static double recur_rate(const struct proc_verdict *pv, const struct site_verdict *sv,
			 double life)
{
	if (!pv->step_lifetime)
		return !sv->lifetime && sv->fit.allocs >= 3 ? sv->fit.alloc_rate : 0;
	return sv->ss->st.alloc_count >= 3 && life > 0 ? (double)sv->ss->st.alloc_count / life
							: 0;
}

/* Steps per second (history_step_rate) from the allocation rates of the sites that recur. The
 * sites that churn set the clock: a site more than STEP_CHURN_MAX times slower than the
 * slowest of them (a segment the allocator takes now and then, a checkpoint) is left out, or
 * it would make the step many steps long. So a site may churn up to STEP_CHURN_MAX times a
 * step (a layer's scratch in a loop over the layers) and the step still be found. */
static void find_step(struct proc_verdict *pv)
{
	double *rates = xcalloc(pv->nsites ? pv->nsites : 1, sizeof(double));
	double life = lifetime_s(pv->p), churn_min = 0;
	size_t n = 0, windowed = 0;

	for (size_t i = 0; i < pv->nsites; i++)
		windowed += !pv->sites[i].lifetime;
	pv->step_lifetime = windowed == 0;
	for (size_t i = 0; i < pv->nsites; i++) {
		double r = recur_rate(pv, &pv->sites[i], life);

		if (r > 0 && churns(pv, &pv->sites[i]) && (churn_min == 0 || r < churn_min))
			churn_min = r;
	}
	for (size_t i = 0; i < pv->nsites; i++) {
		double r = recur_rate(pv, &pv->sites[i], life);

		if (r > 0 && r * STEP_CHURN_MAX * (1 + STEP_RATE_TOLERANCE) >= churn_min)
			rates[n++] = r;
	}
	pv->step_rate = history_step_rate(rates, n);
	free(rates);
	for (size_t i = 0; i < pv->nsites; i++) {
		struct site_verdict *sv = &pv->sites[i];

		sv->per_step = NAN;
		if (pv->step_rate <= 0 || sv->verdict != LEAK_GROWING)
			continue;
		if (sv->lifetime && life > 0)
			sv->per_step = (double)sv->ss->st.current_bytes / (pv->step_rate * life);
		else if (!sv->lifetime)
			sv->per_step = sv->rate / pv->step_rate;
	}
}

/* Suspects first: growing by rate, then what is held, then what was freed. */
static int site_rank_cmp(const void *a, const void *b)
{
	const struct site_verdict *x = a, *y = b;

	if (x->verdict != y->verdict)
		return x->verdict < y->verdict ? -1 : 1;
	if (x->verdict == LEAK_GROWING && x->rate != y->rate)
		return x->rate > y->rate ? -1 : 1;
	if (x->ss->st.current_bytes != y->ss->st.current_bytes)
		return x->ss->st.current_bytes > y->ss->st.current_bytes ? -1 : 1;
	if (x->ss->st.alloc_bytes_total != y->ss->st.alloc_bytes_total)
		return x->ss->st.alloc_bytes_total > y->ss->st.alloc_bytes_total ? -1 : 1;
	if (x->ss->stack_id != y->ss->stack_id)
		return (x->ss->stack_id > y->ss->stack_id) - (x->ss->stack_id < y->ss->stack_id);
	if (x->ss->py_stack_id != y->ss->py_stack_id)
		return (x->ss->py_stack_id > y->ss->py_stack_id) -
		       (x->ss->py_stack_id < y->ss->py_stack_id);
	return (x->ss->gpu > y->ss->gpu) - (x->ss->gpu < y->ss->gpu);
}

static int proc_rank_cmp(const void *a, const void *b)
{
	const struct proc_verdict *x = a, *y = b;

	if ((x->growing > 0) != (y->growing > 0))
		return x->growing ? -1 : 1;
	if (x->p->st.current_bytes != y->p->st.current_bytes)
		return x->p->st.current_bytes > y->p->st.current_bytes ? -1 : 1;
	return x->p->pid - y->p->pid;
}

static void judge_proc(const struct history *h, struct proc_verdict *pv, const struct snap_proc *p)
{
	struct hist_key pk = hist_key_proc(p);
	const struct hist_series *series = history_find(h, &pk);
	const struct hist_sample *last = series ? history_last(series) : NULL;

	memset(pv, 0, sizeof(*pv));
	pv->p = p;
	pv->now = last ? last->t_ns : p->end_ns;
	if (p->end_ns > pv->now)
		pv->now = p->end_ns;
	/* Tensor sites are judged beside the segment sites: a caching allocator keeps its
	 * reserved bytes flat while the tensors in them leak. */
	pv->nsites = p->nsites + p->ntensor_sites;
	pv->sites = xcalloc(pv->nsites ? pv->nsites : 1, sizeof(*pv->sites));
	for (size_t i = 0; i < pv->nsites; i++) {
		struct site_verdict *sv = &pv->sites[i];

		sv->tensor = i >= p->nsites;
		sv->ss = sv->tensor ? &p->tensor_sites[i - p->nsites] : &p->sites[i];
		judge_site(h, pv, sv);
		pv->growing += sv->verdict == LEAK_GROWING;
		pv->growing_tensors += sv->verdict == LEAK_GROWING && sv->tensor;
	}
	find_step(pv);
	if (pv->nsites > 1)
		qsort(pv->sites, pv->nsites, sizeof(*pv->sites), site_rank_cmp);
}

void leaks_judge(const struct snapshot *snap, const struct history *h, struct leak_report *out)
{
	out->procs = xcalloc(snap->nprocs ? snap->nprocs : 1, sizeof(*out->procs));
	out->nprocs = 0;
	for (size_t i = 0; i < snap->nprocs; i++)
		if (snap->procs[i].valid & SP_STATS) {
			struct proc_verdict *pv = &out->procs[out->nprocs++];

			judge_proc(h, pv, &snap->procs[i]);
			oom_forecast_of(snap, pv, &pv->forecast);
		}
	if (out->nprocs > 1)
		qsort(out->procs, out->nprocs, sizeof(*out->procs), proc_rank_cmp);
}

void proc_oom_forecast(const struct snapshot *snap, const struct history *h,
		       const struct snap_proc *p, struct snap_forecast *out)
{
	struct proc_verdict pv;

	judge_proc(h, &pv, p);
	oom_forecast_of(snap, &pv, out);
	free(pv.sites);
}

void leak_report_free(struct leak_report *r)
{
	for (size_t i = 0; i < r->nprocs; i++)
		free(r->procs[i].sites);
	free(r->procs);
	r->procs = NULL;
	r->nprocs = 0;
}
