/* SPDX-License-Identifier: GPL-2.0 */
/* A hash map from a pair of 64-bit keys to a pair of 64-bit values (open addressing, linear
 * probing, deletion by backward shift): the recorder's and the reader's in-memory indexes. */
#ifndef GPUMEM_IDMAP_H
#define GPUMEM_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct idmap_slot {
	uint64_t k1, k2;	/* k1 == 0: empty (callers' first keys are never 0) */
	uint64_t v, v2;
};

struct idmap {
	struct idmap_slot *slots;
	size_t cap, n;		/* cap: a power of two */
};

/* The slot of (k1, k2), or NULL. k1 must not be 0. */
struct idmap_slot *idmap_find(const struct idmap *m, uint64_t k1, uint64_t k2);
/* Sets (k1, k2) to (v, v2); returns its slot (valid until the next put or del). */
struct idmap_slot *idmap_put(struct idmap *m, uint64_t k1, uint64_t k2, uint64_t v,
			     uint64_t v2);
/* Removes (k1, k2); returns whether it was there (and its values in *out when out). */
bool idmap_del(struct idmap *m, uint64_t k1, uint64_t k2, struct idmap_slot *out);
void idmap_clear(struct idmap *m);
void idmap_free(struct idmap *m);

#endif
