// SPDX-License-Identifier: GPL-2.0
/* The intern table: keys copied once, found again by an FNV-1a hash with linear probing. */
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "export/intern.h"

static uint64_t hash_bytes(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static bool same(const struct intern_key *k, const void *key, size_t len)
{
	return k->len == len && (!len || !memcmp(k->data, key, len));
}

/* The slot that holds key, or the empty one where it would go. */
static size_t probe(const struct intern *t, const void *key, size_t len)
{
	size_t i = hash_bytes(key, len) & (t->nslots - 1);

	while (t->slots[i] && !same(&t->keys[t->slots[i] - 1], key, len))
		i = (i + 1) & (t->nslots - 1);
	return i;
}

static void grow(struct intern *t)
{
	size_t old = t->nslots;
	uint32_t *slots = t->slots;

	t->nslots = old ? old * 2 : 64;
	t->slots = xcalloc(t->nslots, sizeof(*t->slots));
	for (size_t i = 0; i < t->n; i++)
		t->slots[probe(t, t->keys[i].data, t->keys[i].len)] = (uint32_t)i + 1;
	free(slots);
}

int64_t intern_find(const struct intern *t, const void *key, size_t len)
{
	size_t i;

	if (!t->nslots)
		return -1;
	i = probe(t, key, len);
	return t->slots[i] ? (int64_t)t->slots[i] - 1 : -1;
}

uint32_t intern(struct intern *t, const void *key, size_t len, bool *added)
{
	size_t i;

	if ((t->n + 1) * 2 > t->nslots)
		grow(t);
	i = probe(t, key, len);
	if (added)
		*added = !t->slots[i];
	if (t->slots[i])
		return t->slots[i] - 1;
	if (t->n == t->keys_cap) {
		t->keys_cap = t->keys_cap ? t->keys_cap * 2 : 64;
		t->keys = xrealloc(t->keys, t->keys_cap * sizeof(*t->keys));
	}
	t->keys[t->n].data = xcalloc(1, len + 1);	/* NUL-terminated: a string key reads as one */
	memcpy(t->keys[t->n].data, key, len);
	t->keys[t->n].len = len;
	t->slots[i] = (uint32_t)++t->n;
	return (uint32_t)(t->n - 1);
}

uint32_t intern_str(struct intern *t, const char *s)
{
	return intern(t, s ? s : "", s ? strlen(s) : 0, NULL);
}

void intern_free(struct intern *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->keys[i].data);
	free(t->keys);
	free(t->slots);
	*t = (struct intern){ 0 };
}
