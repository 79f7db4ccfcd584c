/* SPDX-License-Identifier: GPL-2.0 */
/* Attaching the probe table's programs to one file, and what is attached there. */
#ifndef GPUMEM_LOADER_ATTACH_H
#define GPUMEM_LOADER_ATTACH_H

#include <stdbool.h>
#include <stdint.h>
#include "probes/table.h"

struct bpf_program;
struct attached_file;

/* The programs a probe-table row attaches, lent by the tracer (which owns them). */
struct probe_programs {
	struct bpf_program *enter_alloc, *enter_alloc_pitch, *enter_free, *call_return;
	struct bpf_program *enter_array;	/* descriptor-sized arrays, cudaMalloc3D */
	struct bpf_program *enter_ctx;		/* the thread's current context */
	struct bpf_program *tensor_malloc, *tensor_free;	/* USDT; NULL: not attached */
	bool multi;	/* in uprobe_multi links (else one perf-event link per probe) */
	bool session;	/* enter_alloc is a session program: its shapes have no call_return */
	/* The agent's pins (pin.h): each link is pinned by the file's device and inode, and a
	 * file whose links an earlier agent pinned is adopted (its links opened, not made). */
	const char *pin_dir;	/* NULL: nothing pinned */
	uint64_t pin_kdev, pin_ino;
	bool adopt;
};

/* Attaches every probe-table symbol that path defines; *out is NULL when it defines none.
 * Returns 0 or -errno. */
int attach_file(const struct probe_programs *pp, const char *path, struct attached_file **out);
void detach_file(struct attached_file *f);
/* Detaches n files at once: the kernel waits for grace periods at each link's close (tens of
 * milliseconds), which closes on threads of their own let overlap. */
void detach_files(struct attached_file **files, size_t n);
/* Removes the agent's pins of f's links: once f is detached too, its probes are off. */
void attached_unpin(const struct attached_file *f);
unsigned int attached_probe_count(const struct attached_file *f);
const char *attached_path(const struct attached_file *f);
/* Whether probe-table row api is attached in f (at its own address, or at that of an alias). */
bool attached_has_api(const struct attached_file *f, unsigned int api);

#endif
