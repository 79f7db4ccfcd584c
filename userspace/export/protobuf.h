/* SPDX-License-Identifier: GPL-2.0 */
/* A protocol-buffers encoder for the few wire types pprof's profile.proto uses: varints,
 * length-delimited fields (strings, nested messages, packed repeated varints), into a growing
 * buffer. A nested message is encoded into a buffer of its own, then appended. */
#ifndef GPUMEM_PROTOBUF_H
#define GPUMEM_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

enum pb_wire {
	PB_VARINT = 0,
	PB_LEN = 2,
};

struct pb_buf {
	uint8_t *data;
	size_t len, cap;
};

void pb_free(struct pb_buf *b);
/* Empties b, keeping its memory for the next message. */
void pb_reset(struct pb_buf *b);
void pb_bytes(struct pb_buf *b, const void *p, size_t n);
/* Base-128, least significant group first; a negative int64 takes ten bytes. */
void pb_varint(struct pb_buf *b, uint64_t v);
void pb_tag(struct pb_buf *b, uint32_t field, enum pb_wire wire);
/* Field `field` as a varint (int64 and uint64 alike, two's complement). Zero is written too:
 * proto3 readers take it as the default, which is the same value. */
void pb_field_varint(struct pb_buf *b, uint32_t field, uint64_t v);
void pb_field_bytes(struct pb_buf *b, uint32_t field, const void *p, size_t n);
/* NULL is the empty string. */
void pb_field_string(struct pb_buf *b, uint32_t field, const char *s);
void pb_field_message(struct pb_buf *b, uint32_t field, const struct pb_buf *msg);
/* A packed repeated varint field; nothing at all when n is 0. */
void pb_field_packed(struct pb_buf *b, uint32_t field, const uint64_t *v, size_t n);

#endif
