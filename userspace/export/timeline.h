/* SPDX-License-Identifier: GPL-2.0 */
/* The allocations of each process replayed from the call events, for the exporters that draw
 * time (chrome, memviz): what is live, from which call site, and what each site holds and
 * held at most. A free is matched to the allocation it frees; one whose allocation the events
 * never showed (made before they were streamed, or lost) is counted and left out. PyTorch's
 * tensors (events of layer GM_LAYER_TENSOR) are allocations of their own, inside the segments
 * the other allocations are: an address may be a segment's and a tensor's at once. */
#ifndef GPUMEM_TIMELINE_H
#define GPUMEM_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "export/intern.h"
#include "model/snapshot.h"

struct tl_site {
	int32_t stack_id;
	uint32_t api, kind;
	uint32_t gpu;		/* snap_site's: the device + 1 of its memory, 0 not known */
	uint64_t bytes, peak;
	struct snap_stack *stack;	/* of its first allocation (a reference) */
};

struct tl_alloc {
	uint64_t addr, size;
	uint64_t wall_ns;
	uint32_t site;		/* index in the process's sites */
	bool used;		/* a slot of the live table */
	bool tensor;		/* a PyTorch tensor (inside a segment), not a segment */
};

struct tl_proc {
	size_t index;		/* in the timeline, in the order processes first appeared */
	int pid;
	uint32_t gen;		/* which of the pid's processes (gm_proc_gen) */
	bool ended;
	char comm[GM_COMM_LEN + 1];
	struct container_info container;
	bool has_container;
	uint64_t process_bytes;	/* the kernel's count at the last event (GPU-side kinds) */
	uint64_t tensor_bytes;	/* its tensors, as the last tensor event counted them */
	/* What its live allocations of GPU memory hold on each device (the last: not known),
	 * and the devices it ever allocated on (bit g: gpu_bytes[g]). */
	uint64_t gpu_bytes[GM_MAX_GPUS + 1];
	uint32_t gpus;
	bool has_tensors;	/* a tensor event came */
	struct intern site_keys;
	struct tl_site *sites;
	size_t sites_cap;
	struct tl_alloc *live;	/* open addressing by address */
	size_t nlive, live_cap;
	uint64_t unmatched_frees;
	/* Addresses allocated again before the free event of their last allocation arrived: the
	 * kernel claims a free at its entry, so the address was free, but the free's event is
	 * sent at its return, after another thread's allocation of it may be. That allocation
	 * frees the old one here; the late free event, when it comes, is taken as done. */
	uint64_t *early;
	size_t nearly, early_cap;
	void *priv;		/* the exporter's, freed with free_priv */
};

enum tl_what { TL_NONE, TL_ALLOC, TL_FREE, TL_FAILED, TL_EXIT };

struct tl_change {
	enum tl_what what;
	bool tensor;		/* a tensor's allocation or free (layer GM_LAYER_TENSOR) */
	struct tl_proc *p;
	struct tl_site *site;	/* alloc and failure: its site; free: the allocation's */
	struct tl_alloc alloc;	/* alloc: the new one; free: the one it freed */
	/* alloc: the allocation its address still had, freed first (its free event is late) */
	bool early_free;
	struct tl_alloc early;
	struct tl_site *early_site;
};

struct timeline {
	struct tl_proc **procs;	/* every process seen, in order */
	size_t nprocs, procs_cap;
	struct intern pids;	/* pid -> slot of current[] */
	size_t *current;	/* the index of each pid's newest process */
	void (*free_priv)(void *priv);
};

/* Applies one event; out says what it changed (TL_NONE: nothing this replays). */
void timeline_apply(struct timeline *t, const struct snap_event *e, struct tl_change *out);
/* Calls fn on every live allocation of p, in no order. */
void timeline_for_each_live(const struct tl_proc *p,
			    void (*fn)(const struct tl_proc *p, const struct tl_alloc *a, void *ctx),
			    void *ctx);
void timeline_free(struct timeline *t);

#endif
