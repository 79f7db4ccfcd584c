// SPDX-License-Identifier: GPL-2.0
/* The pickle of one process for --format memviz: {"segments": [...], "device_traces": [[...]],
 * "gpumem": {...}}, the keys and value types of torch.cuda.memory._snapshot(). A stack's
 * frames are written once and referred to through the pickle memo after that. A process with
 * PyTorch's tensors has them as the blocks of its segments; without, each segment is one
 * block. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "export/memviz.h"
#include "export/pickle.h"

struct writer {
	struct pickle pk;
	struct intern stacks;	/* stack pointers written: index -> memo id */
	uint32_t *memo;
	size_t memo_cap;
	const struct tl_proc *p;
	const struct tl_alloc **tensors;	/* live tensors, by address */
	size_t ntensors, tensors_placed, ntensors_total;
};

static void kv_str(struct pickle *pk, const char *key, const char *value)
{
	pk_str(pk, key);
	pk_str(pk, value);
}

static void kv_uint(struct pickle *pk, const char *key, uint64_t value)
{
	pk_str(pk, key);
	pk_uint(pk, value);
}

/* [{"filename", "line", "name"}], innermost first, as PyTorch's frames are. */
static void frames(struct writer *w, const struct snap_stack *st)
{
	char name[512];
	bool added;
	uint32_t i = intern(&w->stacks, &st, sizeof(st), &added);

	if (!added) {
		pk_memo_get(&w->pk, w->memo[i]);
		return;
	}
	if (i >= w->memo_cap) {
		w->memo_cap = w->memo_cap ? w->memo_cap * 2 : 64;
		w->memo = xrealloc(w->memo, w->memo_cap * sizeof(*w->memo));
	}
	pk_list_begin(&w->pk);
	for (uint32_t j = 0; st && j < st->nframes; j++) {
		const struct snap_frame *f = &st->frames[j];

		pk_dict_begin(&w->pk);
		kv_str(&w->pk, "filename", f->file ? f->file : f->module ? f->module : "??");
		kv_uint(&w->pk, "line", f->line);
		kv_str(&w->pk, "name", export_frame_name(f, name, sizeof(name)));
		pk_dict_end(&w->pk);
	}
	pk_list_end(&w->pk);
	w->memo[i] = pk_memo_put(&w->pk);
}

static void block(struct writer *w, uint64_t addr, uint64_t size, const char *state,
		  const struct snap_stack *st)
{
	struct pickle *pk = &w->pk;

	pk_dict_begin(pk);
	kv_uint(pk, "address", addr);
	kv_uint(pk, "size", size);
	kv_uint(pk, "requested_size", st ? size : 0);
	kv_str(pk, "state", state);
	pk_str(pk, "frames");
	frames(w, st);
	pk_dict_end(pk);
}

/* The live tensors inside segment a, from *first on (both sorted by address): their bytes;
 * [*first, *end) are those tensors. */
static uint64_t tensors_in(const struct writer *w, const struct tl_alloc *a, size_t *first,
			   size_t *end)
{
	uint64_t bytes = 0;
	size_t i = *first;

	while (i < w->ntensors && w->tensors[i]->addr < a->addr)
		i++;
	*first = i;
	for (; i < w->ntensors && w->tensors[i]->addr + w->tensors[i]->size <= a->addr + a->size;
	     i++)
		bytes += w->tensors[i]->size;
	*end = i;
	return bytes;
}

/* A segment's blocks: its tensors with the room between them inactive, or (no tensors in the
 * process) the whole segment as one block. */
static void blocks(struct writer *w, const struct tl_alloc *a, size_t first, size_t end)
{
	uint64_t at = a->addr;

	pk_str(&w->pk, "blocks");
	pk_list_begin(&w->pk);
	if (!w->p->has_tensors)
		block(w, a->addr, a->size, "active_allocated", w->p->sites[a->site].stack);
	for (size_t i = first; w->p->has_tensors && i < end; i++) {
		const struct tl_alloc *t = w->tensors[i];

		if (t->addr > at)
			block(w, at, t->addr - at, "inactive", NULL);
		block(w, t->addr, t->size, "active_allocated", w->p->sites[t->site].stack);
		at = t->addr + t->size;
	}
	if (w->p->has_tensors && at < a->addr + a->size)
		block(w, at, a->addr + a->size - at, "inactive", NULL);
	pk_list_end(&w->pk);
}

static void segment(struct writer *w, const struct tl_alloc *a, size_t *next)
{
	const struct snap_stack *st = w->p->sites[a->site].stack;
	struct pickle *pk = &w->pk;
	size_t first = *next, end = first;
	uint64_t used = w->p->has_tensors ? tensors_in(w, a, &first, &end) : a->size;

	*next = end;
	w->tensors_placed += end - first;
	pk_dict_begin(pk);
	kv_uint(pk, "device", memviz_device(w->p->sites[a->site].gpu));
	kv_uint(pk, "address", a->addr);
	kv_uint(pk, "total_size", a->size);
	kv_uint(pk, "allocated_size", used);
	kv_uint(pk, "active_size", used);
	kv_uint(pk, "requested_size", used);
	kv_uint(pk, "stream", 0);
	kv_str(pk, "segment_type", "large");
	pk_str(pk, "is_expandable");
	pk_bool(pk, false);
	pk_str(pk, "frames");
	frames(w, st);
	blocks(w, a, first, end);
	pk_dict_end(pk);
}

struct live_list {
	const struct tl_alloc **a;
	size_t n;
};

static void collect(const struct tl_proc *p, const struct tl_alloc *a, void *ctx)
{
	struct live_list *l = ctx;

	if (!a->tensor && export_kind_is_gpu(p->sites[a->site].kind))
		l->a[l->n++] = a;
}

static void collect_tensors(const struct tl_proc *p, const struct tl_alloc *a, void *ctx)
{
	struct live_list *l = ctx;

	(void)p;
	if (a->tensor)
		l->a[l->n++] = a;
}

static int by_address(const void *a, const void *b)
{
	uint64_t x = (*(const struct tl_alloc *const *)a)->addr;
	uint64_t y = (*(const struct tl_alloc *const *)b)->addr;

	return x < y ? -1 : x > y;
}

/* "segments": the GPU allocations live at the end, by address. */
static void segments(struct writer *w)
{
	struct live_list l = { .a = xcalloc(w->p->nlive + 1, sizeof(*l.a)) };
	struct live_list t = { .a = xcalloc(w->p->nlive + 1, sizeof(*t.a)) };
	size_t next = 0;

	timeline_for_each_live(w->p, collect, &l);
	timeline_for_each_live(w->p, collect_tensors, &t);
	qsort(l.a, l.n, sizeof(*l.a), by_address);
	qsort(t.a, t.n, sizeof(*t.a), by_address);
	w->tensors = t.a;
	w->ntensors = w->ntensors_total = t.n;
	pk_str(&w->pk, "segments");
	pk_list_begin(&w->pk);
	for (size_t i = 0; i < l.n; i++)
		segment(w, l.a[i], &next);
	pk_list_end(&w->pk);
	free(l.a);
	free(t.a);
	w->tensors = NULL;
}

static void entry(struct writer *w, const struct mv_entry *e)
{
	struct pickle *pk = &w->pk;

	pk_dict_begin(pk);
	kv_str(pk, "action", memviz_action_name(e->action));
	if (e->action == MV_OOM)
		kv_uint(pk, "device_free", 0);	/* not known: gpumem has no device query here */
	else
		kv_uint(pk, "addr", e->addr);
	kv_uint(pk, "size", e->size);
	kv_uint(pk, "stream", 0);
	kv_uint(pk, "time_us", e->wall_ns / 1000);
	pk_str(pk, "frames");
	frames(w, e->stack);
	pk_dict_end(pk);
}

/* "device_traces": one list per device, 0 up to the highest one an entry has (a device not
 * known is 0). */
static void device_traces(struct writer *w)
{
	const struct mv_proc *mp = w->p->priv;
	unsigned int devices = 1;

	for (size_t i = 0; mp && i < mp->n; i++)
		if (mp->ring[i].device >= devices)
			devices = mp->ring[i].device + 1u;
	/* A segment's device gets a list even when its entries left the ring: memory_viz offers
	 * the devices device_traces has. */
	for (size_t i = 0; i < w->p->site_keys.n; i++)
		if (w->p->sites[i].bytes && memviz_device(w->p->sites[i].gpu) >= devices)
			devices = memviz_device(w->p->sites[i].gpu) + 1u;
	pk_str(&w->pk, "device_traces");
	pk_list_begin(&w->pk);
	for (unsigned int d = 0; d < devices; d++) {
		pk_list_begin(&w->pk);
		for (size_t i = 0; mp && i < mp->n; i++) {
			const struct mv_entry *e = &mp->ring[(mp->head + i) % mp->n];

			/* With tensors, a segment's own block actions are left out: its blocks
			 * are them. */
			if (e->device != d || (w->p->has_tensors && !e->tensor &&
					       e->action != MV_SEGMENT_ALLOC &&
					       e->action != MV_SEGMENT_FREE && e->action != MV_OOM))
				continue;
			entry(w, e);
		}
		pk_list_end(&w->pk);
	}
	pk_list_end(&w->pk);
}

/* What gpumem adds: who this is, and what the trace is missing. */
static void about(struct writer *w)
{
	const struct tl_proc *p = w->p;
	const struct mv_proc *mp = p->priv;
	struct pickle *pk = &w->pk;

	pk_str(pk, "gpumem");
	pk_dict_begin(pk);
	kv_uint(pk, "pid", (uint64_t)p->pid);
	kv_str(pk, "comm", p->comm);
	kv_str(pk, "container", p->has_container && p->container.has_id ? p->container.id : NULL);
	kv_str(pk, "pod", p->has_container && p->container.has_pod ? p->container.pod_uid : NULL);
	pk_str(pk, "ended");
	pk_bool(pk, p->ended);
	kv_uint(pk, "dropped_trace_entries", mp ? mp->dropped : 0);
	kv_uint(pk, "unmatched_frees", p->unmatched_frees);
	/* live tensors in no live segment (it was allocated before the events were streamed) */
	kv_uint(pk, "tensors_outside_segments", w->ntensors_total - w->tensors_placed);
	kv_str(pk, "device", "its own where known; a device not known is shown as 0");
	pk_dict_end(pk);
}

/* PID-COMM.pickle, the comm reduced to [A-Za-z0-9._-]; a pid seen again gets -2, -3... */
static void file_name(struct memviz *m, const struct tl_proc *p, char *buf, size_t len)
{
	char comm[GM_COMM_LEN + 1];
	bool added = false;

	snprintf(comm, sizeof(comm), "%s", p->comm[0] ? p->comm : "unknown");
	for (char *c = comm; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-'))
			*c = '_';
	snprintf(buf, len, "%d-%s.pickle", p->pid, comm);
	intern(&m->names, buf, strlen(buf), &added);
	for (unsigned int n = 2; !added; n++) {
		snprintf(buf, len, "%d-%s-%u.pickle", p->pid, comm, n);
		intern(&m->names, buf, strlen(buf), &added);
	}
}

static bool has_gpu_memory(const struct tl_proc *p)
{
	for (size_t i = 0; i < p->live_cap; i++)
		if (p->live[i].used && export_kind_is_gpu(p->sites[p->live[i].site].kind))
			return true;
	return false;
}

int memviz_write_process(const struct exporter *x, struct memviz *m, const struct tl_proc *p)
{
	struct writer w = { .p = p };
	char name[64], shown[4096];
	FILE *f;
	int err;

	if (!p->priv && !has_gpu_memory(p))
		return 0;
	pk_begin(&w.pk);
	pk_dict_begin(&w.pk);
	segments(&w);
	device_traces(&w);
	about(&w);
	pk_dict_end(&w.pk);
	pk_end(&w.pk);
	file_name(m, p, name, sizeof(name));
	snprintf(shown, sizeof(shown), "%s/%s", x->path, name);
	f = outfile_create_in(m->dirfd, x->path, name);
	err = f ? 0 : -EIO;
	if (f && fwrite(w.pk.data, 1, w.pk.len, f) != w.pk.len)
		err = -EIO;	/* outfile_close says what went wrong */
	if (f && outfile_close(f, shown))
		err = -EIO;
	pk_free(&w.pk);
	intern_free(&w.stacks);
	free(w.memo);
	return err;
}
