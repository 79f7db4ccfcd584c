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

struct py_layout {
	unsigned int major, minor;
	struct gm_py_offsets walk;	/* what the BPF side needs */
	/* PyCodeObject */
	uint32_t code_filename, code_qualname, code_linetable, code_firstlineno;
	uint32_t code_firsttraceable;
	/* PyBytesObject, PyUnicodeObject (compact forms only) */
	uint32_t var_size, bytes_data;
	uint32_t str_length, str_state, str_ascii_data, str_compact_data;
};

/* The layout of CPython major.minor, or NULL when gpumem has none for it. */
const struct py_layout *py_layout_find(unsigned int major, unsigned int minor);

/* One code object as read from the process. */
struct py_code {
	char *file;		/* co_filename */
	char *qualname;		/* co_qualname */
	int firstlineno;
	int firsttraceable;	/* code units before the first traceable instruction */
	uint8_t *linetable;	/* co_linetable (3.11's location table) */
	size_t nlinetable;
};

/* Reads the code object at addr from process pid; -EINVAL when it is no code object (its type
 * is not code_type) or its fields are not what l says, -errno when the memory is gone. */
int py_read_code(int pid, uint64_t addr, uint64_t code_type, const struct py_layout *l,
		 struct py_code *out);
void py_code_free(struct py_code *c);

/* The line of the instruction at byte offset addrq in a 3.11+ location table (what
 * PyCode_Addr2Line returns); -1 when the instruction has no line. */
int py_line_of(const uint8_t *table, size_t len, int firstlineno, int addrq);

#endif
