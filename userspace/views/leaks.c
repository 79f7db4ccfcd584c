// SPDX-License-Identifier: GPL-2.0
/* `gpumem leaks`: call sites that hold memory and keep growing. Samples every site's bytes and
 * allocation count twice a second, fits the growth over a sliding window, finds the period of
 * the loop from the allocation rates, and ranks the sites that grow first. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common.h"
#include "history.h"
#include "probes.h"
#include "state.h"
#include "units.h"
#include "util.h"

#define LEAKS_SAMPLE_S 0.5	/* how often the sites are sampled */
#define LEAKS_WINDOW_S 60.0	/* the growth fit looks this far back */
#define LEAKS_MIN_SAMPLES 3	/* fewer: judged on the process's lifetime totals */
#define LEAKS_MIN_SPAN_S 1.0
#define LEAKS_MIN_R2 0.8	/* a fit below this is not steady growth */
#define LEAKS_DEFAULT_PRINT_S 10.0	/* without -c and without -i */

enum verdict { V_GROWING, V_STEADY, V_FREED };
static const char *const verdict_names[] = { "growing", "steady", "freed" };

struct site_verdict {
	const struct site_snap *ss;
	enum verdict verdict;
	struct hist_fit fit;
	bool lifetime;		/* too few samples: judged on totals since the process began */
	double rate;		/* bytes per second */
	double per_step;	/* bytes per step; NAN when no step was found */
};

struct proc_verdict {
	struct proc_rec *p;
	struct site_verdict *sites;
	size_t nsites;
	uint64_t now;		/* the end of the window: the last sample (or the exit) */
	double step_rate;	/* steps per second; 0: no recurring allocations */
	bool step_lifetime;
	size_t growing;
};

static struct {
	struct history *hist;
	uint64_t next_print;
} leaks;

static struct hist_key site_key(const struct proc_rec *p, const struct site_snap *ss)
{
	return (struct hist_key){ .pid = p->pid, .stack_id = ss->key.stack_id,
				  .api = ss->key.api, .kind = ss->key.kind };
}

static void ensure_started(struct session *s)
{
	s->state->want_median_ages = true;
	if (!leaks.hist)
		leaks.hist = history_new();
}

/* One sample of every site of every process; an ended process once more, at its end. */
static void sample(struct session *s)
{
	uint64_t now = now_ns();

	for (size_t i = 0; i < s->state->nprocs; i++) {
		struct proc_rec *p = s->state->procs[i];
		uint64_t t = p->alive ? now : p->end_ns;
		struct hist_key pk = { .pid = p->pid, .stack_id = HIST_PROCESS };

		if (!p->have_stats)
			continue;
		history_add(history_get(leaks.hist, &pk), t, p->st.current_bytes,
			    p->st.alloc_count, p->st.free_count);
		for (size_t j = 0; j < p->nsites; j++) {
			const struct site_snap *ss = &p->sites[j];
			struct hist_key k = site_key(p, ss);

			history_add(history_get(leaks.hist, &k), t, ss->st.current_bytes,
				    ss->st.alloc_count, ss->st.free_count);
		}
	}
}

static double lifetime_s(const struct proc_rec *p)
{
	return p->end_ns > p->st.first_seen_ns ? (double)(p->end_ns - p->st.first_seen_ns) / 1e9 : 0;
}

static void judge_site(struct proc_verdict *pv, struct site_verdict *sv)
{
	const struct site_snap *ss = sv->ss;
	struct hist_key k = site_key(pv->p, ss);
	struct hist_series *h = history_find(leaks.hist, &k);
	double life = lifetime_s(pv->p);

	if (h)
		history_fit(h, pv->now, LEAKS_WINDOW_S, &sv->fit);
	sv->lifetime = sv->fit.n < LEAKS_MIN_SAMPLES || sv->fit.span_s < LEAKS_MIN_SPAN_S;
	if (sv->lifetime) {
		/* Everything it ever allocated, still held, over several calls: it only grew. */
		sv->rate = life > 0 ? (double)ss->st.current_bytes / life : 0;
		sv->verdict = ss->st.alloc_count >= 3 && ss->st.free_count == 0 ? V_GROWING
									   : V_STEADY;
	} else {
		const struct hist_fit *f = &sv->fit;

		/* A slope the line does not fit (a plateau sampled mid-cycle) is no rate. */
		sv->rate = f->r2 >= LEAKS_MIN_R2 ? f->slope : 0;
		sv->verdict = f->slope > 0 && f->r2 >= LEAKS_MIN_R2 && f->growth > 0 &&
					      f->recent_growth > 0
				      ? V_GROWING
				      : V_STEADY;
	}
	if (!ss->st.current_bytes)
		sv->verdict = V_FREED;
}

/* Steps per second from the allocation rates of the sites that recur (history_step_rate). */
static void find_step(struct proc_verdict *pv)
{
	double *rates = xcalloc(pv->nsites ? pv->nsites : 1, sizeof(double));
	size_t n = 0, windowed = 0;
	double life = lifetime_s(pv->p);

	for (size_t i = 0; i < pv->nsites; i++)
		windowed += !pv->sites[i].lifetime;
	pv->step_lifetime = windowed == 0;
	for (size_t i = 0; i < pv->nsites; i++) {
		const struct site_verdict *sv = &pv->sites[i];

		if (!pv->step_lifetime && !sv->lifetime && sv->fit.allocs >= 3)
			rates[n++] = sv->fit.alloc_rate;
		else if (pv->step_lifetime && sv->ss->st.alloc_count >= 3 && life > 0)
			rates[n++] = (double)sv->ss->st.alloc_count / life;
	}
	pv->step_rate = history_step_rate(rates, n);
	free(rates);
	for (size_t i = 0; i < pv->nsites; i++) {
		struct site_verdict *sv = &pv->sites[i];

		sv->per_step = NAN;
		if (pv->step_rate <= 0)
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
	if (x->verdict == V_GROWING && x->rate != y->rate)
		return x->rate > y->rate ? -1 : 1;
	if (x->ss->st.current_bytes != y->ss->st.current_bytes)
		return x->ss->st.current_bytes > y->ss->st.current_bytes ? -1 : 1;
	if (x->ss->st.alloc_bytes_total != y->ss->st.alloc_bytes_total)
		return x->ss->st.alloc_bytes_total > y->ss->st.alloc_bytes_total ? -1 : 1;
	return x->ss->key.stack_id - y->ss->key.stack_id;
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

static void judge_proc(struct proc_verdict *pv, struct proc_rec *p)
{
	struct hist_key pk = { .pid = p->pid, .stack_id = HIST_PROCESS };
	struct hist_series *h = history_find(leaks.hist, &pk);
	const struct hist_sample *last = h ? history_last(h) : NULL;

	memset(pv, 0, sizeof(*pv));
	pv->p = p;
	pv->now = last ? last->t_ns : p->end_ns;
	if (p->end_ns > pv->now)
		pv->now = p->end_ns;
	pv->nsites = p->nsites;
	pv->sites = xcalloc(p->nsites ? p->nsites : 1, sizeof(*pv->sites));
	for (size_t i = 0; i < p->nsites; i++) {
		pv->sites[i].ss = &p->sites[i];
		judge_site(pv, &pv->sites[i]);
		pv->growing += pv->sites[i].verdict == V_GROWING;
	}
	find_step(pv);
	if (pv->nsites > 1)
		qsort(pv->sites, pv->nsites, sizeof(*pv->sites), site_rank_cmp);
}

/* A step's length: "850 ms", "2.4 ms", "1.25 s". */
static void fmt_period(char *buf, size_t len, double s)
{
	if (s < 0.01)
		snprintf(buf, len, "%.2f ms", s * 1e3);
	else if (s < 1)
		snprintf(buf, len, "%.0f ms", s * 1e3);
	else
		snprintf(buf, len, "%.2f s", s);
}

static uint64_t age_at(uint64_t now, uint64_t t)
{
	return t && now > t ? now - t : 0;
}

/* ---- text ---- */

static void site_name(struct session *s, FILE *out, int pid, const struct site_snap *ss,
		      unsigned int frames)
{
	uint64_t ips[GM_MAX_STACK_DEPTH];
	uint32_t n = state_stack(s->state, (int)ss->key.tgid, ss->key.stack_id, ips);

	frames_text(s, out, pid, ips, n, " <- ", frames);
}

static void site_text(struct session *s, const struct proc_verdict *pv,
		      const struct site_verdict *sv)
{
	bool exact = s->opt->exact_bytes;
	char held[32], rate[40], step[32], fit[16], oldest[16], median[16];

	fmt_size(held, sizeof(held), sv->ss->st.current_bytes, exact);
	fmt_delta(rate, sizeof(rate), sv->rate, exact);
	if (strcmp(rate, "0"))
		strcat(rate, "/s");
	if (isnan(sv->per_step))
		snprintf(step, sizeof(step), "-");
	else
		fmt_delta(step, sizeof(step), sv->per_step, exact);
	if (sv->lifetime)
		snprintf(fit, sizeof(fit), "life");
	else
		snprintf(fit, sizeof(fit), "%.2f", sv->fit.r2);
	fmt_age(oldest, sizeof(oldest), age_at(pv->now, sv->ss->oldest_ns));
	fmt_age(median, sizeof(median), age_at(pv->now, sv->ss->median_ns));
	fprintf(s->out, "  %-7s %10s %7llu %12s %10s %4s %6s %6s  %s %s at ", verdict_names[sv->verdict],
		held, sv->ss->st.current_allocs, rate, step, fit, oldest, median,
		probe_api_name(sv->ss->key.api), kind_name(sv->ss->key.kind));
	site_name(s, s->out, pv->p->pid, sv->ss, 4);
	fputc('\n', s->out);
}

static void proc_text(struct session *s, const struct proc_verdict *pv)
{
	bool exact = s->opt->exact_bytes;
	char comm[GM_COMM_LEN + 1], cur[32], peak[32], period[32];

	text_sanitize(comm, sizeof(comm), pv->p->comm);
	fmt_size(cur, sizeof(cur), pv->p->st.current_bytes, exact);
	fmt_size(peak, sizeof(peak), pv->p->st.peak_bytes, exact);
	fprintf(s->out, "pid %d %s", pv->p->pid, comm);
	if (pv->p->container.has_id)
		fprintf(s->out, " [%.*s]", CONTAINER_SHORT_LEN, pv->p->container.id);
	if (!pv->p->alive)
		fprintf(s->out, " (ended, exit %d)", pv->p->exit_code);
	fprintf(s->out, ": holds %s, peak %s", cur, peak);
	if (pv->step_rate > 0) {
		fmt_period(period, sizeof(period), 1 / pv->step_rate);
		fprintf(s->out, "; a step every %s (from %s)", period,
			pv->step_lifetime ? "lifetime counts" : "allocation rates");
	}
	fputc('\n', s->out);
	fprintf(s->out, "  %-7s %10s %7s %12s %10s %4s %6s %6s  %s\n", "VERDICT", "HELD", "ALLOCS",
		"GROWTH", "PER STEP", "FIT", "OLDEST", "MEDIAN", "SITE");
	for (size_t i = 0; i < pv->nsites; i++)
		site_text(s, pv, &pv->sites[i]);
}

/* The sentence people came for: what was still held, and what grew by how much a step. */
static void summary_text(struct session *s, const struct proc_verdict *pv)
{
	bool exact = s->opt->exact_bytes;
	uint64_t held = 0, allocs = 0;
	size_t nheld = 0;
	char buf[32], comm[GM_COMM_LEN + 1], period[32];

	for (size_t i = 0; i < pv->nsites; i++) {
		held += pv->sites[i].ss->st.current_bytes;
		allocs += pv->sites[i].ss->st.current_allocs;
		nheld += pv->sites[i].verdict != V_FREED;
	}
	text_sanitize(comm, sizeof(comm), pv->p->comm);
	fmt_size(buf, sizeof(buf), held, exact);
	fprintf(s->out, "pid %d %s %s: %zu site%s still held %s in %" PRIu64 " allocation%s\n",
		pv->p->pid, comm, pv->p->alive ? "now" : "at its end", nheld, nheld == 1 ? "" : "s",
		buf, allocs, allocs == 1 ? "" : "s");
	for (size_t i = 0; i < pv->nsites && pv->sites[i].verdict == V_GROWING; i++) {
		const struct site_verdict *sv = &pv->sites[i];

		fputs("  ", s->out);
		site_name(s, s->out, pv->p->pid, sv->ss, 1);
		if (!isnan(sv->per_step)) {
			fmt_size(buf, sizeof(buf), (uint64_t)llround(fabs(sv->per_step)), exact);
			fmt_period(period, sizeof(period), 1 / pv->step_rate);
			fprintf(s->out, " grew by ~%s per step (a step every %s)", buf, period);
		} else {
			fmt_size(buf, sizeof(buf), (uint64_t)llround(fabs(sv->rate)), exact);
			fprintf(s->out, " grew by ~%s per second", buf);
		}
		fmt_size(buf, sizeof(buf), (uint64_t)llround(fabs(sv->rate)), exact);
		fprintf(s->out, ", %s/s\n", buf);
	}
}

static void report_text(struct session *s, struct proc_verdict *pvs, size_t n, bool final)
{
	char when[32];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	fprintf(s->out, "gpumem leaks %s%s (window %.0f s, a sample every %.1f s)\n", when,
		final ? ", final" : "", LEAKS_WINDOW_S, LEAKS_SAMPLE_S);
	for (size_t i = 0; i < n; i++)
		proc_text(s, &pvs[i]);
	if (final)
		for (size_t i = 0; i < n; i++)
			summary_text(s, &pvs[i]);
	lost_text(s, s->out);
	fputc('\n', s->out);
}

/* ---- JSON ---- */

static void site_json(struct session *s, struct json_writer *w, const struct proc_verdict *pv,
		      const struct site_verdict *sv, size_t rank)
{
	const struct site_snap *ss = sv->ss;
	uint64_t ips[GM_MAX_STACK_DEPTH];
	uint32_t n = state_stack(s->state, (int)ss->key.tgid, ss->key.stack_id, ips);

	jw_object_begin(w);
	jw_kv_u64(w, "rank", rank);
	jw_kv_string(w, "verdict", verdict_names[sv->verdict]);
	jw_kv_string(w, "api", probe_api_name(ss->key.api));
	jw_kv_string(w, "kind", kind_name(ss->key.kind));
	jw_kv_i64(w, "stack_id", ss->key.stack_id);
	jw_kv_u64(w, "current_bytes", ss->st.current_bytes);
	jw_kv_u64(w, "current_allocs", ss->st.current_allocs);
	jw_kv_u64(w, "alloc_count", ss->st.alloc_count);
	jw_kv_u64(w, "free_count", ss->st.free_count);
	jw_kv_u64(w, "alloc_bytes_total", ss->st.alloc_bytes_total);
	jw_kv_string(w, "method", sv->lifetime ? "lifetime" : "window");
	jw_kv_i64(w, "growth_bytes_per_s", llround(sv->rate));
	if (isnan(sv->per_step))
		jw_kv_null(w, "growth_bytes_per_step");
	else
		jw_kv_i64(w, "growth_bytes_per_step", llround(sv->per_step));
	jw_kv_u64(w, "samples", sv->fit.n);
	jw_kv_u64(w, "window_ns", (uint64_t)(sv->fit.span_s * 1e9));
	jw_kv_i64(w, "window_growth_bytes", llround(sv->fit.growth));
	jw_kv_u64(w, "fit_r2_pct", (uint64_t)llround(sv->fit.r2 * 100));
	jw_kv_u64(w, "alloc_rate_milli", (uint64_t)llround(sv->fit.alloc_rate * 1000));
	jw_kv_u64(w, "oldest_age_ns", age_at(pv->now, ss->oldest_ns));
	jw_kv_u64(w, "median_age_ns", age_at(pv->now, ss->median_ns));
	jw_key(w, "frames");
	frames_json(s, w, pv->p->pid, ips, n);
	jw_object_end(w);
}

static void proc_json(struct session *s, struct json_writer *w, const struct proc_verdict *pv)
{
	const struct proc_rec *p = pv->p;

	jw_object_begin(w);
	jw_kv_i64(w, "pid", p->pid);
	jw_kv_string(w, "comm", p->comm);
	jw_kv_string(w, "cmdline", p->cmdline ? p->cmdline : "");
	container_kv_json(w, &p->container);
	jw_kv_bool(w, "alive", p->alive);
	if (!p->alive)
		jw_kv_i64(w, "exit_code", p->exit_code);
	jw_kv_u64(w, "current_bytes", p->st.current_bytes);
	jw_kv_u64(w, "current_allocs", p->st.current_allocs);
	jw_kv_u64(w, "peak_bytes", p->st.peak_bytes);
	jw_kv_u64(w, "growing_sites", pv->growing);
	jw_key(w, "step");
	if (pv->step_rate > 0) {
		jw_object_begin(w);
		jw_kv_string(w, "method", pv->step_lifetime ? "lifetime" : "alloc_rates");
		jw_kv_u64(w, "period_ns", (uint64_t)llround(1e9 / pv->step_rate));
		jw_kv_u64(w, "steps_per_s_milli", (uint64_t)llround(pv->step_rate * 1000));
		jw_object_end(w);
	} else {
		jw_null(w);
	}
	jw_key(w, "sites");
	jw_array_begin(w);
	for (size_t i = 0; i < pv->nsites; i++)
		site_json(s, w, pv, &pv->sites[i], i + 1);
	jw_array_end(w);
	jw_object_end(w);
}

static void report_json(struct session *s, struct proc_verdict *pvs, size_t n, bool final)
{
	struct json_writer *w = jw_new(s->out);

	jw_object_begin(w);
	jw_kv_u64(w, "version", 1);
	jw_kv_u64(w, "time_ns", realtime_ns());
	jw_kv_bool(w, "final", final);
	jw_kv_u64(w, "window_ns", (uint64_t)(LEAKS_WINDOW_S * 1e9));
	jw_kv_u64(w, "sample_interval_ns", (uint64_t)(LEAKS_SAMPLE_S * 1e9));
	jw_key(w, "processes");
	jw_array_begin(w);
	for (size_t i = 0; i < n; i++)
		proc_json(s, w, &pvs[i]);
	jw_array_end(w);
	jw_key(w, "lost");
	lost_json(s, w);
	jw_object_end(w);
	jw_newline(w);
	jw_free(w);
}

static void report(struct session *s, bool final)
{
	struct state *st = s->state;
	struct proc_verdict *pvs = xcalloc(st->nprocs ? st->nprocs : 1, sizeof(*pvs));
	size_t n = 0;

	for (size_t i = 0; i < st->nprocs; i++)
		if (st->procs[i]->have_stats)
			judge_proc(&pvs[n++], st->procs[i]);
	if (n > 1)
		qsort(pvs, n, sizeof(*pvs), proc_rank_cmp);
	if (s->opt->json)
		report_json(s, pvs, n, final);
	else
		report_text(s, pvs, n, final);
	fflush(s->out);
	for (size_t i = 0; i < n; i++)
		free(pvs[i].sites);
	free(pvs);
}

static double print_interval(struct session *s)
{
	if (s->opt->interval_s > 0)
		return s->opt->interval_s;
	return s->opt->cmd_argv ? 0 : LEAKS_DEFAULT_PRINT_S;
}

static void leaks_tick(struct session *s)
{
	double every = print_interval(s);
	uint64_t now = now_ns();

	ensure_started(s);
	if (every > 0 && !leaks.next_print)
		leaks.next_print = s->start_mono_ns + (uint64_t)(every * 1e9);
	if (every > 0 && now >= leaks.next_print) {
		/* A report: ages too, which needs the walk over every live allocation. */
		if (state_refresh(s->state))
			p_err("cannot read the BPF maps");
		sample(s);
		report(s, false);
		while (leaks.next_print <= now)
			leaks.next_print += (uint64_t)(every * 1e9);
		return;
	}
	if (state_refresh_counts(s->state))
		p_err("cannot read the BPF maps");
	sample(s);
}

/* Before a process's entries are dropped: its median ages are then collected too. */
static void leaks_on_exit(struct session *s, const struct gm_call_event *e)
{
	(void)e;
	ensure_started(s);
}

static int leaks_finish(struct session *s)
{
	int err;

	ensure_started(s);
	err = state_refresh(s->state);
	if (err)
		p_err("cannot read the BPF maps: %s", strerror(-err));
	sample(s);
	report(s, true);
	history_free(leaks.hist);
	leaks.hist = NULL;
	return err ? 1 : 0;
}

const struct view_ops leaks_view = {
	.name = "leaks",
	.tick = leaks_tick,
	.on_exit = leaks_on_exit,
	.finish = leaks_finish,
	.tick_s = LEAKS_SAMPLE_S,
};
