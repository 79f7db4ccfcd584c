/* SPDX-License-Identifier: GPL-2.0 */
/* uprobe_multi links (kernel 6.6+), which libbpf 1.1 cannot create: every probe of one
 * program on one file in one link, attached and detached in one RCU grace period. */
#ifndef GPUMEM_UPROBE_MULTI_H
#define GPUMEM_UPROBE_MULTI_H

#include <stdbool.h>
#include <linux/types.h>

#define ATTACH_UPROBE_MULTI 48	/* BPF_TRACE_UPROBE_MULTI */
#define ATTACH_UPROBE_SESSION 57	/* BPF_TRACE_UPROBE_SESSION (6.13+): entry and return */

struct bpf_program;

/* A link of prog on path at the file offsets, each with its cookie; ret: return probes.
 * The program must have been loaded with expected attach type ATTACH_UPROBE_MULTI, or
 * ATTACH_UPROBE_SESSION (a session link: its entry and return, ret false).
 * Returns the link's fd (close it to detach) or -errno. */
int uprobe_multi_link(struct bpf_program *prog, const char *path, const __u64 *offsets,
		      const __u64 *cookies, unsigned int cnt, bool ret);
/* The same for a program's fd and its attach type. */
int uprobe_multi_link_fd(int prog_fd, unsigned int attach_type, const char *path,
			 const __u64 *offsets, const __u64 *cookies, unsigned int cnt, bool ret);
/* An entry probe of prog on path at offset that fires in process pid only. */
int uprobe_multi_link_pid(struct bpf_program *prog, const char *path, __u64 offset, int pid);

#endif
