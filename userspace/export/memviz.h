/* SPDX-License-Identifier: GPL-2.0 */
/* What memviz.c keeps of each process while the export runs, and memviz_pickle.c writes at
 * its end. */
#ifndef GPUMEM_MEMVIZ_H
#define GPUMEM_MEMVIZ_H

#include <stdint.h>
#include "export/exporters.h"
#include "export/intern.h"
#include "export/timeline.h"

#define MEMVIZ_MAX_ENTRIES 100000	/* trace entries kept per process: the last ones */

enum mv_action {
	MV_SEGMENT_ALLOC, MV_ALLOC, MV_FREE_REQUESTED, MV_FREE_COMPLETED, MV_SEGMENT_FREE, MV_OOM,
};

struct mv_entry {
	uint64_t addr, size, wall_ns;
	struct snap_stack *stack;	/* a reference; NULL: none recorded */
	uint8_t action;			/* enum mv_action */
	uint8_t device;			/* its device; not known: 0 */
	bool tensor;			/* a PyTorch tensor's (a block), else a segment's */
};

/* The device memory_viz shows a site's memory on: its own, 0 when not known. */
static inline uint8_t memviz_device(uint32_t gpu)
{
	return gpu && gpu <= GM_MAX_GPUS ? (uint8_t)(gpu - 1) : 0;
}

/* A process's trace: a ring once it is full (head is then the oldest). */
struct mv_proc {
	struct mv_entry *ring;
	size_t n, cap, head;
	uint64_t dropped;
};

struct memviz {
	int dirfd;
	struct timeline tl;
	struct intern names;	/* file names already written */
};

const char *memviz_action_name(enum mv_action a);
/* Writes p's pickle into the directory; nothing for a process that has no GPU allocation
 * and no trace. Returns 0 or -errno after one p_err(). */
int memviz_write_process(const struct exporter *x, struct memviz *m, const struct tl_proc *p);

#endif
