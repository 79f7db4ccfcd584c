// SPDX-License-Identifier: GPL-2.0
/* Fuzzes host/gpu_map.c: every input is read as a process's /proc/PID/environ, and each of its
 * ordinals mapped without NVML and with four devices, and as HIP's without KFD and with three
 * AMD GPUs: a host index is -1 or one of those devices, and no two ordinals of a process are
 * one device. */
#include "fuzz.h"
#include "host/gpu_map.h"

static void check_mapping(const struct gpu_visible *v, const struct nvml_device *devs,
			  unsigned int ndevs)
{
	int seen[GPU_VISIBLE_MAX + 2];

	for (unsigned int k = 0; k < GPU_VISIBLE_MAX + 2; k++) {
		seen[k] = gpu_map_host(v, k, devs, ndevs);
		fuzz_check(seen[k] >= -1, "ordinal %u: host %d", k, seen[k]);
		fuzz_check(!ndevs || seen[k] < (int)ndevs, "ordinal %u: host %d of %u devices", k,
			   seen[k], ndevs);
		for (unsigned int j = 0; ndevs && seen[k] >= 0 && j < k; j++)
			fuzz_check(seen[j] != seen[k], "ordinals %u and %u are both host %d", j, k,
				   seen[k]);
	}
}

static void check_amd(const struct gpu_visible *v, const struct amd_device *devs,
		      unsigned int ndevs)
{
	int seen[GPU_VISIBLE_MAX + 2];

	for (unsigned int k = 0; k < GPU_VISIBLE_MAX + 2; k++) {
		seen[k] = gpu_map_amd(v, k, devs, ndevs);
		fuzz_check(seen[k] >= -1, "HIP ordinal %u: host %d", k, seen[k]);
		fuzz_check(!ndevs || seen[k] < (int)ndevs, "HIP ordinal %u: host %d of %u GPUs", k,
			   seen[k], ndevs);
		for (unsigned int j = 0; ndevs && seen[k] >= 0 && j < k; j++)
			fuzz_check(seen[j] != seen[k], "HIP ordinals %u and %u are both host %d", j,
				   k, seen[k]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const uuids[] = { "GPU-8f6b0000-aaaa", "GPU-8f6b1111-aaaa",
					     "GPU-3c2e2222-aaaa", "GPU-3c2e3333-aaaa" };
	struct nvml_device devs[4];
	struct amd_device amd[3];
	struct gpu_visible v;
	char *copy = malloc(size ? size : 1);

	if (!copy)
		abort();
	memcpy(copy, data, size);	/* exactly size bytes: ASan sees an overread */
	memset(devs, 0, sizeof(devs));
	for (unsigned int i = 0; i < 4; i++) {
		devs[i].index = i;
		snprintf(devs[i].uuid, sizeof(devs[i].uuid), "%s", uuids[i]);
	}
	memset(amd, 0, sizeof(amd));
	for (unsigned int i = 0; i < 3; i++) {
		amd[i].index = i;
		snprintf(amd[i].uuid, sizeof(amd[i].uuid), "GPU-%016x", 0xa0 + i);
	}
	gpu_visible_parse_environ(copy, size, &v);
	fuzz_check(v.known, "a parsed environment is not known");
	fuzz_check(v.cuda.n <= GPU_VISIBLE_MAX && v.nvidia.n <= GPU_VISIBLE_MAX,
		   "lists of %u and %u entries", v.cuda.n, v.nvidia.n);
	for (unsigned int i = 0; i < v.cuda.n; i++)
		fuzz_check(memchr(v.cuda.e[i].uuid, 0, sizeof(v.cuda.e[i].uuid)) != NULL,
			   "entry %u unterminated", i);
	check_mapping(&v, devs, 0);
	check_mapping(&v, devs, 4);
	check_amd(&v, amd, 0);
	check_amd(&v, amd, 3);
	free(copy);
	return 0;
}
