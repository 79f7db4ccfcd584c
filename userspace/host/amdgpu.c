// SPDX-License-Identifier: GPL-2.0
/* AMD's devices from KFD's topology and amdgpu's DRM files (amdgpu.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "host/amdgpu.h"

#define TOPOLOGY "class/kfd/kfd/topology/nodes"
#define MAX_NODES 256	/* KFD numbers CPU and GPU nodes from 0; more is not a topology */

const char *amdgpu_sysfs_root(void)
{
	const char *root = getenv("GPUMEM_SYSFS_ROOT");

	return root && root[0] == '/' ? root : "/sys";
}

/* A small sysfs file, NUL-terminated; its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

static bool read_u64(const char *path, uint64_t *v)
{
	char buf[32], *end;

	if (read_small(path, buf, sizeof(buf)) <= 0)
		return false;
	errno = 0;
	*v = strtoull(buf, &end, 0);
	return !errno && end != buf && (*end == '\n' || !*end);
}

/* "key value" lines of a topology properties file: the value of key, if there. */
static bool property(const char *text, const char *key, uint64_t *v)
{
	size_t klen = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (!strncmp(l, key, klen) && l[klen] == ' ') {
			*v = strtoull(l + klen + 1, NULL, 10);
			return true;
		}
	}
	return false;
}

static int node_cmp(const void *a, const void *b)
{
	unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;

	return x < y ? -1 : x > y;
}

/* The topology's node numbers, ascending: KFD's order, which HIP's ordinals follow. */
static unsigned int topology_nodes(const char *root, unsigned int *nodes)
{
	char path[512];
	unsigned int n = 0;
	struct dirent *de;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/" TOPOLOGY, root);
	dir = opendir(path);
	if (!dir)
		return 0;
	while ((de = readdir(dir)) && n < MAX_NODES) {
		char *end;
		unsigned long v = strtoul(de->d_name, &end, 10);

		if (end != de->d_name && !*end && v < MAX_NODES)
			nodes[n++] = (unsigned int)v;
	}
	closedir(dir);
	qsort(nodes, n, sizeof(*nodes), node_cmp);
	return n;
}

/* Node's name, bus and render node from the topology; its VRAM from the DRM device. */
static bool read_node(const char *root, unsigned int node, struct amd_device *d)
{
	char path[512], props[4096];
	uint64_t minor, location, domain = 0, gpu_id, unique_id;

	snprintf(path, sizeof(path), "%s/" TOPOLOGY "/%u/gpu_id", root, node);
	if (!read_u64(path, &gpu_id) || !gpu_id || gpu_id > UINT32_MAX)
		return false;	/* a CPU node */
	d->gpu_id = (uint32_t)gpu_id;
	snprintf(path, sizeof(path), "%s/" TOPOLOGY "/%u/name", root, node);
	if (read_small(path, d->name, sizeof(d->name)) <= 0)
		snprintf(d->name, sizeof(d->name), "AMD GPU");
	d->name[strcspn(d->name, "\n")] = 0;
	d->render_minor = -1;
	snprintf(path, sizeof(path), "%s/" TOPOLOGY "/%u/properties", root, node);
	if (read_small(path, props, sizeof(props)) > 0) {
		if (property(props, "drm_render_minor", &minor) && minor < 1u << 20)
			d->render_minor = (int)minor;
		property(props, "domain", &domain);
		if (property(props, "unique_id", &unique_id) && unique_id)
			snprintf(d->uuid, sizeof(d->uuid), "GPU-%016" PRIx64, unique_id);
		if (property(props, "location_id", &location))
			snprintf(d->pci_bus_id, sizeof(d->pci_bus_id), "%04x:%02x:%02x.%x",
				 (unsigned int)(domain & 0xffff), (unsigned int)(location >> 8) & 0xff,
				 (unsigned int)(location >> 3) & 0x1f, (unsigned int)location & 7);
	}
	if (d->render_minor < 0)
		return true;	/* listed; its memory not known */
	snprintf(path, sizeof(path), "%s/class/drm/renderD%d/device/mem_info_vram_total", root,
		 d->render_minor);
	if (!read_u64(path, &d->total))
		return true;
	snprintf(path, sizeof(path), "%s/class/drm/renderD%d/device/mem_info_vram_used", root,
		 d->render_minor);
	if (!read_u64(path, &d->used) || d->used > d->total) {
		d->total = d->used = 0;
		return true;
	}
	d->free = d->total - d->used;
	return true;
}

unsigned int amdgpu_devices(struct amd_device *out, unsigned int max,
			    struct amdgpu_status *st)
{
	const char *root = amdgpu_sysfs_root();
	unsigned int nodes[MAX_NODES], nnodes, n = 0, gpus = 0;
	char path[512];

	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "%s/" TOPOLOGY, root);
	if (access(path, R_OK)) {
		snprintf(st->reason, sizeof(st->reason), "no %s/class/kfd: amdgpu's KFD is not "
			 "loaded", root);
		return 0;
	}
	st->present = true;
	nnodes = topology_nodes(root, nodes);
	for (unsigned int i = 0; i < nnodes && n < max; i++) {
		struct amd_device d = { 0 };

		if (!read_node(root, nodes[i], &d))
			continue;
		d.index = gpus++;
		if (d.total)
			out[n++] = d;
	}
	if (!gpus)
		snprintf(st->reason, sizeof(st->reason), "KFD lists no GPU");
	else if (!n)
		snprintf(st->reason, sizeof(st->reason), "amdgpu gives no mem_info_vram_total for "
			 "its %u GPUs", gpus);
	return n;
}

bool amdgpu_process_vram(int pid, const struct amd_device *dev, uint64_t *bytes)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/class/kfd/kfd/proc/%d/vram_%" PRIu32,
		 amdgpu_sysfs_root(), pid, dev->gpu_id);
	return read_u64(path, bytes);
}
