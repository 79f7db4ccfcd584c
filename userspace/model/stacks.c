// SPDX-License-Identifier: GPL-2.0
/* Naming call stacks for the snapshots: each (process, stack id) once, its addresses expanded
 * into inlined calls, the CUDA libraries' own frames left out (unless --all-frames), names
 * demangled (unless --no-demangle). A stack whose frames did not all find a module is named
 * again, after a re-read of the maps, while its process lives. */
#include <stdlib.h>
#include <string.h>
#include "probes.h"
#include "python.h"
#include "state.h"
#include "symbolize.h"
#include "util.h"

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

	if (is_cuda_module(f->module))
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
	struct frame f[SYM_MAX_INLINE];
	int got = 0;

	if (p->have_mm) {
		/* A library loaded after the map was captured: look again while it lives. */
		if (!module_map_find(&p->mm, ip) && p->alive)
			state_reread_maps(s, p);
		got = symbolize_frames(s->sym, p->pid, &p->mm, ip, true, f, SYM_MAX_INLINE);
	}
	if (got <= 0) {
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
	return snap_stack_get(ns->stack);
}
