/* SPDX-License-Identifier: GPL-2.0 */
/* Device memory from NVML, loaded with dlopen when present: never required. */
#ifndef GPUMEM_NVML_H
#define GPUMEM_NVML_H

#include <stdbool.h>
#include <stdint.h>

#define NVML_MAX_DEVICES 16

#define NVML_UUID_LEN 96	/* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define NVML_BUS_ID_LEN 32	/* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */

/* One device as NVML numbers it (index: the host's order, by PCI bus). uuid, pci_bus_id:
 * "" when NVML did not give them, minor: -1; printed "-" or null, never as a value. */
struct nvml_device {
	unsigned int index;
	char name[96];
	uint64_t total, free, used;
	char uuid[NVML_UUID_LEN];	/* "GPU-8f6b...", what CUDA_VISIBLE_DEVICES may name */
	char pci_bus_id[NVML_BUS_ID_LEN];	/* "00000000:17:00.0" */
	int minor;		/* /dev/nvidiaN */
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
