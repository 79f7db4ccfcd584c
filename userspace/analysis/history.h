/* SPDX-License-Identifier: GPL-2.0 */
/* Time series of the snapshots over time: bytes held, allocations and frees of each process
 * and call site, and what can be read off them (growth fit, rates, step period). A process's
 * series go when it leaves the snapshots. */
#ifndef GPUMEM_HISTORY_H
#define GPUMEM_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HIST_CAP 256			/* samples kept per series (the oldest are overwritten) */
#define HIST_PROCESS (-0x7fffffff - 1)	/* stack_id of a series for a whole process */

struct hist_key {
	uint64_t serial;	/* the process record's (a reused pid is another process) */
	int32_t stack_id;	/* HIST_PROCESS: the process's totals */
	int32_t py_stack_id;	/* negative: none */
	uint32_t api, kind;
	uint32_t gpu;		/* the site's (snap_site.gpu) */
};

struct hist_sample {
	uint64_t t_ns;		/* CLOCK_MONOTONIC */
	uint64_t bytes, allocs, frees;
};

struct hist_series {
	struct hist_key key;
	struct hist_sample *s;	/* a ring of cap samples, grown up to HIST_CAP as they come */
	unsigned int cap, head, count;	/* s[head] is the oldest */
};

/* What a window of one series says. */
struct hist_fit {
	unsigned int n;		/* samples in the window */
	double span_s;		/* from the first to the last of them */
	double slope;		/* least-squares bytes per second */
	double r2;		/* fit quality, 0..1 (1 for a flat line) */
	double growth;		/* last - first bytes in the window */
	double recent_growth;	/* last - bytes at the middle of the window */
	double alloc_rate, free_rate;	/* per second over the window */
	uint64_t allocs;	/* allocations in the window */
};

struct history;

struct history *history_new(void);
void history_free(struct history *h);
/* The series of key, created empty if new. */
struct hist_series *history_get(struct history *h, const struct hist_key *key);
struct hist_series *history_find(const struct history *h, const struct hist_key *key);
/* Series in the history (for tests and the churn benchmark). */
size_t history_count(const struct history *h);

struct snapshot;
struct snap_proc;
struct snap_site;
/* One sample of every process and site of snap (an ended process once more, at its end);
 * then the series of processes that are no longer in snap go. */
void history_observe(struct history *h, const struct snapshot *snap);
struct hist_key hist_key_proc(const struct snap_proc *p);
struct hist_key hist_key_site(const struct snap_proc *p, const struct snap_site *ss);
/* Appends a sample; one no later than the last is ignored. */
void history_add(struct hist_series *s, uint64_t t_ns, uint64_t bytes, uint64_t allocs,
		 uint64_t frees);
const struct hist_sample *history_last(const struct hist_series *s);
/* Fits the samples taken within window_s before now_ns. */
void history_fit(const struct hist_series *s, uint64_t now_ns, double window_s,
		 struct hist_fit *out);
/* The most bytes held in each of nbins equal slices of the window_s before now_ns; a slice
 * with no sample repeats the one before it. Returns the largest value. */
uint64_t history_bins(const struct hist_series *s, uint64_t now_ns, double window_s,
		      uint64_t *bins, unsigned int nbins);

/* The step of a loop from the allocation rates of its recurring call sites: the largest
 * frequency of which every rate is close to a whole multiple (within STEP_RATE_TOLERANCE, and
 * 3% more for each multiple: the least frequent site is called once a step, or once every
 * few). Returns steps per second, 0 when none. */
#define STEP_RATE_TOLERANCE 0.15
/* Allocations a step of the sites that churn most often, at most (leak_verdicts.c). */
#define STEP_CHURN_MAX 8
double history_step_rate(const double *rates, size_t n);

#endif
