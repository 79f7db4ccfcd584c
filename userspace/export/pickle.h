/* SPDX-License-Identifier: GPL-2.0 */
/* A pickle writer (protocol 2) for the few types a PyTorch memory snapshot holds: dicts,
 * lists, unicode strings, ints of any size, None, bools, and memo references so a value
 * written once (a stack's frames) can be referred to again. Only opcodes that both Python's
 * unpickler and PyTorch's MemoryViz.js read. Strings that are not valid UTF-8 get U+FFFD. */
#ifndef GPUMEM_PICKLE_H
#define GPUMEM_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pickle {
	uint8_t *data;
	size_t len, cap;
	uint32_t next_memo;
};

void pk_free(struct pickle *p);
void pk_begin(struct pickle *p);	/* PROTO 2 */
void pk_end(struct pickle *p);		/* STOP */
/* A dict: keys and values alternate between begin and end. */
void pk_dict_begin(struct pickle *p);
void pk_dict_end(struct pickle *p);
void pk_list_begin(struct pickle *p);
void pk_list_end(struct pickle *p);
/* NULL writes None. */
void pk_str(struct pickle *p, const char *s);
void pk_strn(struct pickle *p, const char *s, size_t n);
void pk_int(struct pickle *p, int64_t v);
void pk_uint(struct pickle *p, uint64_t v);
void pk_none(struct pickle *p);
void pk_bool(struct pickle *p, bool v);
/* Remembers the value just written; returns its memo id for pk_memo_get. */
uint32_t pk_memo_put(struct pickle *p);
/* The value remembered as id, again (the same object, not a copy). */
void pk_memo_get(struct pickle *p, uint32_t id);

#endif
