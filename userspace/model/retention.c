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

/* Ended and past the time bound, or among those over the count bound (over_bound). */
static bool must_go(const struct proc_rec *p, uint64_t now, uint64_t keep_ns)
{
	if (p->alive || !p->reaped)
		return false;
	return (now > p->reaped_ns && now - p->reaped_ns > keep_ns) || p->over_bound;
}

/* An ended process that made no call gpumem saw (a shell's child, a `true`): no numbers, no
 * stack, no failure. Letting it go loses nothing, so it is no loss, and over the count bound
 * such processes go before any that did (a script's thousand commands must not push its
 * training process out of the report). */
static bool made_no_call(const struct proc_rec *p)
{
	return !p->have_stats && !p->nnamed;
}

static bool ended(const struct proc_rec *p)
{
	return !p->alive && p->reaped;
}

/* Oldest end first; one end shared by many (those reaped in one sweep), the older record. */
static int end_cmp(const void *a, const void *b)
{
	const struct proc_rec *x = *(struct proc_rec *const *)a, *y = *(struct proc_rec *const *)b;

	if (x->end_ns != y->end_ns)
		return (x->end_ns > y->end_ns) - (x->end_ns < y->end_ns);
	return (x->serial > y->serial) - (x->serial < y->serial);
}

/* Marks the n oldest ended processes of one kind (made_no_call or not) over_bound. */
static void mark_oldest(struct state *s, bool no_call, size_t n)
{
	struct proc_rec **ends;
	size_t k = 0;

	if (!n)
		return;
	ends = malloc(s->nprocs * sizeof(*ends));
	if (!ends)
		return;
	for (size_t i = 0; i < s->nprocs; i++)
		if (ended(s->procs[i]) && made_no_call(s->procs[i]) == no_call)
			ends[k++] = s->procs[i];
	qsort(ends, k, sizeof(*ends), end_cmp);
	for (size_t i = 0; i < n && i < k; i++)
		ends[i]->over_bound = true;
	free(ends);
}

void state_retain(struct state *s, uint64_t now)
{
	uint64_t keep_ns = (uint64_t)(s->opt.keep_ended_s * 1e9);
	size_t nended = 0, nno_call = 0, over, kept = 0, before = s->nprocs, lost = 0;

	for (size_t i = 0; i < s->nprocs; i++) {
		nended += ended(s->procs[i]);
		nno_call += ended(s->procs[i]) && made_no_call(s->procs[i]);
	}
	over = nended > s->opt.keep_ended ? nended - s->opt.keep_ended : 0;
	mark_oldest(s, true, over < nno_call ? over : nno_call);
	mark_oldest(s, false, over > nno_call ? over - nno_call : 0);
	for (size_t i = 0; i < s->nprocs; i++) {
		struct proc_rec *p = s->procs[i];

		if (must_go(p, now, keep_ns)) {
			lost += !made_no_call(p);
			proc_rec_free(p);
		} else {
			s->procs[kept++] = p;
		}
	}
	if (kept == before)
		return;
	s->nprocs = kept;
	s->lost[SNAP_LOST_ENDED_DROPPED] += lost;
	state_reindex(s);
	sweep_symbols(s);
}
