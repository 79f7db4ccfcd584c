/* SPDX-License-Identifier: GPL-2.0 */
/* What the snapshots say over time, as functions of snapshots and their history: rates and
 * growth (trends), leak verdicts with the loop's step, and the context of a failed allocation.
 * No BPF and no /proc: unit tests feed them synthetic snapshots. */
#ifndef GPUMEM_ANALYSIS_H
#define GPUMEM_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analysis/history.h"
#include "model/snapshot.h"

/* ---- trends: rates and growth of one process or site ---- */

struct trend {
	double alloc_rate, free_rate;	/* per second, over the rate window */
	double growth_per_s;		/* least-squares slope over the growth window */
};

struct trend trend_of(const struct history *h, const struct hist_key *key, uint64_t now_ns,
		      double rate_window_s, double growth_window_s);

/* ---- leaks ---- */

/* Growth is fitted over this window: leaks' verdicts, top's GROW/min and its sparkline. */
#define GROWTH_WINDOW_S 60.0
#define LEAKS_SAMPLE_S 0.5	/* how often the history samples the sites for leaks */
#define LEAKS_MIN_SAMPLES 3	/* fewer: judged on the process's lifetime totals */
#define LEAKS_MIN_SPAN_S 1.0
#define LEAKS_MIN_R2 0.8	/* a fit below this is not steady growth */

enum leak_verdict { LEAK_GROWING, LEAK_STEADY, LEAK_FREED };

struct site_verdict {
	const struct snap_site *ss;
	bool tensor;		/* a PyTorch tensor site: allocated bytes, inside reserved */
	enum leak_verdict verdict;
	struct hist_fit fit;
	bool lifetime;		/* too few samples: judged on totals since the process began */
	double rate;		/* bytes per second */
	double per_step;	/* bytes per step; NAN when no step was found */
};

struct proc_verdict {
	const struct snap_proc *p;
	struct site_verdict *sites;	/* suspects first */
	size_t nsites;
	uint64_t now;		/* the end of the window: the last sample (or the exit) */
	double step_rate;	/* steps per second; 0: no recurring allocations */
	bool step_lifetime;
	size_t growing;		/* sites growing, tensor sites among them */
	size_t growing_tensors;
	struct snap_forecast forecast;
};

struct leak_report {
	struct proc_verdict *procs;	/* processes that allocate, suspects first */
	size_t nprocs;
};

const char *leak_verdict_name(enum leak_verdict v);
/* Judges every process of snap that allocated, from its series in h. */
void leaks_judge(const struct snapshot *snap, const struct history *h, struct leak_report *out);
void leak_report_free(struct leak_report *r);
/* p's forecast (snap_forecast): its sites judged from h as leaks_judge does, with snap's
 * devices. Only where the growth is fitted well over the window (each site's fit r2 >=
 * LEAKS_MIN_R2; lifetime judgements are no fit), some site grows, the net growth on the device
 * is positive, and NVML gave the device's free memory; the device that runs out first. */
void proc_oom_forecast(const struct snapshot *snap, const struct history *h,
		       const struct snap_proc *p, struct snap_forecast *out);
/* pv's forecast with snap's devices (its sites judged by leaks_judge). */
void oom_forecast_of(const struct snapshot *snap, const struct proc_verdict *pv,
		     struct snap_forecast *out);

/* ---- gpumem's own cost in a process (cost.c) ---- */

struct proc_cost {
	bool hits_known;	/* a live snapshot's: the kernel counts them */
	bool seconds_known;	/* and a hit's cost was measured */
	bool share_known;	/* and the process's CPU time was read */
	uint64_t hits;		/* probe programs run in its threads (gm_proc_stats.probe_hits) */
	double seconds;		/* hits x (trap + mean program run where the kernel keeps it) */
	double share;		/* seconds / the process's CPU time */
};

void proc_cost_of(const struct snapshot *s, const struct snap_proc *p, struct proc_cost *out);

/* ---- oom: what a failed allocation happened in ---- */

#define OOM_TOP_SITES 5

struct oom_context {
	const struct snap_proc *p;	/* NULL: not in the snapshot (ended and let go) */
	const struct snap_site *top[OOM_TOP_SITES];	/* what it held most on the device that
							 * failed, largest first */
	size_t ntop;
};

/* gpu: the failure's device + 1, whose sites alone are taken; 0 (not known): every site. */
void oom_context_of(const struct snapshot *snap, int pid, uint32_t gpu, struct oom_context *out);

#endif
