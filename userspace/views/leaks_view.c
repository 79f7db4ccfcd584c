// SPDX-License-Identifier: GPL-2.0
/* `gpumem leaks`: the call sites that hold memory and keep growing, as analysis/leaks.c judges
 * them from the snapshots' history (sampled twice a second), every -i seconds and at the end. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/analysis.h"
#include "base/util.h"
#include "output/report.h"
#include "output/site_text.h"
#include "output/units.h"
#include "probes/table.h"
#include "views/common.h"

#define LEAKS_DEFAULT_PRINT_S 10.0	/* without -c and without -i */

/* How far apart the history's samples are: the view's own, or a recording's. */
static double sampled_every(const struct sink *s)
{
	return s->history_sample_s > 0 ? s->history_sample_s : LEAKS_SAMPLE_S;
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

static uint64_t age_at(uint64_t now, uint64_t t, bool valid)
{
	return valid && t && now > t ? now - t : 0;
}

/* ---- text ---- */

/* How many frames each of a process's sites needs to read apart from the others (to free). */
static unsigned int *verdict_depths(const struct proc_verdict *pv)
{
	const struct snap_stack **st = xcalloc(pv->nsites ? pv->nsites : 1, sizeof(*st));
	unsigned int *depth = xcalloc(pv->nsites ? pv->nsites : 1, sizeof(*depth));

	for (size_t i = 0; i < pv->nsites; i++)
		st[i] = pv->sites[i].ss->stack;
	site_text_depths(st, pv->nsites, SITE_TEXT_FRAMES, depth);
	free(st);
	return depth;
}

static void site_text(struct sink *s, const struct proc_verdict *pv,
		      const struct site_verdict *sv, unsigned int depth)
{
	const struct snap_site *ss = sv->ss;
	bool exact = s->opt->exact_bytes;
	char held[32], rate[40], step[32], fit[16], oldest[16], median[16];

	fmt_size(held, sizeof(held), ss->st.current_bytes, exact);
	if (sv->verdict == LEAK_GROWING) {
		fmt_delta(rate, sizeof(rate), sv->rate, exact);
		strcat(rate, "/s");
	} else {
		snprintf(rate, sizeof(rate), "-");	/* not growing: no rate */
	}
	if (isnan(sv->per_step))
		snprintf(step, sizeof(step), "-");
	else
		fmt_delta(step, sizeof(step), sv->per_step, exact);
	if (sv->lifetime)
		snprintf(fit, sizeof(fit), "life");
	else
		snprintf(fit, sizeof(fit), "%.2f", sv->fit.r2);
	fmt_age(oldest, sizeof(oldest), age_at(pv->now, ss->oldest_ns, ss->valid & SS_OLDEST));
	fmt_age(median, sizeof(median), age_at(pv->now, ss->median_ns, ss->valid & SS_MEDIAN));
	fprintf(s->out, "  %-7s %10s %7llu %12s %10s %4s %6s %6s  %s %s",
		leak_verdict_name(sv->verdict), held, ss->st.current_allocs, rate, step, fit, oldest,
		median, probe_api_name(ss->api), site_kind_name(ss));
	if (ss->gpu && snap_proc_many_gpus(pv->p))
		fprintf(s->out, " on GPU %u", ss->gpu - 1);
	fputs(" at ", s->out);
	text_site(s->out, ss->stack, depth, s->opt->all_frames);
	fputc('\n', s->out);
}

/* "  at +1.0 MiB a step, GPU 0 runs out in ~100 steps, ~2 s (512 MiB free)" */
static void forecast_text(struct sink *s, const struct snap_forecast *f)
{
	bool exact = s->opt->exact_bytes;
	char growth[40], left[32], free_b[32];
	const char *amd;

	if (!f->valid)
		return;
	amd = f->vendor && !strcmp(f->vendor, "amd") ? "AMD " : "";
	fmt_age(left, sizeof(left), f->seconds < 1e9 ? (uint64_t)(f->seconds * 1e9) : UINT64_C(1) << 62);
	fmt_size(free_b, sizeof(free_b), f->device_free, exact);
	if (!isnan(f->growth_per_step)) {
		fmt_delta(growth, sizeof(growth), f->growth_per_step, exact);
		fprintf(s->out, "  at %s a step, %sGPU %d runs out in ~%.0f steps, ~%s (%s free)\n",
			growth, amd, f->gpu, f->steps, left, free_b);
	} else {
		fmt_delta(growth, sizeof(growth), f->growth_per_s, exact);
		fprintf(s->out, "  at %s/s, %sGPU %d runs out in ~%s (%s free)\n", growth, amd,
			f->gpu, left, free_b);
	}
}

static void proc_text(struct sink *s, const struct proc_verdict *pv)
{
	unsigned int *depth;
	const struct snap_proc *p = pv->p;
	bool exact = s->opt->exact_bytes;
	char comm[GM_COMM_LEN + 1], cur[32], peak[32], period[32];

	text_known(comm, sizeof(comm), p->comm, p->valid & SP_COMM);
	fmt_size(cur, sizeof(cur), p->st.current_bytes, exact);
	fmt_size(peak, sizeof(peak), p->st.peak_bytes, exact);
	fprintf(s->out, "pid %d %s", p->pid, comm);
	if (p->container.has_id)
		fprintf(s->out, " [%.*s]", CONTAINER_SHORT_LEN, p->container.id);
	if (p->execed)
		fprintf(s->out, " (ended: exec'd)");
	else if (!p->alive)
		fprintf(s->out, " (ended, exit %d)", p->exit_code);
	fprintf(s->out, ": holds %s, peak %s", cur, peak);
	if (p->tensor.alloc_count) {
		fmt_size(cur, sizeof(cur), p->tensor.current_bytes, exact);
		fmt_size(peak, sizeof(peak), p->st.tensor_peak_bytes, exact);
		fprintf(s->out, "; tensors %s, peak %s", cur, peak);
	}
	if (pv->step_rate > 0) {
		fmt_period(period, sizeof(period), 1 / pv->step_rate);
		fprintf(s->out, "; a step every %s (from %s)", period,
			pv->step_lifetime ? "lifetime counts" : "allocation rates");
	}
	fputc('\n', s->out);
	forecast_text(s, &pv->forecast);
	text_libraries_line(s->out, "  ", p, exact);
	fprintf(s->out, "  %-7s %10s %7s %12s %10s %4s %6s %6s  %s\n", "VERDICT", "HELD", "ALLOCS",
		"GROWTH", "PER STEP", "FIT", "OLDEST", "MEDIAN", "SITE");
	depth = verdict_depths(pv);
	for (size_t i = 0; i < pv->nsites; i++)
		site_text(s, pv, &pv->sites[i], depth[i]);
	free(depth);
}

static void growth_text(struct sink *s, const struct proc_verdict *pv,
			const struct site_verdict *sv, unsigned int depth)
{
	bool exact = s->opt->exact_bytes;
	char buf[32], period[32];

	fputs(sv->tensor ? "  tensors at " : "  ", s->out);
	text_site(s->out, sv->ss->stack, depth, s->opt->all_frames);
	if (!isnan(sv->per_step)) {
		fmt_size(buf, sizeof(buf), (uint64_t)llround(fabs(sv->per_step)), exact);
		fmt_period(period, sizeof(period), 1 / pv->step_rate);
		fprintf(s->out, " grew by ~%s per step (a step every %s)", buf, period);
	} else {
		fmt_size(buf, sizeof(buf), (uint64_t)llround(fabs(sv->rate)), exact);
		fprintf(s->out, " grew by ~%s per second", buf);
	}
	fmt_size(buf, sizeof(buf), (uint64_t)llround(fabs(sv->rate)), exact);
	if (sv->lifetime)
		fprintf(s->out, ", %s/s over its lifetime\n", buf);
	else
		fprintf(s->out, ", %s/s over the last %.0f s\n", buf, sv->fit.span_s);
}

/* The sentence people came for: what was still held, and what grew by how much a step. */
static void summary_text(struct sink *s, const struct proc_verdict *pv)
{
	uint64_t held = 0, allocs = 0;
	size_t nheld = 0, ntensor = 0;
	unsigned int *depth;
	char buf[32], comm[GM_COMM_LEN + 1];

	for (size_t i = 0; i < pv->nsites; i++) {
		const struct site_verdict *sv = &pv->sites[i];

		if (sv->tensor) {	/* inside what the other sites hold */
			ntensor += sv->verdict != LEAK_FREED;
			continue;
		}
		held += sv->ss->st.current_bytes;
		allocs += sv->ss->st.current_allocs;
		nheld += sv->verdict != LEAK_FREED;
	}
	text_known(comm, sizeof(comm), pv->p->comm, pv->p->valid & SP_COMM);
	fmt_size(buf, sizeof(buf), held, s->opt->exact_bytes);
	fprintf(s->out, "pid %d %s %s: %zu site%s still held %s in %" PRIu64 " allocation%s",
		pv->p->pid, comm, pv->p->alive ? "now" : "at its end", nheld, nheld == 1 ? "" : "s",
		buf, allocs, allocs == 1 ? "" : "s");
	if (pv->p->tensor.alloc_count) {
		fmt_size(buf, sizeof(buf), pv->p->tensor.current_bytes, s->opt->exact_bytes);
		fprintf(s->out, "; %zu tensor site%s held %s of it in %llu tensor%s", ntensor,
			ntensor == 1 ? "" : "s", buf, pv->p->tensor.current_allocs,
			pv->p->tensor.current_allocs == 1 ? "" : "s");
	}
	fputc('\n', s->out);
	depth = verdict_depths(pv);
	for (size_t i = 0; i < pv->nsites && pv->sites[i].verdict == LEAK_GROWING; i++)
		growth_text(s, pv, &pv->sites[i], depth[i]);
	free(depth);
}

static void report_text(struct sink *s, const struct snapshot *snap,
			const struct leak_report *r, bool final)
{
	char when[32];

	text_clock(when, sizeof(when), snapshot_wall_ns(snap, snap->time_ns), false);
	fprintf(s->out, "gpumem leaks %s%s (window %.0f s, a sample every %.1f s)\n", when,
		final ? ", final" : "", GROWTH_WINDOW_S, sampled_every(s));
	fputs("growing: its bytes held rose across the window; steady: holds memory, not more "
	      "of it; freed: holds nothing.\nGROWTH: bytes a second, fitted over the window (FIT: "
	      "the fit's r2; life: too few samples, over the process's lifetime).\n", s->out);
	for (size_t i = 0; i < r->nprocs; i++)
		proc_text(s, &r->procs[i]);
	if (final)
		for (size_t i = 0; i < r->nprocs; i++)
			summary_text(s, &r->procs[i]);
	text_lost(s->out, snap);
	fputc('\n', s->out);
}

/* ---- JSON ---- */

static void site_json(struct json_writer *w, const struct proc_verdict *pv,
		      const struct site_verdict *sv, size_t rank)
{
	const struct snap_site *ss = sv->ss;

	jw_object_begin(w);
	jw_kv_u64(w, "rank", rank);
	jw_kv_string(w, "verdict", leak_verdict_name(sv->verdict));
	json_site_fields(w, pv->p, ss);
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
	jw_kv_double(w, "fit_r2", sv->fit.r2);
	jw_kv_u64(w, "alloc_rate_milli", (uint64_t)llround(sv->fit.alloc_rate * 1000));
	jw_kv_double(w, "alloc_rate", sv->fit.alloc_rate);
	jw_kv_u64(w, "median_age_ns", age_at(pv->now, ss->median_ns, ss->valid & SS_MEDIAN));
	jw_object_end(w);
}

#define FORECAST_MAX 1e15	/* steps or seconds past it (30 million years) are written as it */

static void kv_or_null(struct json_writer *w, const char *key, double v)
{
	if (isnan(v))
		jw_kv_null(w, key);
	else
		jw_kv_i64(w, key, llround(v < FORECAST_MAX ? v : FORECAST_MAX));
}

static void forecast_json(struct json_writer *w, const struct snap_forecast *f)
{
	jw_key(w, "oom_forecast");
	if (!f->valid) {
		jw_null(w);
		return;
	}
	jw_object_begin(w);
	jw_kv_i64(w, "gpu", f->gpu);
	jw_kv_string(w, "vendor", f->vendor ? f->vendor : "nvidia");
	jw_kv_u64(w, "device_free_bytes", f->device_free);
	jw_kv_i64(w, "growth_bytes_per_s", llround(f->growth_per_s));
	kv_or_null(w, "growth_bytes_per_step", f->growth_per_step);
	kv_or_null(w, "steps", f->steps);
	jw_kv_double(w, "seconds", f->seconds < FORECAST_MAX ? f->seconds : FORECAST_MAX);
	jw_object_end(w);
}

static void proc_json(struct json_writer *w, const struct proc_verdict *pv)
{
	const struct snap_proc *p = pv->p;

	jw_object_begin(w);
	jw_kv_i64(w, "pid", p->pid);
	json_kv_known(w, "comm", p->comm, p->valid & SP_COMM);
	json_kv_known(w, "cmdline", p->cmdline, p->valid & SP_CMDLINE);
	json_container(w, &p->container);
	jw_kv_bool(w, "alive", p->alive);
	jw_kv_bool(w, "execed", p->execed);
	if (!p->alive && !p->execed)
		jw_kv_i64(w, "exit_code", p->exit_code);
	jw_kv_u64(w, "current_bytes", p->st.current_bytes);
	jw_kv_u64(w, "current_allocs", p->st.current_allocs);
	jw_kv_u64(w, "peak_bytes", p->st.peak_bytes);
	jw_kv_u64(w, "growing_sites", pv->growing);
	jw_kv_u64(w, "growing_tensor_sites", pv->growing_tensors);
	jw_kv_u64(w, "tensor_bytes", p->tensor.current_bytes);
	jw_kv_u64(w, "tensor_allocs", p->tensor.current_allocs);
	jw_kv_u64(w, "tensor_peak_bytes", p->st.tensor_peak_bytes);
	jw_key(w, "step");
	if (pv->step_rate > 0) {
		jw_object_begin(w);
		jw_kv_string(w, "method", pv->step_lifetime ? "lifetime" : "alloc_rates");
		jw_kv_u64(w, "period_ns", (uint64_t)llround(1e9 / pv->step_rate));
		jw_kv_u64(w, "steps_per_s_milli", (uint64_t)llround(pv->step_rate * 1000));
		jw_kv_double(w, "steps_per_s", pv->step_rate);
		jw_object_end(w);
	} else {
		jw_null(w);
	}
	forecast_json(w, &pv->forecast);
	json_libraries(w, p);
	jw_key(w, "sites");
	jw_array_begin(w);
	for (size_t i = 0; i < pv->nsites; i++)
		site_json(w, pv, &pv->sites[i], i + 1);
	jw_array_end(w);
	jw_object_end(w);
}

static void report_json(struct sink *s, const struct snapshot *snap,
			const struct leak_report *r, bool final)
{
	struct json_writer *w = jw_new(s->out);

	jw_object_begin(w);
	jw_kv_u64(w, "version", 1);
	jw_kv_u64(w, "time_ns", snapshot_wall_ns(snap, snap->time_ns));
	jw_kv_bool(w, "final", final);
	jw_kv_u64(w, "window_ns", (uint64_t)(GROWTH_WINDOW_S * 1e9));
	jw_kv_u64(w, "sample_interval_ns", (uint64_t)(sampled_every(s) * 1e9));
	jw_key(w, "processes");
	jw_array_begin(w);
	for (size_t i = 0; i < r->nprocs; i++)
		proc_json(w, &r->procs[i]);
	jw_array_end(w);
	jw_key(w, "lost");
	json_lost(w, snap);
	jw_object_end(w);
	jw_newline(w);
	jw_free(w);
}

static int report(struct sink *s, const struct snapshot *snap, bool final)
{
	struct leak_report r;

	leaks_judge(snap, s->hist, &r);
	if (s->opt->json)
		report_json(s, snap, &r, final);
	else
		report_text(s, snap, &r, final);
	leak_report_free(&r);
	return fflush(s->out) || ferror(s->out) ? -1 : 0;
}

static void leaks_report(struct sink *s, const struct snapshot *snap)
{
	report(s, snap, false);
}

static int leaks_finish(struct sink *s, const struct snapshot *snap)
{
	return report(s, snap, true);
}

static double sample_interval(const struct options *o)
{
	(void)o;
	return LEAKS_SAMPLE_S;
}

static double print_interval(const struct options *o)
{
	if (o->interval_s > 0)
		return o->interval_s;
	return o->cmd_argv ? 0 : LEAKS_DEFAULT_PRINT_S;
}

const struct sink_ops leaks_view = {
	.reads_agent = true,
	.name = "leaks",
	.keeps_history = true,
	.report_wants = SNAP_AGES | SNAP_MEDIAN_AGES | SNAP_DEVICES,	/* the forecast's free */
	.exit_wants = SNAP_MEDIAN_AGES,
	.sample_interval = sample_interval,
	.report_interval = print_interval,
	.on_report = leaks_report,
	.finish = leaks_finish,
};
