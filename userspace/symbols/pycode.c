// SPDX-License-Identifier: GPL-2.0
/* CPython's per-version offsets (3.9-3.13; 3.13's from the process's _Py_DebugOffsets), code
 * objects read from a process (process_vm_readv), and their line tables decoded to lines: 3.9's
 * lnotab, 3.10's line table, 3.11+'s location table (Objects/locations.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "host/procs.h"
#include "symbols/pycode.h"

#define NONE_OFF GM_PY_OFF_NONE
#define PY_MAX_STR 4096			/* characters of a file name or qualified name */
#define PY_MAX_LINETABLE (256u << 10)
#define PY_MAX_OBJECT 4096		/* no field gpumem reads of an object lies further in */
#define PY_MAX_RUNTIME (1u << 20)	/* nor of _PyRuntime and an interpreter */

/* From CPython's own headers (Include/internal/pycore_frame.h, pycore_code.h,
 * cpython/pystate.h, pycore_runtime.h, pycore_interp.h), checked with offsetof() on the
 * installed headers of each version (tests/integration/test_python_layouts.py): pyenv's
 * 3.9.18, 3.10.13, 3.11.7, 3.12.1, 3.13.0 and Debian 12's 3.11.2. 3.13's are read from the
 * process itself (_Py_DebugOffsets) where they are there; this table's are for what that
 * structure does not say. */
/* 3.9 and 3.10: frames are PyFrameObjects on the heap, chained from tstate->frame; they differ
 * in where f_lasti is and what it counts, and in their line tables. */
#define PY_LAYOUT_FRAMEOBJECT(minor_, lasti, kind, lines_)				\
	{										\
		.major = 3, .minor = (minor_),						\
		.walk = {								\
			.runtime_interp_head = 32,					\
			.interp_threads_head = 8,		/* tstate_head */	\
			.tstate_next = 8,						\
			.tstate_interp = 16,						\
			.tstate_thread_id = 176,		/* thread_id */		\
			.thread_id_kind = GM_PY_TID_PTHREAD,				\
			.tstate_cframe = NONE_OFF,					\
			.cframe_frame = 24,			/* frame */		\
			.tstate_datastack_chunk = NONE_OFF,				\
			.tstate_datastack_top = NONE_OFF,				\
			.frame_read = 112,						\
			.frame_code = 32,						\
			.frame_previous = 24,			/* f_back */		\
			.frame_instr = (lasti),			/* f_lasti */		\
			.instr_kind = (kind),						\
			.frame_entry = NONE_OFF,					\
			.frame_owner = NONE_OFF,					\
			.owner_cstack = NONE_OFF,					\
			.code_units = 0,						\
			.object_type = 8,						\
		},									\
		.lines = (lines_), .frame_per_eval = true,				\
		.code_filename = 104, .code_name = 112, .code_linetable = 120,		\
		.code_firstlineno = 40,							\
		PY_OBJECTS(48, 72),							\
	}

/* Bytes, strings (their data after a PyASCIIObject or PyCompactUnicodeObject), types. */
#define PY_OBJECTS(ascii_data, compact_data)						\
	.var_size = 16, .bytes_data = 32, .str_length = 16, .str_state = 32,		\
	.str_ascii_data = (ascii_data), .str_compact_data = (compact_data), .type_name = 24

/* 3.12 and 3.13: _PyInterpreterFrame begins with its code (f_code, f_executable); frames the
 * C stack owns are shims between two eval loops. */
#define PY_FRAME_312									\
	.frame_read = 80, .frame_code = 0, .frame_previous = 8, .frame_instr = 56,	\
	.instr_kind = GM_PY_INSTR_POINTER, .frame_entry = NONE_OFF, .frame_owner = 70,	\
	.owner_cstack = 3 /* FRAME_OWNED_BY_CSTACK */

static const struct py_layout layouts[] = {
	PY_LAYOUT_FRAMEOBJECT(9, 104, GM_PY_INSTR_LASTI_BYTES, PY_LINES_LNOTAB),
	PY_LAYOUT_FRAMEOBJECT(10, 96, GM_PY_INSTR_LASTI_UNITS, PY_LINES_310),
	{
		.major = 3, .minor = 11,
		.walk = {
			.runtime_interp_head = 40,
			.interp_threads_head = 16,
			.tstate_next = 8,
			.tstate_interp = 16,
			.tstate_thread_id = 160,	/* native_thread_id */
			.thread_id_kind = GM_PY_TID_NATIVE,
			.tstate_cframe = 56,
			.cframe_frame = 8,
			.tstate_datastack_chunk = 296,
			.tstate_datastack_top = 304,
			.frame_read = 80,
			.frame_code = 32,
			.frame_previous = 48,
			.frame_instr = 56,		/* prev_instr */
			.instr_kind = GM_PY_INSTR_POINTER,
			.frame_entry = 68,
			.frame_owner = 69,
			.owner_cstack = NONE_OFF,
			.code_units = 184,
			.object_type = 8,
		},
		.lines = PY_LINES_LOCATIONS, .qualname = true,
		.code_filename = 112, .code_name = 128, .code_linetable = 136,
		.code_firstlineno = 72,
		PY_OBJECTS(48, 72),
	},
	{
		.major = 3, .minor = 12,
		.walk = {
			.runtime_interp_head = 40, .interp_threads_head = 72,
			.tstate_next = 8, .tstate_interp = 16,
			.tstate_thread_id = 144, .thread_id_kind = GM_PY_TID_NATIVE,
			.tstate_cframe = 56, .cframe_frame = 0,
			.tstate_datastack_chunk = 232, .tstate_datastack_top = 240,
			PY_FRAME_312, .code_units = 192, .object_type = 8,
		},
		.lines = PY_LINES_LOCATIONS, .qualname = true,
		.code_filename = 112, .code_name = 128, .code_linetable = 136,
		.code_firstlineno = 68,
		PY_OBJECTS(40, 56),
	},
	{
		/* What _Py_DebugOffsets does not say (the data stack's top, a compact string's
		 * data) and what it would, were it missing. */
		.major = 3, .minor = 13, .debug_offsets = true,
		.walk = {
			.runtime_interp_head = 632, .interp_threads_head = 7344,
			.tstate_next = 8, .tstate_interp = 16,
			.tstate_thread_id = 160, .thread_id_kind = GM_PY_TID_NATIVE,
			.tstate_cframe = NONE_OFF, .cframe_frame = 72,	/* current_frame */
			.tstate_datastack_chunk = 232, .tstate_datastack_top = 240,
			PY_FRAME_312, .code_units = 200, .object_type = 8,
		},
		.lines = PY_LINES_LOCATIONS, .qualname = true,
		.code_filename = 112, .code_name = 128, .code_linetable = 136,
		.code_firstlineno = 68,
		PY_OBJECTS(40, 56),
	},
};

const struct py_layout *py_layout_find(unsigned int major, unsigned int minor)
{
	for (size_t i = 0; i < ARRAY_SIZE(layouts); i++)
		if (layouts[i].major == major && layouts[i].minor == minor)
			return &layouts[i];
	return NULL;
}

/* A field of width bytes at off lies inside limit bytes, aligned to its width. */
static bool field_in(uint32_t off, uint32_t width, uint32_t limit)
{
	return off != NONE_OFF && off % width == 0 && off <= limit && width <= limit - off;
}

static bool optional_in(uint32_t off, uint32_t width, uint32_t limit)
{
	return off == NONE_OFF || field_in(off, width, limit);
}

const char *py_layout_check(const struct py_layout *l)
{
	const struct gm_py_offsets *w = &l->walk;
	uint32_t fr = w->frame_read;

	if (!field_in(w->runtime_interp_head, 8, PY_MAX_RUNTIME) ||
	    !field_in(w->interp_threads_head, 8, PY_MAX_RUNTIME))
		return "the runtime's or interpreter's offsets are out of bounds";
	if (!field_in(w->tstate_next, 8, GM_PY_TSTATE_READ) ||
	    !field_in(w->tstate_interp, 8, GM_PY_TSTATE_READ) ||
	    !field_in(w->tstate_thread_id, 8, GM_PY_TSTATE_READ) ||
	    !optional_in(w->tstate_cframe, 8, GM_PY_TSTATE_READ) ||
	    !field_in(w->cframe_frame, 8, w->tstate_cframe == NONE_OFF ? GM_PY_TSTATE_READ
									: PY_MAX_OBJECT) ||
	    !optional_in(w->tstate_datastack_chunk, 8, GM_PY_TSTATE_READ) ||
	    !optional_in(w->tstate_datastack_top, 8, GM_PY_TSTATE_READ) ||
	    (w->tstate_datastack_chunk == NONE_OFF) != (w->tstate_datastack_top == NONE_OFF))
		return "a thread state's offsets are out of bounds";
	if (w->thread_id_kind != GM_PY_TID_NATIVE && w->thread_id_kind != GM_PY_TID_PTHREAD)
		return "the thread id's kind is unknown";
	if (fr < 8 || fr > GM_PY_FRAME_READ || fr % 8 || !field_in(w->frame_code, 8, fr) ||
	    !field_in(w->frame_previous, 8, fr) ||
	    !field_in(w->frame_instr, w->instr_kind == GM_PY_INSTR_POINTER ? 8 : 4, fr) ||
	    !optional_in(w->frame_entry, 1, fr) ||
	    (w->owner_cstack != NONE_OFF && !field_in(w->frame_owner, 1, fr)))
		return "a frame's offsets are out of bounds";
	if (w->instr_kind > GM_PY_INSTR_LASTI_UNITS ||
	    (w->instr_kind == GM_PY_INSTR_POINTER && !field_in(w->code_units, 2, PY_MAX_OBJECT)))
		return "the instruction's kind or the code's units are out of bounds";
	if (!field_in(w->object_type, 8, PY_MAX_OBJECT) || !field_in(l->code_filename, 8,
								      PY_MAX_OBJECT) ||
	    !field_in(l->code_name, 8, PY_MAX_OBJECT) ||
	    !field_in(l->code_linetable, 8, PY_MAX_OBJECT) ||
	    !field_in(l->code_firstlineno, 4, PY_MAX_OBJECT) ||
	    !field_in(l->var_size, 8, PY_MAX_OBJECT) || !field_in(l->bytes_data, 1, PY_MAX_OBJECT) ||
	    !field_in(l->str_length, 8, PY_MAX_OBJECT) || !field_in(l->str_state, 4, PY_MAX_OBJECT) ||
	    !field_in(l->str_ascii_data, 1, PY_MAX_OBJECT) ||
	    !field_in(l->str_compact_data, 1, PY_MAX_OBJECT) ||
	    !field_in(l->type_name, 8, PY_MAX_OBJECT))
		return "an object's offsets are out of bounds";
	return NULL;
}

/* CPython 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h), up to its unicode
 * section: every field a uint64_t. */
struct debug_offsets_313 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
	struct {
		uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins,
			ceval_gil, gil_runtime_state, gil_enabled, gil_locked, gil_holder;
	} interpreter_state;
	struct {
		uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
			datastack_chunk, status;
	} thread_state;
	struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner; } frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			localsplusnames, localspluskinds, co_code_adaptive;
	} code_object;
	struct { uint64_t size, ob_type; } pyobject;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
	struct { uint64_t size, ob_item, ob_size; } tuple_object, list_object;
	struct { uint64_t size, ma_keys, ma_values; } dict_object;
	struct { uint64_t size, ob_fval; } float_object;
	struct { uint64_t size, lv_tag, ob_digit; } long_object;
	struct { uint64_t size, ob_size, ob_sval; } bytes_object;
	struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
};
_Static_assert(sizeof(struct debug_offsets_313) == PY_DEBUG_OFFSETS_LEN,
	       "3.13's _Py_DebugOffsets up to its unicode section");

/* An offset inside the structure of size bytes it is said to be in. */
static bool debug_off(uint64_t off, uint64_t size, uint32_t *out)
{
	if (size > PY_MAX_RUNTIME || off >= size)
		return false;
	*out = (uint32_t)off;
	return true;
}

int py_layout_from_debug(const void *buf, size_t len, const struct py_layout *base,
			 struct py_layout *out, const char **why)
{
	struct debug_offsets_313 d;
	struct gm_py_offsets *w = &out->walk;
	uint32_t chunk;
	bool ok;

	*out = *base;
	*why = "_Py_DebugOffsets: too short";
	if (len < sizeof(d))
		return -EINVAL;
	memcpy(&d, buf, sizeof(d));
	*why = "_Py_DebugOffsets: no \"xdebugpy\" cookie";
	if (memcmp(d.cookie, "xdebugpy", 8))
		return -EINVAL;
	*why = "_Py_DebugOffsets: another version's";
	if ((d.version >> 24) != base->major || ((d.version >> 16) & 0xff) != base->minor)
		return -EINVAL;
	*why = "_Py_DebugOffsets: a free-threaded build (its objects are laid out otherwise)";
	if (d.free_threaded)
		return -EINVAL;
	ok = debug_off(d.runtime_state.interpreters_head, d.runtime_state.size,
		       &w->runtime_interp_head) &&
	     debug_off(d.interpreter_state.threads_head, d.interpreter_state.size,
		       &w->interp_threads_head) &&
	     debug_off(d.thread_state.next, d.thread_state.size, &w->tstate_next) &&
	     debug_off(d.thread_state.interp, d.thread_state.size, &w->tstate_interp) &&
	     debug_off(d.thread_state.native_thread_id, d.thread_state.size,
		       &w->tstate_thread_id) &&
	     debug_off(d.thread_state.current_frame, d.thread_state.size, &w->cframe_frame) &&
	     debug_off(d.thread_state.datastack_chunk, d.thread_state.size, &chunk) &&
	     debug_off(d.frame.previous, d.frame.size, &w->frame_previous) &&
	     debug_off(d.frame.executable, d.frame.size, &w->frame_code) &&
	     debug_off(d.frame.instr_ptr, d.frame.size, &w->frame_instr) &&
	     debug_off(d.frame.owner, d.frame.size, &w->frame_owner) &&
	     debug_off(d.code_object.filename, d.code_object.size, &out->code_filename) &&
	     debug_off(d.code_object.qualname, d.code_object.size, &out->code_name) &&
	     debug_off(d.code_object.linetable, d.code_object.size, &out->code_linetable) &&
	     debug_off(d.code_object.firstlineno, d.code_object.size, &out->code_firstlineno) &&
	     debug_off(d.code_object.co_code_adaptive, d.code_object.size + 1, &w->code_units) &&
	     debug_off(d.pyobject.ob_type, d.pyobject.size, &w->object_type) &&
	     debug_off(d.type_object.tp_name, d.type_object.size, &out->type_name) &&
	     debug_off(d.bytes_object.ob_size, d.bytes_object.size, &out->var_size) &&
	     debug_off(d.bytes_object.ob_sval, d.bytes_object.size + 1, &out->bytes_data) &&
	     debug_off(d.unicode_object.state, d.unicode_object.size, &out->str_state) &&
	     debug_off(d.unicode_object.length, d.unicode_object.size, &out->str_length) &&
	     debug_off(d.unicode_object.asciiobject_size, d.unicode_object.size + 1,
		       &out->str_ascii_data);
	*why = "_Py_DebugOffsets: an offset outside its structure";
	if (!ok)
		return -EINVAL;
	/* Not in the structure: the data stack's top follows its chunk, and a compact string's
	 * data its two utf8 fields, as in the version's own headers. */
	w->tstate_datastack_chunk = chunk;
	w->tstate_datastack_top = chunk + (base->walk.tstate_datastack_top -
					   base->walk.tstate_datastack_chunk);
	out->str_compact_data = out->str_ascii_data + (base->str_compact_data -
						       base->str_ascii_data);
	*why = py_layout_check(out);
	return *why ? -EINVAL : 0;
}

static int read_u64(int pid, uint64_t addr, uint64_t *out)
{
	return proc_read_mem(pid, addr, out, sizeof(*out));
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
	    (err = proc_read_mem(pid, addr + l->str_state, &state, sizeof(state))))
		return err;
	kind = (state >> 2) & 7;
	if (!(state & (1u << 5)) || length > PY_MAX_STR)	/* not compact, or absurd */
		return -EINVAL;
	if (kind != 1 && kind != 2 && kind != 4)
		return -EINVAL;
	width = kind;
	raw = xrealloc(NULL, length * width + 1);
	err = proc_read_mem(pid, addr + ((state & (1u << 6)) ? l->str_ascii_data : l->str_compact_data),
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
	err = proc_read_mem(pid, addr + l->bytes_data, *out, size);
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
	int32_t firstlineno;
	int err;

	memset(out, 0, sizeof(*out));
	if ((err = read_u64(pid, addr + l->walk.object_type, &type)))
		return err;
	if (type != code_type)
		return -EINVAL;
	if ((err = read_u64(pid, addr + l->code_filename, &filename)) ||
	    (err = read_u64(pid, addr + l->code_name, &qualname)) ||
	    (err = read_u64(pid, addr + l->code_linetable, &linetable)) ||
	    (err = proc_read_mem(pid, addr + l->code_firstlineno, &firstlineno, 4)))
		return err;
	if (firstlineno < 0)
		return -EINVAL;
	out->firstlineno = firstlineno;
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

/* ---- the line tables of 3.10 and 3.9 ---- */

int py_line_of_310(const uint8_t *t, size_t len, int firstlineno, int addrq)
{
	int line = firstlineno, start = 0;

	if (addrq < 0)
		return firstlineno;
	/* (byte delta, line delta) pairs; a line delta of -128: these bytes have no line. */
	for (size_t at = 0; at + 1 < len; at += 2) {
		int end = start + t[at], delta = (int8_t)t[at + 1];

		if (delta != -128)
			line += delta;
		if (addrq >= start && addrq < end)
			return delta == -128 ? -1 : line;
		start = end;
	}
	return -1;
}

int py_line_of_lnotab(const uint8_t *t, size_t len, int firstlineno, int addrq)
{
	int line = firstlineno, addr = 0;

	/* (byte delta, line delta) pairs: the line changes at each pair's address. */
	for (size_t at = 0; at + 1 < len; at += 2) {
		addr += t[at];
		if (addr > addrq)
			break;
		line += (int8_t)t[at + 1];
	}
	return line;
}

int py_code_line(const struct py_layout *l, const struct py_code *c, uint32_t instr)
{
	int addrq = (int)instr * 2;

	switch (l->lines) {
	case PY_LINES_LNOTAB:
		return py_line_of_lnotab(c->linetable, c->nlinetable, c->firstlineno, addrq);
	case PY_LINES_310:
		return py_line_of_310(c->linetable, c->nlinetable, c->firstlineno, addrq);
	case PY_LINES_LOCATIONS:
		return py_line_of(c->linetable, c->nlinetable, c->firstlineno, addrq);
	}
	return -1;
}
