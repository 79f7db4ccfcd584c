// SPDX-License-Identifier: GPL-2.0
/* CPython's per-version offsets, code objects read from a process (process_vm_readv), and the
 * 3.11+ location table (Objects/locations.md) decoded to lines. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "pycode.h"
#include "util.h"

#define NONE_OFF 0xffffffffu
#define PY_MAX_STR 4096			/* characters of a file name or qualified name */
#define PY_MAX_LINETABLE (256u << 10)

/* From CPython's own headers (Include/internal/pycore_frame.h, pycore_code.h,
 * cpython/pystate.h, pycore_runtime.h, pycore_interp.h), checked against Debian 12's
 * python3.11 (3.11.2) with offsetof() on its installed headers. Only 3.11 so far. */
static const struct py_layout layouts[] = {
	{
		.major = 3, .minor = 11,
		.walk = {
			.runtime_interp_head = 40,
			.interp_threads_head = 16,
			.tstate_next = 8,
			.tstate_interp = 16,
			.tstate_native_tid = 160,
			.tstate_cframe = 56,
			.cframe_frame = 8,
			.frame_code = 32,
			.frame_previous = 48,
			.frame_instr = 56,
			.frame_entry = 68,
			.frame_owner = 69,
			.owner_cstack = NONE_OFF,
			.code_units = 184,
			.object_type = 8,
		},
		.code_filename = 112, .code_qualname = 128, .code_linetable = 136,
		.code_firstlineno = 72, .code_firsttraceable = 168,
		.var_size = 16, .bytes_data = 32,
		.str_length = 16, .str_state = 32, .str_ascii_data = 48, .str_compact_data = 72,
	},
};

const struct py_layout *py_layout_find(unsigned int major, unsigned int minor)
{
	for (size_t i = 0; i < ARRAY_SIZE(layouts); i++)
		if (layouts[i].major == major && layouts[i].minor == minor)
			return &layouts[i];
	return NULL;
}

static int read_mem(int pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

static int read_u64(int pid, uint64_t addr, uint64_t *out)
{
	return read_mem(pid, addr, out, sizeof(*out));
}

static void put_utf8(char *out, size_t *at, uint32_t c)
{
	if (c < 0x80) {
		out[(*at)++] = (char)c;
	} else if (c < 0x800) {
		out[(*at)++] = (char)(0xc0 | c >> 6);
		out[(*at)++] = (char)(0x80 | (c & 0x3f));
	} else if (c < 0x10000) {
		out[(*at)++] = (char)(0xe0 | c >> 12);
		out[(*at)++] = (char)(0x80 | ((c >> 6) & 0x3f));
		out[(*at)++] = (char)(0x80 | (c & 0x3f));
	} else {
		out[(*at)++] = (char)(0xf0 | c >> 18);
		out[(*at)++] = (char)(0x80 | ((c >> 12) & 0x3f));
		out[(*at)++] = (char)(0x80 | ((c >> 6) & 0x3f));
		out[(*at)++] = (char)(0x80 | (c & 0x3f));
	}
}

/* A str object, as UTF-8: compact strings only (every name the compiler makes is one). */
static int read_str(int pid, uint64_t addr, const struct py_layout *l, char **out)
{
	uint64_t length;
	uint32_t state, kind;
	size_t at = 0, width;
	uint8_t *raw;
	char *s;
	int err;

	*out = NULL;
	if ((err = read_u64(pid, addr + l->str_length, &length)) ||
	    (err = read_mem(pid, addr + l->str_state, &state, sizeof(state))))
		return err;
	kind = (state >> 2) & 7;
	if (!(state & (1u << 5)) || length > PY_MAX_STR)	/* not compact, or absurd */
		return -EINVAL;
	if (kind != 1 && kind != 2 && kind != 4)
		return -EINVAL;
	width = kind;
	raw = xrealloc(NULL, length * width + 1);
	err = read_mem(pid, addr + ((state & (1u << 6)) ? l->str_ascii_data : l->str_compact_data),
		       raw, length * width);
	if (err) {
		free(raw);
		return err;
	}
	s = xrealloc(NULL, length * 4 + 1);
	for (uint64_t i = 0; i < length; i++) {
		uint32_t c = width == 1 ? raw[i]
			     : width == 2 ? (uint32_t)raw[2 * i] | (uint32_t)raw[2 * i + 1] << 8
					  : (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
						    (uint32_t)raw[4 * i + 2] << 16 |
						    (uint32_t)raw[4 * i + 3] << 24;

		if (c > 0x10ffff || c == 0)
			c = 0xfffd;
		put_utf8(s, &at, c);
	}
	s[at] = 0;
	free(raw);
	*out = s;
	return 0;
}

static int read_bytes(int pid, uint64_t addr, const struct py_layout *l, uint8_t **out,
		      size_t *len)
{
	uint64_t size;
	int err;

	*out = NULL;
	if ((err = read_u64(pid, addr + l->var_size, &size)))
		return err;
	if (size > PY_MAX_LINETABLE)
		return -EINVAL;
	*out = xrealloc(NULL, size + 1);
	*len = size;
	err = read_mem(pid, addr + l->bytes_data, *out, size);
	if (err) {
		free(*out);
		*out = NULL;
	}
	return err;
}

int py_read_code(int pid, uint64_t addr, uint64_t code_type, const struct py_layout *l,
		 struct py_code *out)
{
	uint64_t type, filename, qualname, linetable;
	int32_t firstlineno, firsttraceable;
	int err;

	memset(out, 0, sizeof(*out));
	if ((err = read_u64(pid, addr + l->walk.object_type, &type)))
		return err;
	if (type != code_type)
		return -EINVAL;
	if ((err = read_u64(pid, addr + l->code_filename, &filename)) ||
	    (err = read_u64(pid, addr + l->code_qualname, &qualname)) ||
	    (err = read_u64(pid, addr + l->code_linetable, &linetable)) ||
	    (err = read_mem(pid, addr + l->code_firstlineno, &firstlineno, 4)) ||
	    (err = read_mem(pid, addr + l->code_firsttraceable, &firsttraceable, 4)))
		return err;
	if (firstlineno < 0 || firsttraceable < 0)
		return -EINVAL;
	out->firstlineno = firstlineno;
	out->firsttraceable = firsttraceable;
	if ((err = read_str(pid, filename, l, &out->file)) ||
	    (err = read_str(pid, qualname, l, &out->qualname)) ||
	    (err = read_bytes(pid, linetable, l, &out->linetable, &out->nlinetable))) {
		py_code_free(out);
		return err;
	}
	return 0;
}

void py_code_free(struct py_code *c)
{
	free(c->file);
	free(c->qualname);
	free(c->linetable);
	memset(c, 0, sizeof(*c));
}

/* ---- the location table (3.11+) ---- */

enum {
	LOC_LONG = 14,		/* line delta, end line delta, columns: varints */
	LOC_NO_COLUMNS = 13,	/* line delta */
	LOC_NONE = 15,		/* no location */
	LOC_ONE_LINE0 = 10,	/* 10..12: line delta 0..2, two column bytes */
};

static unsigned int read_varint(const uint8_t *t, size_t len, size_t *at)
{
	unsigned int v = 0, shift = 0;

	while (*at < len && shift < 32) {
		uint8_t b = t[(*at)++];

		v |= (unsigned int)(b & 63) << shift;
		shift += 6;
		if (!(b & 64))
			break;
	}
	return v;
}

static int read_svarint(const uint8_t *t, size_t len, size_t *at)
{
	unsigned int v = read_varint(t, len, at);

	return (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
}

int py_line_of(const uint8_t *t, size_t len, int firstlineno, int addrq)
{
	int line = firstlineno, start = 0;
	size_t at = 0;

	if (addrq < 0)
		return firstlineno;
	while (at < len) {
		uint8_t first = t[at++];
		unsigned int code = (first >> 3) & 15;
		int end = start + ((first & 7) + 1) * 2, delta = 0;

		if (!(first & 128))
			return -1;	/* not at an entry's first byte: a corrupt table */
		if (code == LOC_LONG) {
			delta = read_svarint(t, len, &at);
			read_varint(t, len, &at);
			read_varint(t, len, &at);
			read_varint(t, len, &at);
		} else if (code == LOC_NO_COLUMNS) {
			delta = read_svarint(t, len, &at);
		} else if (code >= LOC_ONE_LINE0 && code < LOC_NO_COLUMNS) {
			delta = (int)code - LOC_ONE_LINE0;
			at += 2;
		} else if (code != LOC_NONE) {
			at += 1;	/* short form: one column byte, same line */
		}
		line += delta;
		if (addrq >= start && addrq < end)
			return code == LOC_NONE ? -1 : line;
		start = end;
	}
	return -1;
}
