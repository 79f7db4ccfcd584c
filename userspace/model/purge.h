/* SPDX-License-Identifier: GPL-2.0 */
/* Ended processes whose live-allocation entries are still in the map, deleted later in one
 * walk for many (purge.c): an end must not cost a walk over every process's allocations. */
#ifndef GPUMEM_PURGE_H
#define GPUMEM_PURGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How long entries may wait, and how many: a walk then deletes them all. */
#define PURGE_DELAY_NS 60000000000ull
#define PURGE_CAPACITY_SHARE 8	/* or once they are an eighth of the map's capacity */

struct purge;

struct purge *purge_new(void);
void purge_free(struct purge *pg);
/* Process (tgid, gen) ended with entries allocation entries left in the map. */
void purge_add(struct purge *pg, uint32_t tgid, uint32_t gen, uint64_t entries, uint64_t now);
bool purge_has(const struct purge *pg, uint32_t tgid, uint32_t gen);
/* Whether a walk is due now, for a map of capacity entries. */
bool purge_due(const struct purge *pg, uint64_t now, uint64_t capacity);
/* Processes and entries waiting. */
size_t purge_pending(const struct purge *pg);
uint64_t purge_entries(const struct purge *pg);
void purge_clear(struct purge *pg);

#endif
