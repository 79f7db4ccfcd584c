/* SPDX-License-Identifier: GPL-2.0 */
/* How a call site reads in text: the user's code first (a Python line of the program's own
 * files; else any Python line; else the first native frame outside the call glue: libc,
 * libstdc++, libffi, ctypes, the interpreter), then its callers in that code, outward; as
 * many frames as tell the rows of a listing apart. --all-frames shows every frame instead. */
#ifndef GPUMEM_SITE_TEXT_H
#define GPUMEM_SITE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "model/snapshot.h"

#define SITE_TEXT_MAX_FRAMES 32
#define SITE_TEXT_FRAMES 4	/* a row's frames, more where two rows need them */

/* The indexes in st of the frames a row shows, innermost first; returns how many (at most
 * cap). */
unsigned int site_frames(const struct snap_stack *st, uint32_t *idx, unsigned int cap);
/* `line (file.py:8) <- caller (file.py:20)`: at most max of those frames, " <- ..." when there
 * are more; every frame of the stack when all_frames. */
void text_site(FILE *out, const struct snap_stack *st, unsigned int max, bool all_frames);
/* The same, its text written once a stack and kept (frames_cache_text): a stream's line per
 * event (trace). */
void text_site_cached(FILE *out, const struct snap_stack *st, unsigned int max, bool all_frames);
/* For each of n stacks listed together, the frames its row needs so that no two rows read
 * alike where their stacks differ: at least min. */
void site_text_depths(const struct snap_stack *const *stacks, size_t n, unsigned int min,
		      unsigned int *depth);
/* The same for n sites (SITE_TEXT_FRAMES at least), in an array to free. */
unsigned int *site_depths(const struct snap_site *sites, size_t n);

#endif
