/* SPDX-License-Identifier: GPL-2.0 */
/* The site table (the sites map: open addressing in an array, gpumem.h), mapped and walked in
 * place; the entries of ended processes are taken out by the compare-and-swap the BPF programs
 * use. */
#ifndef GPUMEM_SITE_TABLE_H
#define GPUMEM_SITE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpumem.h"

struct site_table {
	struct gm_site_slot *slots;	/* NULL: not mapped */
	uint32_t nslots;		/* a power of two */
	size_t len;
	bool writable;
};

/* An entry as a walk saw it: where it is, and its state then (site_table_take's proof). */
struct site_ref {
	uint32_t idx;
	uint32_t seen;
};

/* Maps the table of sites map fd (read only unless writable); -errno on failure, with the
 * table left unmapped. */
int site_table_open(struct site_table *t, int fd, bool writable);
void site_table_close(struct site_table *t);

/* cb for every live entry, its key and numbers read between two loads of its state (an entry
 * made or taken out meanwhile is skipped); returns how many were live. */
typedef void (*site_walk_fn)(void *ctx, struct site_ref ref, const struct gm_site_key *key,
			     const struct gm_site_stats *stats);
uint64_t site_table_walk(const struct site_table *t, site_walk_fn cb, void *ctx);

/* The key of the live entry in slot idx (an allocation's gm_alloc_info.site): false when there
 * is none. */
bool site_table_key(const struct site_table *t, uint32_t idx, struct gm_site_key *key);

/* The slot holding key live, its numbers in *stats and its state in *ref (either may be NULL);
 * -ENOENT when there is none. */
int site_table_find(const struct site_table *t, const struct gm_site_key *key,
		    struct gm_site_stats *stats, struct site_ref *ref);

/* Takes the entry out if it is still the one the walk saw: true when this call did. */
bool site_table_take(struct site_table *t, struct site_ref ref);

/* An entry made as the BPF programs make one (the unit tests' way in): its slot, or -EEXIST
 * when key is live, -ENOSPC when none of its GM_SITE_PROBES slots is free, -EPERM when the
 * table is not mapped writable. */
int site_table_insert(struct site_table *t, const struct gm_site_key *key,
		      const struct gm_site_stats *stats);

#endif
