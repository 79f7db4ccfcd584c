// SPDX-License-Identifier: GPL-2.0
/* The protocol-buffers wire encoding: varints and length-delimited fields into a buffer. */
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "export/protobuf.h"

void pb_free(struct pb_buf *b)
{
	free(b->data);
	*b = (struct pb_buf){ 0 };
}

void pb_reset(struct pb_buf *b)
{
	b->len = 0;
}

static void reserve(struct pb_buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 256;

	if (b->len + n <= b->cap)
		return;
	while (cap < b->len + n)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
}

void pb_bytes(struct pb_buf *b, const void *p, size_t n)
{
	if (!n)
		return;
	reserve(b, n);
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void pb_varint(struct pb_buf *b, uint64_t v)
{
	uint8_t out[10];
	size_t n = 0;

	do {
		out[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			out[n] |= 0x80;
		n++;
	} while (v);
	pb_bytes(b, out, n);
}

void pb_tag(struct pb_buf *b, uint32_t field, enum pb_wire wire)
{
	pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}

void pb_field_varint(struct pb_buf *b, uint32_t field, uint64_t v)
{
	pb_tag(b, field, PB_VARINT);
	pb_varint(b, v);
}

void pb_field_bytes(struct pb_buf *b, uint32_t field, const void *p, size_t n)
{
	pb_tag(b, field, PB_LEN);
	pb_varint(b, n);
	pb_bytes(b, p, n);
}

void pb_field_string(struct pb_buf *b, uint32_t field, const char *s)
{
	pb_field_bytes(b, field, s ? s : "", s ? strlen(s) : 0);
}

void pb_field_message(struct pb_buf *b, uint32_t field, const struct pb_buf *msg)
{
	pb_field_bytes(b, field, msg->data, msg->len);
}

void pb_field_packed(struct pb_buf *b, uint32_t field, const uint64_t *v, size_t n)
{
	struct pb_buf packed = { 0 };

	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		pb_varint(&packed, v[i]);
	pb_field_message(b, field, &packed);
	pb_free(&packed);
}
