/* SPDX-License-Identifier: GPL-2.0 */
/* The published model: one immutable snapshot per tick (processes, their sites with named
 * frames, failures, loss counters, times), read from the maps in one pass. Every output reads
 * a snapshot; none reads the maps or /proc. What gpumem does not know has its valid bit clear
 * and prints as "-" in text and null in JSON, never as 0 or "". */
#ifndef GPUMEM_SNAPSHOT_H
#define GPUMEM_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpumem.h"
#include "discover/discover.h"
#include "host/container.h"
#include "host/gpu_map.h"
#include "host/amdgpu.h"
#include "host/nvml.h"

/* What a snapshot carries beyond the counts (each costs a walk or a query). */
enum snap_want {
	SNAP_AGES = 1u << 0,		/* each site's oldest live allocation: a walk of allocs */
	SNAP_MEDIAN_AGES = 1u << 1,	/* and its median one */
	SNAP_FAILURES = 1u << 2,	/* the failure records kept so far */
	SNAP_DEVICES = 1u << 3,		/* device memory from NVML */
	SNAP_LOSSES_ONLY = 1u << 4,	/* only the loss counters: no map walk, no processes */
	SNAP_FORECAST = 1u << 5,	/* each process's OOM forecast (the session's, from its
					 * history; SNAP_DEVICES with it) */
	SNAP_COST = 1u << 6,		/* gpumem's own cost: a probe hit's (measured once) and
					 * each living process's CPU time */
};

/* One frame as the user reads it; strings live as long as the session's symbolizer. */
struct snap_frame {
	uint64_t addr;
	uint64_t offset;	/* ELF vaddr in the module (see symbolize.h) */
	uint64_t symbol_offset;	/* from the function's entry; valid when symbol && !inlined */
	const char *module;	/* NULL: unknown */
	const char *symbol;	/* demangled unless --no-demangle; NULL: unknown */
	const char *file;	/* NULL: unknown */
	uint32_t line;		/* 0: unknown */
	bool inlined;
	bool python;		/* a CPython frame: addr is its code object, symbol its
				 * qualified name */
};

/* A call stack named once and shared by every snapshot that shows it (reference counted). */
struct snap_stack {
	unsigned int refs;
	uint32_t nframes;	/* 0: no stack was recorded */
	struct snap_frame frames[];	/* innermost (the call site) first */
};

/* A frame of the code that carries calls between the user's and the GPU libraries: libc,
 * libstdc++, libffi, ctypes, the dynamic loader, the Python interpreter's native code. */
bool snap_frame_is_glue(const struct snap_frame *f);
/* A Python frame of code the user installed rather than wrote: the standard library and
 * installed packages (site-packages, dist-packages), or the interpreter's frozen modules. */
bool snap_frame_is_library(const struct snap_frame *f);

struct snap_stack *snap_stack_get(struct snap_stack *st);
void snap_stack_put(struct snap_stack *st);

enum snap_site_valid {
	SS_OLDEST = 1u << 0,	/* oldest_ns is known (SNAP_AGES and a live allocation) */
	SS_MEDIAN = 1u << 1,
};

struct snap_site {
	uint32_t api, kind;
	int32_t stack_id;
	int32_t py_stack_id;	/* negative: no Python frames */
	uint32_t gpu;		/* the device + 1 its memory is on; 0: host memory or not known
				 * (gm_site_gpu) */
	unsigned int valid;
	struct gm_site_stats st;
	uint64_t oldest_ns, median_ns;	/* CLOCK_MONOTONIC allocation times */
	struct snap_stack *stack;
};

enum snap_library_valid {
	SL_PEAK = 1u << 0,	/* peak_bytes is known (the live model's reads; not a recording's) */
};

/* What one library holds for a process (model/owners.h): the sums of the sites it owns. */
struct snap_library {
	const char *library;	/* a file name or a Python file; strings live as long as the
				 * process's site stacks */
	const char *family;	/* NULL: no known family */
	unsigned int valid;
	uint32_t nsites;
	struct gm_site_stats st;
	uint64_t peak_bytes;	/* SL_PEAK: the most it held at a read of the maps */
};

/* When the device runs out at the rate a process grows: analysis/forecast.c's, filled in by the
 * session for the sinks that ask (SNAP_FORECAST), from the history of the snapshots. */
struct snap_forecast {
	bool valid;
	int gpu;		/* the host device: its index within its vendor's */
	const char *vendor;	/* "nvidia" (NVML's free memory), "amd" (amdgpu's) */
	uint64_t device_free;	/* its free bytes at the snapshot */
	double growth_per_s;	/* net bytes a second of the process's sites on it */
	double growth_per_step;	/* NAN: no step */
	double steps;		/* steps until it runs out; NAN: no step */
	double seconds;
};

enum snap_proc_valid {
	SP_COMM = 1u << 0,
	SP_CMDLINE = 1u << 1,
	SP_CGROUP = 1u << 2,
	SP_NS_PID = 1u << 3,
	SP_USER = 1u << 4,
	SP_STATS = 1u << 5,	/* it made a call gpumem accounted: st and sites are real */
	SP_EXIT_CODE = 1u << 6,
	SP_HITS = 1u << 7,	/* st.probe_hits is the kernel's (a live snapshot's) */
	SP_CPU = 1u << 8,	/* cpu_ns was read (SNAP_COST, alive) */
	SP_KFD_VRAM = 1u << 9,	/* kfd_vram was read (SNAP_DEVICES, alive, KFD has it) */
};

struct snap_proc {
	uint64_t serial;	/* unique for the session: a reused pid gets a new one */
	int pid;
	int ns_pid;
	unsigned int valid;
	bool alive;
	bool execed;		/* ended by an exec: its pid runs another image, a process of its
				 * own in the snapshot */
	int exit_code;
	char comm[GM_COMM_LEN + 1];
	char *cmdline, *cgroup, *user;
	struct container_info container;
	uint64_t end_ns;	/* exit time; alive: the snapshot's time */
	struct gm_proc_stats st;
	struct snap_site *sites;	/* by current bytes, then bytes allocated */
	size_t nsites;
	struct snap_library *libraries;	/* sites by owning library, largest first */
	size_t nlibraries;
	struct snap_forecast forecast;	/* SNAP_FORECAST */
	uint64_t cpu_ns;	/* SP_CPU: its CPU time so far, user and system */
	/* SP_KFD_VRAM: the VRAM KFD says it holds on the host's AMD GPUs, traced or not (an
	 * AMD program's own count: what gpumem's sites miss shows as the difference). */
	uint64_t kfd_vram;
	/* PyTorch tensors (USDT pytorch:malloc/free): *allocated* bytes, inside the segments
	 * that st and sites count as held (*reserved*); never added to those. */
	struct gm_site_stats tensor;	/* the sums of tensor_sites */
	struct snap_site *tensor_sites;	/* by current bytes; st counts tensors */
	size_t ntensor_sites;
	/* IPC imports held now: another process's memory, of a size the handle does not say
	 * (st.by_kind[GM_KIND_IPC_IMPORTED] stays 0). Live only: recordings do not keep it. */
	uint64_t imported_allocs;
	/* Which host GPU each of its ordinals is (gpu_map.h); live only: recordings do not keep
	 * it, so there every ordinal is unknown. */
	struct gpu_visible visible;
};

struct snap_failure {
	struct gm_call_event ev;
	struct snap_stack *stack;
	struct container_info container;
	bool has_container;	/* the process's start was seen */
};

/* Loss counters userspace keeps beside the kernel's GM_CNT_* ones. */
enum snap_loss {
	SNAP_LOST_BAD_RECORDS = 0,	/* ring-buffer records of an unknown type or size */
	SNAP_LOST_ENDED_DROPPED,	/* ended processes let go: --keep-ended, --keep-ended-for */
	SNAP_LOST_FAILURES_DROPPED,	/* failure records between the first and the last kept */
	SNAP_LOST_OCI_REJECTED,		/* OCI bundles refused: those containers' names unknown */
	SNAP_LOST_PY_REFUSED,		/* CPython processes whose interpreter gpumem has no
					 * offsets for or that failed the checks: native frames */
	SNAP_LOST_NOT_UNWOUND,		/* stack copies (--unwind dwarf) that could not be
					 * unwound, whose frame-pointer stack is short */
	SNAP_LOST_FILES_NOT_ATTACHED,	/* CUDA files in use left without probes (discovery) */
	SNAP_LOST_UNHELD_LATE,		/* processes a new file was attached for while they ran */
	SNAP_LOST_NAMES_DROPPED,	/* function and file names past the symbolizer's bound */
	SNAP_LOST_MODULE_MAPS_MISSED,	/* processes ended (or exec'd) whose map the kernel could
					 * not walk then (GM_CNT_MODULE_MAPS_BUSY), a frame of
					 * theirs found in no module */
	SNAP_LOST_PY_STACKS_UNNAMED,	/* Python stacks of a process past the ones it names */
	SNAP_LOST_STACKS_CUT,		/* stacks unwound from a copy their frames ran past */
	SNAP_LOST_MODULES_UNREAD,	/* files a shown frame lies in that could not be opened:
					 * its frames there unnamed */
	SNAP_LOST_COUNT,
};

struct snapshot {
	unsigned int refs;
	unsigned int wants;	/* enum snap_want: what was read */
	int error;		/* 0, or -errno when the maps could not be read (numbers are old) */
	uint64_t time_ns;	/* CLOCK_MONOTONIC */
	uint64_t mono_to_real_ns;	/* add to a CLOCK_MONOTONIC time for wall-clock time */
	struct snap_proc *procs;	/* by pid; an ended process before its pid's new owner */
	size_t nprocs;
	struct snap_failure *failures;	/* SNAP_FAILURES: the first, then the most recent */
	size_t nfailures;
	uint64_t counters[GM_CNT_COUNT];	/* the kernel's loss and health counters */
	uint64_t lost[SNAP_LOST_COUNT];
	uint64_t map_procs, map_sites, map_allocs;	/* entries in the maps */
	bool map_allocs_valid;	/* the allocation map was walked (SNAP_AGES) */
	struct discovery_stats disc;
	struct discovery_file *files;	/* the live tracer's attached files; none from a recording */
	size_t nfiles;
	struct nvml_device devices[NVML_MAX_DEVICES];
	unsigned int ndevices;
	bool devices_valid;	/* SNAP_DEVICES and NVML answered */
	struct nvml_status nvml;	/* SNAP_DEVICES: why not, when it did not */
	/* SNAP_DEVICES: AMD's GPUs (KFD and amdgpu's sysfs), and why none when none. */
	struct amd_device amd_devices[AMDGPU_MAX_DEVICES];
	unsigned int namd_devices;
	struct amdgpu_status amd;
	/* SNAP_COST: what a probe hit costs a traced thread (the trap and a program run, measured
	 * once), and the mean run of gpumem's programs (the kernel's statistics, where on). */
	bool trap_known, bpf_run_known;
	double trap_ns, bpf_run_ns;
};

struct snapshot *snapshot_get(struct snapshot *s);
/* Whether p holds GPU memory on a device other than GPU 0 (or on one not known): views show
 * its bytes per device, and each site's, only then. */
bool snap_proc_many_gpus(const struct snap_proc *p);
void snapshot_put(struct snapshot *s);
/* The process record of pid (its newest, alive or not), or NULL. */
const struct snap_proc *snapshot_find(const struct snapshot *s, int pid);
/* The orders of a snapshot (qsort comparators), one for both sources of the model: processes
 * by pid, an ended one before its pid's new owner; sites by bytes held, then allocated. */
int snap_proc_cmp(const void *a, const void *b);
int snap_site_cmp(const void *a, const void *b);
/* Wall-clock time of a CLOCK_MONOTONIC one. */
uint64_t snapshot_wall_ns(const struct snapshot *s, uint64_t mono_ns);
/* A site's age at its process's end (or the snapshot): 0 when not valid. */
uint64_t snap_site_oldest_age(const struct snap_proc *p, const struct snap_site *ss);

/* One ring-buffer call event with its process's container and its stack named. */
struct snap_event {
	const struct gm_call_event *ev;
	struct snap_stack *stack;	/* NULL for a process exit */
	int32_t stack_id, py_stack_id;	/* the site it counts in (state_site_ids), whose ids
					 * the snapshots' sites carry: ev's own may differ */
	const struct container_info *container;	/* NULL: its start was not seen */
	uint64_t wall_ns;
};

/* Whose GPUs the process's memory is on: "amd" where a HIP call allocated some, else
 * "nvidia". Its ordinals are HIP's then, mapped to KFD's GPUs, never to NVML's. */
const char *snap_proc_gpu_vendor(const struct snap_proc *p);

/* A host device as every sum over processes keys it: NVML's device of index i is slot i, KFD's
 * GPU i (HIP's order) slot SNAP_AMD_SLOT + i, and SNAP_SLOT_UNKNOWN holds what is on a device
 * not known (an ordinal past its lists, a recording's, or past GM_MAX_GPUS). */
#define SNAP_AMD_SLOT GM_MAX_GPUS
#define SNAP_SLOT_UNKNOWN (2 * GM_MAX_GPUS)
#define SNAP_SLOTS (SNAP_SLOT_UNKNOWN + 1)

/* A host device described for a view, whichever vendor's. */
struct snap_gpu {
	const char *vendor;	/* "nvidia", "amd" */
	int index;		/* within its vendor: NVML's index, KFD's GPU order */
	const char *name, *uuid;	/* "" when not known */
	bool memory_known;	/* NVML or amdgpu gave total, used and free */
	uint64_t total, used, free;
};

/* The device of slot (below SNAP_SLOT_UNKNOWN) in snapshot s; false for SNAP_SLOT_UNKNOWN. */
bool snap_gpu_of_slot(const struct snapshot *s, int slot, struct snap_gpu *out);
/* p's ordinal as a host device's slot, or -1: not known. */
int snap_gpu_host(const struct snapshot *s, const struct snap_proc *p, unsigned int ordinal);
/* Adds p's GPU bytes (gm_proc_stats.gpu_bytes, by its ordinals) to out by slot: what every
 * sum over processes adds (processes number devices each their own way). */
void snap_host_gpu_add(const struct snapshot *s, const struct snap_proc *p,
		       uint64_t out[SNAP_SLOTS]);
/* The slot of a site of p (below SNAP_SLOT_UNKNOWN), or -1: host memory or not known. */
int snap_site_host_gpu(const struct snapshot *s, const struct snap_proc *p,
		       const struct snap_site *ss);

/* Lets go of what describing an event took (its stack). */
void snap_event_release(struct snap_event *e);

#endif
