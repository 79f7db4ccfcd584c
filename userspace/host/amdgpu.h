/* SPDX-License-Identifier: GPL-2.0 */
/* AMD's devices as the kernel tells them, where NVML tells NVIDIA's: each GPU in KFD's
 * topology (HIP's order), its VRAM from amdgpu's DRM files, and the VRAM each process holds
 * from KFD's per-process files. Nothing is loaded: a host without amdgpu has a reason. */
#ifndef GPUMEM_AMDGPU_H
#define GPUMEM_AMDGPU_H

#include <stdbool.h>
#include <stdint.h>

#define AMDGPU_MAX_DEVICES 16
#define AMDGPU_REASON_LEN 160

/* One GPU node of KFD's topology. index: its place among the GPU nodes, the ordinal HIP
 * gives it with no *_VISIBLE_DEVICES; pci_bus_id "" and render_minor -1 when not known. */
struct amd_device {
	unsigned int index;
	uint32_t gpu_id;	/* KFD's id: the suffix of /sys/class/kfd/kfd/proc/PID/vram_ID */
	char name[64];		/* KFD's, e.g. "gfx90a" */
	char uuid[24];		/* "GPU-" and KFD's unique_id in hex, as ROCR_VISIBLE_DEVICES
				 * names it; "" when not known */
	uint64_t total, used, free;	/* mem_info_vram_total and _used */
	char pci_bus_id[32];	/* "0000:c1:00.0" */
	int render_minor;	/* /dev/dri/renderDN */
};

struct amdgpu_status {
	bool present;		/* KFD's topology is there */
	char reason[AMDGPU_REASON_LEN];	/* "" when it listed GPUs with their memory */
};

/* The sysfs tree read: "/sys", or $GPUMEM_SYSFS_ROOT (tests give a tree of their own; the
 * environment is gpumem's, which no traced process sets). */
const char *amdgpu_sysfs_root(void);
/* Fills up to max devices with their memory now; how many (0: st says why). */
unsigned int amdgpu_devices(struct amd_device *out, unsigned int max,
			    struct amdgpu_status *st);
/* The VRAM pid holds on dev as KFD counts it (every allocation of the process, traced or
 * not); false when KFD has no file for it (not a KFD process, or gone). */
bool amdgpu_process_vram(int pid, const struct amd_device *dev, uint64_t *bytes);

#endif
