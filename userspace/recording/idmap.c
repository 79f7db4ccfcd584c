// SPDX-License-Identifier: GPL-2.0
/* The pair-keyed hash map of idmap.h: grown at 3/4 full, no tombstones. */
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "recording/idmap.h"

static size_t hash_of(uint64_t k1, uint64_t k2)
{
	uint64_t h = k1 * 0x9e3779b97f4a7c15ull ^ (k2 + 0x632be59bd9b4e019ull);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 29;
	return (size_t)h;
}

struct idmap_slot *idmap_find(const struct idmap *m, uint64_t k1, uint64_t k2)
{
	if (!m->cap)
		return NULL;
	for (size_t i = hash_of(k1, k2) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct idmap_slot *s = &m->slots[i];

		if (!s->k1)
			return NULL;
		if (s->k1 == k1 && s->k2 == k2)
			return s;
	}
}

static struct idmap_slot *insert_new(struct idmap *m, const struct idmap_slot *e)
{
	size_t i = hash_of(e->k1, e->k2) & (m->cap - 1);

	while (m->slots[i].k1)
		i = (i + 1) & (m->cap - 1);
	m->slots[i] = *e;
	m->n++;
	return &m->slots[i];
}

static void grow(struct idmap *m)
{
	struct idmap_slot *old = m->slots;
	size_t old_cap = m->cap;

	m->cap = m->cap ? 2 * m->cap : 64;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
	m->n = 0;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].k1)
			insert_new(m, &old[i]);
	free(old);
}

struct idmap_slot *idmap_put(struct idmap *m, uint64_t k1, uint64_t k2, uint64_t v,
			     uint64_t v2)
{
	struct idmap_slot *found = idmap_find(m, k1, k2), e = { k1, k2, v, v2 };

	if (found) {
		*found = e;
		return found;
	}
	if (4 * (m->n + 1) > 3 * m->cap)
		grow(m);
	return insert_new(m, &e);
}

bool idmap_del(struct idmap *m, uint64_t k1, uint64_t k2, struct idmap_slot *out)
{
	struct idmap_slot *found = idmap_find(m, k1, k2);
	size_t mask = m->cap - 1, hole;

	if (!found)
		return false;
	if (out)
		*out = *found;
	hole = (size_t)(found - m->slots);
	/* Backward shift: every later entry of the run that may move into the hole does. */
	for (size_t i = (hole + 1) & mask; m->slots[i].k1; i = (i + 1) & mask) {
		size_t home = hash_of(m->slots[i].k1, m->slots[i].k2) & mask;

		if (((i - home) & mask) >= ((i - hole) & mask)) {
			m->slots[hole] = m->slots[i];
			hole = i;
		}
	}
	m->slots[hole] = (struct idmap_slot){ 0 };
	m->n--;
	return true;
}

void idmap_clear(struct idmap *m)
{
	if (m->cap)
		memset(m->slots, 0, m->cap * sizeof(*m->slots));
	m->n = 0;
}

void idmap_free(struct idmap *m)
{
	free(m->slots);
	*m = (struct idmap){ 0 };
}
