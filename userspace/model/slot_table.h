/* SPDX-License-Identifier: GPL-2.0 */
/* The tables of call sites and processes (the sites and procs maps: open addressing in an
 * array, gpumem.h), mapped and walked in place; the entries of ended processes are taken out
 * by the compare-and-swap the BPF programs use. A slot is {state, span, key, value}. */
#ifndef GPUMEM_SLOT_TABLE_H
#define GPUMEM_SLOT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpumem.h"

/* What a table's slots hold, after their state and span words. */
struct slot_layout {
	const char *what;		/* "site table", for messages */
	size_t key_size, value_size;
	uint32_t (*home)(const void *key, uint32_t mask);
};
extern const struct slot_layout site_slots;	/* gm_site_slot: gm_site_key, gm_site_stats */
extern const struct slot_layout proc_slots;	/* gm_proc_slot: gm_proc_key, gm_proc_stats */

/* The largest key and value of any layout (a walk's copies). */
#define SLOT_KEY_MAX sizeof(struct gm_site_key)
#define SLOT_VALUE_MAX sizeof(struct gm_proc_stats)

struct slot_table {
	const struct slot_layout *layout;
	unsigned char *slots;		/* NULL: not mapped */
	uint32_t nslots;		/* a power of two */
	size_t len;
	bool writable;
};

/* An entry as a walk saw it: where it is, and its state then (slot_table_take's proof). */
struct slot_ref {
	uint32_t idx;
	uint32_t seen;
};

/* Maps BPF array fd, a table of a power of two of slots of slot_size bytes (read only unless
 * writable): *base, *nslots and *len (what munmap takes); -errno (-EINVAL: the map is no such
 * table). The allocation table's way in too. */
int table_map(int fd, size_t slot_size, bool writable, void **base, uint32_t *nslots,
	      size_t *len);

/* Maps the table of map fd, whose slots are of layout l (read only unless writable); -errno
 * on failure (-EINVAL: the map is no such table), with the table left unmapped. */
int slot_table_open(struct slot_table *t, int fd, bool writable, const struct slot_layout *l);
void slot_table_close(struct slot_table *t);

/* cb for every live entry, its key and value read between two loads of its state (an entry
 * made or taken out meanwhile is skipped); returns how many were live. */
typedef void (*slot_walk_fn)(void *ctx, struct slot_ref ref, const void *key, const void *value);
uint64_t slot_table_walk(const struct slot_table *t, slot_walk_fn cb, void *ctx);

/* The key of the live entry in slot idx (an allocation's gm_alloc_info.site): false when there
 * is none. */
bool slot_table_key(const struct slot_table *t, uint32_t idx, void *key);

/* The slot holding key live, its value in *value and its state in *ref (either may be NULL);
 * -ENOENT when there is none (*value is then undefined). A table that could not be mapped
 * holds nothing. */
int slot_table_find(const struct slot_table *t, const void *key, void *value,
		    struct slot_ref *ref);

/* Takes the entry out if it is still the one the walk saw: true when this call did. */
bool slot_table_take(struct slot_table *t, struct slot_ref ref);

/* An entry made as the BPF programs make one (the unit tests' way in): its slot, or -EEXIST
 * when key is live, -ENOSPC when none of its GM_SLOT_PROBES slots is free, -EPERM when the
 * table is not mapped writable. */
int slot_table_insert(struct slot_table *t, const void *key, const void *value);

#endif
