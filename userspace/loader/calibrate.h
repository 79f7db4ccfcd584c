/* SPDX-License-Identifier: GPL-2.0 */
/* What one probe hit costs the traced thread: a uprobe on a function of gpumem's own, called
 * with and without it, once; and the mean run time of gpumem's programs from the kernel's own
 * statistics where they are enabled (kernel.bpf_stats_enabled). */
#ifndef GPUMEM_CALIBRATE_H
#define GPUMEM_CALIBRATE_H

#include <stdint.h>

struct bpf_object;
struct bpf_program;

/* Nanoseconds a hit of prog (a uprobe_multi entry program) adds to a call: its trap and a run
 * of the program that finds nothing to do. 0 or -errno (the probe could not be placed). */
int calibrate_trap_ns(struct bpf_program *prog, double *ns);
/* The mean nanoseconds of a run of obj's programs, from the kernel's statistics: -ENODATA when
 * they are off (kernel.bpf_stats_enabled 0) or nothing ran. */
int bpf_mean_run_ns(const struct bpf_object *obj, double *ns);

#endif
