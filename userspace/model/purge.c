// SPDX-License-Identifier: GPL-2.0
/* The set of ended processes whose allocation entries wait for the next purge walk: an open
 * addressing set of (tgid, gen), with when the first one came and how many entries wait. */
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "model/purge.h"

struct purge {
	uint64_t *slots;	/* tgid << 32 | gen; gen is never 0, so 0 is an empty slot */
	size_t cap, used;
	uint64_t entries;
	uint64_t since_ns;	/* when the oldest waiting process was added */
};

static uint64_t key_of(uint32_t tgid, uint32_t gen)
{
	return (uint64_t)tgid << 32 | (gen ? gen : 1);
}

static size_t slot_of(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

struct purge *purge_new(void)
{
	return xcalloc(1, sizeof(struct purge));
}

void purge_free(struct purge *pg)
{
	if (!pg)
		return;
	free(pg->slots);
	free(pg);
}

static void insert(uint64_t *slots, size_t cap, uint64_t key)
{
	size_t i = slot_of(key, cap);

	while (slots[i] && slots[i] != key)
		i = (i + 1) & (cap - 1);
	slots[i] = key;
}

static void grow(struct purge *pg)
{
	size_t cap = pg->cap ? 2 * pg->cap : 64;
	uint64_t *slots = xcalloc(cap, sizeof(*slots));

	for (size_t i = 0; i < pg->cap; i++)
		if (pg->slots[i])
			insert(slots, cap, pg->slots[i]);
	free(pg->slots);
	pg->slots = slots;
	pg->cap = cap;
}

bool purge_has(const struct purge *pg, uint32_t tgid, uint32_t gen)
{
	uint64_t key = key_of(tgid, gen);
	size_t i;

	if (!pg->used)
		return false;
	for (i = slot_of(key, pg->cap); pg->slots[i]; i = (i + 1) & (pg->cap - 1))
		if (pg->slots[i] == key)
			return true;
	return false;
}

void purge_add(struct purge *pg, uint32_t tgid, uint32_t gen, uint64_t entries, uint64_t now)
{
	if (purge_has(pg, tgid, gen))
		return;
	if (2 * (pg->used + 1) > pg->cap)
		grow(pg);
	insert(pg->slots, pg->cap, key_of(tgid, gen));
	if (!pg->used)
		pg->since_ns = now;
	pg->used++;
	pg->entries += entries;
}

bool purge_due(const struct purge *pg, uint64_t now, uint64_t capacity)
{
	if (!pg->used)
		return false;
	return now - pg->since_ns >= PURGE_DELAY_NS ||
	       pg->entries * PURGE_CAPACITY_SHARE >= capacity;
}

size_t purge_pending(const struct purge *pg)
{
	return pg->used;
}

uint64_t purge_entries(const struct purge *pg)
{
	return pg->entries;
}

void purge_clear(struct purge *pg)
{
	if (pg->cap)
		memset(pg->slots, 0, pg->cap * sizeof(*pg->slots));
	pg->used = 0;
	pg->entries = 0;
}
