// SPDX-License-Identifier: GPL-2.0
/* The snapshot object: references, look-ups and the times read off it. Built by publish.c;
 * read by every output. */
#include <stdlib.h>
#include <string.h>
#include "host/gpu_map.h"
#include "model/snapshot.h"
#include "probes/table.h"

struct snap_stack *snap_stack_get(struct snap_stack *st)
{
	if (st)
		__atomic_add_fetch(&st->refs, 1, __ATOMIC_RELAXED);
	return st;
}

void snap_stack_put(struct snap_stack *st)
{
	if (st && __atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(st);
}

struct snapshot *snapshot_get(struct snapshot *s)
{
	if (s)
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	return s;
}

static void snap_proc_release(struct snap_proc *p)
{
	free(p->cmdline);
	free(p->cgroup);
	free(p->user);
	for (size_t i = 0; i < p->nsites; i++)
		snap_stack_put(p->sites[i].stack);
	free(p->sites);
	free(p->libraries);
	for (size_t i = 0; i < p->ntensor_sites; i++)
		snap_stack_put(p->tensor_sites[i].stack);
	free(p->tensor_sites);
}

void snapshot_put(struct snapshot *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL))
		return;
	for (size_t i = 0; i < s->nprocs; i++)
		snap_proc_release(&s->procs[i]);
	free(s->procs);
	for (size_t i = 0; i < s->nfailures; i++)
		snap_stack_put(s->failures[i].stack);
	free(s->failures);
	free(s->files);
	free(s);
}

const struct snap_proc *snapshot_find(const struct snapshot *s, int pid)
{
	size_t lo = 0, hi = s->nprocs;

	/* The last record of pid: its newest owner. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->procs[mid].pid <= pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && s->procs[lo - 1].pid == pid ? &s->procs[lo - 1] : NULL;
}

uint64_t snapshot_wall_ns(const struct snapshot *s, uint64_t mono_ns)
{
	return mono_ns + s->mono_to_real_ns;
}

uint64_t snap_site_oldest_age(const struct snap_proc *p, const struct snap_site *ss)
{
	if (!(ss->valid & SS_OLDEST) || p->end_ns <= ss->oldest_ns)
		return 0;
	return p->end_ns - ss->oldest_ns;
}

int snap_proc_cmp(const void *a, const void *b)
{
	const struct snap_proc *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->alive != y->alive)
		return x->alive - y->alive;	/* an ended process before the pid's new owner */
	return (x->serial > y->serial) - (x->serial < y->serial);
}

bool snap_proc_many_gpus(const struct snap_proc *p)
{
	for (unsigned int g = 1; g <= GM_MAX_GPUS; g++)
		if (p->st.gpu_bytes[g])
			return true;
	return false;
}

int snap_site_cmp(const void *a, const void *b)
{
	const struct snap_site *x = a, *y = b;

	if (x->st.current_bytes != y->st.current_bytes)
		return x->st.current_bytes > y->st.current_bytes ? -1 : 1;
	if (x->st.alloc_bytes_total != y->st.alloc_bytes_total)
		return x->st.alloc_bytes_total > y->st.alloc_bytes_total ? -1 : 1;
	if (x->stack_id != y->stack_id)
		return (x->stack_id > y->stack_id) - (x->stack_id < y->stack_id);
	if (x->py_stack_id != y->py_stack_id)
		return (x->py_stack_id > y->py_stack_id) - (x->py_stack_id < y->py_stack_id);
	return (x->gpu > y->gpu) - (x->gpu < y->gpu);
}

/* ---- what a frame is to the user ---- */

static const char *base_name_of(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

bool snap_frame_is_glue(const struct snap_frame *f)
{
	static const char *const glue[] = {
		"libc.so", "libc-", "ld-linux", "ld-", "libpthread", "libdl.", "libstdc++",
		"libgcc_s", "libffi", "_ctypes", "libpython", "python",
	};
	const char *base;

	if (f->python || !f->module)
		return false;
	base = base_name_of(f->module);
	for (size_t i = 0; i < sizeof(glue) / sizeof(glue[0]); i++)
		if (starts(base, glue[i]))
			return true;
	return false;
}

/* A Python frame in code the user installed rather than wrote: the standard library and
 * installed packages (torch, numpy), or the interpreter's own frozen modules. */
bool snap_frame_is_library(const struct snap_frame *f)
{
	const char *file = f->file;

	if (!file || file[0] == '<')
		return true;
	if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/"))
		return true;
	/* .../lib/python3.11/... : the standard library */
	const char *lib = strstr(file, "/lib/python");

	return lib && strchr(lib + strlen("/lib/python"), '/');
}

/* ---- which host GPU: a process's ordinals through its list variables and the devices ---- */

static bool proc_is_amd(const struct snap_proc *p)
{
	for (size_t i = 0; i < p->nsites; i++)
		if (gm_kind_is_gpu(p->sites[i].kind) &&
		    !strcmp(probe_api_vendor(p->sites[i].api), "amd"))
			return true;
	return false;
}

const char *snap_proc_gpu_vendor(const struct snap_proc *p)
{
	return proc_is_amd(p) ? "amd" : "nvidia";
}

static int slot_of(const struct snapshot *s, const struct snap_proc *p, bool amd,
		   unsigned int ordinal)
{
	int host;

	if (amd)
		host = gpu_map_amd(&p->visible, ordinal, s->amd_devices, s->namd_devices);
	else
		host = gpu_map_host(&p->visible, ordinal, s->devices,
				    s->devices_valid ? s->ndevices : 0);
	if (host < 0 || host >= GM_MAX_GPUS)
		return -1;
	return amd ? SNAP_AMD_SLOT + host : host;
}

int snap_gpu_host(const struct snapshot *s, const struct snap_proc *p, unsigned int ordinal)
{
	return slot_of(s, p, proc_is_amd(p), ordinal);
}

bool snap_gpu_of_slot(const struct snapshot *s, int slot, struct snap_gpu *out)
{
	*out = (struct snap_gpu){ .vendor = "nvidia", .index = slot, .name = "", .uuid = "" };
	if (slot < 0 || slot >= SNAP_SLOT_UNKNOWN)
		return false;
	if (slot >= SNAP_AMD_SLOT) {
		out->vendor = "amd";
		out->index = slot - SNAP_AMD_SLOT;
		for (unsigned int i = 0; i < s->namd_devices; i++) {
			const struct amd_device *d = &s->amd_devices[i];

			if ((int)d->index != out->index)
				continue;
			out->name = d->name;
			out->uuid = d->uuid;
			out->memory_known = d->total > 0;
			out->total = d->total, out->used = d->used, out->free = d->free;
		}
		return true;
	}
	const struct nvml_device *d = s->devices_valid ?
		gpu_device_by_index(s->devices, s->ndevices, slot) : NULL;

	if (d) {
		out->name = d->name;
		out->uuid = d->uuid;
		out->memory_known = d->total > 0;
		out->total = d->total, out->used = d->used, out->free = d->free;
	}
	return true;
}

void snap_host_gpu_add(const struct snapshot *s, const struct snap_proc *p,
		       uint64_t out[SNAP_SLOTS])
{
	bool amd = proc_is_amd(p);

	for (unsigned int g = 0; g <= GM_MAX_GPUS; g++) {
		int slot;

		if (!p->st.gpu_bytes[g])
			continue;
		slot = g < GM_MAX_GPUS ? slot_of(s, p, amd, g) : -1;
		out[slot >= 0 ? slot : SNAP_SLOT_UNKNOWN] += p->st.gpu_bytes[g];
	}
}

int snap_site_host_gpu(const struct snapshot *s, const struct snap_proc *p,
		       const struct snap_site *ss)
{
	if (!ss->gpu || ss->gpu > GM_MAX_GPUS)
		return -1;
	return slot_of(s, p, !strcmp(probe_api_vendor(ss->api), "amd"), ss->gpu - 1u);
}
