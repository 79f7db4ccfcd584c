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

/* Loads libnvidia-ml.so.1 once; false (and stays false) when it is absent or fails. */
bool nvml_available(void);
/* Fills up to max devices with their memory now; returns how many (0: no NVML). */
unsigned int nvml_devices(struct nvml_device *out, unsigned int max);
void nvml_close(void);

#endif
