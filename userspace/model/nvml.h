/* SPDX-License-Identifier: GPL-2.0 */
/* Device memory from NVML, loaded with dlopen when present: never required. */
#ifndef GPUMEM_NVML_H
#define GPUMEM_NVML_H

#include <stdbool.h>
#include <stdint.h>

#define NVML_MAX_DEVICES 16

struct nvml_device {
	unsigned int index;
	char name[96];
	uint64_t total, free, used;
};

#define NVML_REASON_LEN 160

/* Why there are no device numbers: shown instead of them, never a zero. */
struct nvml_status {
	bool loaded;		/* libnvidia-ml.so.1 was opened */
	bool error_valid;	/* error is the return code of the call named in reason */
	int error;		/* NVML's nvmlReturn_t (9: NVML_ERROR_DRIVER_NOT_LOADED) */
	char reason[NVML_REASON_LEN];	/* "" when NVML answered with devices */
};

/* Loads libnvidia-ml.so.1 once; false (and stays false) when it is absent or fails. */
bool nvml_available(void);
/* Fills up to max devices with their memory now; returns how many (0: no NVML, see
 * nvml_get_status). */
unsigned int nvml_devices(struct nvml_device *out, unsigned int max);
/* What the last nvml_devices() found: the reason when it returned 0. */
void nvml_get_status(struct nvml_status *out);
void nvml_close(void);

#endif
