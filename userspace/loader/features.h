/* SPDX-License-Identifier: GPL-2.0 */
/* What the running kernel offers the BPF side, found once, each by its smallest question
 * (a two-instruction program, a look in the kernel's BTF), not by loading the whole object
 * again and again. */
#ifndef GPUMEM_LOADER_FEATURES_H
#define GPUMEM_LOADER_FEATURES_H

#include <stdbool.h>

struct kernel_features {
	bool uprobe_multi;	/* uprobe_multi links (6.6+): one link per program and file */
	bool uprobe_session;	/* uprobe sessions (6.13+): entry and return in one program */
	bool open_watch;	/* the vm_unmapped_area tracepoint: libraries mapped later */
};

/* The running kernel's, asked the first time and remembered. */
const struct kernel_features *kernel_features(void);

#endif
