/* SPDX-License-Identifier: GPL-2.0 */
/* Who holds a process's memory by library: the owner of a call site is the innermost frame
 * outside the GPU runtimes and drivers and outside the call glue (libc, libstdc++, libffi,
 * the dynamic loader, the Python interpreter and its standard library, whose innermost Python
 * frame's file of the program or of an installed package is then the owner), named with its family where it is a known one (NCCL, cuBLAS, cuDNN, TensorRT,
 * PyTorch...). Derived from the sites of a snapshot: the BPF side pays nothing. */
#ifndef GPUMEM_OWNERS_H
#define GPUMEM_OWNERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "model/snapshot.h"

/* The library of a site no frame names (no stack, or only runtime and glue frames). */
#define OWNER_UNKNOWN "(unknown)"
/* The family of the process's own executable and of its own Python files. */
#define OWNER_PROGRAM "program"
/* How many libraries a process's peaks are kept for (the rest: peak not known). */
#define OWNER_PEAKS_MAX 64

struct snap_owner {
	const char *library;	/* a file name (libnccl.so.2), or a Python file as its code
				 * object names it; OWNER_UNKNOWN */
	const char *family;	/* NULL: not a known family */
	bool python;		/* library is a Python file */
};

/* The owner of a stack of process p (p: its executable's name; may be NULL). Its strings live
 * as long as the stack's. */
void owner_of_stack(const struct snap_proc *p, const struct snap_stack *st,
		    struct snap_owner *out);
/* The family of a file name (or a Python file's path), or NULL. */
const char *owner_family(const char *library, bool python);
/* A library's name as text shows it: a Python file from its package on
 * ("torch/cuda/memory.py"), else its file name. Points into library. */
const char *owner_short_name(const char *library);
/* A GPU runtime's or driver's own file (libcudart, libcuda, libnvidia-*, libamdhip64...). */
bool owner_is_runtime(const char *module);

/* Fills p->libraries from p->sites of memory (tensor sites are inside the segments, VMM
 * mappings and reservations and IPC imports are no memory of its own: none adds anything),
 * largest first; their current_bytes add up to p's GPU and host memory. No peaks:
 * owner_peaks_apply. */
void snap_proc_libraries(struct snap_proc *p);

/* The most each library of one process was seen to hold, at the instants it was read. */
struct owner_peak {
	char *library;
	uint64_t peak;
};

struct owner_peaks {
	struct owner_peak *v;
	size_t n;
};

/* Raises pk's peaks with p's libraries and gives each row its peak (SL_PEAK); a library past
 * OWNER_PEAKS_MAX keeps its peak unknown. */
void owner_peaks_apply(struct owner_peaks *pk, struct snap_proc *p);
void owner_peaks_free(struct owner_peaks *pk);

#endif
