/* SPDX-License-Identifier: GPL-2.0 */
/* The probe table (which symbol gets which BPF program) and attaching one file. */
#ifndef GPUMEM_PROBES_H
#define GPUMEM_PROBES_H

#include <stdbool.h>
#include <stdint.h>
#include "gpumem.h"

struct probe_def {
	const char *symbol;
	enum gm_layer layer;
	enum gm_shape shape;
	enum gm_kind kind;	/* of what an allocation holds; unused for frees */
};

/* The api id carried in cookies and events is the row's index. */
extern const struct probe_def probe_table[];
extern const unsigned int probe_count;

const char *probe_api_name(unsigned int api);
const char *probe_layer_name(unsigned int layer);
const char *kind_name(unsigned int kind);
/* Index of symbol in the table, or -1. */
int probe_find(const char *symbol);
/* A name for a CUDA return code ("cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY"). */
const char *cuda_error_name(unsigned int layer, int error);

struct gpumem_bpf;
struct attached_file;

/* Attaches every probe-table symbol that path defines (multi: in uprobe_multi links);
 * *out is NULL when it defines none. Returns 0 or -errno. */
int attach_file(struct gpumem_bpf *skel, const char *path, bool multi,
		struct attached_file **out);
void detach_file(struct attached_file *f);
unsigned int attached_probe_count(const struct attached_file *f);
const char *attached_path(const struct attached_file *f);

#endif
