/* SPDX-License-Identifier: GPL-2.0 */
/* What the files that write gpumem's metric families share (prom.c, prom_sites.c): which
 * processes have series, and the labels that name a process. */
#ifndef GPUMEM_PROM_FAMILIES_H
#define GPUMEM_PROM_FAMILIES_H

#include <stdbool.h>
#include <stdio.h>
#include "model/snapshot.h"
#include "output/prom_writer.h"

/* A process's labels: pid, comm, container, pod, namespace, pod_name, container_name ("" when
 * not known); room for a family's own labels after them. */
struct proc_labels {
	char pid[16];
	char comm[GM_COMM_LEN + 1];
	struct prom_labels ls;
};

/* Whether s->procs[i] has series: alive, with accounted calls, and the newest record of its
 * pid (so that no two samples of a family share a pid). */
bool prom_proc_shown(const struct snapshot *s, size_t i);
void prom_proc_labels(const struct snap_proc *p, struct proc_labels *pl);

/* The gpu label of device slot g (gm_proc_stats.gpu_bytes, gm_gpu_slot): its number, or
 * "unknown". Returns buf. */
const char *prom_gpu_label(unsigned int g, char *buf, size_t len);

/* The call-site families: at most per_proc sites of each process in each. 0 or -ENOMEM. */
int prom_write_sites(FILE *out, const struct snapshot *s, unsigned int per_proc);
/* gpumem_library_memory_bytes: at most per_proc libraries of each process, the rest as
 * "other" (prom_libraries.c). */
void prom_write_libraries(FILE *out, const struct snapshot *s, unsigned int per_proc);

#endif
