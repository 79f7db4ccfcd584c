/* SPDX-License-Identifier: GPL-2.0 */
/* DWARF unwinding of a copied user stack with the CFI of a process's modules. */
#ifndef GPUMEM_UNWIND_H
#define GPUMEM_UNWIND_H

#include <stdint.h>
#include "gpumem.h"
#include "host/procs.h"
#include "symbols/symbolize.h"

struct unwinder;

/* An unwinder for one process, over the modules of its captured map, each file opened as sym
 * opens it (symbolizer_open_mapped; sym may be NULL); NULL on failure. */
struct unwinder *unwinder_new(struct symbolizer *sym, int pid, const struct module_map *mm);
void unwinder_free(struct unwinder *u);
/* Return addresses of the stack in ev, innermost (the call site) first; returns the count.
 * *cut: the frames went on past the bytes copied (--stack-bytes, or a page of the stack not
 * in memory): the outer ones are missing. */
uint32_t unwind_stack(struct unwinder *u, const struct gm_stack_event *ev, uint64_t *ips,
		      uint32_t max, bool *cut);

#endif
