// SPDX-License-Identifier: GPL-2.0
/* A process's CUDA or HIP ordinals -> the host's devices (NVML's indices, KFD's GPU order), from
 * its environment (read live from its memory, symbols/environ.c, or the one it started with).
 * The environment is untrusted input: every value is bounded and parsed here. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host/gpu_map.h"
#include "host/procs.h"

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

/* One comma-separated token; false: not a device name (the list ends before it). */
static bool parse_entry(const char *tok, size_t len, struct gpu_entry *e)
{
	memset(e, 0, sizeof(*e));
	if (!len)
		return false;
	if (tok[0] >= '0' && tok[0] <= '9') {
		uint64_t v = 0;

		for (size_t i = 0; i < len; i++) {
			if (tok[i] < '0' || tok[i] > '9')
				return false;
			v = v * 10 + (uint64_t)(tok[i] - '0');
			if (v > INT32_MAX)
				return false;
		}
		e->kind = GPU_ENTRY_INDEX;
		e->index = (unsigned int)v;
		return true;
	}
	if (len > 4 && !strncmp(tok, "GPU-", 4)) {
		if (len >= sizeof(e->uuid)) {
			e->kind = GPU_ENTRY_OTHER;
			return true;
		}
		e->kind = GPU_ENTRY_UUID;
		memcpy(e->uuid, tok, len);
		return true;
	}
	if (len > 4 && !strncmp(tok, "MIG-", 4)) {
		e->kind = GPU_ENTRY_OTHER;
		return true;
	}
	return false;
}

void gpu_list_parse(const char *value, size_t len, bool nvidia, struct gpu_list *out)
{
	size_t pos = 0;

	memset(out, 0, sizeof(*out));
	out->set = true;
	if (nvidia) {
		if (len == 3 && !memcmp(value, "all", 3)) {
			out->all = true;
			return;
		}
		if ((len == 4 && !memcmp(value, "none", 4)) ||
		    (len == 4 && !memcmp(value, "void", 4)))
			return;
	}
	while (pos < len && out->n < GPU_VISIBLE_MAX) {
		size_t start = pos, end;

		while (pos < len && value[pos] != ',')
			pos++;
		end = pos++;
		while (start < end && is_space(value[start]))
			start++;
		while (end > start && is_space(value[end - 1]))
			end--;
		if (!parse_entry(value + start, end - start, &out->e[out->n]))
			return;
		out->n++;
	}
}

static bool var_is(const char *s, size_t len, const char *name, const char **value,
		   size_t *vlen)
{
	size_t n = strlen(name);

	if (len <= n || memcmp(s, name, n) || s[n] != '=')
		return false;
	*value = s + n + 1;
	*vlen = len - n - 1;
	return true;
}

const char *const gpu_visible_vars[] = {
	"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
	"ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", NULL,
};

void gpu_visible_parse_environ(const char *data, size_t n, struct gpu_visible *v)
{
	size_t pos = 0;

	memset(v, 0, sizeof(*v));
	v->known = true;
	while (pos < n) {
		const char *s = data + pos, *nul = memchr(s, 0, n - pos), *value;
		size_t len, vlen;

		if (!nul)
			break;	/* cut short by the bound: its value may be only a part */
		len = (size_t)(nul - s);
		pos += len + 1;
		/* A name set twice: the first, as getenv (and so CUDA) takes it. */
		if (var_is(s, len, "CUDA_VISIBLE_DEVICES", &value, &vlen) && !v->cuda.set)
			gpu_list_parse(value, vlen, false, &v->cuda);
		else if (var_is(s, len, "NVIDIA_VISIBLE_DEVICES", &value, &vlen) && !v->nvidia.set)
			gpu_list_parse(value, vlen, true, &v->nvidia);
		else if (var_is(s, len, "HIP_VISIBLE_DEVICES", &value, &vlen) && !v->hip.set)
			gpu_list_parse(value, vlen, false, &v->hip);
		else if (var_is(s, len, "ROCR_VISIBLE_DEVICES", &value, &vlen) && !v->rocr.set)
			gpu_list_parse(value, vlen, false, &v->rocr);
		else if (var_is(s, len, "CUDA_DEVICE_ORDER", &value, &vlen) && !v->order_set) {
			v->order_set = true;
			v->pci_order = vlen == 10 && !memcmp(value, "PCI_BUS_ID", 10);
		}
	}
}

int gpu_visible_read(int pid, struct gpu_visible *v)
{
	size_t n = 0;
	char *buf = malloc(GPU_ENVIRON_MAX);
	int err;

	memset(v, 0, sizeof(*v));
	if (!buf)
		return -ENOMEM;
	err = proc_read_environ(pid, buf, GPU_ENVIRON_MAX, &n);
	/* Nothing, from a process that has begun to end (its memory gone): not an empty
	 * environment, which maps every ordinal as itself, but none read. */
	if (!err && !n && proc_is_ending(pid))
		err = -ESRCH;
	if (!err)
		gpu_visible_parse_environ(buf, n, v);
	free(buf);
	return err;
}

const struct nvml_device *gpu_device_by_index(const struct nvml_device *devs, unsigned int ndevs,
					      int host)
{
	for (unsigned int i = 0; host >= 0 && i < ndevs; i++)
		if (devs[i].index == (unsigned int)host)
			return &devs[i];
	return NULL;
}

/* A vendor's devices as the list variables name them: each one's host index (NVML's, or KFD's
 * GPU order) and UUID ("" when not known). */
struct gpu_ids {
	unsigned int n;
	unsigned int index[GPU_VISIBLE_MAX];
	const char *uuid[GPU_VISIBLE_MAX];
};

/* The devices a process may see, as host indices, in its ordinals' order before its last
 * list: every one (identity), or a container's or ROCr's. */
struct gpu_set {
	bool identity;
	int count;		/* identity: the host's device count, -1 when none were listed */
	int host[GPU_VISIBLE_MAX];	/* !identity: host indices, count of them */
};

static int host_count(const struct gpu_ids *ids)
{
	int count = -1;

	for (unsigned int i = 0; i < ids->n; i++)
		if ((int)ids->index[i] + 1 > count)
			count = (int)ids->index[i] + 1;
	return count;
}

static bool set_has(const struct gpu_set *set, int host)
{
	if (set->identity)
		return host >= 0 && (set->count < 0 || host < set->count);
	for (int i = 0; i < set->count; i++)
		if (set->host[i] == host)
			return true;
	return false;
}

/* The one device in set whose UUID begins with prefix: its host index, -1 when none or more
 * than one (CUDA refuses an ambiguous prefix). */
static int match_uuid(const struct gpu_set *set, const char *prefix, const struct gpu_ids *ids)
{
	size_t len = strlen(prefix);
	int found = -1;

	for (unsigned int i = 0; i < ids->n; i++) {
		if (!ids->uuid[i][0] || strncmp(ids->uuid[i], prefix, len) ||
		    !set_has(set, (int)ids->index[i]))
			continue;
		if (found >= 0)
			return -1;
		found = (int)ids->index[i];
	}
	return found;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Position pos of set: its host index, or -1. */
static int set_at(const struct gpu_set *set, unsigned int pos)
{
	if (set->identity)
		return set->count < 0 || pos < (unsigned int)set->count ? (int)pos : -1;
	return pos < (unsigned int)set->count ? set->host[pos] : -1;
}

/* Entry j of a list, within set: its host index, or -1 (not a device of the set). */
static int entry_host(const struct gpu_entry *e, const struct gpu_set *set,
		      const struct gpu_ids *ids)
{
	if (e->kind == GPU_ENTRY_OTHER)
		return -1;
	if (e->kind == GPU_ENTRY_UUID)
		return ids->n ? match_uuid(set, e->uuid, ids) : -1;
	return set_at(set, e->index);
}

/* The set a first list leaves (NVIDIA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES): its entries up to
 * the first invalid one, in PCI order where sorted (a container's device files, numbered by
 * bus) or as listed (ROCr's). False when that set is not known (a UUID with no devices
 * listed, a MIG device). */
static bool first_set(const struct gpu_list *l, const struct gpu_ids *ids, bool sorted,
		      struct gpu_set *out)
{
	struct gpu_set all = { .identity = true, .count = host_count(ids) };
	int n = 0;

	if (!l->set || l->all) {
		*out = all;
		return true;
	}
	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < l->n; i++) {
		int host;

		if (l->e[i].kind == GPU_ENTRY_OTHER || (l->e[i].kind == GPU_ENTRY_UUID && !ids->n))
			return false;
		host = entry_host(&l->e[i], &all, ids);
		if (host < 0 || (!sorted && set_has(out, host)))
			break;	/* an invalid entry ends the list; for ROCr a repeat too */
		out->host[n++] = host;
		out->count = n;
	}
	if (sorted)
		qsort(out->host, (size_t)n, sizeof(out->host[0]), cmp_int);
	out->count = 0;
	for (int i = 0; i < n; i++)
		if (!i || out->host[i] != out->host[i - 1])
			out->host[out->count++] = out->host[i];
	return true;
}

/* The host index of ordinal through set and then list (CUDA_VISIBLE_DEVICES, HIP's). */
static int list_pick(const struct gpu_list *l, const struct gpu_set *set,
		     const struct gpu_ids *ids, unsigned int ordinal)
{
	int seen[GPU_VISIBLE_MAX];

	if (!l->set)
		return set_at(set, ordinal);
	/* Each entry up to the ordinal must be valid: an invalid one ends the list there. */
	for (unsigned int j = 0; j <= ordinal; j++) {
		int host;

		if (j >= l->n)
			return -1;
		host = entry_host(&l->e[j], set, ids);
		if (host < 0)
			return -1;
		for (unsigned int k = 0; k < j; k++)
			if (seen[k] == host)
				return -1;	/* a device named twice ends the list too */
		seen[j] = host;
	}
	return seen[ordinal];
}

int gpu_map_host(const struct gpu_visible *v, unsigned int ordinal,
		 const struct nvml_device *devs, unsigned int ndevs)
{
	struct gpu_ids ids = { 0 };
	struct gpu_set set;

	for (unsigned int i = 0; i < ndevs && ids.n < GPU_VISIBLE_MAX; i++, ids.n++) {
		ids.index[ids.n] = devs[i].index;
		ids.uuid[ids.n] = devs[i].uuid;
	}
	if (!v->known || !first_set(&v->nvidia, &ids, true, &set))
		return -1;
	return list_pick(&v->cuda, &set, &ids, ordinal);
}

int gpu_map_amd(const struct gpu_visible *v, unsigned int ordinal,
		const struct amd_device *devs, unsigned int ndevs)
{
	struct gpu_ids ids = { 0 };
	struct gpu_set set;

	for (unsigned int i = 0; i < ndevs && ids.n < GPU_VISIBLE_MAX; i++, ids.n++) {
		ids.index[ids.n] = devs[i].index;
		ids.uuid[ids.n] = devs[i].uuid;
	}
	if (!v->known || !first_set(&v->rocr, &ids, false, &set))
		return -1;
	return list_pick(v->hip.set ? &v->hip : &v->cuda, &set, &ids, ordinal);
}
