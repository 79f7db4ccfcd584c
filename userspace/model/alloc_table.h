/* SPDX-License-Identifier: GPL-2.0 */
/* The allocation table (the allocs map: open addressing in an array, gpumem.h), mapped and
 * walked in place; entries are taken out by the compare-and-swap the BPF programs use. */
#ifndef GPUMEM_ALLOC_TABLE_H
#define GPUMEM_ALLOC_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpumem.h"

struct alloc_table {
	struct gm_alloc_slot *slots;	/* NULL: not mapped */
	uint32_t nslots;		/* a power of two */
	size_t len;
	bool writable;
};

/* An entry as a walk saw it: where it is, and its state then (alloc_table_take's proof). */
struct alloc_ref {
	uint32_t idx;
	uint32_t seen;
};

/* Maps the table of allocs map fd (read only unless writable); -errno on failure, with the
 * table left unmapped. */
int alloc_table_open(struct alloc_table *t, int fd, bool writable);
void alloc_table_close(struct alloc_table *t);

/* cb for every live entry, each seen whole (an entry changing under the walk is skipped: it is
 * being made or freed); returns how many were live. */
typedef void (*alloc_walk_fn)(void *ctx, struct alloc_ref ref, const struct gm_alloc_key *key,
			      const struct gm_alloc_info *info);
uint64_t alloc_table_walk(const struct alloc_table *t, alloc_walk_fn cb, void *ctx);

/* Takes the entry out if it is still the one the walk saw: true when this call did. */
bool alloc_table_take(struct alloc_table *t, struct alloc_ref ref);

/* An entry made as the BPF programs make one (the unit tests' way in): 0 when made live;
 * -EEXIST when key is live; -ENOSPC when none of its GM_ALLOC_PROBES slots is free. */
int alloc_table_insert(struct alloc_table *t, const struct gm_alloc_key *key,
		       const struct gm_alloc_info *info);
/* 0 and *info when key is live; -ENOENT when not. */
int alloc_table_find(const struct alloc_table *t, const struct gm_alloc_key *key,
		     struct gm_alloc_info *info, struct alloc_ref *ref);

#endif
