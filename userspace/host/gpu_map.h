/* SPDX-License-Identifier: GPL-2.0 */
/* Which physical GPU a process's ordinal is, as its environment said at start. NVIDIA: its
 * CUDA_VISIBLE_DEVICES, composed with the NVIDIA_VISIBLE_DEVICES a container runtime honoured.
 * AMD: HIP_VISIBLE_DEVICES (else CUDA_VISIBLE_DEVICES, which HIP honours too), composed with
 * ROCR_VISIBLE_DEVICES, which ROCr applies first in the order it lists. */
#ifndef GPUMEM_GPU_MAP_H
#define GPUMEM_GPU_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpumem.h"
#include "host/amdgpu.h"
#include "host/nvml.h"

#define GPU_VISIBLE_MAX NVML_MAX_DEVICES	/* entries kept of each list */
#define GPU_ENTRY_LEN 48	/* a UUID ("GPU-" and 36) fits; longer names none */
/* The most of /proc/PID/environ read: variables past it count as unset. */
#define GPU_ENVIRON_MAX (256 * 1024)

enum gpu_entry_kind {
	GPU_ENTRY_INDEX,	/* a device index */
	GPU_ENTRY_UUID,		/* "GPU-..." (a prefix of a UUID) */
	GPU_ENTRY_OTHER,	/* MIG-..., or a name too long: a device gpumem cannot tell */
};

struct gpu_entry {
	uint8_t kind;		/* enum gpu_entry_kind */
	unsigned int index;	/* GPU_ENTRY_INDEX */
	char uuid[GPU_ENTRY_LEN];	/* GPU_ENTRY_UUID */
};

/* One list variable as parsed. Unset: every device in order. A syntax error (a non-number
 * that is not GPU-/MIG-) ends the list there, as CUDA does; so does a repeated index. */
struct gpu_list {
	bool set;
	bool all;		/* NVIDIA_VISIBLE_DEVICES=all */
	unsigned int n;
	struct gpu_entry e[GPU_VISIBLE_MAX];
};

struct gpu_visible {
	bool known;		/* the environment was read; else every ordinal is unknown */
	bool order_set;		/* CUDA_DEVICE_ORDER was set */
	bool pci_order;		/* ... to PCI_BUS_ID (else FASTEST_FIRST, assumed the same) */
	struct gpu_list cuda;	/* CUDA_VISIBLE_DEVICES */
	struct gpu_list nvidia;	/* NVIDIA_VISIBLE_DEVICES */
	struct gpu_list hip;	/* HIP_VISIBLE_DEVICES */
	struct gpu_list rocr;	/* ROCR_VISIBLE_DEVICES */
};

/* Parses one list's value (CUDA_VISIBLE_DEVICES' or NVIDIA_VISIBLE_DEVICES'). */
void gpu_list_parse(const char *value, size_t len, bool nvidia, struct gpu_list *out);
/* The variables gpu_visible_parse_environ reads (NULL-terminated). */
extern const char *const gpu_visible_vars[];
/* Fills v from environ's NUL-separated "NAME=value" strings (n bytes); a last string without
 * its NUL was cut short and is ignored. Sets v->known. */
void gpu_visible_parse_environ(const char *data, size_t n, struct gpu_visible *v);
/* Reads /proc/PID/environ (at most GPU_ENVIRON_MAX bytes): 0 or -errno (v left unknown);
 * -ESRCH for a process that has begun to end, whose environ reads empty. */
int gpu_visible_read(int pid, struct gpu_visible *v);

/* The host index (NVML's) of the device the process calls ordinal, or -1 when not known: its
 * environment not read, a MIG or unmatched UUID on the way, past the end of its list, or a UUID
 * while NVML gave no devices (devs, ndevs: what NVML listed, by host index). */
int gpu_map_host(const struct gpu_visible *v, unsigned int ordinal,
		 const struct nvml_device *devs, unsigned int ndevs);
/* The host index (KFD's GPU order, amd_device's index) of the device an AMD program calls
 * ordinal, or -1 when not known, as above (devs, ndevs: the GPUs KFD listed). */
int gpu_map_amd(const struct gpu_visible *v, unsigned int ordinal,
		const struct amd_device *devs, unsigned int ndevs);
/* NVML's device of that host index, or NULL. */
const struct nvml_device *gpu_device_by_index(const struct nvml_device *devs, unsigned int ndevs,
					      int host);

#endif
