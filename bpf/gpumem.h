/* SPDX-License-Identifier: GPL-2.0 */
/* Every struct, enum and capacity that crosses the kernel/user boundary. A limit is defined
 * once, here. Only fixed-width __u32/__u64 types and fixed-size arrays. */
#ifndef GPUMEM_H
#define GPUMEM_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* The layout of what crosses the boundary: bump it whenever a pinned map's key or value (or a
 * ring-buffer record) changes, so that state pinned by another build is never read as this
 * one's (an agent refuses pins of another layout). 2: processes keyed by {tgid, generation}.
 * 3: sites and allocations carry a Python stack id; Python maps and records.
 * 4: call records carry the cgroup id. 5: PyTorch tensors (GM_SPACE_TENSOR allocations, their
 * sites, a counter of unknown tensor frees). 6: the agent record says what the programs were
 * loaded with. 7: processes keep their tensor bytes and peak; call records carry the process's
 * tensor bytes (tensor events are streamed). 8: frame-pointer stacks walked by gpumem (a hash
 * map of struct gm_user_stack, not a stack-trace map); frees accounted at their entry, with no
 * return probe. 9: Python offsets for 3.9-3.13 (thread id kind, data stack, frame reads).
 * 10: the cookie carries the allocation's space (arrays, registered host memory, VMM mappings
 * and reservations, IPC imports have spaces of their own); kinds that are not memory (mapped,
 * reserved, imported); a fifth entry program (descriptor-sized arrays) and a sixth (the
 * thread's current context); allocations carry their context and device, processes their GPU
 * bytes per device, call records their device. 12: a site is kept per device
 * (gm_site_key.gpu). 13: a thread's record (inflight) keeps what the first stack read of a
 * return held at the call's out-pointers; py_procs_gen counts the entries made in py_procs.
 * 14: allocs is an array of gm_alloc_slot in open addressing (mapped by userspace).
 * 15: sites and procs are arrays of gm_site_slot and gm_proc_slot in open addressing too,
 * procs_made names each process's slot, and an allocation names its site's slot
 * (gm_alloc_info.site) instead of its stacks; a thread's record keeps a clock. 16: a thread's
 * record no longer holds the stack walk's window (read onto the BPF stack). 17: the generation
 * counts execs too (an exec ends an image: GM_REC_PROCESS_EXEC); a process's first call sends its
 * executable mappings (gm_vma_event.at_start). 18: a file record says whether the run traces
 * its process (gm_file_event.traced). 19: a process's probe hits (gm_proc_stats.probe_hits,
 * gm_inflight.hits), the agent's measured cost of a hit (gm_agent.trap_ps), a process's CPU
 * time in its exit record. 20: a thread's Python scratch keeps its interpreter thread id, the
 * interpreter its thread state was found in and the walk's hash (py_scratch). 21: two
 * counters more (GM_CNT_TARGETS_FULL, GM_CNT_FAILED_ALLOCS). 22: a stack copy says whether it
 * reaches the stack's end (gm_stack_event.flags); the targets map follows --max-procs. 23: an
 * executable mapping of the kernel's walk carries its file's path (gm_vma_event.path). */
#define GM_LAYOUT_VERSION 23

#define GM_MAX_STACK_DEPTH 64	/* frames kept per call site */
#define GM_COMM_LEN 16
#define GM_PATH_LEN 256

/* Default capacities; each one has a command-line option that raises it. */
#define GM_DEFAULT_MAX_ALLOCS (1u << 20)	/* --max-allocs */
#define GM_DEFAULT_MAX_STACKS 32768		/* --max-stacks: 512 bytes each, as used */
#define GM_DEFAULT_MAX_SITES 65536		/* --max-sites */
#define GM_DEFAULT_MAX_PROCS 8192		/* --max-procs */
#define GM_DEFAULT_RINGBUF_BYTES (8u << 20)	/* --ringbuf-mb */
#define GM_MAX_PY_PROCS 8192			/* processes whose interpreter is walked */
#define GM_MAX_CGROUP_FILTERS 64		/* --cgroup/--container/--pod selections */
#define GM_MAX_KNOWN_FILES 16384		/* library files examined by userspace */
/* An executable mapping's file path as the kernel's walk sends it: its components, the file's
 * own name first, each ending in a NUL (gm_vma_event.path). */
#define GM_VMA_PATH_LEN 256
#define GM_STACK_COPY_MAX 16384			/* --stack-bytes: user stack copied for DWARF */
#define GM_STACK_COPY_WHOLE 1			/* the copy reaches the stack mapping's end */
#define GM_STACK_COPY_DEFAULT 8192

enum gm_layer {
	GM_LAYER_RUNTIME = 0,
	GM_LAYER_DRIVER = 1,
	GM_LAYER_TENSOR = 2,	/* PyTorch's caching allocator (USDT probes) */
	GM_LAYER_HIP = 3,	/* AMD's HIP runtime (libamdhip64): a vendor of its own */
};

/* What a byte is. GPU-side kinds add to a process's current bytes; host (pinned or registered)
 * does not. The kinds from GM_KIND_MEMORY_COUNT on are no memory of the process's own: VMM
 * mappings of physical memory already counted at cuMemCreate, reserved address ranges, and
 * memory imported from another process through IPC (its exporter holds the bytes). They are
 * kept and shown apart, never added to a total of memory. */
enum gm_kind {
	GM_KIND_DEVICE = 0,
	GM_KIND_MANAGED = 1,
	GM_KIND_HOST = 2,
	GM_KIND_ASYNC = 3,
	GM_KIND_VMM = 4,
	GM_KIND_MEMORY_COUNT = 5,	/* by_kind, recordings: the kinds of memory */
	GM_KIND_VMM_MAPPED = 5,		/* cuMemMap: a handle's memory mapped at an address */
	GM_KIND_VMM_RESERVED = 6,	/* cuMemAddressReserve: address space, no memory */
	GM_KIND_IPC_IMPORTED = 7,	/* cudaIpcOpenMemHandle: another process's memory */
	GM_KIND_COUNT = 8,
};

/* The kinds whose bytes are the process's GPU memory (current_bytes, peak_bytes). */
static inline int gm_kind_is_gpu(__u32 kind)
{
	return kind == GM_KIND_DEVICE || kind == GM_KIND_MANAGED || kind == GM_KIND_ASYNC ||
	       kind == GM_KIND_VMM;
}

/* The argument layout of a probed function; one BPF entry program per shape. */
enum gm_shape {
	GM_SHAPE_ALLOC = 0,		/* (out_ptr, size, ...) */
	GM_SHAPE_ALLOC_PITCH = 1,	/* (out_ptr, out_pitch, width, height, ...) */
	GM_SHAPE_FREE = 2,		/* (ptr, ...) */
	GM_SHAPE_VMM_CREATE = 3,	/* (out_handle, size, ...) */
	GM_SHAPE_VMM_RELEASE = 4,	/* (handle) */
	GM_SHAPE_TENSOR = 5,		/* USDT pytorch:malloc(ptr, device, size, stream) */
	/* Arrays, sized at entry from the descriptor the caller passes (gm_array_bytes rule in
	 * the BPF side: the requested size, never the driver's padded footprint). */
	GM_SHAPE_ARRAY_RT = 6,		/* cudaMallocArray(out, chan_desc*, width, height) */
	GM_SHAPE_ARRAY3D_RT = 7,	/* cudaMalloc3DArray(out, chan_desc*, extent on stack) */
	GM_SHAPE_MIPMAP_RT = 8,		/* cudaMallocMipmappedArray(out, chan_desc*, extent,
					 * levels, flags) */
	GM_SHAPE_ARRAY_DRV = 9,		/* cuArrayCreate_v2(out, CUDA_ARRAY_DESCRIPTOR*) */
	GM_SHAPE_ARRAY3D_DRV = 10,	/* cuArray3DCreate_v2(out, CUDA_ARRAY3D_DESCRIPTOR*) */
	GM_SHAPE_MIPMAP_DRV = 11,	/* cuMipmappedArrayCreate(out, 3D desc*, levels) */
	GM_SHAPE_MALLOC3D = 12,		/* cudaMalloc3D(cudaPitchedPtr*, extent on stack):
					 * pitch x height x depth */
	GM_SHAPE_REGISTER = 13,		/* (addr, size, ...): the caller's range, no out-pointer
					 * (cudaHostRegister, cuMemMap) */
	GM_SHAPE_IMPORT = 14,		/* (out_ptr, handle by value, flags): size unknown */
	/* The thread's current context (entry program enter_ctx, whatever the nesting). */
	GM_SHAPE_CTX_SET = 15,		/* cuCtxSetCurrent(ctx): replaces the top; NULL pops */
	GM_SHAPE_CTX_PUSH = 16,		/* cuCtxPushCurrent_v2(ctx) */
	GM_SHAPE_CTX_POP = 17,		/* cuCtxPopCurrent_v2(out) */
	GM_SHAPE_SET_DEVICE = 18,	/* cudaSetDevice(dev): that device's primary context */
	GM_SHAPE_CTX_CREATE = 19,	/* cuCtxCreate_v2(out, flags, dev): pushed at return */
	GM_SHAPE_CTX_CREATE_V4 = 20,	/* cuCtxCreate_v4(out, params, flags, dev) */
	GM_SHAPE_CTX_RETAIN = 21,	/* cuDevicePrimaryCtxRetain(out, dev): learnt as primary */
	/* Teardown: what the context held is released at a successful return (outermost call). */
	GM_SHAPE_CTX_DESTROY = 22,	/* cuCtxDestroy_v2(ctx) */
	GM_SHAPE_PRIMARY_RESET = 23,	/* cuDevicePrimaryCtxReset_v2(dev) */
	GM_SHAPE_DEVICE_RESET = 24,	/* cudaDeviceReset(): the thread's device's primary,
					 * async allocations kept (they outlive it) */
	GM_SHAPE_CTX_CREATE_V3 = 25,	/* cuCtxCreate_v3(out, affinity, n, flags, dev): what
					 * cuGetProcAddress("cuCtxCreate") gives from 11.4 */
	GM_SHAPE_COUNT = 26,
};

/* A context as allocations carry it: the driver's CUcontext, or, for a device's primary
 * context (whatever pointer the driver gives it: the runtime's cudaSetDevice names none),
 * GM_CTX_PRIMARY | device. A user-space pointer never has the top bit. */
#define GM_CTX_PRIMARY (1ull << 63)
#define GM_CTX_DEPTH 8			/* contexts pushed per thread that are followed */
#define GM_MAX_CONTEXTS 4096		/* contexts whose device is known, every process */
#define GM_DEVICE_UNKNOWN (-1)
#define GM_MAX_GPUS 16			/* devices counted apart per process; others: unknown */

/* A site's gpu: the device + 1 of the kinds that are GPU memory and of tensors (which live in
 * it), 0 for the others (host memory, address space, imports) and a device not known or past
 * the GM_MAX_GPUS counted apart (as gm_proc_stats.gpu_bytes has them). */
static inline __u32 gm_site_gpu(__u32 kind, __u32 layer, __s32 device)
{
	if (device < 0 || device >= GM_MAX_GPUS ||
	    (!gm_kind_is_gpu(kind) && layer != GM_LAYER_TENSOR))
		return 0;
	return (__u32)device + 1;
}

/* The gm_proc_stats.gpu_bytes slot of a site's gpu (the device + 1; 0 not known: the last). */
static inline __u32 gm_gpu_slot(__u32 gpu)
{
	return gpu && gpu <= GM_MAX_GPUS ? gpu - 1 : GM_MAX_GPUS;
}

struct gm_ctx_key {
	__u32 tgid;
	__u32 gen;
	__u64 ctx;		/* CUcontext */
};

struct gm_ctx_info {
	__s32 device;
	__u32 primary;		/* 1: the device's primary context (cuDevicePrimaryCtxRetain) */
};

/* Array descriptors, as the x86-64 ABI lays out NVIDIA's structs (cuda.h, driver_types.h). */
#define GM_CHAN_DESC_BYTES 20		/* cudaChannelFormatDesc: int x, y, z, w; enum f */
#define GM_ARRAY_DESC_BYTES 24		/* CUDA_ARRAY_DESCRIPTOR: Width, Height, Format,
					 * NumChannels */
#define GM_ARRAY3D_DESC_BYTES 40	/* CUDA_ARRAY3D_DESCRIPTOR: Width, Height, Depth, Format,
					 * NumChannels, Flags */
#define GM_ARRAY_LAYERED 0x01		/* CUDA_ARRAY3D_LAYERED, cudaArrayLayered: depth is
					 * layers, never halved by a mip level */
#define GM_MAX_MIP_LEVELS 32		/* more levels than any 2^32-wide array has: unsized */
#define GM_MAX_ARRAY_BYTES (1ull << 48)	/* a descriptor asking for more is not believed */

/* The attach cookie of every probe: which probe-table row fired. */
#define GM_COOKIE(api, kind, layer, shape)                                                     \
	((__u64)(api) | ((__u64)(kind) << 16) | ((__u64)(layer) << 24) | ((__u64)(shape) << 32))
#define GM_COOKIE_API(c) ((__u32)((c)&0xffff))
#define GM_COOKIE_KIND(c) ((__u32)(((c) >> 16) & 0xff))
#define GM_COOKIE_LAYER(c) ((__u32)(((c) >> 24) & 0xff))
#define GM_COOKIE_SHAPE(c) ((__u32)(((c) >> 32) & 0xff))
#define GM_COOKIE_SPACE(c) ((__u32)(((c) >> 40) & 0xff))
/* A row whose allocations live in a space other than device addresses. */
#define GM_COOKIE_IN(api, kind, layer, shape, space)                                           \
	(GM_COOKIE(api, kind, layer, shape) | ((__u64)(space) << 40))

/* Address spaces of live allocations: device addresses and VMM handles never collide. */
enum gm_space {
	GM_SPACE_ADDR = 0,
	GM_SPACE_VMM_HANDLE = 1,
	GM_SPACE_TENSOR = 2,	/* PyTorch tensors, carved out of cudaMalloc'd segments */
	GM_SPACE_ARRAY = 3,	/* CUarray, CUmipmappedArray, cudaArray_t handles */
	GM_SPACE_HOST_REGISTERED = 4,	/* cudaHostRegister'd ranges, by their start */
	GM_SPACE_VMM_MAP = 5,	/* cuMemMap'd ranges, by their start */
	GM_SPACE_VMM_RESERVE = 6,	/* cuMemAddressReserve'd ranges, by their start */
	GM_SPACE_IPC = 7,	/* addresses cudaIpcOpenMemHandle gave */
};

/* Loss and health counters, one per-CPU slot each; userspace sums them. */
enum gm_counter {
	GM_CNT_ALLOC_MAP_FULL = 0,	/* live allocation not recorded: --max-allocs */
	GM_CNT_STACK_ERRORS,		/* stack not recorded (map full or collision): --max-stacks */
	GM_CNT_RINGBUF_DROPPED,		/* event not delivered: --ringbuf-mb */
	GM_CNT_UNKNOWN_FREES,		/* free of an address never seen alloc'd (from before
					 * gpumem started, or no allocation at all) */
	GM_CNT_SITE_MAP_FULL,		/* call-site aggregate not updated: --max-sites */
	GM_CNT_PROC_MAP_FULL,		/* process aggregate not updated: --max-procs */
	GM_CNT_INFLIGHT_FULL,		/* call entry not recorded: no memory for its thread record */
	GM_CNT_NESTED_CALLS,		/* calls inside another probed call (not accounted) */
	GM_CNT_STALE_INFLIGHT,		/* in-flight records replaced (return never fired) */
	GM_CNT_FAILED_FREES,		/* frees the driver refuses that gpumem can tell: of a
					 * live allocation of the other kind (cudaFree of pinned
					 * host memory, cudaFreeHost of device memory) */
	GM_CNT_REPLACED_ALLOCS,		/* address allocated again while live: freed unseen */
	GM_CNT_HOLDS,			/* processes this instance paused (its own targets only) */
	GM_CNT_PY_STACK_ERRORS,		/* Python stack not recorded (map full or collision):
					 * --max-stacks */
	GM_CNT_PY_MISMATCH,		/* interpreters whose live state did not match the
					 * offsets: Python frames disabled for that process */
	GM_CNT_UNKNOWN_TENSOR_FREES,	/* pytorch:free of a tensor never seen allocated */
	GM_CNT_UNSIZED_ARRAYS,		/* arrays whose descriptor could not be read or sized:
					 * held with 0 bytes */
	GM_CNT_CTX_RELEASED,		/* allocations released by a context's teardown */
	GM_CNT_CTX_MAP_FULL,		/* a context's device not recorded: its allocations'
					 * device unknown */
	GM_CNT_MODULE_MAPS_BUSY,	/* module map captures the kernel refused: the process's
					 * memory map was locked (mmap_lock contended) */
	GM_CNT_TARGETS_FULL,		/* children of -c/-p not followed: --max-procs of
					 * them live at once */
	GM_CNT_FAILED_ALLOCS,		/* allocation calls that returned an error (no loss:
					 * every process's, ended ones' too) */
	GM_CNT_COUNT,
};

/* A process's generation: two processes that one pid numbers in turn (a pid reused before
 * userspace reaped the first, or the images an exec replaces one with the next) never share an
 * entry of procs, sites or allocs. Folded from the process's start time in ns since boot (its
 * group leader's start_boottime, what field 22 of /proc/PID/stat counts in clock ticks) and
 * its exec count (the leader's self_exec_id); never 0, so that 0 can mean "not known". */
static inline __u32 gm_proc_gen(__u64 start_ns, __u64 exec_id)
{
	__u64 v = start_ns ^ (exec_id * 0x9e3779b97f4a7c15ull);
	__u32 gen = (__u32)v ^ (__u32)(v >> 32);

	return gen ? gen : 1;
}

struct gm_proc_key {
	__u32 tgid;
	__u32 gen;		/* gm_proc_gen() of its start time */
};

struct gm_alloc_info {
	__u64 size;
	__u64 time_ns;
	/* Its site's slot in the site table (its stacks, api, kind and device are there), where a
	 * free subtracts it with no lookup; GM_NO_SITE: none (the table was full). */
	__u32 site;
	__u16 api;
	__u8 kind;
	__u8 layer;
	__s32 device;		/* the device of its context; GM_DEVICE_UNKNOWN */
	__u32 pad;
	__u64 ctx;		/* its context (GM_CTX_PRIMARY | device for a primary one) */
};
#define GM_NO_SITE 0xffffffffu

struct gm_inflight {
	__u64 sp;		/* stack pointer at entry: nesting and return matching */
	__u64 cookie;
	__u64 time_ns;
	__u64 out_ptr;		/* where the callee writes the address or handle */
	__u64 out_pitch;	/* pitch allocations: where the callee writes the pitch;
				 * cuMemCreate: the device its properties name + 1 (0: none) */
	__u64 size;		/* bytes; width for pitch allocations */
	__u64 height;		/* pitch allocations */
	__u64 addr;		/* frees: the address or handle released */
	/* A free's record: frees are accounted at their entry and have no return probe, so the
	 * record stays after the call returned (inside_call says what is inside it). refused:
	 * the free was of the other kind (failed_frees), its allocation left live. */
	__u32 entry_only;
	__u32 refused;
	/* The thread's process, read at its first call: a thread never changes process (an
	 * exec, which makes it another image, clears the whole record). 0: not read yet. */
	__u32 gen;
	/* Probe programs run for this thread since its hits were last added to its process's
	 * probe_hits (at its next accounted call: the process's entry is at hand there). */
	__u32 hits;
	__u64 start_ns;
	/* The thread's CPython thread state, found once by native thread id; 0: none known. */
	__u64 py_tstate;
	/* The thread's current contexts, as the driver stacks them (the top is current); past
	 * GM_CTX_DEPTH, pushes are counted in ctx_depth but not kept. */
	__u64 ctx_stack[GM_CTX_DEPTH];
	__u32 ctx_depth;
	__s32 rt_device;	/* cudaSetDevice's; 0 until it is called, as in the runtime */
	/* cuCtxCreate, cuDevicePrimaryCtxRetain in flight (apart from the accounting's record:
	 * the runtime makes them inside its own calls): where the context is written, and its
	 * device. */
	__u64 ctx_out;
	__s32 ctx_out_device;
	__u32 ctx_out_shape;
	/* cudaSetDevice in flight: its device, made current at a successful return. */
	__s32 set_device;
	__u32 set_device_pending;
};

/* The generation is in the key, not only in the value: an address the pid's new process is
 * handed while the old one's entry waits to be reaped is then a new entry, and a free finds
 * only its own process's allocation, with no check on the hot path. */
/* A frame-pointer stack: return addresses, innermost first, zeros after the last. */
struct gm_user_stack {
	__u64 ips[GM_MAX_STACK_DEPTH];
};

struct gm_alloc_key {
	__u32 tgid;
	__u32 gen;
	__u32 space;		/* enum gm_space */
	__u32 pad;		/* 0: keys are compared byte for byte */
	__u64 addr;
};
_Static_assert(sizeof(struct gm_alloc_key) == 24, "gm_alloc_key has no hidden padding");

/*
 * The live allocations (the allocs map): open addressing in an array, with no lock and no
 * allocation on the hot path (a hash map's insert and delete were 250 ns of a traced pair's
 * 2.4 µs). A key's entry lies in one of the GM_ALLOC_PROBES slots from its home,
 * gm_alloc_home(), and no further than its home slot's span says: every insert raises its
 * home's span to where it put the entry before the entry is live, so a lookup looks at span + 1
 * slots, most often one, and a free slot anywhere is as free as one never used (no tombstones
 * pile up; a home's span only grows, to the longest run of taken slots it ever met, 63 at
 * most). A slot's state is claimed by
 * compare-and-swap and its sequence (above the two state bits) changes at every claim, so that
 * whoever saw an entry live takes it out only if it is still that entry: two frees of one
 * address count once, and userspace's deletes (of ended processes) race with nothing. The
 * array is mapped by userspace (BPF_F_MMAPABLE), which walks it in place.
 */
#define GM_SLOT_FREE 0
#define GM_SLOT_BUSY 1		/* claimed, being written */
#define GM_SLOT_LIVE 2
#define GM_SLOT_STATE(s) ((s) & 3u)
#define GM_SLOT_NEXT(s, st) ((((s) & ~3u) + 4u) | (st))	/* the next claim's state */
#define GM_ALLOC_PROBES 64
#define GM_ALLOC_TRIES 4	/* an insert whose slot another CPU claimed first looks again */

struct gm_alloc_slot {
	__u32 state;		/* GM_SLOT_* and the sequence */
	__u32 tgid;		/* the key: tgid, gen, space, addr (a gm_alloc_key's fields) */
	__u32 gen;
	/* One 32-bit word, changed by compare-and-swap only: the entry's space, and the span of
	 * the keys whose home this slot is (whatever entry the slot itself holds). */
	__u16 space;
	__u16 span;
	__u64 addr;
	struct gm_alloc_info info;
};
_Static_assert(sizeof(struct gm_alloc_slot) == 64, "gm_alloc_slot is one cache line");
_Static_assert(__builtin_offsetof(struct gm_alloc_slot, span) ==
	       __builtin_offsetof(struct gm_alloc_slot, space) + 2,
	       "space and span share a word, span in its high half");

/* The slot a key's probe starts at; mask: the slot count (a power of two) - 1. The top bits of
 * a multiplicative hash: addresses are aligned, their low bits say nothing. */
static inline __u32 gm_alloc_home(__u32 tgid, __u32 gen, __u32 space, __u64 addr, __u32 mask)
{
	__u64 h = addr ^ (((__u64)tgid << 32 | gen) * 0xff51afd7ed558ccdULL) ^ space;

	return (__u32)((h * 0x9e3779b97f4a7c15ULL) >> 32) & mask;
}

struct gm_site_key {
	__u32 tgid;
	__u32 gen;
	__s32 stack_id;
	__u16 api;		/* the probe table's row, GM_COOKIE_API: 16 bits */
	__u16 kind;		/* enum gm_kind */
	__s32 py_stack_id;	/* the Python stack (py_stacks); negative: none */
	__u32 gpu;		/* gm_site_gpu(): the device + 1 of GPU memory, 0 for host memory
				 * and a device not known; a stack allocating on two devices is
				 * two sites */
};
_Static_assert(sizeof(struct gm_site_key) == 24, "gm_site_key has no hidden padding");
_Static_assert(sizeof(struct gm_proc_key) == 8, "gm_proc_key has no hidden padding");

struct gm_site_stats {
	__u64 current_bytes;
	__u64 current_allocs;
	__u64 alloc_count;
	__u64 free_count;
	__u64 alloc_bytes_total;
	__u64 failed_count;
};

/*
 * The call sites and the processes (the sites and procs maps): open addressing in an array, as
 * the allocation table is (its slot states, GM_SLOT_*, and spans), so that an entry is found
 * without a hash map's lookup (30-60 ns a call here) and an allocation keeps its site's slot,
 * where its free subtracts it. A slot is {state, span, key, value}; the span is the home's
 * (how far from it the keys whose home it is lie). Only the BPF programs make entries, and only
 * userspace takes them out (those of ended processes). Two CPUs making one new site at once
 * may each make it: userspace adds up the entries of one key, and every allocation keeps
 * counting in the entry it was counted in. A process's entry is made once: a hash map of
 * owners (procs_made) decides between two threads making it at once, since its running totals
 * (the peak) cannot be added up afterwards.
 */
#define GM_SLOT_PROBES 64

struct gm_site_slot {
	__u32 state;		/* GM_SLOT_* and the sequence */
	__u32 span;		/* of the keys whose home this slot is; raised by compare-and-swap */
	struct gm_site_key key;
	struct gm_site_stats stats;
};
_Static_assert(sizeof(struct gm_site_slot) == 80, "gm_site_slot has no hidden padding");

/* The slot a site key's probe starts at; mask: the slot count (a power of two) - 1. The top bits
 * of a multiplicative hash. */
static inline __u32 gm_site_home(const struct gm_site_key *k, __u32 mask)
{
	__u64 h = ((__u64)k->tgid << 32 | k->gen) * 0xff51afd7ed558ccdULL;

	h ^= ((__u64)(__u32)k->stack_id << 32 | (__u32)k->py_stack_id) * 0xc4ceb9fe1a85ec53ULL;
	h ^= (__u64)k->api << 40 | (__u64)k->kind << 32 | k->gpu;
	return (__u32)((h * 0x9e3779b97f4a7c15ULL) >> 32) & mask;
}

/* Per process. current/peak count GPU-side kinds only; by_kind holds every kind, host too;
 * the *_count and *_total fields count calls of every kind. The BPF side keeps current_bytes,
 * peak_bytes, failed_count and first_seen_ns (what needs a running total); userspace fills the
 * rest from the process's sites, which hold the same counts. */
struct gm_proc_stats {
	__u64 current_bytes;
	__u64 current_allocs;
	__u64 peak_bytes;
	__u64 alloc_count;
	__u64 free_count;
	__u64 alloc_bytes_total;
	__u64 failed_count;
	__u64 by_kind[GM_KIND_COUNT];
	__u64 first_seen_ns;
	__u64 cgroup_id;	/* cgroup v2 of the thread that made its first call, or its last new site */
	__u64 ns_pid;		/* its pid inside its own pid namespace */
	__u64 start_ns;		/* its start, ns since boot (CLOCK_BOOTTIME): proc_start_matches() */
	/* PyTorch tensors it holds (allocated, inside the segments current_bytes counts), and the
	 * most it held at once: running totals of the tensor programs, never part of the above. */
	__u64 tensor_bytes;
	__u64 tensor_peak_bytes;
	/* Its GPU memory (current_bytes) per device 0..GM_MAX_GPUS-1; the last slot: on a device
	 * not known (a context never seen created or retained) or beyond GM_MAX_GPUS. */
	__u64 gpu_bytes[GM_MAX_GPUS + 1];
	/* gpumem's probe programs run in its threads (entries, returns, context and tensor
	 * probes), added at each accounted call (gm_inflight.hits): gpumem's own cost. */
	__u64 probe_hits;
};

struct gm_proc_slot {
	__u32 state;		/* GM_SLOT_* and the sequence */
	__u32 span;		/* of the keys whose home this slot is; raised by compare-and-swap */
	struct gm_proc_key key;
	struct gm_proc_stats stats;
};
_Static_assert(sizeof(struct gm_proc_slot) == 16 + sizeof(struct gm_proc_stats),
	       "gm_proc_slot has no hidden padding");

/* The slot a process's probe starts at (gm_site_home()'s hash of its key). */
static inline __u32 gm_proc_home(__u32 tgid, __u32 gen, __u32 mask)
{
	__u64 h = ((__u64)tgid << 32 | gen) * 0xff51afd7ed558ccdULL;

	return (__u32)((h * 0x9e3779b97f4a7c15ULL) >> 32) & mask;
}

/* PyTorch tensors (the caching allocator's USDT probes pytorch:malloc and pytorch:free) are
 * sites of their own, keyed like any other with the api of the probe table's "pytorch:malloc"
 * row (the cookie says which): their gm_site_stats count tensors, the *allocated* bytes, never
 * part of a process's current_bytes (the *reserved* bytes, its cudaMalloc'd segments), which
 * userspace keeps apart. While calls are streamed, tensor_malloc and tensor_free send
 * GM_REC_ALLOC and GM_REC_FREE (GM_REC_UNKNOWN_FREE) with layer GM_LAYER_TENSOR and the api of
 * that row, for the free too; process_bytes is then the process's reserved bytes at the event,
 * tensor_bytes its tensor bytes after it. */

/* Ring-buffer records; each begins with its type. */
enum gm_record_type {
	GM_REC_ALLOC = 1,
	GM_REC_FREE = 2,
	GM_REC_ALLOC_FAILED = 3,
	GM_REC_UNKNOWN_FREE = 4,
	GM_REC_PROCESS_NEW = 5,		/* first allocation call of a process */
	GM_REC_PROCESS_EXIT = 6,	/* last thread of a tracked process ended; size: its
					 * CPU time in ns (userspace takes it, passes on 0) */
	GM_REC_EXEC = 7,		/* a process exec'd: look for a static runtime */
	GM_REC_LIB_OPEN = 8,		/* a file named like a CUDA library was opened */
	GM_REC_EXIT_VMA = 9,		/* an executable mapping of a process that is ending (or
					 * making its first call) */
	GM_REC_STACK_COPY = 10,		/* registers and stack top of a new site, to unwind */
	GM_REC_PY_STACK = 11,		/* a new Python stack: name its code objects now */
	GM_REC_PROCESS_EXEC = 12,	/* a tracked process exec'd: the image that held its
					 * allocations ended (the driver frees them) */
};

struct gm_call_event {
	__u32 type;		/* enum gm_record_type */
	__u32 pid;
	__u32 tid;
	__s32 stack_id;
	__u64 time_ns;
	__u64 addr;
	__u64 size;
	__u64 process_bytes;	/* the process's current GPU bytes after (or, failed: at) the call */
	__s32 error;		/* return code */
	__u16 api;
	__u8 kind;
	__u8 layer;
	char comm[GM_COMM_LEN];
	__u32 gen;		/* the process's generation: which of a pid's processes */
	__s32 py_stack_id;	/* negative: no Python frames */
	__u64 start_ns;		/* the process's start, ns since boot */
	__u64 cgroup_id;	/* the caller's cgroup: a process gone before /proc was read
				 * still gets its container */
	__u64 tensor_bytes;	/* the process's PyTorch tensor bytes after a tensor event
				 * (layer GM_LAYER_TENSOR) or at a failure; else 0 */
	__u32 gpu;		/* the device of the allocation + 1; 0: not known */
	__u32 held;		/* GM_REC_PROCESS_NEW: paused until userspace resumes it */
};

/* The kernel's encoding of a device number (new_encode_dev's layout, as inodes and vmas carry
 * it): one definition for both sides. */
#define GM_DEV_MINOR_BITS 20
#define GM_DEV_MINOR_MASK ((1u << GM_DEV_MINOR_BITS) - 1)
static inline __u64 gm_kernel_dev(__u32 major, __u32 minor)
{
	return ((__u64)major << GM_DEV_MINOR_BITS) | minor;
}

/* A file's ctime as known_files keeps it (ns; lifecycle.bpf.h's inode_ctime_ns reads the
 * inode's): userspace's from stat, one formula for discovery and the agent's pins. */
static inline __u64 gm_ctime_ns(__s64 sec, __s64 nsec)
{
	return (__u64)sec * 1000000000ull + (__u64)nsec;
}

/* Holds: a process is paused only while its gpumem's heartbeat (written at every turn of its
 * loop) is this fresh, and each hold is recorded in a map every instance shares (pinned at
 * GM_HOLDS_PIN), so the next gpumem to start resumes what an ended one left paused. */
#define GM_HEARTBEAT_FRESH_NS 1000000000ull
#define GM_MAX_HOLDS 4096
#define GM_HOLDS_PIN "/sys/fs/bpf/gpumem_holds"

struct gm_hold {
	__u32 holder;		/* the tgid of the gpumem that paused it */
	__u32 pad;
	__u64 time_ns;
};

/* The agent (`gpumem serve`) pins its maps and links under a directory of the BPF file system,
 * so the probes keep counting while it restarts; the one-entry map `agent` there says which
 * layout they have and which agent owns them. */
#define GM_PIN_DIR_DEFAULT "/sys/fs/bpf/gpumem"
#define GM_AGENT_FRESH_NS 5000000000ull	/* an agent whose heartbeat is older is not running */

/* Settings userspace changes at run time (the `settings` map, one entry). */
struct gm_settings {
	__u32 stream_calls;	/* per-allocation events: trace, record, export */
	__u32 pad;
};

struct gm_agent {
	__u32 layout;		/* GM_LAYOUT_VERSION of the agent that created the pins */
	__u32 pid;		/* the agent running now, 0 when none */
	__u64 heartbeat_ns;	/* CLOCK_MONOTONIC, written by the running agent */
	__u64 started_ns;	/* when the pins were made */
	/* What the pinned programs were loaded with (their read-only data is not pinned): an
	 * agent that adopts their links must ask for the same. */
	__u32 stack_mode;
	__u32 stack_bytes;
	__u32 python_frames;
	__u32 uprobe_sessions;	/* the alloc shape's probes are session links (0 before them) */
	/* What a probe hit costs, as the agent measured it (loader/calibrate.h), in picoseconds:
	 * 0 not measured. Readers report gpumem's cost with it. */
	__u64 trap_ps;
};
_Static_assert(sizeof(struct gm_agent) == 48, "gm_agent has no hidden padding");

struct gm_file_key {
	__u64 dev;		/* the kernel's encoding: major << 20 | minor */
	__u64 ino;
};

struct gm_file_event {
	__u32 type;		/* GM_REC_EXEC or GM_REC_LIB_OPEN */
	__u32 pid;
	__u64 time_ns;
	__u64 ino;
	__u32 dev;
	__u32 fd;		/* LIB_OPEN: the descriptor just opened */
	__u32 held;		/* LIB_OPEN: the process is stopped until userspace sends SIGCONT */
	__u32 traced;		/* the process passes the run's filters (-p, -c, --container) */
	char path[GM_PATH_LEN];	/* EXEC: the path exec'd; LIB_OPEN: the file's name */
};

/* How call stacks are taken. Sites are keyed by the frame-pointer stack id in the kernel (so
 * aggregation is exact in every mode); in DWARF mode the first allocation of each new site
 * also sends its registers and stack top, which userspace unwinds with the modules' CFI. */
enum gm_stack_mode {
	GM_STACKS_NONE = 0,
	GM_STACKS_FP = 1,
	GM_STACKS_DWARF = 2,
};

/* Registers sent for unwinding: the caller's, at the return of the CUDA call. */
enum gm_unwind_reg {
	GM_REG_IP = 0,
	GM_REG_SP,
	GM_REG_BP,
	GM_REG_BX,
	GM_REG_R12,
	GM_REG_R13,
	GM_REG_R14,
	GM_REG_R15,
	GM_REG_COUNT,
};

struct gm_stack_event {
	__u32 type;		/* GM_REC_STACK_COPY */
	__u32 pid;
	__u32 tid;
	__s32 stack_id;		/* the site's frame-pointer stack id */
	__u64 regs[GM_REG_COUNT];
	__u16 len;		/* bytes of stack copied from regs[GM_REG_SP] up */
	__u16 flags;		/* GM_STACK_COPY_* */
	__u32 gen;		/* the process's generation */
	__u8 stack[GM_STACK_COPY_MAX];
};

/* Sent just before GM_REC_PROCESS_EXIT, while the ending process's memory map still exists,
 * so frames in a process that ended before userspace read its maps still get names; and just
 * before GM_REC_PROCESS_NEW (at_start), for an image an exec may end before userspace reads
 * its maps (the old image's memory map is gone by the time the exec is seen). */
struct gm_vma_event {
	__u32 type;		/* GM_REC_EXIT_VMA */
	__u32 pid;
	__u32 gen;		/* the process's generation */
	__u32 at_start;		/* 1: sent at the process's first call; 0: at its end */
	__u64 start;
	__u64 end;
	__u64 pgoff;		/* in pages */
	__u64 ino;
	__u64 dev;		/* the kernel's encoding: major << 20 | minor */
	/* The file's path from its mount namespace's root, read from its dentries: path_len
	 * bytes of components, the file's own name first, each NUL-terminated. path_whole: the
	 * walk reached the root, so every component is there; else (an overlay's file among
	 * others, mapped as its layer's) only the first, the name, is. */
	__u32 path_len;
	__u32 path_whole;
	char path[GM_VMA_PATH_LEN];
};

/* CPython frames. For a process userspace found running a supported interpreter (py_procs),
 * each allocation walks the calling thread's frame chain and records up to GM_PY_MAX_FRAMES
 * (code object, instruction) pairs, innermost first, as one entry of py_stacks. */
#define GM_PY_MAX_FRAMES 32
#define GM_PY_MAX_THREADS 64	/* thread states walked to find the calling thread's */
#define GM_PY_FRAME_READ 112	/* bytes of a frame read at most: every frame_ offset below it */
#define GM_PY_TSTATE_READ 320	/* bytes of a thread state read at once: every tstate_ offset
				 * below it */
#define GM_PY_WINDOW 8192	/* bytes of a thread's data stack read at once (3.11+): the
				 * frames below the innermost come with it */
#define GM_PY_WINDOW_SLACK 512	/* read beyond what the thread's last walk used */
#define GM_PY_RUNS 8		/* runs of heap frames a walk keeps for the next (py_scratch) */
#define GM_PY_INSTR_ENTRY (1u << 31)	/* in instr[]: the frame is an entry frame, the first
					 * a C call of the eval loop ran */
#define GM_PY_INSTR_NONE 0x7fffffffu	/* the instruction pointer was outside the code */
#define GM_PY_OFF_NONE 0xffffffffu	/* an offset of a field this version does not have */

/* How a thread state names its thread. */
enum gm_py_thread_id {
	GM_PY_TID_NATIVE = 0,	/* native_thread_id: the tid in its pid namespace (3.11+) */
	GM_PY_TID_PTHREAD = 1,	/* thread_id: pthread_self(), the thread's fs base (3.9, 3.10,
				 * x86-64) */
};

/* What a frame's instruction field holds. */
enum gm_py_instr_kind {
	GM_PY_INSTR_POINTER = 0,	/* a pointer into co_code_adaptive (3.11+) */
	GM_PY_INSTR_LASTI_BYTES = 1,	/* int f_lasti, in bytes (3.9) */
	GM_PY_INSTR_LASTI_UNITS = 2,	/* int f_lasti, in 2-byte code units (3.10) */
};

/* Offsets (bytes) in the interpreter's structures, per version, from userspace, which checks
 * that each lies inside what the BPF side reads of its structure (GM_PY_*_READ). */
struct gm_py_offsets {
	__u32 runtime_interp_head;	/* _PyRuntimeState.interpreters.head */
	__u32 interp_threads_head;	/* PyInterpreterState.threads.head (tstate_head) */
	__u32 tstate_next;
	__u32 tstate_interp;
	__u32 tstate_thread_id;		/* native_thread_id or thread_id: see thread_id_kind */
	__u32 thread_id_kind;		/* enum gm_py_thread_id */
	__u32 tstate_cframe;		/* 3.11-3.12: PyThreadState.cframe; NONE: frame in tstate */
	__u32 cframe_frame;		/* _PyCFrame.current_frame (or tstate.current_frame, frame) */
	__u32 tstate_datastack_chunk;	/* 3.11+: the data stack's chunk and top; NONE: frames */
	__u32 tstate_datastack_top;	/* are objects of their own (3.9, 3.10) */
	__u32 frame_read;		/* bytes of a frame read: <= GM_PY_FRAME_READ, 8-aligned */
	__u32 frame_code;		/* _PyInterpreterFrame.f_code / f_executable (f_code) */
	__u32 frame_previous;		/* previous (f_back) */
	__u32 frame_instr;		/* prev_instr / instr_ptr (f_lasti) */
	__u32 instr_kind;		/* enum gm_py_instr_kind */
	__u32 frame_entry;		/* is_entry (a byte); NONE: none in this version */
	__u32 frame_owner;		/* owner (a byte) */
	__u32 owner_cstack;		/* owner value of C-stack shim frames to skip; NONE: none */
	__u32 code_units;		/* PyCodeObject.co_code_adaptive */
	__u32 object_type;		/* PyObject.ob_type */
};

enum gm_py_state {
	GM_PY_ON = 1,
	GM_PY_MISMATCH = 2,	/* a walk found the live state unlike the offsets: off for good */
};

/* py_procs value, keyed by tgid. */
struct gm_py_proc {
	__u32 state;		/* enum gm_py_state, written by BPF on a mismatch */
	__u32 pad;
	__u64 runtime;		/* address of _PyRuntime in the process */
	__u64 code_type;	/* address of PyCode_Type: every frame's code is checked against it */
	struct gm_py_offsets off;
};

/* py_stacks value, keyed by a Python stack id (a hash of it, checked on every use). */
struct gm_py_stack {
	__u32 depth;		/* pairs recorded */
	__u32 truncated;	/* 1: the chain went on past GM_PY_MAX_FRAMES */
	__u64 code[GM_PY_MAX_FRAMES];	/* PyCodeObject addresses, innermost first */
	__u32 instr[GM_PY_MAX_FRAMES];	/* code-unit index, | GM_PY_INSTR_ENTRY */
};

/* GM_REC_PY_STACK: the first allocation with a new Python stack; the process is held until
 * userspace has read its code objects when held is set. */
struct gm_py_stack_event {
	__u32 type;
	__u32 pid;
	__u32 gen;
	__s32 py_stack_id;
	__u32 held;
	__u32 pad;
	struct gm_py_stack stack;
};

#endif /* GPUMEM_H */
