/* SPDX-License-Identifier: GPL-2.0 */
/* CPython's structures as gpumem reads them: the per-version offsets (the frame walk's, sent
 * to the BPF side, and the code objects'), code objects read from a living process, and the
 * line table that maps an instruction to its line. */
#ifndef GPUMEM_PYCODE_H
#define GPUMEM_PYCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpumem.h"

/* How a version's code objects map instructions to lines. */
enum py_lines {
	PY_LINES_LNOTAB,	/* 3.9: co_lnotab, (byte delta, line delta) pairs */
	PY_LINES_310,		/* 3.10: co_linetable, (byte delta, line delta or -128) pairs */
	PY_LINES_LOCATIONS,	/* 3.11+: co_linetable, the location table */
};

struct py_layout {
	unsigned int major, minor;
	struct gm_py_offsets walk;	/* what the BPF side needs */
	enum py_lines lines;
	bool frame_per_eval;	/* 3.9, 3.10: each frame is a C call of the eval loop (an entry) */
	bool qualname;		/* code_name is co_qualname (3.11+), else co_name */
	bool debug_offsets;	/* 3.13+: _PyRuntime begins with _Py_DebugOffsets, read live */
	/* PyCodeObject */
	uint32_t code_filename, code_name, code_linetable, code_firstlineno;
	/* PyBytesObject, PyUnicodeObject (compact forms only), PyTypeObject */
	uint32_t var_size, bytes_data;
	uint32_t str_length, str_state, str_ascii_data, str_compact_data;
	uint32_t type_name;
};

/* The layout of CPython major.minor, or NULL when gpumem has none for it. */
const struct py_layout *py_layout_find(unsigned int major, unsigned int minor);

/* NULL when every offset of l lies inside what is read of its structure (the BPF side's
 * GM_PY_*_READ, PY_MAX_OBJECT here), else what does not. */
const char *py_layout_check(const struct py_layout *l);

/* CPython 3.13's _Py_DebugOffsets (the first bytes of _PyRuntime, len of them read from the
 * process) over base, the version's own table: 0, or -EINVAL with *why set when they are not
 * 3.13's, or out of bounds. */
int py_layout_from_debug(const void *buf, size_t len, const struct py_layout *base,
			 struct py_layout *out, const char **why);
#define PY_DEBUG_OFFSETS_LEN 568	/* bytes of _Py_DebugOffsets read: 3.13's, up to unicode */

/* One code object as read from the process. */
struct py_code {
	char *file;		/* co_filename */
	char *qualname;		/* co_qualname (co_name before 3.11) */
	int firstlineno;
	uint8_t *linetable;	/* co_linetable or co_lnotab, as the layout's lines says */
	size_t nlinetable;
};

/* Reads the code object at addr from process pid; -EINVAL when it is no code object (its type
 * is not code_type) or its fields are not what l says, -errno when the memory is gone. */
int py_read_code(int pid, uint64_t addr, uint64_t code_type, const struct py_layout *l,
		 struct py_code *out);
void py_code_free(struct py_code *c);

/* The line of the instruction at byte offset addrq (what PyCode_Addr2Line returns); -1 when
 * the instruction has no line. In a 3.11+ location table, a 3.10 line table, a 3.9 lnotab. */
int py_line_of(const uint8_t *table, size_t len, int firstlineno, int addrq);
int py_line_of_310(const uint8_t *table, size_t len, int firstlineno, int addrq);
int py_line_of_lnotab(const uint8_t *table, size_t len, int firstlineno, int addrq);

/* The line of code unit index instr in c, decoded as l's version does; -1: none. */
int py_code_line(const struct py_layout *l, const struct py_code *c, uint32_t instr);

#endif
