/* SPDX-License-Identifier: GPL-2.0 */
/* What one probe hit costs the traced thread: a uprobe on a function of gpumem's own, called
 * with and without it, once; and, where the kernel keeps statistics (kernel.bpf_stats_enabled),
 * how much longer gpumem's probe programs run than the calibration's. */
#ifndef GPUMEM_CALIBRATE_H
#define GPUMEM_CALIBRATE_H

#include <stdint.h>

struct bpf_object;
struct bpf_program;

struct calibration {
	double trap_ns;		/* a hit: the trap and a run of a program that does nothing */
	/* The calibration program's runs during the measurement, from the kernel's statistics
	 * (0 when they were off): left out of the programs' mean, and its own mean is what the
	 * trap already holds of a run. */
	uint64_t runs, run_ns;
};

/* Measures a hit of prog (an uprobe_multi entry program), placed in gpumem alone. 0 or -errno
 * (the probe could not be placed). */
int calibrate_trap(struct bpf_program *prog, struct calibration *out);
/* What a run of obj's probe programs (uprobes, returns, USDT) costs beyond the calibration's,
 * on average, from the kernel's statistics: -ENODATA when they are off or nothing ran. */
int bpf_extra_run_ns(const struct bpf_object *obj, const struct calibration *c, double *ns);

#endif
