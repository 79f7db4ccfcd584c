// SPDX-License-Identifier: GPL-2.0
/* --format memviz: PyTorch's memory snapshot, the pickle torch.cuda.memory._dump_snapshot()
 * writes and pytorch.org/memory_viz (and torch/cuda/_memory_viz.py) read: one file per
 * process, PID-COMM.pickle, in the directory -o names. There is no caching allocator below
 * gpumem, so each GPU allocation (device, managed, async, vmm; pinned host memory is left out)
 * is a segment holding one block: its trace is segment_alloc then alloc, and a free is
 * free_requested, free_completed, segment_free; a failed allocation is an oom entry. The
 * segments are what the process held at the end (for a process that ended: when it ended),
 * so replaying the trace backwards from them is consistent. Each process keeps its last
 * MEMVIZ_MAX_ENTRIES trace entries, as PyTorch's max_entries does. gpumem does not know the
 * device of an allocation yet: everything is device 0, stream 0. A process with PyTorch's
 * tensors (its caching allocator's USDT events) is drawn as PyTorch draws it: the segments
 * are what cudaMalloc gave (segment_alloc, segment_free) and their blocks the tensors (alloc,
 * free_requested, free_completed); the choice is made when its pickle is written. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/util.h"
#include "export/exporters.h"
#include "export/memviz.h"
#include "export/timeline.h"

static const char *const action_names[] = {
	[MV_SEGMENT_ALLOC] = "segment_alloc", [MV_ALLOC] = "alloc",
	[MV_FREE_REQUESTED] = "free_requested", [MV_FREE_COMPLETED] = "free_completed",
	[MV_SEGMENT_FREE] = "segment_free", [MV_OOM] = "oom",
};

const char *memviz_action_name(enum mv_action a)
{
	return action_names[a];
}

static void mv_proc_free(void *priv)
{
	struct mv_proc *mp = priv;

	for (size_t i = 0; i < mp->n; i++)
		snap_stack_put(mp->ring[i].stack);
	free(mp->ring);
	free(mp);
}

/* Appends an entry to p's trace; past MEMVIZ_MAX_ENTRIES the oldest goes. */
static void push(struct tl_proc *p, enum mv_action action, const struct snap_event *e,
		 uint64_t addr, uint64_t size, bool tensor, uint32_t gpu)
{
	struct mv_proc *mp = p->priv;
	struct mv_entry *slot;

	if (!mp)
		mp = p->priv = xcalloc(1, sizeof(*mp));
	if (mp->n < MEMVIZ_MAX_ENTRIES) {
		if (mp->n == mp->cap) {
			mp->cap = mp->cap ? mp->cap * 2 : 256;
			mp->ring = xrealloc(mp->ring, mp->cap * sizeof(*mp->ring));
		}
		slot = &mp->ring[mp->n++];
	} else {
		slot = &mp->ring[mp->head];
		mp->head = (mp->head + 1) % MEMVIZ_MAX_ENTRIES;
		snap_stack_put(slot->stack);
		mp->dropped++;
	}
	*slot = (struct mv_entry){ .addr = addr, .size = size, .wall_ns = e->wall_ns,
				   .stack = e->stack ? snap_stack_get(e->stack) : NULL,
				   .action = (uint8_t)action, .device = memviz_device(gpu),
				   .tensor = tensor };
}

static void memviz_event(struct exporter *x, const struct snap_event *e)
{
	struct memviz *m = x->priv;
	struct tl_change ch;
	uint64_t addr, size;
	uint32_t gpu;

	timeline_apply(&m->tl, e, &ch);
	if (ch.what == TL_NONE || ch.what == TL_EXIT || !export_kind_is_gpu(ch.site->kind))
		return;
	gpu = ch.site->gpu;
	addr = ch.alloc.addr;
	size = ch.alloc.size;
	if (ch.tensor) {	/* a block of a segment */
		if (ch.what == TL_ALLOC) {
			push(ch.p, MV_ALLOC, e, addr, size, true, gpu);
		} else {
			push(ch.p, MV_FREE_REQUESTED, e, addr, size, true, gpu);
			push(ch.p, MV_FREE_COMPLETED, e, addr, size, true, gpu);
		}
		return;
	}
	switch (ch.what) {
	case TL_ALLOC:
		if (ch.early_free) {	/* the address's last allocation, whose free is late */
			push(ch.p, MV_FREE_REQUESTED, e, ch.early.addr, ch.early.size, false,
			     ch.early_site->gpu);
			push(ch.p, MV_FREE_COMPLETED, e, ch.early.addr, ch.early.size, false,
			     ch.early_site->gpu);
			push(ch.p, MV_SEGMENT_FREE, e, ch.early.addr, ch.early.size, false,
			     ch.early_site->gpu);
		}
		push(ch.p, MV_SEGMENT_ALLOC, e, addr, size, false, gpu);
		push(ch.p, MV_ALLOC, e, addr, size, false, gpu);
		break;
	case TL_FREE:
		push(ch.p, MV_FREE_REQUESTED, e, addr, size, false, gpu);
		push(ch.p, MV_FREE_COMPLETED, e, addr, size, false, gpu);
		push(ch.p, MV_SEGMENT_FREE, e, addr, size, false, gpu);
		break;
	default:
		push(ch.p, MV_OOM, e, 0, e->ev->size, false, e->ev->gpu);
		break;
	}
}

static int memviz_begin(struct exporter *x)
{
	struct memviz *m = xcalloc(1, sizeof(*m));

	m->dirfd = outfile_open_dir(x->path);
	if (m->dirfd < 0) {
		int err = m->dirfd;

		free(m);
		return err;
	}
	m->tl.free_priv = mv_proc_free;
	x->priv = m;
	return 0;
}

static int memviz_end(struct exporter *x)
{
	struct memviz *m = x->priv;
	int err = 0;

	uint64_t dropped = 0, unmatched = 0;

	for (size_t i = 0; i < m->tl.nprocs; i++) {
		const struct tl_proc *p = m->tl.procs[i];
		int perr = memviz_write_process(x, m, p);

		err = err ? err : perr;
		dropped += p->priv ? ((const struct mv_proc *)p->priv)->dropped : 0;
		unmatched += p->unmatched_frees;
	}
	if (dropped || unmatched)
		fprintf(stderr, "gpumem: memviz: %" PRIu64 " trace entries dropped (each process "
			"keeps its last %d), %" PRIu64 " frees of allocations the events never "
			"showed left out\n", dropped, MEMVIZ_MAX_ENTRIES, unmatched);
	close(m->dirfd);
	timeline_free(&m->tl);
	intern_free(&m->names);
	free(m);
	x->priv = NULL;
	return err;
}

const struct exporter_ops memviz_exporter = {
	.name = "memviz",
	.what = "PyTorch memory_viz snapshots, one pickle per process",
	.wants_events = true,
	.begin = memviz_begin,
	.on_event = memviz_event,
	.end = memviz_end,
};
