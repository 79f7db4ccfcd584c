/* SPDX-License-Identifier: GPL-2.0 */
/* Stack addresses -> module, ELF offset and function, with symbol tables cached per file. */
#ifndef GPUMEM_SYMBOLIZE_H
#define GPUMEM_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "procs.h"

struct frame {
	uint64_t addr;
	const char *module;	/* path as the process saw it, or NULL */
	uint64_t offset;	/* ELF vaddr within the module: what addr2line takes; for
				 * unresolvable frames the raw address (no module) or the file
				 * offset (module whose segments are unknown) */
	const char *symbol;	/* or NULL */
	uint64_t symbol_offset;
};

struct symbolizer;

struct symbolizer *symbolizer_new(void);
void symbolizer_free(struct symbolizer *s);

/*
 * addr is a return address when is_return: the lookup uses addr - 1, but offset and
 * symbol_offset report addr's own. mm is the process's module map captured while it lived;
 * the file is opened as the process saw it: /proc/PID/map_files/<start>-<end> first, then
 * /proc/PID/root/<path>, then <path> (those two only when their inode is the mapped one).
 * Strings stay owned by the symbolizer until symbolizer_free. An address that no mapping or
 * symbol covers still fills *out (return 0); errors are -EINVAL and -ENOMEM.
 */
int symbolize_addr(struct symbolizer *s, int pid, const struct module_map *mm, uint64_t addr,
		   bool is_return, struct frame *out);

/* Files loaded (or failed) so far: for tests and statistics. */
struct symbolizer_stats {
	uint64_t files_loaded;
	uint64_t files_failed;
	uint64_t open_failures;
};
void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *stats);

#endif
