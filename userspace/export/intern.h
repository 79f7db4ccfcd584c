/* SPDX-License-Identifier: GPL-2.0 */
/* An intern table: each distinct key (bytes) gets the next index, 0, 1, 2... in the order
 * first seen, and keeps it; the keys can be walked in that order. The exporters number their
 * strings, functions, locations and tracks with it. */
#ifndef GPUMEM_INTERN_H
#define GPUMEM_INTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct intern_key {
	void *data;
	size_t len;
};

struct intern {
	struct intern_key *keys;	/* by index */
	size_t n, keys_cap;
	uint32_t *slots;	/* open addressing: index + 1, 0 when empty */
	size_t nslots;
};

/* The index of key; *added (may be NULL) says whether it was new. */
uint32_t intern(struct intern *t, const void *key, size_t len, bool *added);
uint32_t intern_str(struct intern *t, const char *s);
/* The index of key if it was interned, else -1. */
int64_t intern_find(const struct intern *t, const void *key, size_t len);
void intern_free(struct intern *t);

#endif
