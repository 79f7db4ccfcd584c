// SPDX-License-Identifier: GPL-2.0
/* gpumem's metric families from one snapshot: build info, processes, containers, pods and
 * every loss counter (the call sites are prom_sites.c's). */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/util.h"
#include "output/prom.h"
#include "output/prom_families.h"
#include "output/report.h"
#include "probes/table.h"

#ifndef GPUMEM_VERSION
#define GPUMEM_VERSION "unknown"
#endif

#define GAUGE "gauge"
#define COUNTER "counter"

bool prom_proc_shown(const struct snapshot *s, size_t i)
{
	const struct snap_proc *p = &s->procs[i], *next;

	if (!p->alive || !(p->valid & SP_STATS))
		return false;
	next = i + 1 < s->nprocs ? &s->procs[i + 1] : NULL;
	return !(next && next->pid == p->pid && next->alive && (next->valid & SP_STATS));
}

void prom_proc_labels(const struct snap_proc *p, struct proc_labels *pl)
{
	const struct container_info *ci = &p->container;

	snprintf(pl->pid, sizeof(pl->pid), "%d", p->pid);
	snprintf(pl->comm, sizeof(pl->comm), "%.*s", GM_COMM_LEN,
		 p->valid & SP_COMM ? p->comm : "");
	pl->ls.n = 0;
	prom_label_add(&pl->ls, "pid", pl->pid);
	prom_label_add(&pl->ls, "comm", pl->comm);
	prom_label_add(&pl->ls, "container", ci->has_id ? ci->id : "");
	prom_label_add(&pl->ls, "pod", ci->has_pod ? ci->pod_uid : "");
	prom_label_add(&pl->ls, "namespace", ci->pod_namespace);
	prom_label_add(&pl->ls, "pod_name", ci->pod_name);
	prom_label_add(&pl->ls, "container_name", ci->container_name);
}

static bool is_gpu_kind(unsigned int kind)
{
	return gm_kind_is_gpu(kind);
}

/* ---- processes ---- */

/* The per-process families with one sample each: a number of struct gm_proc_stats. */
static const struct proc_family {
	const char *name, *type, *help;
	size_t off;
} proc_families[] = {
	{ "gpumem_process_host_pinned_memory_bytes", GAUGE,
	  "Page-locked host memory the process holds now (cudaMallocHost, cudaHostAlloc, "
	  "cuMemAllocHost); never part of its GPU memory.",
	  offsetof(struct gm_proc_stats, by_kind[GM_KIND_HOST]) },
	{ "gpumem_process_vmm_mapped_bytes", GAUGE,
	  "Bytes the process has mapped with cuMemMap: views of physical memory counted at "
	  "cuMemCreate (kind vmm), never added to it.",
	  offsetof(struct gm_proc_stats, by_kind[GM_KIND_VMM_MAPPED]) },
	{ "gpumem_process_vmm_reserved_bytes", GAUGE,
	  "Virtual address space the process reserved with cuMemAddressReserve: no memory.",
	  offsetof(struct gm_proc_stats, by_kind[GM_KIND_VMM_RESERVED]) },
	{ "gpumem_process_live_allocations", GAUGE,
	  "GPU allocations the process holds now (host pinned ones not included).",
	  offsetof(struct gm_proc_stats, current_allocs) },
	{ "gpumem_process_peak_memory_bytes", GAUGE,
	  "The most GPU memory the process held at once since gpumem first saw it.",
	  offsetof(struct gm_proc_stats, peak_bytes) },
	{ "gpumem_process_allocations_total", COUNTER,
	  "Successful allocation calls of the process, of every kind.",
	  offsetof(struct gm_proc_stats, alloc_count) },
	{ "gpumem_process_frees_total", COUNTER,
	  "Successful free calls of the process that freed an allocation gpumem saw.",
	  offsetof(struct gm_proc_stats, free_count) },
	{ "gpumem_process_failed_allocations_total", COUNTER,
	  "Allocation calls of the process that returned an error.",
	  offsetof(struct gm_proc_stats, failed_count) },
	{ "gpumem_process_allocated_bytes_total", COUNTER,
	  "Bytes of the successful allocations of the process, of every kind.",
	  offsetof(struct gm_proc_stats, alloc_bytes_total) },
	{ "gpumem_process_tensor_peak_memory_bytes", GAUGE,
	  "The most PyTorch tensor memory (allocated) the process held at once since gpumem "
	  "first saw it; part of its GPU memory, never added to it.",
	  offsetof(struct gm_proc_stats, tensor_peak_bytes) },
};

/* PyTorch's tensors: numbers of struct gm_site_stats (snap_proc.tensor). */
static const struct proc_family tensor_families[] = {
	{ "gpumem_process_tensor_memory_bytes", GAUGE,
	  "PyTorch tensor memory the process holds now (allocated): part of the GPU memory it "
	  "reserved (gpumem_process_memory_bytes), never added to it.",
	  offsetof(struct gm_site_stats, current_bytes) },
	{ "gpumem_process_live_tensors", GAUGE, "PyTorch tensors the process holds now.",
	  offsetof(struct gm_site_stats, current_allocs) },
	{ "gpumem_process_tensor_allocations_total", COUNTER,
	  "PyTorch tensors the process allocated.", offsetof(struct gm_site_stats, alloc_count) },
};

static uint64_t stat_at(const void *st, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)st + off, sizeof(v));
	return v;
}

static void write_process_memory(FILE *out, const struct snapshot *s)
{
	struct proc_labels pl;

	prom_family(out, "gpumem_process_memory_bytes", GAUGE,
		    "GPU memory the process holds now, by kind (device, managed, async, vmm); "
		    "their sum is its GPU memory.");
	for (size_t i = 0; i < s->nprocs; i++) {
		if (!prom_proc_shown(s, i))
			continue;
		prom_proc_labels(&s->procs[i], &pl);
		pl.ls.n++;
		for (unsigned int k = 0; k < GM_KIND_COUNT; k++) {
			if (!is_gpu_kind(k))
				continue;
			pl.ls.l[pl.ls.n - 1] = (struct prom_label){ "kind", kind_name(k) };
			prom_sample(out, "gpumem_process_memory_bytes", &pl.ls,
				    s->procs[i].st.by_kind[k]);
		}
	}
}

const char *prom_gpu_label(unsigned int g, char *buf, size_t len)
{
	if (g < GM_MAX_GPUS)
		snprintf(buf, len, "%u", g);
	else
		snprintf(buf, len, "unknown");
	return buf;
}

/* GPU memory per device; gpu="unknown": on a device gpumem did not see the context of. gpu is
 * the ordinal as the process numbers it; host_gpu, uuid, name: that device on the host ("" when
 * not known: no NVML, a MIG device, an environment not read). */
static void write_process_gpu_memory(FILE *out, const struct snapshot *s)
{
	struct proc_labels pl;
	char gpu[16], host_gpu[16];

	prom_family(out, "gpumem_process_gpu_memory_bytes", GAUGE,
		    "GPU memory the process holds now on each device (gpu: its CUDA or HIP ordinal; "
		    "host_gpu, uuid, name: the host's device, \"\" when not known; vendor: whose "
		    "GPU), every kind of gpumem_process_memory_bytes; devices it holds nothing on "
		    "have no series.");
	for (size_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];

		if (!prom_proc_shown(s, i))
			continue;
		prom_proc_labels(p, &pl);
		const char *vendor = snap_proc_gpu_vendor(p);

		for (unsigned int g = 0; g <= GM_MAX_GPUS; g++) {
			struct snap_gpu d;
			bool known;
			size_t n = pl.ls.n;

			if (!p->st.gpu_bytes[g])
				continue;
			known = g < GM_MAX_GPUS &&
				snap_gpu_of_slot(s, snap_gpu_host(s, p, g), &d);
			host_gpu[0] = 0;
			if (known)
				snprintf(host_gpu, sizeof(host_gpu), "%d", d.index);
			prom_label_add(&pl.ls, "gpu", prom_gpu_label(g, gpu, sizeof(gpu)));
			prom_label_add(&pl.ls, "host_gpu", host_gpu);
			prom_label_add(&pl.ls, "uuid", known ? d.uuid : "");
			prom_label_add(&pl.ls, "name", known ? d.name : "");
			prom_label_add(&pl.ls, "vendor", vendor);
			prom_sample(out, "gpumem_process_gpu_memory_bytes", &pl.ls, p->st.gpu_bytes[g]);
			pl.ls.n = n;
		}
	}
}

/* When a process's device runs out at the rate it grows (analysis/forecast.c, from the
 * agent's history of its reports): only the processes with a forecast. */
static void write_forecasts(FILE *out, const struct snapshot *s)
{
	struct proc_labels pl;
	char gpu[16];

	if (!(s->wants & SNAP_FORECAST))
		return;
	prom_family(out, "gpumem_process_oom_forecast_seconds", GAUGE,
		    "Seconds until the device (vendor; gpu: the host's, NVML's index or KFD's GPU "
		    "order) runs out of memory at the rate the process's GPU memory grows, fitted "
		    "over the last 60 s; only processes that grow with a good fit on a device whose "
		    "free memory NVML or amdgpu gives.");
	for (size_t i = 0; i < s->nprocs; i++) {
		const struct snap_forecast *f = &s->procs[i].forecast;

		if (!prom_proc_shown(s, i) || !f->valid)
			continue;
		prom_proc_labels(&s->procs[i], &pl);
		snprintf(gpu, sizeof(gpu), "%d", f->gpu);
		prom_label_add(&pl.ls, "vendor", f->vendor ? f->vendor : "nvidia");
		prom_label_add(&pl.ls, "gpu", gpu);
		prom_sample(out, "gpumem_process_oom_forecast_seconds", &pl.ls,
			    f->seconds < 1e12 ? (uint64_t)ceil(f->seconds) : UINT64_C(1000000000000));
	}
}

/* Family name's sample of each shown process whose snapshot has the value (valid). */
static void proc_samples(FILE *out, const struct snapshot *s, const char *name,
			 unsigned int valid, uint64_t (*value)(const struct snap_proc *))
{
	struct proc_labels pl;

	for (size_t i = 0; i < s->nprocs; i++) {
		if (!prom_proc_shown(s, i) || !(s->procs[i].valid & valid))
			continue;
		prom_proc_labels(&s->procs[i], &pl);
		prom_sample(out, name, &pl.ls, value(&s->procs[i]));
	}
}

static uint64_t probe_hits_of(const struct snap_proc *p)
{
	return p->st.probe_hits;
}

static uint64_t kfd_vram_of(const struct snap_proc *p)
{
	return p->kfd_vram;
}

/* gpumem's own cost: each process's probe hits (the kernel's count) and what a hit costs
 * (measured once, with the programs' mean run where the kernel keeps it): their product is
 * the time gpumem took from the process. */
static void write_cost(FILE *out, const struct snapshot *s)
{
	struct prom_labels none = { .n = 0 };

	if (!(s->wants & SNAP_COST))
		return;
	prom_family(out, "gpumem_process_probe_hits_total", COUNTER,
		    "gpumem's probe programs run in the process's threads (entries, returns, context "
		    "and tensor probes), counted by the kernel; times "
		    "gpumem_probe_hit_cost_seconds, the time gpumem took from it.");
	proc_samples(out, s, "gpumem_process_probe_hits_total", SP_HITS, probe_hits_of);
	if (!s->trap_known)
		return;
	prom_family(out, "gpumem_probe_hit_cost_seconds", GAUGE,
		    "What one probe hit costs a traced thread: the kernel's trap and a program run, "
		    "measured once at start on a probe of gpumem's own, plus the mean run of "
		    "gpumem's programs where kernel.bpf_stats_enabled is 1.");
	prom_sample_double(out, "gpumem_probe_hit_cost_seconds", &none,
			   (s->trap_ns + (s->bpf_run_known ? s->bpf_run_ns : 0)) / 1e9);
}

/* The labels of one host device's slot: vendor, gpu its index among that vendor's ("" both for
 * memory on no device known), uuid and name ("" when not known). */
static void host_gpu_labels(struct prom_labels *ls, char *gpu, size_t len,
			    const struct snapshot *s, int slot)
{
	struct snap_gpu d;
	bool known = snap_gpu_of_slot(s, slot, &d);

	ls->n = 0;
	gpu[0] = 0;
	if (known)
		snprintf(gpu, len, "%d", d.index);
	prom_label_add(ls, "vendor", known ? d.vendor : "");
	prom_label_add(ls, "gpu", gpu);
	prom_label_add(ls, "uuid", known ? d.uuid : "");
	prom_label_add(ls, "name", known ? d.name : "");
}

/* Whether slot is a device the host lists (NVML's or KFD's with its memory). */
static bool slot_listed(const struct snapshot *s, int slot)
{
	struct snap_gpu d;

	return snap_gpu_of_slot(s, slot, &d) && d.memory_known;
}

/* Who holds GPU N: the memory every traced process holds on each host device (each device
 * NVML or amdgpu lists, 0 when none; others where a process's list named them), gpu="" where
 * not known. */
static void write_gpu_traced(FILE *out, const struct snapshot *s)
{
	uint64_t held[SNAP_SLOTS] = { 0 };
	struct prom_labels ls;
	char gpu[16];

	for (size_t i = 0; i < s->nprocs; i++)
		if (prom_proc_shown(s, i))
			snap_host_gpu_add(s, &s->procs[i], held);
	prom_family(out, "gpumem_gpu_traced_bytes", GAUGE,
		    "GPU memory the traced processes hold now on each of the host's devices (vendor; "
		    "gpu: NVML's index, or KFD's GPU order on AMD; \"\": a device not known), the "
		    "sum of their gpumem_process_gpu_memory_bytes.");
	for (int h = 0; h < SNAP_SLOTS; h++) {
		if (!held[h] && !slot_listed(s, h))
			continue;
		host_gpu_labels(&ls, gpu, sizeof(gpu), s, h);
		prom_sample(out, "gpumem_gpu_traced_bytes", &ls, held[h]);
	}
}

static void write_processes(FILE *out, const struct snapshot *s)
{
	struct proc_labels pl;
	uint64_t shown = 0;

	for (size_t i = 0; i < s->nprocs; i++)
		shown += prom_proc_shown(s, i);
	prom_family(out, "gpumem_processes", GAUGE,
		    "Processes alive that made an allocation call gpumem accounted.");
	prom_sample(out, "gpumem_processes", NULL, shown);
	write_process_memory(out, s);
	write_process_gpu_memory(out, s);
	write_gpu_traced(out, s);
	for (size_t f = 0; f < ARRAY_SIZE(proc_families); f++) {
		const struct proc_family *pf = &proc_families[f];

		prom_family(out, pf->name, pf->type, pf->help);
		for (size_t i = 0; i < s->nprocs; i++) {
			if (!prom_proc_shown(s, i))
				continue;
			prom_proc_labels(&s->procs[i], &pl);
			prom_sample(out, pf->name, &pl.ls, stat_at(&s->procs[i].st, pf->off));
		}
	}
	for (size_t f = 0; f < ARRAY_SIZE(tensor_families); f++) {
		const struct proc_family *pf = &tensor_families[f];

		prom_family(out, pf->name, pf->type, pf->help);
		for (size_t i = 0; i < s->nprocs; i++) {
			if (!prom_proc_shown(s, i))
				continue;
			prom_proc_labels(&s->procs[i], &pl);
			prom_sample(out, pf->name, &pl.ls, stat_at(&s->procs[i].tensor, pf->off));
		}
	}
}

/* ---- containers and pods ---- */

/* The processes of one container (by id) or one pod (by UID), summed; a label is taken from
 * the first process that knows it. */
struct group {
	const char *key;
	const char *container, *pod, *ns, *pod_name, *container_name;
	uint64_t by_kind[GM_KIND_COUNT];
	uint64_t gpu_bytes[SNAP_SLOTS];
	uint64_t procs;
};

struct scope {
	bool pod;	/* a pod's group, else a container's */
	const char *memory, *gpu, *host, *procs;	/* family names */
	const char *what;	/* in HELP */
};

static const struct scope scopes[] = {
	{ false, "gpumem_container_memory_bytes", "gpumem_container_gpu_memory_bytes",
	  "gpumem_container_host_pinned_memory_bytes", "gpumem_container_processes", "container" },
	{ true, "gpumem_pod_memory_bytes", "gpumem_pod_gpu_memory_bytes",
	  "gpumem_pod_host_pinned_memory_bytes", "gpumem_pod_processes", "pod" },
};

static const char *first_known(const char *have, const char *s)
{
	return have && have[0] ? have : s;
}

/* One process's group. */
static void group_of(struct group *g, const struct snapshot *s, const struct snap_proc *p,
		     const char *key)
{
	const struct container_info *ci = &p->container;

	g->key = key;
	g->container = ci->has_id ? ci->id : "";
	g->pod = ci->has_pod ? ci->pod_uid : "";
	g->ns = ci->pod_namespace;
	g->pod_name = ci->pod_name;
	g->container_name = ci->container_name;
	memcpy(g->by_kind, p->st.by_kind, sizeof(g->by_kind));
	snap_host_gpu_add(s, p, g->gpu_bytes);	/* by host device: summed over processes */
	g->procs = 1;
}

static void group_merge(struct group *into, const struct group *g)
{
	into->container = first_known(into->container, g->container);
	into->pod = first_known(into->pod, g->pod);
	into->ns = first_known(into->ns, g->ns);
	into->pod_name = first_known(into->pod_name, g->pod_name);
	into->container_name = first_known(into->container_name, g->container_name);
	for (unsigned int k = 0; k < GM_KIND_COUNT; k++)
		into->by_kind[k] += g->by_kind[k];
	for (unsigned int d = 0; d < SNAP_SLOTS; d++)
		into->gpu_bytes[d] += g->gpu_bytes[d];
	into->procs += g->procs;
}

static int group_cmp(const void *a, const void *b)
{
	return strcmp(((const struct group *)a)->key, ((const struct group *)b)->key);
}

/* The groups of a scope, sorted by key and merged: *out (free it) and their number, or
 * -ENOMEM. */
static ssize_t make_groups(const struct snapshot *s, const struct scope *sc, struct group **out)
{
	struct group *g = calloc(s->nprocs ? s->nprocs : 1, sizeof(*g));
	size_t n = 0, m = 0;

	if (!g)
		return -ENOMEM;
	for (size_t i = 0; i < s->nprocs; i++) {
		const struct container_info *ci = &s->procs[i].container;

		if (!prom_proc_shown(s, i) || !(sc->pod ? ci->has_pod : ci->has_id))
			continue;
		group_of(&g[n++], s, &s->procs[i], sc->pod ? ci->pod_uid : ci->id);
	}
	qsort(g, n, sizeof(*g), group_cmp);
	for (size_t i = 0; i < n; i++) {
		if (m && !strcmp(g[m - 1].key, g[i].key))
			group_merge(&g[m - 1], &g[i]);
		else
			g[m++] = g[i];
	}
	*out = g;
	return (ssize_t)m;
}

static void group_labels(const struct group *g, const struct scope *sc, struct prom_labels *ls)
{
	ls->n = 0;
	if (!sc->pod)
		prom_label_add(ls, "container", g->container);
	prom_label_add(ls, "pod", g->pod);
	prom_label_add(ls, "namespace", g->ns);
	prom_label_add(ls, "pod_name", g->pod_name);
	if (!sc->pod)
		prom_label_add(ls, "container_name", g->container_name);
}

static void write_group_memory(FILE *out, const struct scope *sc, const struct group *g, size_t n)
{
	char help[160];
	struct prom_labels ls;

	snprintf(help, sizeof(help), "GPU memory the processes of the %s hold now, by kind.",
		 sc->what);
	prom_family(out, sc->memory, GAUGE, help);
	for (size_t i = 0; i < n; i++) {
		group_labels(&g[i], sc, &ls);
		ls.n++;
		for (unsigned int k = 0; k < GM_KIND_COUNT; k++) {
			if (!is_gpu_kind(k))
				continue;
			ls.l[ls.n - 1] = (struct prom_label){ "kind", kind_name(k) };
			prom_sample(out, sc->memory, &ls, g[i].by_kind[k]);
		}
	}
}

static void write_group_gpu_memory(FILE *out, const struct snapshot *s, const struct scope *sc,
				   const struct group *g, size_t n)
{
	char help[240], gpu[16];
	struct prom_labels ls;

	snprintf(help, sizeof(help), "GPU memory the processes of the %s hold now on each host "
		 "device (vendor; gpu: NVML's index or KFD's GPU order, \"unknown\": not known), "
		 "every kind.", sc->what);
	prom_family(out, sc->gpu, GAUGE, help);
	for (size_t i = 0; i < n; i++) {
		group_labels(&g[i], sc, &ls);
		ls.n += 2;
		for (int d = 0; d < SNAP_SLOTS; d++) {
			struct snap_gpu dev;
			bool known = snap_gpu_of_slot(s, d, &dev);

			if (!g[i].gpu_bytes[d])
				continue;
			if (known)
				snprintf(gpu, sizeof(gpu), "%d", dev.index);
			ls.l[ls.n - 2] = (struct prom_label){ "vendor", known ? dev.vendor : "" };
			ls.l[ls.n - 1] = (struct prom_label){ "gpu", known ? gpu : "unknown" };
			prom_sample(out, sc->gpu, &ls, g[i].gpu_bytes[d]);
		}
	}
}

static int write_scope(FILE *out, const struct snapshot *s, const struct scope *sc)
{
	struct prom_labels ls;
	struct group *g;
	ssize_t n = make_groups(s, sc, &g);
	char help[160];

	if (n < 0)
		return (int)n;
	write_group_memory(out, sc, g, (size_t)n);
	write_group_gpu_memory(out, s, sc, g, (size_t)n);
	snprintf(help, sizeof(help), "Page-locked host memory the processes of the %s hold now.",
		 sc->what);
	prom_family(out, sc->host, GAUGE, help);
	for (ssize_t i = 0; i < n; i++) {
		group_labels(&g[i], sc, &ls);
		prom_sample(out, sc->host, &ls, g[i].by_kind[GM_KIND_HOST]);
	}
	snprintf(help, sizeof(help), "Processes of the %s that have series.", sc->what);
	prom_family(out, sc->procs, GAUGE, help);
	for (ssize_t i = 0; i < n; i++) {
		group_labels(&g[i], sc, &ls);
		prom_sample(out, sc->procs, &ls, g[i].procs);
	}
	free(g);
	return 0;
}

/* ---- gpumem itself ---- */

/* The kernel's counters that are no loss, named as in snapshot --json's "tracer". */
static const struct {
	unsigned int which;
	const char *name;
} tracer_events[] = {
	{ GM_CNT_NESTED_CALLS, "nested_calls" },
	{ GM_CNT_STALE_INFLIGHT, "stale_inflight" },
	{ GM_CNT_FAILED_FREES, "failed_frees" },
	{ GM_CNT_HOLDS, "holds" },
	{ GM_CNT_CTX_RELEASED, "ctx_released_allocs" },
	{ GM_CNT_MODULE_MAPS_BUSY, "module_maps_busy" },
};

static void write_counters(FILE *out, const struct snapshot *s)
{
	struct prom_labels ls = { .n = 1 };

	prom_family(out, "gpumem_lost_total", COUNTER,
		    "What gpumem could not record, by reason (as in snapshot --json \"lost\"); "
		    "gpumem's loss line names the option that fixes each.");
	for (size_t i = 0; i < loss_count(); i++) {
		ls.l[0] = (struct prom_label){ "reason", loss_name(i) };
		prom_sample(out, "gpumem_lost_total", &ls, loss_value(s, i));
	}
	prom_family(out, "gpumem_files_attached", GAUGE,
		    "CUDA files with gpumem's probes on them now (--max-files at most).");
	prom_sample(out, "gpumem_files_attached", NULL, s->disc.files);
	prom_family(out, "gpumem_files_released_total", COUNTER,
		    "CUDA files whose probes, pins and descriptors gpumem let go: no process "
		    "mapped them any more.");
	prom_sample(out, "gpumem_files_released_total", NULL, s->disc.released);
	prom_family(out, "gpumem_failed_allocations_total", COUNTER,
		    "Allocation calls that returned an error, of every process gpumem traced, those "
		    "that ended included (per process while it lives: "
		    "gpumem_process_failed_allocations_total).");
	prom_sample(out, "gpumem_failed_allocations_total", NULL,
		    s->counters[GM_CNT_FAILED_ALLOCS]);
	prom_family(out, "gpumem_tracer_events_total", COUNTER,
		    "Probe events that are no loss, by event (as in snapshot --json \"tracer\").");
	for (size_t i = 0; i < ARRAY_SIZE(tracer_events); i++) {
		ls.l[0] = (struct prom_label){ "event", tracer_events[i].name };
		prom_sample(out, "gpumem_tracer_events_total", &ls,
			    s->counters[tracer_events[i].which]);
	}
}

/* Every device, NVML's and AMD's: the sample of family f for each (info: with its bus and
 * minor, always 1). */
enum device_value { DEVICE_INFO, DEVICE_TOTAL, DEVICE_USED };

static void device_samples(FILE *out, const struct snapshot *s, const char *f,
			   enum device_value what)
{
	struct device_row rows[DEVICE_ROWS_MAX];
	unsigned int n = device_rows(s, rows);
	struct prom_labels ls;
	char gpu[16], minor[16];

	for (unsigned int i = 0; i < n; i++) {
		const struct device_row *d = &rows[i];

		ls.n = 0;
		snprintf(gpu, sizeof(gpu), "%u", d->index);
		prom_label_add(&ls, "vendor", d->vendor);
		prom_label_add(&ls, "gpu", gpu);
		prom_label_add(&ls, "uuid", d->uuid);
		prom_label_add(&ls, "name", d->name);
		if (what == DEVICE_INFO) {
			minor[0] = 0;
			if (d->minor >= 0)
				snprintf(minor, sizeof(minor), "%d", d->minor);
			prom_label_add(&ls, "pci_bus_id", d->pci_bus_id);
			prom_label_add(&ls, "minor", minor);
		}
		prom_sample(out, f, &ls, what == DEVICE_TOTAL ? d->total :
					 what == DEVICE_USED ? d->used : 1);
	}
}

/* The devices: which each is (gpumem_gpu_info) and their memory. */
static void write_devices(FILE *out, const struct snapshot *s)
{
	if (!s->devices_valid && !s->namd_devices)
		return;
	prom_family(out, "gpumem_gpu_info", GAUGE,
		    "Always 1: each GPU, by vendor and index (gpu: NVML's; AMD's in HIP's order), "
		    "with its uuid, name, pci_bus_id and minor (/dev/nvidiaN, /dev/dri/renderDN), "
		    "\"\" when not known.");
	device_samples(out, s, "gpumem_gpu_info", DEVICE_INFO);
	prom_family(out, "gpumem_gpu_memory_total_bytes", GAUGE,
		    "Each GPU's memory, as NVML (NVIDIA) or amdgpu's mem_info_vram_total (AMD) "
		    "reports it.");
	device_samples(out, s, "gpumem_gpu_memory_total_bytes", DEVICE_TOTAL);
	prom_family(out, "gpumem_gpu_memory_used_bytes", GAUGE,
		    "Each GPU's memory in use, by every process and the driver, as NVML or "
		    "amdgpu's mem_info_vram_used reports it.");
	device_samples(out, s, "gpumem_gpu_memory_used_bytes", DEVICE_USED);
}

/* Whether NVML answered with each GPU's memory and whether KFD listed AMD's, and why not:
 * return code and reason as labels, so that a dashboard shows the cause and never a zero.
 * Only where devices were asked for. */
static void write_device_sources(FILE *out, const struct snapshot *s)
{
	struct prom_labels ls = { .n = 0 };
	char error[16] = "";

	if (!(s->wants & SNAP_DEVICES))
		return;
	if (!s->devices_valid && s->nvml.error_valid)
		snprintf(error, sizeof(error), "%d", s->nvml.error);
	prom_label_add(&ls, "error", error);
	prom_label_add(&ls, "reason", s->devices_valid ? "" : devices_reason(s));
	prom_family(out, "gpumem_nvml_up", GAUGE,
		    "1 when NVML answered with each GPU's memory; else 0, with NVML's return code "
		    "(error, \"\" when none) and the reason (as in snapshot --json \"nvml\").");
	prom_sample(out, "gpumem_nvml_up", &ls, s->devices_valid);
	ls.n = 0;
	prom_label_add(&ls, "reason", s->namd_devices ? "" : amd_devices_reason(s));
	prom_family(out, "gpumem_amdgpu_up", GAUGE,
		    "1 when KFD and amdgpu's sysfs gave AMD GPUs with their memory; else 0, with "
		    "the reason (as in snapshot --json \"amdgpu\").");
	prom_sample(out, "gpumem_amdgpu_up", &ls, s->namd_devices > 0);
	write_devices(out, s);
}

/* KFD's count of each AMD process's VRAM, traced or not: beside gpumem's own, what its
 * probes did not see. */
static void write_kfd_vram(FILE *out, const struct snapshot *s)
{
	if (!s->namd_devices)
		return;
	prom_family(out, "gpumem_process_kfd_vram_bytes", GAUGE,
		    "VRAM the process holds on the host's AMD GPUs as KFD counts it "
		    "(/sys/class/kfd/kfd/proc/PID/vram_*), every allocation, traced or not.");
	proc_samples(out, s, "gpumem_process_kfd_vram_bytes", SP_KFD_VRAM, kfd_vram_of);
}

int prom_write(FILE *out, const struct snapshot *s, const struct prom_opts *o)
{
	struct prom_opts opts = o ? *o : PROM_OPTS_DEFAULT;
	struct prom_labels ls = { .n = 1 };
	int err;

	ls.l[0] = (struct prom_label){ "version", GPUMEM_VERSION };
	prom_family(out, "gpumem_build_info", GAUGE,
		    "Always 1; its version label is the version of gpumem.");
	prom_sample(out, "gpumem_build_info", &ls, 1);
	write_processes(out, s);
	err = prom_write_sites(out, s, opts.site_series);
	prom_write_libraries(out, s, opts.site_series);
	for (size_t i = 0; !err && i < ARRAY_SIZE(scopes); i++)
		err = write_scope(out, s, &scopes[i]);
	if (err)
		return err;
	write_counters(out, s);
	write_device_sources(out, s);
	write_kfd_vram(out, s);
	write_forecasts(out, s);
	write_cost(out, s);
	return ferror(out) ? -EIO : 0;
}
