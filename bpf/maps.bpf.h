/* SPDX-License-Identifier: GPL-2.0 */
/* Every map of the BPF object, here and nowhere else: the knobs userspace sets before load
 * (.rodata) and while the programs run (.bss), then the maps of .maps, with the types of the
 * values only the kernel side sees (what crosses to userspace is in gpumem.h). */
#ifndef GPUMEM_MAPS_BPF_H
#define GPUMEM_MAPS_BPF_H

#include "gpumem.h"

/* ---- Knobs: set by userspace before load (.rodata) ---- */

const volatile bool filter_pids = false;	/* only processes in `targets` */
const volatile __u32 filter_cgroups = 0;	/* entries of cgroup_filter in use */
const volatile bool hold_new_libs = false;	/* SIGSTOP at the first open of an unknown
						 * CUDA library until it is attached */
const volatile bool hold_ttyless = false;	/* with no targets (serve): hold a process
						 * with no controlling terminal (a shell's job
						 * control would take a stop for the user's) */
const volatile __u32 stack_mode = GM_STACKS_DWARF;	/* enum gm_stack_mode */
const volatile __u32 stack_copy_bytes = GM_STACK_COPY_DEFAULT;
const volatile __u32 self_tgid = 0;		/* gpumem itself: never held */
const volatile bool hold_new_procs = false;	/* SIGSTOP at the first allocation (-c only):
						 * userspace captures its module map, then
						 * sends SIGCONT; likewise at each new Python
						 * stack, until its code objects are read */
const volatile __u32 alloc_mask = GM_DEFAULT_MAX_ALLOCS - 1;	/* allocs' slots - 1 */
const volatile __u32 site_mask = 2 * GM_DEFAULT_MAX_SITES - 1;	/* sites' slots - 1 */
const volatile __u32 proc_mask = 2 * GM_DEFAULT_MAX_PROCS - 1;	/* procs' slots - 1 */
const volatile bool python_frames = true;	/* --no-python clears it */

/* ---- Written by userspace while the programs run (.bss) ---- */

/* Userspace clears this before it stops reading events, so no process is held that it
 * would not resume. */
bool holds_enabled = false;
/* Written by userspace at every turn of its loop: a gpumem that is stopped or hung holds no
 * one. */
__u64 heartbeat_ns = 0;

/* ---- The per-thread state kept in task storage ---- */

/* Where a thread's user stack is walked (ustack.bpf.h): per thread (a per-CPU buffer would be
 * shared with a program that preempts us). The stack's bytes are read onto the BPF stack
 * (struct walk), GM_STACK_WINDOW at a time, and past GM_STACK_NEAR_READS such windows into far,
 * GM_STACK_FAR at a time (a deep stack's frames in a few reads, not one a frame; 8 KiB was
 * 110-220 ns a walk faster at depth 40 than 4 KiB, for twice the memory a thread). */
#define GM_STACK_FAR 4096

struct stack_scratch {
	/* The stack walked now and the one walked before it, whose id is last_id + 1: a thread
	 * that allocates from one place again and again is answered without a lookup. */
	struct gm_user_stack st[2];
	__u32 cur;			/* st[cur & 1] is walked into */
	__u32 last_id_plus1;		/* 0: none */
	__u64 lo, hi;			/* the thread's stack mapping; 0: not found yet */
	/* What the walk's first read (the stack from sp up) held at the words the call in flight
	 * writes its results to (rec.out_ptr, rec.out_pitch): their values at its return, with no
	 * read of their own. Bit i of out_have: out_val[i] holds them. */
	__u64 out_val[2];
	__u32 out_have;
	/* The stack past the walk's windows on the BPF stack, read GM_STACK_FAR bytes at a time
	 * into far ([fbase, fbase + fhave)), and the frame record gm_frame_record() gave. */
	__u64 fbase, fhave, fnext, fret;
	__u64 far[GM_STACK_FAR / 8];
};

struct thread_state {
	struct gm_inflight rec;		/* first: the map's value is read as a record */
	struct stack_scratch stack;
	/* py_procs_gen + 1 when the thread's process was found to have no interpreter to walk
	 * (no py_procs entry, or one that is off); 0: not known. */
	__u64 py_none_gen_plus1;
	/* The clock at the thread's first call of the scheduler tick jiffies (call_clock()). */
	__u64 clock_jiffies, clock_ns;
};

/* Where a stack is built before it is looked up, and the thread state and frames read: off
 * the 512-byte BPF stack, and per thread (a per-CPU buffer would be shared with a program that
 * preempts us); made at a thread's first walk, never on the hot path after. */
struct py_scratch {
	struct gm_py_stack st;
	__u64 tstate[GM_PY_TSTATE_READ / 8];	/* the thread state's first bytes */
	__u64 win_base, win_len;		/* what win holds: [win_base, win_base + win_len) */
	/* Bytes of data stack the last walk used, and this walk's bounds: in the map value, where
	 * the verifier does not follow them from one frame to the next. */
	__u64 span, want, first_end, lowest;
	/* The thread's id as its interpreter records it (python_thread_id), found once for the
	 * process generation tid_gen names (its gen + 1; 0: not yet): a thread keeps its id
	 * until an exec, which makes another generation. */
	__u64 tid;
	__u64 interp;		/* the interpreter its cached thread state was found in */
	__u32 tid_gen;
	__u32 hash;		/* the stack's id: its process and frames hashed as the walk goes */
	__u32 last_id_plus1;	/* the id of last, the thread's stack before (0: none) */
	struct gm_py_stack last;	/* as py_stacks holds it (an entry never changes) */
	__u64 win[GM_PY_WINDOW / 8];		/* frames, as read */
	/* Frames off the data stack (3.9's and 3.10's, a generator's): the runs of them each walk
	 * found, frames near enough to be read at once, [run_lo, run_hi); run_set names the last
	 * walk's, which the next one reads by, the other set being this walk's. After the window,
	 * whose offset stays: placed before it, 3.12's and 3.13's walks at depth 50 measured 60 ns
	 * slower. */
	__u64 run_lo[2][GM_PY_RUNS], run_hi[2][GM_PY_RUNS];
	__u32 runs[2], run_set;
};

/* ---- The maps ---- */

/* The call in flight on each thread, in the thread itself: no hash on the hot path, and it
 * goes away with the thread. sp == 0: none. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} inflight SEC(".maps");

/* The live allocations, in open addressing (gpumem.h): nothing is ever evicted, which would
 * corrupt the totals silently. Slots: --max-allocs, rounded up to a power of two. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, GM_DEFAULT_MAX_ALLOCS);
	__type(key, __u32);
	__type(value, struct gm_alloc_slot);
} allocs SEC(".maps");

/* The call sites, in open addressing (gpumem.h): an allocation keeps its site's slot. Slots:
 * twice --max-sites, rounded up to a power of two. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 2 * GM_DEFAULT_MAX_SITES);
	__type(key, __u32);
	__type(value, struct gm_site_slot);
} sites SEC(".maps");

/* The processes, in open addressing (gpumem.h). Slots: twice --max-procs, rounded up to a
 * power of two. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 2 * GM_DEFAULT_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct gm_proc_slot);
} procs SEC(".maps");

/* Which slot each process's entry is in, made with the entry: what decides between two threads
 * making it at once (a second entry would split its running totals). --max-procs entries. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_DEFAULT_MAX_PROCS);
	__type(key, struct gm_proc_key);
	__type(value, __u32);
} procs_made SEC(".maps");

/* Frame-pointer stacks by id, as BPF_MAP_TYPE_STACK_TRACE kept them (the return addresses,
 * zeros after the last), but walked here (user_stack()): made as stacks are first seen. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, GM_DEFAULT_MAX_STACKS);
	__type(key, __u32);
	__type(value, struct gm_user_stack);
} stacks SEC(".maps");

/* The loss and health counters (enum gm_counter), per CPU: userspace sums them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GM_CNT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* -p and -c: the processes to trace, and their children (on_fork); as many as --max-procs
 * raised above its default (size_maps). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_DEFAULT_MAX_PROCS);
	__type(key, __u32);			/* tgid */
	__type(value, __u8);
} targets SEC(".maps");

/* The records to userspace, each beginning with its enum gm_record_type. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, GM_DEFAULT_RINGBUF_BYTES);
} events SEC(".maps");

/* What userspace may change while the programs run (pinned with the agent's maps, so that an
 * agent started with --record streams through the links an earlier one left). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gm_settings);
} settings SEC(".maps");

/* Every hold of every instance, so that the next one to start resumes an ended one's. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_MAX_HOLDS);
	__type(key, __u32);			/* tgid held */
	__type(value, struct gm_hold);
} holds SEC(".maps");

/* --cgroup, --container, --pod: the cgroups (with everything below them) to trace. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, GM_MAX_CGROUP_FILTERS);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_filter SEC(".maps");

/* The devices of the contexts processes created or retained (cuCtxCreate,
 * cuDevicePrimaryCtxRetain), and which are primary. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_MAX_CONTEXTS);
	__type(key, struct gm_ctx_key);
	__type(value, struct gm_ctx_info);
} ctx_infos SEC(".maps");

/* Processes running a supported interpreter, with its offsets (filled by userspace). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_MAX_PY_PROCS);
	__type(key, __u32);			/* tgid */
	__type(value, struct gm_py_proc);
} py_procs SEC(".maps");

/* Counts the entries userspace made in py_procs, each counted once made: a thread whose
 * process had none skips the lookup while the count is as it was (thread_state). In a map, not
 * a global: the programs of an agent that adopted pinned links and those it loaded share it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} py_procs_gen SEC(".maps");

/* Python stacks by id; sized like the stack map (--max-stacks). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, GM_DEFAULT_MAX_STACKS);
	__type(key, __u32);
	__type(value, struct gm_py_stack);
} py_stacks SEC(".maps");

/* Each thread's struct py_scratch, made at its first Python walk. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct py_scratch);
} py_scratch SEC(".maps");

/* Where the kernel's walk of a process's mappings builds a file's path (lifecycle.bpf.h): per
 * CPU, taken with busy, since a program on another task may preempt the walk and take it. A
 * component is read at an offset under GM_VMA_PATH_LEN, up to GM_VMA_PATH_LEN bytes: path has
 * room for both. */
struct path_scratch {
	__u32 busy;
	__u32 off;		/* bytes of path written */
	__u64 dentry, mnt;	/* the next dentry up, and the struct mount it is in */
	__u32 whole;		/* the root was reached */
	char path[2 * GM_VMA_PATH_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct path_scratch);
} path_scratch SEC(".maps");

/* What the pins under the agent's directory are, and whose (userspace's only). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gm_agent);
} agent SEC(".maps");

/* Library files userspace has examined, by (kernel dev, inode), each with its ctime then (ns):
 * opening one unchanged costs nothing. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_MAX_KNOWN_FILES);
	__type(key, struct gm_file_key);
	__type(value, __u64);
} known_files SEC(".maps");

#endif /* GPUMEM_MAPS_BPF_H */
