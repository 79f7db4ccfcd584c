// SPDX-License-Identifier: GPL-2.0
/* The per-process replay of call events: sites interned by (stack, api, kind, device), the live
 * allocations in an open-addressing table (deleted by backward shift, no tombstones). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "export/timeline.h"

struct site_key {
	int32_t stack_id;
	int32_t py_stack_id;	/* Python paths that share a native stack: sites apart */
	uint32_t api, kind;
	uint32_t gpu;		/* and so are its devices */
};

static size_t slot_of(uint64_t addr, bool tensor, size_t cap)
{
	return (size_t)(((addr >> 4) ^ tensor) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

static bool same_alloc(const struct tl_alloc *a, uint64_t addr, bool tensor)
{
	return a->addr == addr && a->tensor == tensor;
}

static void live_put(struct tl_proc *p, const struct tl_alloc *a);

static void live_grow(struct tl_proc *p)
{
	struct tl_alloc *old = p->live;
	size_t old_cap = p->live_cap;

	p->live_cap = old_cap ? old_cap * 2 : 64;
	p->live = xcalloc(p->live_cap, sizeof(*p->live));
	p->nlive = 0;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].used)
			live_put(p, &old[i]);
	free(old);
}

/* Inserts a, replacing a live allocation at the same address (its free was not seen). */
static void live_put(struct tl_proc *p, const struct tl_alloc *a)
{
	size_t i;

	if ((p->nlive + 1) * 2 > p->live_cap)
		live_grow(p);
	i = slot_of(a->addr, a->tensor, p->live_cap);
	while (p->live[i].used && !same_alloc(&p->live[i], a->addr, a->tensor))
		i = (i + 1) & (p->live_cap - 1);
	if (!p->live[i].used)
		p->nlive++;
	p->live[i] = *a;
	p->live[i].used = true;
}

/* Removes the allocation (or tensor) at addr into *out; false when there is none. */
static bool live_take(struct tl_proc *p, uint64_t addr, bool tensor, struct tl_alloc *out)
{
	size_t mask = p->live_cap - 1, i, j;

	if (!p->live_cap)
		return false;
	for (i = slot_of(addr, tensor, p->live_cap); p->live[i].used; i = (i + 1) & mask)
		if (same_alloc(&p->live[i], addr, tensor))
			break;
	if (!p->live[i].used)
		return false;
	*out = p->live[i];
	p->live[i].used = false;
	p->nlive--;
	/* Backward shift: move up every entry that probed past the hole. */
	for (j = (i + 1) & mask; p->live[j].used; j = (j + 1) & mask) {
		size_t home = slot_of(p->live[j].addr, p->live[j].tensor, p->live_cap);

		if (((j - home) & mask) >= ((j - i) & mask)) {
			p->live[i] = p->live[j];
			p->live[j].used = false;
			i = j;
		}
	}
	return true;
}

static struct tl_proc *proc_new(struct timeline *t, size_t slot, const struct snap_event *e)
{
	struct tl_proc *p = xcalloc(1, sizeof(*p));

	p->index = t->nprocs;
	p->pid = (int)e->ev->pid;
	p->gen = e->ev->gen;
	if (t->nprocs == t->procs_cap) {
		t->procs_cap = t->procs_cap ? t->procs_cap * 2 : 16;
		t->procs = xrealloc(t->procs, t->procs_cap * sizeof(*t->procs));
	}
	t->procs[t->nprocs++] = p;
	t->current[slot] = p->index;
	return p;
}

/* The process of an event: its newest record, or a new one (first seen, or its pid reused:
 * another generation, or after its end). */
static struct tl_proc *proc_of(struct timeline *t, const struct snap_event *e)
{
	int pid = (int)e->ev->pid;
	bool added;
	uint32_t slot = intern(&t->pids, &pid, sizeof(pid), &added);
	struct tl_proc *p;

	if (added) {
		t->current = xrealloc(t->current, t->pids.n * sizeof(*t->current));
		p = proc_new(t, slot, e);
	} else {
		p = t->procs[t->current[slot]];
		if (p->ended || p->gen != e->ev->gen)	/* an exit record may have been lost */
			p = proc_new(t, slot, e);
	}
	if (e->ev->type != GM_REC_PROCESS_EXIT || !p->comm[0])
		snprintf(p->comm, sizeof(p->comm), "%.*s", GM_COMM_LEN, e->ev->comm);
	if (e->container && !p->has_container) {
		p->container = *e->container;
		p->has_container = true;
	}
	return p;
}

static struct tl_site *site_of(struct tl_proc *p, const struct snap_event *e, uint32_t *index)
{
	struct site_key key = { .stack_id = e->stack_id, .py_stack_id = e->py_stack_id,
				.api = e->ev->api,
				.kind = e->ev->kind,
				.gpu = gm_site_gpu(e->ev->kind, e->ev->layer,
						   (int32_t)e->ev->gpu - 1) };
	bool added;
	uint32_t i = intern(&p->site_keys, &key, sizeof(key), &added);

	if (i >= p->sites_cap) {
		p->sites_cap = p->sites_cap ? p->sites_cap * 2 : 16;
		p->sites = xrealloc(p->sites, p->sites_cap * sizeof(*p->sites));
	}
	if (added) {
		p->sites[i] = (struct tl_site){ .stack_id = key.stack_id, .api = key.api,
						.kind = key.kind, .gpu = key.gpu };
		p->sites[i].stack = e->stack ? snap_stack_get(e->stack) : NULL;
	}
	*index = i;
	return &p->sites[i];
}

static void early_put(struct tl_proc *p, uint64_t addr)
{
	if (p->nearly == p->early_cap) {
		p->early_cap = p->early_cap ? 2 * p->early_cap : 8;
		p->early = xrealloc(p->early, p->early_cap * sizeof(*p->early));
	}
	p->early[p->nearly++] = addr;
}

/* Whether a free of addr is the late event of an allocation already freed by its address's
 * reuse (then it is taken out of the list). */
static bool early_take(struct tl_proc *p, uint64_t addr)
{
	for (size_t i = 0; i < p->nearly; i++) {
		if (p->early[i] == addr) {
			p->early[i] = p->early[--p->nearly];
			return true;
		}
	}
	return false;
}

/* A site's bytes changed by delta: its device's too, for GPU memory (not a tensor's). */
static void site_add(struct tl_proc *p, struct tl_site *site, bool tensor, uint64_t delta)
{
	uint32_t g = gm_gpu_slot(site->gpu);

	site->bytes += delta;
	if (tensor || !gm_kind_is_gpu(site->kind))
		return;
	p->gpu_bytes[g] += delta;
	p->gpus |= 1u << g;
}

static void apply_alloc(struct tl_proc *p, const struct snap_event *e, struct tl_change *out)
{
	uint32_t index;
	bool reused = live_take(p, e->ev->addr, out->tensor, &out->early);
	struct tl_site *site = site_of(p, e, &index);

	if (reused) {	/* its old allocation's free event is on its way: freed now */
		out->early_free = true;
		out->early_site = &p->sites[out->early.site];
		site_add(p, out->early_site, out->tensor, -out->early.size);
		/* A tensor's free is sent before the allocator can hand its address out again:
		 * none is on its way (it was lost). */
		if (!out->tensor)
			early_put(p, e->ev->addr);
	}

	out->alloc = (struct tl_alloc){ .addr = e->ev->addr, .size = e->ev->size,
					.wall_ns = e->wall_ns, .site = index,
					.tensor = out->tensor };
	live_put(p, &out->alloc);
	site_add(p, site, out->tensor, e->ev->size);
	if (site->bytes > site->peak)
		site->peak = site->bytes;
	out->site = site;
	out->what = TL_ALLOC;
}

static void apply_free(struct tl_proc *p, const struct snap_event *e, struct tl_change *out)
{
	if (!out->tensor && early_take(p, e->ev->addr))
		return;		/* freed already, when its address was allocated again */
	if (!live_take(p, e->ev->addr, out->tensor, &out->alloc)) {
		p->unmatched_frees++;
		return;
	}
	out->site = &p->sites[out->alloc.site];
	site_add(p, out->site, out->tensor, -out->alloc.size);
	out->what = TL_FREE;
}

static void apply_exit(struct tl_proc *p, struct tl_change *out)
{
	p->ended = true;
	out->what = TL_EXIT;
}

void timeline_apply(struct timeline *t, const struct snap_event *e, struct tl_change *out)
{
	const struct gm_call_event *ev = e->ev;
	uint32_t index;

	*out = (struct tl_change){ .what = TL_NONE };
	if (ev->type != GM_REC_ALLOC && ev->type != GM_REC_FREE &&
	    ev->type != GM_REC_ALLOC_FAILED && ev->type != GM_REC_PROCESS_EXIT)
		return;
	out->p = proc_of(t, e);
	out->tensor = ev->layer == GM_LAYER_TENSOR && ev->type != GM_REC_PROCESS_EXIT;
	if (ev->type != GM_REC_PROCESS_EXIT)
		out->p->process_bytes = ev->process_bytes;
	if (out->tensor) {
		out->p->tensor_bytes = ev->tensor_bytes;
		out->p->has_tensors = true;
	}
	switch (ev->type) {
	case GM_REC_ALLOC:
		apply_alloc(out->p, e, out);
		break;
	case GM_REC_FREE:
		apply_free(out->p, e, out);
		break;
	case GM_REC_ALLOC_FAILED:
		out->site = site_of(out->p, e, &index);
		out->what = TL_FAILED;
		break;
	default:
		apply_exit(out->p, out);
		break;
	}
}

void timeline_for_each_live(const struct tl_proc *p,
			    void (*fn)(const struct tl_proc *p, const struct tl_alloc *a, void *ctx),
			    void *ctx)
{
	for (size_t i = 0; i < p->live_cap; i++)
		if (p->live[i].used)
			fn(p, &p->live[i], ctx);
}

static void proc_free(struct timeline *t, struct tl_proc *p)
{
	for (size_t i = 0; i < p->site_keys.n; i++)
		snap_stack_put(p->sites[i].stack);
	if (p->priv && t->free_priv)
		t->free_priv(p->priv);
	intern_free(&p->site_keys);
	free(p->sites);
	free(p->live);
	free(p->early);
	free(p);
}

void timeline_free(struct timeline *t)
{
	for (size_t i = 0; i < t->nprocs; i++)
		proc_free(t, t->procs[i]);
	free(t->procs);
	free(t->current);
	intern_free(&t->pids);
	*t = (struct timeline){ 0 };
}
