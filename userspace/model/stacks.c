// SPDX-License-Identifier: GPL-2.0
/* Naming call stacks for the snapshots: each (process, stack id) once, its addresses expanded
 * into inlined calls, the CUDA libraries' own frames left out (unless --all-frames), names
 * demangled (unless --no-demangle). A stack whose frames did not all find a module is named
 * again, after a re-read of the maps, while its process lives. */
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "model/python.h"
#include "model/state.h"
#include "probes/table.h"
#include "symbols/symbolize.h"

/* A stack with a frame in no known module is named again at most this often. */
#define STACK_RENAME_NS 2000000000ull

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Code of the CUDA libraries, or of a runtime linked statically into the program. */
static bool is_cuda_frame(const struct snap_frame *f)
{
	const char *sym = f->symbol;

	if (is_gpu_module(f->module))
		return true;
	if (!sym)
		return false;
	if (has_prefix(sym, "__cudart") || has_prefix(sym, "_ZN6cudart"))
		return true;
	/* the APIs themselves: cudaMalloc, cuMemAlloc_v2 */
	return (has_prefix(sym, "cuda") && sym[4] >= 'A' && sym[4] <= 'Z') ||
	       (has_prefix(sym, "cu") && sym[2] >= 'A' && sym[2] <= 'Z');
}

static void copy_frame(struct snap_frame *out, const struct frame *f)
{
	*out = (struct snap_frame){
		.addr = f->addr, .offset = f->offset, .symbol_offset = f->symbol_offset,
		.module = f->module, .symbol = f->symbol, .file = f->file, .line = f->line,
		.inlined = f->inlined,
	};
}

/* The frames of one address (with its inlined calls); *complete cleared when it has no
 * module. Returns how many were written. */
static unsigned int name_address(struct state *s, struct proc_rec *p, uint64_t ip,
				 struct snap_frame *out, bool *complete)
{
	bool mapped = p->have_mm && symbolize_mapping_of(&p->mm, ip, true);
	struct frame f[SYM_MAX_INLINE];
	int got = 0;

	/* A library loaded after the map was captured: look again while it lives. */
	if (!mapped && p->have_mm && p->alive && state_reread_maps(s, p))
		mapped = symbolize_mapping_of(&p->mm, ip, true);
	if (mapped)
		got = symbolize_frames(s->sym, p->pid, &p->mm, ip, true, f, SYM_MAX_INLINE);
	if (got <= 0) {	/* in no file the process maps (as far as its map tells) */
		state_frame_unmapped(s, p);
		memset(out, 0, sizeof(*out));
		out->addr = out->offset = ip;
		*complete = false;
		return 1;
	}
	for (int i = 0; i < got; i++) {
		copy_frame(&out[i], &f[i]);
		if (!out[i].module)
			*complete = false;
	}
	return (unsigned int)got;
}

static struct snap_stack *name_stack(struct state *s, struct proc_rec *p, int32_t stack_id,
				     int32_t py_stack_id, bool *complete)
{
	uint64_t ips[GM_MAX_STACK_DEPTH];
	uint32_t n = state_stack_ips(s, p, stack_id, ips), count = 0, kept = 0;
	struct snap_stack *st = xcalloc(1, sizeof(*st) + ((size_t)n * SYM_MAX_INLINE + 1 +
							   GM_PY_MAX_FRAMES + 1) *
						   sizeof(struct snap_frame));

	st->refs = 1;
	*complete = n > 0 || stack_id < 0;
	for (uint32_t i = 0; i < n; i++)
		count += name_address(s, p, ips[i], &st->frames[count], complete);
	for (uint32_t i = 0; i < count; i++) {
		struct snap_frame *f = &st->frames[i];

		if (f->symbol && !s->opt.no_demangle)
			f->symbol = symbolizer_demangle(s->sym, f->symbol);
	}
	if (!s->opt.all_frames) {
		for (uint32_t i = 0; i < count; i++)
			if (!is_cuda_frame(&st->frames[i]))
				st->frames[kept++] = st->frames[i];
		if (kept)
			count = kept;
	}
	if (s->py)
		python_merge(s->py, p->pid, py_stack_id, st->frames, &count);
	st->nframes = count;
	return st;
}

/* ---- one site per named chain ---------------------------------------------------------- */

/* A chain of frames as named, and the first stack of the process that was named so. */
struct site_chain {
	uint64_t hash;		/* 0: an empty slot */
	int32_t stack_id, py_stack_id;
	struct snap_stack *stack;	/* a reference */
};

static uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001b3ull;
}

static uint64_t mix_str(uint64_t h, const char *str)
{
	if (!str)
		return mix(h, 0x9e37);
	for (; *str; str++)
		h = mix(h, (unsigned char)*str);
	return mix(h, 0xff);
}

/* What names a frame: its module, function, file and line; where no line is known, the
 * function and the offset in it, or the offset in the module. */
static uint64_t frame_hash(uint64_t h, const struct snap_frame *f)
{
	h = mix(h, f->python | (uint64_t)f->inlined << 1);
	h = mix_str(h, f->module);
	h = mix_str(h, f->symbol);
	h = mix_str(h, f->file);
	if (f->line)
		return mix(h, f->line);
	if (!f->module)
		return mix(h, f->addr);
	return mix(h, f->symbol ? f->symbol_offset : f->offset);
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool frame_eq(const struct snap_frame *a, const struct snap_frame *b)
{
	if (a->python != b->python || a->inlined != b->inlined || a->line != b->line ||
	    !str_eq(a->module, b->module) || !str_eq(a->symbol, b->symbol) ||
	    !str_eq(a->file, b->file))
		return false;
	if (a->line)
		return true;
	if (!a->module)
		return a->addr == b->addr;
	return a->symbol ? a->symbol_offset == b->symbol_offset : a->offset == b->offset;
}

static uint64_t chain_hash(const struct snap_stack *st)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint32_t i = 0; i < st->nframes; i++)
		h = frame_hash(h, &st->frames[i]);
	return mix(h, st->nframes) | 1;	/* never 0, the empty slot */
}

static bool chain_eq(const struct snap_stack *a, const struct snap_stack *b)
{
	if (a->nframes != b->nframes)
		return false;
	for (uint32_t i = 0; i < a->nframes; i++)
		if (!frame_eq(&a->frames[i], &b->frames[i]))
			return false;
	return true;
}

static void chains_grow(struct proc_rec *p)
{
	struct site_chain *old = p->chains;
	size_t old_cap = p->chains_cap;

	p->chains_cap = old_cap ? 2 * old_cap : 64;
	p->chains = xcalloc(p->chains_cap, sizeof(*p->chains));
	for (size_t i = 0; i < old_cap; i++) {
		size_t j = old[i].hash & (p->chains_cap - 1);

		if (!old[i].hash)
			continue;
		while (p->chains[j].hash)
			j = (j + 1) & (p->chains_cap - 1);
		p->chains[j] = old[i];
	}
	free(old);
}

/* Which site ns counts in: the first stack of p named as it is now. */
static void find_site(struct state *s, struct proc_rec *p, struct named_stack *ns)
{
	uint64_t h;
	size_t j;

	ns->site_stack_id = ns->stack_id;
	ns->site_py_stack_id = ns->py_stack_id;
	if (s->opt.by_address || !ns->stack || !ns->stack->nframes)
		return;	/* no frames: nothing names it, so nothing is the same site */
	if (2 * (p->nchains + 1) > p->chains_cap)
		chains_grow(p);
	h = chain_hash(ns->stack);
	for (j = h & (p->chains_cap - 1); p->chains[j].hash; j = (j + 1) & (p->chains_cap - 1)) {
		const struct site_chain *c = &p->chains[j];

		if (c->hash == h && chain_eq(c->stack, ns->stack)) {
			ns->site_stack_id = c->stack_id;
			ns->site_py_stack_id = c->py_stack_id;
			return;
		}
	}
	p->chains[j] = (struct site_chain){ .hash = h, .stack_id = ns->stack_id,
					    .py_stack_id = ns->py_stack_id,
					    .stack = snap_stack_get(ns->stack) };
	p->nchains++;
}

void site_chains_free(struct proc_rec *p)
{
	for (size_t i = 0; i < p->chains_cap; i++)
		if (p->chains[i].hash)
			snap_stack_put(p->chains[i].stack);
	free(p->chains);
	p->chains = NULL;
	p->chains_cap = p->nchains = 0;
}

static int named_cmp(const void *key, const void *elem)
{
	const int32_t *id = key;
	const struct named_stack *other = elem;

	if (id[0] != other->stack_id)
		return id[0] > other->stack_id ? 1 : -1;
	return (id[1] > other->py_stack_id) - (id[1] < other->py_stack_id);
}

struct snap_stack *state_named_stack(struct state *s, struct proc_rec *p, int32_t stack_id,
				     int32_t py_stack_id)
{
	int32_t key[2] = { stack_id, py_stack_id < 0 ? -1 : py_stack_id };
	struct named_stack *ns = p->nnamed ? bsearch(key, p->named, p->nnamed,
						     sizeof(*p->named), named_cmp) : NULL;
	size_t at = 0;
	bool complete;

	py_stack_id = key[1];

	/* Named again only when it may come out better: a new module map (an ended process's
	 * exit-time map), or, while the process lives, code it may have loaded since. */
	if (ns && (ns->complete || (ns->maps_gen == p->maps_gen &&
				    (!p->alive || now_ns() - ns->named_ns < STACK_RENAME_NS))))
		return snap_stack_get(ns->stack);
	if (ns) {
		snap_stack_put(ns->stack);
		ns->stack = name_stack(s, p, stack_id, py_stack_id, &ns->complete);
		ns->named_ns = now_ns();
		ns->maps_gen = p->maps_gen;
		find_site(s, p, ns);
		return snap_stack_get(ns->stack);
	}
	while (at < p->nnamed && named_cmp(key, &p->named[at]) > 0)
		at++;
	p->named = xrealloc(p->named, (p->nnamed + 1) * sizeof(*p->named));
	memmove(&p->named[at + 1], &p->named[at], (p->nnamed - at) * sizeof(*p->named));
	p->nnamed++;
	ns = &p->named[at];
	ns->stack_id = stack_id;
	ns->py_stack_id = py_stack_id;
	ns->stack = name_stack(s, p, stack_id, py_stack_id, &complete);
	ns->complete = complete;
	ns->named_ns = now_ns();
	ns->maps_gen = p->maps_gen;
	find_site(s, p, ns);
	return snap_stack_get(ns->stack);
}

bool state_event_named(struct state *s, const struct gm_call_event *e)
{
	struct proc_rec *p = state_proc(s, (int)e->pid, e->gen, e->start_ns);
	struct snap_stack *st;
	bool whole = true;

	if (p->exit_known)
		return true;
	st = state_named_stack(s, p, e->stack_id, e->py_stack_id);
	for (uint32_t i = 0; st && i < st->nframes; i++)
		if (!st->frames[i].python && !st->frames[i].module)
			whole = false;
	snap_stack_put(st);
	return whole;
}

void state_site_ids(struct state *s, struct proc_rec *p, int32_t *stack_id,
		    int32_t *py_stack_id)
{
	int32_t key[2] = { *stack_id, *py_stack_id < 0 ? -1 : *py_stack_id };
	const struct named_stack *ns;

	snap_stack_put(state_named_stack(s, p, key[0], key[1]));
	ns = bsearch(key, p->named, p->nnamed, sizeof(*p->named), named_cmp);
	if (ns) {
		*stack_id = ns->site_stack_id;
		*py_stack_id = ns->site_py_stack_id;
	}
}

static void stats_add(struct gm_site_stats *a, const struct gm_site_stats *b)
{
	a->current_bytes += b->current_bytes;
	a->current_allocs += b->current_allocs;
	a->alloc_count += b->alloc_count;
	a->free_count += b->free_count;
	a->alloc_bytes_total += b->alloc_bytes_total;
	a->failed_count += b->failed_count;
}

/* The order of a process's sites by the site they count in; 0: one group. */
static int group_key_cmp(const struct site_rec *x, const struct site_rec *y)
{
	if (x->site_stack_id != y->site_stack_id)
		return x->site_stack_id < y->site_stack_id ? -1 : 1;
	if (x->site_py_stack_id != y->site_py_stack_id)
		return x->site_py_stack_id < y->site_py_stack_id ? -1 : 1;
	if (x->key.api != y->key.api)
		return x->key.api < y->key.api ? -1 : 1;
	if (x->key.kind != y->key.kind)
		return x->key.kind < y->key.kind ? -1 : 1;
	if (x->key.gpu != y->key.gpu)
		return x->key.gpu < y->key.gpu ? -1 : 1;
	return 0;
}

static int group_cmp(const void *a, const void *b)
{
	const struct site_rec *x = *(struct site_rec *const *)a, *y = *(struct site_rec *const *)b;
	int c = group_key_cmp(x, y);

	return c ? c : (x > y) - (x < y);	/* a group's first record first */
}

void state_group_sites(struct state *s, struct proc_rec *p)
{
	struct site_rec **by_group, *first;

	for (size_t i = 0; i < p->nsites; i++) {
		struct site_rec *r = &p->sites[i];

		r->site_stack_id = r->key.stack_id;
		r->site_py_stack_id = r->key.py_stack_id;
		state_site_ids(s, p, &r->site_stack_id, &r->site_py_stack_id);
		r->group = i;
		r->group_st = r->st;
	}
	if (p->nsites < 2 || s->opt.by_address)
		return;
	by_group = xcalloc(p->nsites, sizeof(*by_group));
	for (size_t i = 0; i < p->nsites; i++)
		by_group[i] = &p->sites[i];
	qsort(by_group, p->nsites, sizeof(*by_group), group_cmp);
	first = by_group[0];
	for (size_t i = 1; i < p->nsites; i++) {
		struct site_rec *r = by_group[i];

		if (group_key_cmp(first, r)) {
			first = r;
			continue;
		}
		r->group = (size_t)(first - p->sites);
		stats_add(&first->group_st, &r->st);
	}
	free(by_group);
}
