// SPDX-License-Identifier: GPL-2.0
/* The pickle opcodes of protocol 2 that a memory snapshot needs, written into a buffer. */
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "export/pickle.h"
#include "output/json.h"

enum pk_op {
	OP_MARK = '(',
	OP_STOP = '.',
	OP_BININT = 'J',
	OP_BININT1 = 'K',
	OP_BININT2 = 'M',
	OP_NONE = 'N',
	OP_BINUNICODE = 'X',
	OP_APPENDS = 'e',
	OP_BINGET = 'h',
	OP_LONG_BINGET = 'j',
	OP_BINPUT = 'q',
	OP_LONG_BINPUT = 'r',
	OP_SETITEMS = 'u',
	OP_EMPTY_LIST = ']',
	OP_EMPTY_DICT = '}',
	OP_PROTO = 0x80,
	OP_NEWTRUE = 0x88,
	OP_NEWFALSE = 0x89,
	OP_LONG1 = 0x8a,
};

static const char replacement[] = "\xef\xbf\xbd";	/* U+FFFD */

void pk_free(struct pickle *p)
{
	free(p->data);
	*p = (struct pickle){ 0 };
}

static void put(struct pickle *p, const void *bytes, size_t n)
{
	size_t cap = p->cap ? p->cap : 4096;

	if (p->len + n > p->cap) {
		while (cap < p->len + n)
			cap *= 2;
		p->data = xrealloc(p->data, cap);
		p->cap = cap;
	}
	memcpy(p->data + p->len, bytes, n);
	p->len += n;
}

static void op(struct pickle *p, enum pk_op code)
{
	uint8_t c = (uint8_t)code;

	put(p, &c, 1);
}

static void le32(struct pickle *p, uint32_t v)
{
	uint8_t b[4] = { v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24 };

	put(p, b, sizeof(b));
}

void pk_begin(struct pickle *p)
{
	uint8_t proto[2] = { OP_PROTO, 2 };

	put(p, proto, sizeof(proto));
}

void pk_end(struct pickle *p)
{
	op(p, OP_STOP);
}

void pk_dict_begin(struct pickle *p)
{
	op(p, OP_EMPTY_DICT);
	op(p, OP_MARK);
}

void pk_dict_end(struct pickle *p)
{
	op(p, OP_SETITEMS);
}

void pk_list_begin(struct pickle *p)
{
	op(p, OP_EMPTY_LIST);
	op(p, OP_MARK);
}

void pk_list_end(struct pickle *p)
{
	op(p, OP_APPENDS);
}

/* The UTF-8 length of s once every invalid byte is a U+FFFD. */
static size_t valid_len(const unsigned char *s, size_t n)
{
	size_t out = 0;

	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq_len(s + i, n - i);

		out += k ? k : sizeof(replacement) - 1;
		i += k ? k : 1;
	}
	return out;
}

void pk_strn(struct pickle *p, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	op(p, OP_BINUNICODE);
	le32(p, (uint32_t)valid_len(u, n));
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq_len(u + i, n - i);

		if (k)
			put(p, u + i, k);
		else
			put(p, replacement, sizeof(replacement) - 1);
		i += k ? k : 1;
	}
}

void pk_str(struct pickle *p, const char *s)
{
	if (s)
		pk_strn(p, s, strlen(s));
	else
		pk_none(p);
}

/* LONG1: the shortest little-endian two's complement that holds v. */
static void long1(struct pickle *p, const uint8_t *le, size_t n, bool negative)
{
	uint8_t fill = negative ? 0xff : 0x00;
	uint8_t count;

	while (n > 1 && le[n - 1] == fill && ((le[n - 2] & 0x80) == (fill & 0x80)))
		n--;
	if ((le[n - 1] & 0x80) != (fill & 0x80))
		n++;	/* the sign needs a byte of its own (the caller left room) */
	count = (uint8_t)n;
	op(p, OP_LONG1);
	put(p, &count, 1);
	put(p, le, n);
}

static void int_bytes(uint64_t v, uint8_t le[9], uint8_t fill)
{
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(v >> (8 * i));
	le[8] = fill;
}

void pk_int(struct pickle *p, int64_t v)
{
	uint8_t le[9];

	if (v >= 0 && v <= 0xff) {
		uint8_t b[2] = { OP_BININT1, (uint8_t)v };

		put(p, b, sizeof(b));
	} else if (v >= 0 && v <= 0xffff) {
		uint8_t b[3] = { OP_BININT2, (uint8_t)(v & 0xff), (uint8_t)(v >> 8) };

		put(p, b, sizeof(b));
	} else if (v >= INT32_MIN && v <= INT32_MAX) {
		op(p, OP_BININT);
		le32(p, (uint32_t)(int32_t)v);
	} else {
		int_bytes((uint64_t)v, le, v < 0 ? 0xff : 0x00);
		long1(p, le, 8, v < 0);
	}
}

void pk_uint(struct pickle *p, uint64_t v)
{
	uint8_t le[9];

	if (v <= INT64_MAX) {
		pk_int(p, (int64_t)v);
		return;
	}
	int_bytes(v, le, 0);
	long1(p, le, 8, false);
}

void pk_none(struct pickle *p)
{
	op(p, OP_NONE);
}

void pk_bool(struct pickle *p, bool v)
{
	op(p, v ? OP_NEWTRUE : OP_NEWFALSE);
}

uint32_t pk_memo_put(struct pickle *p)
{
	uint32_t id = p->next_memo++;

	if (id <= 0xff) {
		uint8_t b[2] = { OP_BINPUT, (uint8_t)id };

		put(p, b, sizeof(b));
	} else {
		op(p, OP_LONG_BINPUT);
		le32(p, id);
	}
	return id;
}

void pk_memo_get(struct pickle *p, uint32_t id)
{
	if (id <= 0xff) {
		uint8_t b[2] = { OP_BINGET, (uint8_t)id };

		put(p, b, sizeof(b));
	} else {
		op(p, OP_LONG_BINGET);
		le32(p, id);
	}
}
