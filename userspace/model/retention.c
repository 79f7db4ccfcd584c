// SPDX-License-Identifier: GPL-2.0
/* How long the model keeps what ended: processes past --keep-ended (count) or --keep-ended-for
 * (time since their end) are let go, oldest end first, with everything they held (module
 * maps, named stacks, sites, what the symbolizer read of their files); each one let go is
 * counted where every view shows it. The time counts from when gpumem saw the end. */
#include <stdlib.h>
#include "model/state.h"
#include "symbols/symbolize.h"

/* What the symbolizer holds for the files of processes let go (descriptors, symbol tables,
 * debug info) goes too, unless a process kept maps them. */
static void sweep_symbols(struct state *s)
{
	symbolizer_sweep_begin(s->sym);
	for (size_t i = 0; i < s->nprocs; i++)
		if (s->procs[i]->have_mm)
			symbolizer_keep(s->sym, &s->procs[i]->mm);
	symbolizer_sweep_end(s->sym);
}

/* Ended and past the time bound, or beyond the count bound (oldest ends go first). */
static bool must_go(const struct proc_rec *p, uint64_t now, uint64_t keep_ns, uint64_t cutoff)
{
	if (p->alive || !p->reaped)
		return false;
	return (now > p->reaped_ns && now - p->reaped_ns > keep_ns) || p->end_ns < cutoff;
}

static int end_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The end time below which ended processes are beyond the count bound (0: none is). */
static uint64_t count_cutoff(struct state *s, size_t nended)
{
	uint64_t *ends, cutoff;
	size_t k = 0;

	if (nended <= s->opt.keep_ended)
		return 0;
	ends = malloc(nended * sizeof(*ends));
	if (!ends)
		return 0;
	for (size_t i = 0; i < s->nprocs; i++)
		if (!s->procs[i]->alive && s->procs[i]->reaped)
			ends[k++] = s->procs[i]->end_ns;
	qsort(ends, k, sizeof(*ends), end_cmp);
	cutoff = ends[k - s->opt.keep_ended];	/* the oldest one kept */
	free(ends);
	return cutoff;
}

void state_retain(struct state *s, uint64_t now)
{
	uint64_t keep_ns = (uint64_t)(s->opt.keep_ended_s * 1e9), cutoff;
	size_t nended = 0, kept = 0, before = s->nprocs;

	for (size_t i = 0; i < s->nprocs; i++)
		nended += !s->procs[i]->alive && s->procs[i]->reaped;
	cutoff = count_cutoff(s, nended);
	for (size_t i = 0; i < s->nprocs; i++) {
		struct proc_rec *p = s->procs[i];

		if (must_go(p, now, keep_ns, cutoff))
			proc_rec_free(p);
		else
			s->procs[kept++] = p;
	}
	if (kept == before)
		return;
	s->nprocs = kept;
	s->lost[SNAP_LOST_ENDED_DROPPED] += before - kept;
	state_reindex(s);
	sweep_symbols(s);
}
