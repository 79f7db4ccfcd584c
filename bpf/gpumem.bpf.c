// SPDX-License-Identifier: GPL-2.0
/* The kernel half of gpumem: uprobes on CUDA allocation APIs keep, in maps, what every
 * process and call site holds; process lifecycle and library discovery tracepoints. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>
#include "gpumem.h"

char LICENSE[] SEC("license") = "GPL";

extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
				 __u64 addr) __weak __ksym;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __weak __ksym;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __weak __ksym;
extern bool bpf_session_is_return(void) __weak __ksym;

#define VM_EXEC_FLAG 0x4
#define EEXIST 17

/* Set by userspace before load. */
const volatile bool filter_pids = false;	/* only processes in `targets` */
const volatile __u32 filter_cgroups = 0;	/* entries of cgroup_filter in use */
const volatile bool hold_new_libs = false;	/* SIGSTOP at the first open of an unknown
						 * CUDA library until it is attached */
const volatile __u32 stack_mode = GM_STACKS_DWARF;	/* enum gm_stack_mode */
const volatile __u32 stack_copy_bytes = GM_STACK_COPY_DEFAULT;
const volatile __u32 self_tgid = 0;		/* gpumem itself: never held */
/* Userspace clears this before it stops reading events, so no process is held that it
 * would not resume. */
bool holds_enabled = false;
/* Written by userspace at every turn of its loop: a gpumem that is stopped or hung holds no
 * one. */
__u64 heartbeat_ns = 0;
const volatile bool hold_new_procs = false;	/* SIGSTOP at the first allocation (-c only):
						 * userspace captures its module map, then
						 * sends SIGCONT; likewise at each new Python
						 * stack, until its code objects are read */
const volatile __u32 alloc_mask = GM_DEFAULT_MAX_ALLOCS - 1;	/* allocs' slots - 1 */
const volatile __u32 site_mask = 2 * GM_DEFAULT_MAX_SITES - 1;	/* sites' slots - 1 */
const volatile __u32 proc_mask = 2 * GM_DEFAULT_MAX_PROCS - 1;	/* procs' slots - 1 */
const volatile bool python_frames = true;	/* --no-python clears it */

/* Where a thread's user stack is walked (user_stack()): per thread (a per-CPU buffer would be
 * shared with a program that preempts us). The stack's bytes themselves are read onto the BPF
 * stack (struct walk), GM_STACK_WINDOW at a time. */
#define GM_STACK_WINDOW 256

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

static __always_inline struct thread_state *thread_of(struct gm_inflight *rec)
{
	return (struct thread_state *)rec;
}

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

static __always_inline bool slot_has(const struct gm_alloc_slot *sl, const struct gm_alloc_key *k)
{
	return sl->addr == k->addr && sl->tgid == k->tgid && sl->gen == k->gen &&
	       sl->space == k->space;
}

/* The word a slot's space shares with its span (high half), changed by compare-and-swap. */
static __always_inline __u32 *space_span(struct gm_alloc_slot *sl)
{
	return (__u32 *)&sl->space;
}

/* How many slots from home a lookup looks at: its span + 1. */
static __always_inline __u32 home_reach(struct gm_alloc_slot *home)
{
	return ((*(volatile __u32 *)space_span(home)) >> 16) + 1;
}

/* The slot holding key live, and the state it was seen in (*seen); -1: none. A global
 * function, its loop a bpf_loop callback: the verifier checks them once. */
struct live_search {
	const struct gm_alloc_key *key;
	__u32 home, seen;
	int idx;
};

static long live_slot(__u64 i, void *data)
{
	struct live_search *f = data;
	__u32 idx = (f->home + (__u32)i) & alloc_mask, st;
	struct gm_alloc_slot *s = bpf_map_lookup_elem(&allocs, &idx);
	struct gm_alloc_key k;

	if (!s)
		return 1;
	st = *(volatile __u32 *)&s->state;
	barrier();	/* the key read after the state that says whose it is */
	k = *f->key;
	if (GM_SLOT_STATE(st) != GM_SLOT_LIVE || !slot_has(s, &k))
		return 0;
	f->seen = st;
	f->idx = (int)idx;
	return 1;
}

__noinline int alloc_find_far(const struct gm_alloc_key *key, __u32 *seen)
{
	struct live_search f = { .key = key, .idx = -1 };
	struct gm_alloc_slot *h;
	__u32 reach;

	if (!key || !seen)
		return -1;
	f.home = gm_alloc_home(key->tgid, key->gen, key->space, key->addr, alloc_mask);
	h = bpf_map_lookup_elem(&allocs, &f.home);
	if (!h)
		return -1;
	reach = home_reach(h);
	bpf_loop(reach < GM_ALLOC_PROBES ? reach : GM_ALLOC_PROBES, live_slot, &f, 0);
	if (f.idx >= 0)
		*seen = f.seen;
	return f.idx;
}

/* alloc_find_far, but where the home's span is 0 (most often): the key can be only in its
 * home slot, read here without the walk's call. */
static __always_inline int alloc_find(const struct gm_alloc_key *key, __u32 *seen)
{
	__u32 home = gm_alloc_home(key->tgid, key->gen, key->space, key->addr, alloc_mask), st;
	struct gm_alloc_slot *h = bpf_map_lookup_elem(&allocs, &home);

	if (!h)
		return -1;
	if ((*(volatile __u32 *)space_span(h)) >> 16)
		return alloc_find_far(key, seen);
	st = *(volatile __u32 *)&h->state;
	barrier();	/* the key read after the state that says whose it is */
	if (GM_SLOT_STATE(st) != GM_SLOT_LIVE || !slot_has(h, key))
		return -1;
	*seen = st;
	return (int)home;
}

/* Takes out the entry at idx if it is still the one seen live: true for the one caller that
 * did, with its info in *out. */
static __always_inline bool alloc_take(__u32 idx, __u32 seen, struct gm_alloc_info *out)
{
	struct gm_alloc_slot *sl = bpf_map_lookup_elem(&allocs, &idx);

	if (!sl)
		return false;
	*out = sl->info;
	return __sync_val_compare_and_swap(&sl->state, seen, GM_SLOT_NEXT(seen, GM_SLOT_FREE)) ==
	       seen;
}

/* Sets the low half of the word (space), or raises the high half (span) to at least hi: a few
 * tries, each lost only to another writer of the word (rare: inserts of the same home). */
static __always_inline bool set_space(struct gm_alloc_slot *sl, __u32 space)
{
	for (int i = 0; i < 8; i++) {
		__u32 old = *(volatile __u32 *)space_span(sl);

		if ((old & 0xffffu) == (space & 0xffffu))
			return true;	/* most often: an address of the same space again */

		if (__sync_val_compare_and_swap(space_span(sl), old,
						(old & 0xffff0000u) | (space & 0xffffu)) == old)
			return true;
	}
	return false;
}

static __always_inline bool raise_span(struct gm_alloc_slot *home, __u32 span)
{
	for (int i = 0; i < 8; i++) {
		__u32 old = *(volatile __u32 *)space_span(home);

		if (old >> 16 >= span)
			return true;
		if (__sync_val_compare_and_swap(space_span(home), old,
						(old & 0xffffu) | (span << 16)) == old)
			return true;
	}
	return false;
}

/* The first free slot from home (a bpf_loop callback: its body is verified once). */
struct free_search {
	__u32 home, at, st;
	struct gm_alloc_slot *sl;
};

static long free_slot(__u64 i, void *data)
{
	struct free_search *f = data;
	__u32 idx = (f->home + (__u32)i) & alloc_mask, st;
	struct gm_alloc_slot *s = bpf_map_lookup_elem(&allocs, &idx);

	if (!s)
		return 1;
	st = *(volatile __u32 *)&s->state;
	if (GM_SLOT_STATE(st) != GM_SLOT_FREE)
		return 0;
	f->sl = s;
	f->at = (__u32)i;
	f->st = st;
	return 1;
}

/* One try of alloc_insert: -2 when the slot it chose was claimed by another CPU first. */
__noinline int alloc_insert_once(const struct gm_alloc_key *key, const struct gm_alloc_info *info,
				 struct gm_alloc_info *old)
{
	struct free_search f = {};
	struct gm_alloc_slot *h, *sl;
	__u32 claim, seen = 0, idx;
	int replaced = 0, at;

	if (!key || !info || !old)
		return -1;
	f.home = gm_alloc_home(key->tgid, key->gen, key->space, key->addr, alloc_mask);
	h = bpf_map_lookup_elem(&allocs, &f.home);
	if (!h)
		return -1;
	/* The home's span 0 (most often): the key can be only there, and a free home is it. */
	if (!(*(volatile __u32 *)space_span(h) >> 16)) {
		__u32 st = *(volatile __u32 *)&h->state;

		if (GM_SLOT_STATE(st) == GM_SLOT_FREE) {
			sl = h;
			f.st = st;
			goto claim;
		}
	}
	/* Live already (its free not seen): that slot, its entry replaced. */
	at = alloc_find(key, &seen);
	if (at >= 0) {
		idx = (__u32)at;
		sl = bpf_map_lookup_elem(&allocs, &idx);
		if (!sl)
			return -1;
		*old = sl->info;
		f.st = seen;
		replaced = 1;
	} else {
		bpf_loop(GM_ALLOC_PROBES, free_slot, &f, 0);
		sl = f.sl;
		if (!sl)
			return -1;
	}
claim:
	claim = GM_SLOT_NEXT(f.st, GM_SLOT_BUSY);
	if (__sync_val_compare_and_swap(&sl->state, f.st, claim) != f.st)
		return -2;
	sl->tgid = key->tgid;
	sl->gen = key->gen;
	sl->addr = key->addr;
	sl->info = *info;
	/* The home reaches it before it is live. */
	if (!set_space(sl, key->space) || !raise_span(h, f.at)) {
		barrier();
		*(volatile __u32 *)&sl->state = GM_SLOT_NEXT(claim, GM_SLOT_FREE);
		return -1;
	}
	barrier();	/* the compiler keeps the entry's stores before the state's */
	/* The entry is whole before it is live: x86's stores are seen in order; elsewhere an
	 * exchange orders them. */
#ifdef __TARGET_ARCH_x86
	*(volatile __u32 *)&sl->state = (claim & ~3u) | GM_SLOT_LIVE;
#else
	__sync_lock_test_and_set(&sl->state, (claim & ~3u) | GM_SLOT_LIVE);
#endif
	return replaced;
}

/* Makes key live with info: 0, or 1 when it replaced a live entry of that key (its free was
 * not seen; its info in *old); -1 when none of its GM_ALLOC_PROBES slots is free (the table
 * is full there). GM_ALLOC_TRIES tries: a slot another CPU claimed first is looked for again. */
static __always_inline int alloc_insert(const struct gm_alloc_key *key,
					const struct gm_alloc_info *info, struct gm_alloc_info *old)
{
	int rc = -2;

	for (int i = 0; i < GM_ALLOC_TRIES && rc == -2; i++)
		rc = alloc_insert_once(key, info, old);
	return rc == -2 ? -1 : rc;
}

/* The call sites, in open addressing (gpumem.h): an allocation keeps its site's slot. Slots:
 * twice --max-sites, rounded up to a power of two. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 2 * GM_DEFAULT_MAX_SITES);
	__type(key, __u32);
	__type(value, struct gm_site_slot);
} sites SEC(".maps");

static __always_inline bool site_is(const struct gm_site_slot *sl, const struct gm_site_key *k)
{
	return sl->key.stack_id == k->stack_id && sl->key.tgid == k->tgid &&
	       sl->key.gen == k->gen && sl->key.py_stack_id == k->py_stack_id &&
	       sl->key.api == k->api && sl->key.kind == k->kind && sl->key.gpu == k->gpu;
}

/* From home: the first slot holding key live, and the first free one (a bpf_loop callback,
 * verified once). It stops at a live match, or at a free slot past the home's span (no
 * entry of key lies further). */
struct site_search {
	const struct gm_site_key *key;
	__u32 home, reach;
	int live;			/* -1: none */
	__u32 at, st;			/* the free slot's distance from home and state */
	struct gm_site_slot *free;	/* NULL: none */
};

static long site_slot(__u64 i, void *data)
{
	struct site_search *f = data;
	__u32 idx = (f->home + (__u32)i) & site_mask, st;
	struct gm_site_slot *sl = bpf_map_lookup_elem(&sites, &idx);
	struct gm_site_key k;

	if (!sl)
		return 1;
	st = *(volatile __u32 *)&sl->state;
	barrier();	/* the key read after the state that says whose it is */
	k = *f->key;
	if (GM_SLOT_STATE(st) == GM_SLOT_LIVE && site_is(sl, &k)) {
		f->live = (int)idx;
		return 1;
	}
	if (GM_SLOT_STATE(st) == GM_SLOT_FREE && !f->free) {
		f->free = sl;
		f->at = (__u32)i;
		f->st = st;
	}
	return f->free && i + 1 >= f->reach;
}

/* The span of home raised to at least span (a few tries, each lost only to another insert of
 * the same home). */
static __always_inline bool raise_site_span(struct gm_site_slot *home, __u32 span)
{
	for (int i = 0; i < 8; i++) {
		__u32 old = *(volatile __u32 *)&home->span;

		if (old >= span)
			return true;
		if (__sync_val_compare_and_swap(&home->span, old, span) == old)
			return true;
	}
	return false;
}

/* The slot of key, found live or made (*made = 1, its numbers zero); -1 when none of the
 * GM_SLOT_PROBES slots from home is free (the table is full there), -2 when another CPU
 * claimed the free slot first. A global function: verified once. */
__noinline int site_slot_of(const struct gm_site_key *key, __u32 home, __u32 *made)
{
	struct site_search f = { .key = key, .home = home, .live = -1 };
	struct gm_site_slot *h, *sl;
	__u32 claim;

	if (!key || !made)
		return -1;
	h = bpf_map_lookup_elem(&sites, &home);
	if (!h)
		return -1;
	f.reach = *(volatile __u32 *)&h->span + 1;
	bpf_loop(GM_SLOT_PROBES, site_slot, &f, 0);
	if (f.live >= 0)
		return f.live;
	sl = f.free;
	if (!sl)
		return -1;
	claim = GM_SLOT_NEXT(f.st, GM_SLOT_BUSY);
	if (__sync_val_compare_and_swap(&sl->state, f.st, claim) != f.st)
		return -2;
	sl->key = *key;
	__builtin_memset(&sl->stats, 0, sizeof(sl->stats));
	if (!raise_site_span(h, f.at)) {
		barrier();
		*(volatile __u32 *)&sl->state = GM_SLOT_NEXT(claim, GM_SLOT_FREE);
		return -1;
	}
	barrier();	/* the entry's stores before the state's (x86: seen in that order) */
#ifdef __TARGET_ARCH_x86
	*(volatile __u32 *)&sl->state = (claim & ~3u) | GM_SLOT_LIVE;
#else
	__sync_lock_test_and_set(&sl->state, (claim & ~3u) | GM_SLOT_LIVE);
#endif
	*made = 1;
	return (int)((home + f.at) & site_mask);
}

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

static __always_inline bool proc_is(const struct gm_proc_slot *sl, __u32 tgid, __u32 gen)
{
	return sl->key.tgid == tgid && sl->key.gen == gen;
}

/* From home: the slot holding (tgid, gen) live, or the first free one (a bpf_loop callback). */
struct proc_search {
	__u32 tgid, gen, home, reach;
	int live;			/* -1: none */
	__u32 at, st;			/* the free slot's distance from home and state */
	struct gm_proc_slot *free;	/* NULL: none (not looked for: want_free 0) */
	bool want_free;
};

static long proc_slot(__u64 i, void *data)
{
	struct proc_search *f = data;
	__u32 idx = (f->home + (__u32)i) & proc_mask, st;
	struct gm_proc_slot *sl = bpf_map_lookup_elem(&procs, &idx);

	if (!sl)
		return 1;
	st = *(volatile __u32 *)&sl->state;
	barrier();	/* the key read after the state that says whose it is */
	if (GM_SLOT_STATE(st) == GM_SLOT_LIVE && proc_is(sl, f->tgid, f->gen)) {
		f->live = (int)idx;
		return 1;
	}
	if (f->want_free && GM_SLOT_STATE(st) == GM_SLOT_FREE && !f->free) {
		f->free = sl;
		f->at = (__u32)i;
		f->st = st;
	}
	return (!f->want_free || f->free) && i + 1 >= f->reach;
}

/* The slot holding process (tgid, gen) live, past its home slot (where the span says one may
 * be); -1: none. A global function: verified once. */
__noinline int proc_find_far(__u32 tgid, __u32 gen, __u32 home)
{
	struct proc_search f = { .tgid = tgid, .gen = gen, .home = home, .live = -1 };
	struct gm_proc_slot *h = bpf_map_lookup_elem(&procs, &home);

	if (!h)
		return -1;
	f.reach = *(volatile __u32 *)&h->span + 1;
	bpf_loop(f.reach < GM_SLOT_PROBES ? f.reach : GM_SLOT_PROBES, proc_slot, &f, 0);
	return f.live;
}

/* The live entry of process (tgid, gen): most often its home slot, read here with no call. */
static __always_inline struct gm_proc_stats *proc_find(__u32 tgid, __u32 gen)
{
	__u32 home = gm_proc_home(tgid, gen, proc_mask), st, idx;
	struct gm_proc_slot *sl = bpf_map_lookup_elem(&procs, &home);
	int at;

	if (!sl)
		return NULL;
	if (!*(volatile __u32 *)&sl->span) {
		st = *(volatile __u32 *)&sl->state;
		barrier();	/* the key read after the state that says whose it is */
		if (GM_SLOT_STATE(st) == GM_SLOT_LIVE && proc_is(sl, tgid, gen))
			return &sl->stats;
		return NULL;
	}
	at = proc_find_far(tgid, gen, home);
	if (at < 0)
		return NULL;
	idx = (__u32)at;
	sl = bpf_map_lookup_elem(&procs, &idx);
	return sl ? &sl->stats : NULL;
}

/* Frame-pointer stacks by id, as BPF_MAP_TYPE_STACK_TRACE kept them (the return addresses,
 * zeros after the last), but walked here (user_stack()): made as stacks are first seen. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, GM_DEFAULT_MAX_STACKS);
	__type(key, __u32);
	__type(value, struct gm_user_stack);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GM_CNT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_MAX_TARGETS);
	__type(key, __u32);			/* tgid */
	__type(value, __u8);
} targets SEC(".maps");

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

/* Per-allocation events for trace, record, export: one array lookup, inlined by the verifier. */
static __always_inline bool stream_calls(void)
{
	__u32 key = 0;
	struct gm_settings *s = bpf_map_lookup_elem(&settings, &key);

	return s && s->stream_calls;
}

static __always_inline void count(enum gm_counter which)
{
	__u32 key = which;
	__u64 *v = bpf_map_lookup_elem(&counters, &key);

	if (v)
		*v += 1;
}

/* Every hold of every instance, so that the next one to start resumes an ended one's. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_MAX_HOLDS);
	__type(key, __u32);			/* tgid held */
	__type(value, struct gm_hold);
} holds SEC(".maps");

static __always_inline bool is_gpu_kind(__u32 kind)
{
	return gm_kind_is_gpu(kind);
}

/* --cgroup, --container, --pod: the cgroups (with everything below them) to trace. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, GM_MAX_CGROUP_FILTERS);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_filter SEC(".maps");

static __always_inline bool in_selected_cgroup(void)
{
	for (__u32 i = 0; i < GM_MAX_CGROUP_FILTERS && i < filter_cgroups; i++)
		if (bpf_current_task_under_cgroup(&cgroup_filter, i) == 1)
			return true;
	return false;
}

/* Only this instance's own targets are ever paused: -p / -c processes and their children, or
 * those in the cgroups --cgroup/--container/--pod selected; and only while its consumer is
 * alive (a fresh heartbeat). The hold is recorded before the signal. */
static __always_inline bool hold(__u32 tgid)
{
	struct gm_hold h = { .holder = self_tgid };
	__u64 now = bpf_ktime_get_ns();

	if (!holds_enabled || now - heartbeat_ns > GM_HEARTBEAT_FRESH_NS)
		return false;
	if (filter_pids ? !bpf_map_lookup_elem(&targets, &tgid)
			: !filter_cgroups || !in_selected_cgroup())
		return false;
	h.time_ns = now;
	if (bpf_map_update_elem(&holds, &tgid, &h, BPF_ANY))
		return false;
	bpf_send_signal(19 /* SIGSTOP */);
	count(GM_CNT_HOLDS);
	return true;
}

/* The filters run first, so untraced processes and containers cost only the trap. */
static __always_inline bool wanted(__u32 tgid)
{
	if (filter_pids && !bpf_map_lookup_elem(&targets, &tgid))
		return false;
	return !filter_cgroups || in_selected_cgroup();
}

static __always_inline bool is_free_shape(__u64 cookie)
{
	__u32 shape = GM_COOKIE_SHAPE(cookie);

	return shape == GM_SHAPE_FREE || shape == GM_SHAPE_VMM_RELEASE;
}

/* The calling thread's process (start time, generation), read at the thread's first call and
 * kept in its record: one read per thread, not per call. */
static __always_inline void identify_process(struct gm_inflight *rec)
{
	struct task_struct *task;

	if (rec->gen)
		return;
	task = bpf_get_current_task_btf();
	rec->start_ns = BPF_CORE_READ(task, group_leader, start_boottime);
	rec->gen = gm_proc_gen(rec->start_ns);
}

static __always_inline void alloc_key_of(struct gm_alloc_key *key, __u32 tgid,
					 const struct gm_inflight *rec)
{
	key->tgid = tgid;
	key->gen = rec->gen;
	key->pad = 0;
	key->space = GM_COOKIE_SPACE(rec->cookie);
	key->addr = rec->addr;
}

/* Inside the call a thread has in flight: below its stack pointer (equal: the same call seen
 * by a second probe on the same code, one file reached under two inodes and probed both ways;
 * taking it again would count it twice). A free's record outlives its call (no return probe):
 * a free of the same address and space at or below it is inside it (the driver's cuMemFree_v2
 * inside cudaFree, or the second probe of its trap) exactly when the address is no longer
 * live, the free having taken it (or the free was refused, below); a free of an address live
 * again was handed it since (by another thread's allocation), and is a free of its own, from
 * the same frame too. A program's double free from one frame (one API), with no CUDA call
 * between, counts as nested, not unknown. */
static __always_inline bool inside_call(const struct gm_inflight *rec, __u32 tgid, __u64 sp,
					__u64 cookie, __u64 addr)
{
	struct gm_alloc_key key;
	__u32 seen = 0;

	if (!rec->sp || sp > rec->sp)
		return false;
	if (!rec->entry_only)
		return true;
	if (!is_free_shape(cookie) || addr != rec->addr ||
	    GM_COOKIE_SPACE(cookie) != GM_COOKIE_SPACE(rec->cookie))
		return false;
	/* From the free's own frame, only its own API: a second probe of one trap. */
	if (sp == rec->sp && GM_COOKIE_API(cookie) != GM_COOKIE_API(rec->cookie))
		return false;
	alloc_key_of(&key, tgid, rec);
	if (alloc_find(&key, &seen) < 0)
		return true;
	/* A refused free leaves it live: the driver's call inside it has its kind; the free of
	 * the right kind that follows (cudaFreeHost after cudaFree) is a free of its own. */
	return rec->refused && GM_COOKIE_KIND(cookie) == GM_COOKIE_KIND(rec->cookie);
}

static __always_inline void emit_call(__u32 type, const struct gm_inflight *rec, __u32 tgid,
				      __u32 tid, __s32 stack_id, __s32 py_stack_id, __u32 kind,
				      __u64 addr, __u64 size, __s32 error, __u64 process_bytes,
				      __s32 device);
static __always_inline __u64 account_free(__u32 tgid, __u32 gen,
					  const struct gm_alloc_info *info);
static __noinline void first_call(__u32 tgid, struct gm_inflight *rec, __u64 now);
static __always_inline __s32 user_stack(struct pt_regs *ctx, struct gm_inflight *rec,
					 bool at_entry);

/* A free, whole at its entry: the allocation leaves the live map before the driver can hand
 * its address to another thread, and only the deleter accounts it, so two racing frees of one
 * address count once. A free of a live allocation is taken as done: cudaFree of a valid
 * pointer fails only with the context lost, and the process's memory with it. No return
 * probe: 0.4 µs a pair (its trap) and a program run saved. */
static __always_inline void free_enter(struct pt_regs *ctx, struct gm_inflight *rec, __u64 id)
{
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct gm_alloc_key key;
	struct gm_alloc_slot *found = NULL;
	/* Whole on every path: left undefined where no entry was found, clang 14 read its
	 * fields from registers the verifier refuses as never written (R4 !read_ok). */
	struct gm_alloc_info info = {};
	__s32 stack_id = -1;
	bool stream, mine = false;
	__u32 seen = 0, idx;
	__u64 total;
	int at;

	if (!rec->addr)		/* cudaFree(NULL) frees nothing */
		return;
	alloc_key_of(&key, tgid, rec);
	at = alloc_find(&key, &seen);
	idx = (__u32)at;
	if (at >= 0)
		found = bpf_map_lookup_elem(&allocs, &idx);
	if (found && key.space == GM_SPACE_ADDR &&
	    (found->info.kind == GM_KIND_HOST) != (GM_COOKIE_KIND(rec->cookie) == GM_KIND_HOST) &&
	    *(volatile __u32 *)&found->state == seen) {	/* still that entry's kind */
		/* cudaFree of pinned host memory, cudaFreeHost of device memory: refused by the
		 * driver, and the allocation stays. */
		count(GM_CNT_FAILED_FREES);
		rec->refused = 1;
		return;
	}
	if (found)
		mine = alloc_take(idx, seen, &info);
	stream = stream_calls();
	if (stream)
		stack_id = user_stack(ctx, rec, true);
	if (!mine) {
		count(GM_CNT_UNKNOWN_FREES);
		if (stream)
			emit_call(GM_REC_UNKNOWN_FREE, rec, tgid, tid, stack_id, -1, 0, rec->addr,
				  0, 0, 0, GM_DEVICE_UNKNOWN);
		return;
	}
	total = account_free(tgid, rec->gen, &info);
	if (stream)
		emit_call(GM_REC_FREE, rec, tgid, tid, stack_id, -1, info.kind, rec->addr,
			  info.size, 0, total, info.device);
}

/* What bpf_get_current_pid_tgid() returns, from the task a program has at hand anyway: a
 * helper call less (the task's own fields, read directly). */
static __always_inline __u64 task_id(const struct task_struct *task)
{
	return (__u64)(__u32)task->tgid << 32 | (__u32)task->pid;
}

/* The calling thread's record, made at its first call; NULL for a process not traced. task: the
 * current one. */
static __always_inline struct gm_inflight *thread_record(struct task_struct *task, __u32 tgid)
{
	struct gm_inflight *rec;

	if (!wanted(tgid))
		return NULL;
	rec = bpf_task_storage_get(&inflight, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!rec)
		count(GM_CNT_INFLIGHT_FULL);
	return rec;
}

/* When a call began, for its allocation's age: the clock read at the thread's first call of
 * each scheduler tick (1-4 ms), not at every call. A clock read costs 50-60 ns a call on this
 * project's VM, jiffies a few; the coarse clock is refused to uprobe programs. */
static __always_inline __u64 call_clock(struct gm_inflight *rec)
{
	struct thread_state *ts = thread_of(rec);
	__u64 j = bpf_jiffies64();

	if (j != ts->clock_jiffies || !ts->clock_ns) {
		ts->clock_jiffies = j;
		ts->clock_ns = bpf_ktime_get_ns();
	}
	return ts->clock_ns;
}

/* Entry of a probed call (may_free: enter_free's, whose shapes include the frees). The
 * outermost call in flight on a thread owns the accounting: a call inside the recorded one is
 * skipped; a record whose return never fired (sp not above ours) is stale and replaced. 0 when
 * the call's return has work (a session's entry returns it: anything else spares the return
 * its trap). */
static __always_inline int probe_enter(struct pt_regs *ctx, __u64 out_ptr, __u64 out_pitch,
				       __u64 size, __u64 height, __u64 addr, bool may_free)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = task_id(task), sp = PT_REGS_SP(ctx), cookie, now;
	struct gm_inflight *rec = thread_record(task, id >> 32);

	if (!rec)
		return 1;
	/* Inside an allocation's call (the driver's under the runtime's): no cookie needed. */
	if (rec->sp && !rec->entry_only && sp <= rec->sp) {
		count(GM_CNT_NESTED_CALLS);
		return 1;
	}
	cookie = bpf_get_attach_cookie(ctx);
	/* Past the test above only a free's record can hold a call inside it. */
	if (may_free && inside_call(rec, id >> 32, sp, cookie, addr)) {
		count(GM_CNT_NESTED_CALLS);
		return 1;
	}
	/* Not before: a nested call needs no clock; nor does a free, but to hold a new process. */
	now = may_free && is_free_shape(cookie) && !hold_new_procs ? 0 : call_clock(rec);
	if (rec->sp && !rec->entry_only)
		count(GM_CNT_STALE_INFLIGHT);
	rec->sp = sp;
	rec->cookie = cookie;
	rec->entry_only = may_free && is_free_shape(cookie);
	rec->refused = 0;
	rec->time_ns = now;	/* an allocation's age (0 for a free) */
	rec->out_ptr = out_ptr;
	rec->out_pitch = out_pitch;
	rec->size = size;
	rec->height = height;
	rec->addr = addr;
	identify_process(rec);
	/* -c: a new process is held at its first call's entry, not at its return, so that
	 * userspace has read its maps (a shared libpython, mapped after exec) before the first
	 * allocation's Python stack is walked. */
	if (hold_new_procs)
		first_call(id >> 32, rec, now);
	if (may_free && rec->entry_only) {
		free_enter(ctx, rec, id);
		return 1;
	}
	return 0;
}

/* Entry of a call of a shape that is never a free (every program's but enter_free's): the
 * free's path is not in its code, nor its stack in the program's frame. */
static __always_inline int call_enter(struct pt_regs *ctx, __u64 out_ptr, __u64 out_pitch,
				      __u64 size, __u64 height)
{
	return probe_enter(ctx, out_ptr, out_pitch, size, height, 0, false);
}

SEC("uprobe")
int BPF_KPROBE(enter_alloc, void *out_ptr, __u64 size)
{
	call_enter(ctx, (__u64)out_ptr, 0, size, 1);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(enter_alloc_pitch, void *out_ptr, void *out_pitch, __u64 width, __u64 height)
{
	call_enter(ctx, (__u64)out_ptr, (__u64)out_pitch, width, height);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(enter_free, __u64 addr)
{
	probe_enter(ctx, 0, 0, 0, 0, addr, true);
	return 0;
}

/* ---- Arrays: the size is the one the caller's descriptor asks for ---- */

/* acc *= v, false past GM_MAX_ARRAY_BYTES: what a traced process passes is never trusted. */
static __always_inline bool mul_bounded(__u64 *acc, __u64 v)
{
	if (v && *acc > GM_MAX_ARRAY_BYTES / v)
		return false;
	*acc *= v;
	return true;
}

/* Bytes of an element of a cudaChannelFormatDesc: its channels' bits, each 0..64. */
static __always_inline __u64 channel_desc_bytes(__u64 desc)
{
	__s32 d[5] = {};
	__u32 bits = 0;

	if (!desc || bpf_probe_read_user(d, GM_CHAN_DESC_BYTES, (void *)desc))
		return 0;
	for (int i = 0; i < 4; i++) {
		if (d[i] < 0 || d[i] > 64)
			return 0;
		bits += d[i];
	}
	return bits % 8 ? 0 : bits / 8;
}

/* Bytes of an element of a driver array: its CUarray_format's size times NumChannels (1, 2, 4).
 * Formats of other sizes (block-compressed, YUV planar...) are not sized. */
static __always_inline __u64 driver_element_bytes(__u32 format, __u32 channels)
{
	__u64 bytes;

	switch (format) {
	case 0x01: case 0x08:			/* UNSIGNED_INT8, SIGNED_INT8 */
		bytes = 1;
		break;
	case 0x02: case 0x09: case 0x10:	/* UNSIGNED_INT16, SIGNED_INT16, HALF */
		bytes = 2;
		break;
	case 0x03: case 0x0a: case 0x20:	/* UNSIGNED_INT32, SIGNED_INT32, FLOAT */
		bytes = 4;
		break;
	default:
		return 0;
	}
	if (channels != 1 && channels != 2 && channels != 4)
		return 0;
	return bytes * channels;
}

/* The rule: every mip level l holds max(1, width >> l) x max(1, height >> l) x
 * max(1, depth >> l) elements (a layered array keeps its depth, its layer count, at every
 * level); height and depth 0 are 1 (1D, 2D arrays). 0: not sized. */
static __always_inline __u64 array_bytes(__u64 elem, __u64 width, __u64 height, __u64 depth,
					 __u32 levels, bool layered)
{
	__u64 total = 0;

	if (!elem || !width || !levels || levels > GM_MAX_MIP_LEVELS)
		return 0;
	height = height ? height : 1;
	depth = depth ? depth : 1;
	for (__u32 l = 0; l < GM_MAX_MIP_LEVELS; l++) {
		__u64 level = elem, w = width >> l, h = height >> l, d = layered ? depth : depth >> l;

		if (l >= levels)
			break;
		if (!mul_bounded(&level, w ? w : 1) || !mul_bounded(&level, h ? h : 1) ||
		    !mul_bounded(&level, d ? d : 1))
			return 0;
		total += level;
		if (total > GM_MAX_ARRAY_BYTES)
			return 0;
	}
	return total;
}

/* A cudaExtent {width, height, depth} passed by value: in memory, above the return address. */
static __always_inline bool read_extent(struct pt_regs *ctx, __u64 ext[3])
{
	return bpf_probe_read_user(ext, 3 * sizeof(__u64), (void *)(PT_REGS_SP(ctx) + 8)) == 0;
}

/* Every array shape (and cudaMalloc3D) has its own descriptor: sized here, at entry, while the
 * caller's descriptor is what it passed. For arrays, height says whether the descriptor was
 * sized (1) or not (0: held with 0 bytes, counted at a successful return). */
static __always_inline int array_enter(struct pt_regs *ctx, void *out, void *desc, __u64 a2,
				       __u64 a3, __u64 a4)
{
	__u32 shape = GM_COOKIE_SHAPE(bpf_get_attach_cookie(ctx));
	__u64 d[5] = {}, ext[3] = {}, bytes = 0, elem;

	(void)a4;
	switch (shape) {
	case GM_SHAPE_VMM_CREATE: {
		/* cuMemCreate(out, size, prop, flags): the device is the one prop->location
		 * names (a CUmemLocation {type, id} at offset 8; type 1: a device), not the
		 * thread's; passed on as that device + 1 (0: the thread's). */
		__s32 loc[2] = {};
		__u64 device = 0;

		if (a2 && !bpf_probe_read_user(loc, sizeof(loc), (void *)(a2 + 8)) && loc[0] == 1 &&
		    loc[1] >= 0 && loc[1] < GM_MAX_GPUS)
			device = (__u64)loc[1] + 1;
		return call_enter(ctx, (__u64)out, device, (__u64)desc, 1);
	}
	case GM_SHAPE_MALLOC3D: {
		__u64 rows;

		if (!read_extent(ctx, ext))
			ext[0] = 0;
		rows = ext[1] ? ext[1] : 1;
		if (!mul_bounded(&rows, ext[2] ? ext[2] : 1))
			rows = 0;
		/* pitch (offset 8 of the cudaPitchedPtr) x rows, read at return */
		return call_enter(ctx, (__u64)out, (__u64)out + 8, ext[0], rows);
	}
	case GM_SHAPE_ARRAY_RT:
		bytes = array_bytes(channel_desc_bytes((__u64)desc), (__u64)a2, a3, 0, 1, false);
		break;
	case GM_SHAPE_ARRAY3D_RT:
		if (read_extent(ctx, ext))
			bytes = array_bytes(channel_desc_bytes((__u64)desc), ext[0], ext[1], ext[2],
					    1, a2 & GM_ARRAY_LAYERED);
		break;
	case GM_SHAPE_MIPMAP_RT:
		if (read_extent(ctx, ext))
			bytes = array_bytes(channel_desc_bytes((__u64)desc), ext[0], ext[1], ext[2],
					    (__u32)a2, a3 & GM_ARRAY_LAYERED);
		break;
	case GM_SHAPE_ARRAY_DRV:
		if (desc && !bpf_probe_read_user(d, GM_ARRAY_DESC_BYTES, desc)) {
			elem = driver_element_bytes((__u32)d[2], (__u32)(d[2] >> 32));
			bytes = array_bytes(elem, d[0], d[1], 0, 1, false);
		}
		break;
	case GM_SHAPE_ARRAY3D_DRV:
	case GM_SHAPE_MIPMAP_DRV:
		if (desc && !bpf_probe_read_user(d, GM_ARRAY3D_DESC_BYTES, desc)) {
			elem = driver_element_bytes((__u32)d[3], (__u32)(d[3] >> 32));
			bytes = array_bytes(elem, d[0], d[1], d[2],
					    shape == GM_SHAPE_MIPMAP_DRV ? (__u32)a2 : 1,
					    d[4] & GM_ARRAY_LAYERED);
		}
		break;
	default:
		return 0;
	}
	return call_enter(ctx, (__u64)out, 0, bytes, bytes ? 1 : 0);
}

SEC("uprobe")
int BPF_KPROBE(enter_array, void *out, void *desc, __u64 a2, __u64 a3, __u64 a4)
{
	array_enter(ctx, out, desc, a2, a3, a4);
	return 0;
}

static __always_inline bool is_array_shape(__u32 shape)
{
	return shape >= GM_SHAPE_ARRAY_RT && shape <= GM_SHAPE_MIPMAP_DRV;
}

/* ---- Contexts: which one each thread has current, and the device of each ---- */

/* The devices of the contexts processes created or retained (cuCtxCreate,
 * cuDevicePrimaryCtxRetain), and which are primary. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_MAX_CONTEXTS);
	__type(key, struct gm_ctx_key);
	__type(value, struct gm_ctx_info);
} ctx_infos SEC(".maps");

static __always_inline bool is_ctx_shape(__u32 shape)
{
	return (shape >= GM_SHAPE_CTX_SET && shape <= GM_SHAPE_CTX_RETAIN) ||
	       shape == GM_SHAPE_CTX_CREATE_V3;
}

static __always_inline bool is_teardown_shape(__u32 shape)
{
	return shape >= GM_SHAPE_CTX_DESTROY && shape <= GM_SHAPE_DEVICE_RESET;
}

static __always_inline void ctx_push(struct gm_inflight *rec, __u64 ctx)
{
	__u32 d = rec->ctx_depth;

	if (d < GM_CTX_DEPTH)
		rec->ctx_stack[d & (GM_CTX_DEPTH - 1)] = ctx;
	if (d < 0xffff)
		rec->ctx_depth = d + 1;
}

/* Followed at the entry of each call, nested ones too (the runtime sets contexts inside its
 * own calls), assuming it succeeds (cudaSetDevice, cuCtxCreate and the retain are taken at a
 * successful return): what a failing set, push or pop leaves is the driver's error to report,
 * and the next call on the thread sets it right. */
static __always_inline void ctx_enter(struct gm_inflight *rec, __u32 shape, __u64 a0, __u64 a1,
				      __u64 a2, __u64 a3, __u64 a4)
{
	__u32 d = rec->ctx_depth;

	switch (shape) {
	case GM_SHAPE_CTX_SET:
		if (!a0) {
			if (d)
				rec->ctx_depth = d - 1;
		} else if (!d) {
			ctx_push(rec, a0);
		} else if (d <= GM_CTX_DEPTH) {
			rec->ctx_stack[(d - 1) & (GM_CTX_DEPTH - 1)] = a0;
		}
		break;
	case GM_SHAPE_CTX_PUSH:
		ctx_push(rec, a0);
		break;
	case GM_SHAPE_CTX_POP:
		if (d)
			rec->ctx_depth = d - 1;
		break;
	case GM_SHAPE_SET_DEVICE:	/* at its return: a device that does not exist fails */
		rec->set_device = (__s32)a0;
		rec->set_device_pending = 1;
		break;
	case GM_SHAPE_CTX_CREATE:
	case GM_SHAPE_CTX_CREATE_V3:
	case GM_SHAPE_CTX_CREATE_V4:
	case GM_SHAPE_CTX_RETAIN:
		rec->ctx_out = a0;
		rec->ctx_out_shape = shape;
		rec->ctx_out_device = (__s32)(shape == GM_SHAPE_CTX_CREATE	 ? a2
					      : shape == GM_SHAPE_CTX_CREATE_V3 ? a4
					      : shape == GM_SHAPE_CTX_CREATE_V4 ? a3
										: a1);
		break;
	}
}

SEC("uprobe")
int BPF_KPROBE(enter_ctx, __u64 a0, __u64 a1, __u64 a2, __u64 a3, __u64 a4)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct gm_inflight *rec = thread_record(task, task_id(task) >> 32);

	if (!rec)
		return 0;
	identify_process(rec);
	ctx_enter(rec, GM_COOKIE_SHAPE(bpf_get_attach_cookie(ctx)), a0, a1, a2, a3, a4);
	return 0;
}

/* cuCtxCreate made a context current on the thread; both it and cuDevicePrimaryCtxRetain say
 * whose device it is. */
static __always_inline void ctx_return(struct gm_inflight *rec, __u32 tgid, __u32 shape,
				       __s32 rc)
{
	struct gm_ctx_key key = { .tgid = tgid, .gen = rec->gen };
	struct gm_ctx_info info = { .device = rec->ctx_out_device };
	__u64 out = rec->ctx_out;

	if (shape == GM_SHAPE_SET_DEVICE) {
		__u64 primary = GM_CTX_PRIMARY | (__u32)rec->set_device;
		__u32 d = rec->ctx_depth;

		if (!rec->set_device_pending)
			return;
		rec->set_device_pending = 0;
		if (rc != 0)
			return;
		rec->rt_device = rec->set_device;
		if (!d)
			ctx_push(rec, primary);
		else if (d <= GM_CTX_DEPTH)
			rec->ctx_stack[(d - 1) & (GM_CTX_DEPTH - 1)] = primary;
		return;
	}

	if (!out || rec->ctx_out_shape != shape)
		return;
	rec->ctx_out = 0;
	if (rc != 0 || bpf_probe_read_user(&key.ctx, sizeof(key.ctx), (void *)out) || !key.ctx)
		return;
	info.primary = shape == GM_SHAPE_CTX_RETAIN;
	if (bpf_map_update_elem(&ctx_infos, &key, &info, BPF_ANY))
		count(GM_CNT_CTX_MAP_FULL);
	if (shape != GM_SHAPE_CTX_RETAIN)
		ctx_push(rec, key.ctx);
}

/* The context an allocation is charged to, and its device: the thread's current one, a
 * primary context as GM_CTX_PRIMARY | device; none seen: the runtime's device's primary. */
static __always_inline __u64 current_ctx(struct gm_inflight *rec, __u32 tgid, __s32 *device)
{
	struct gm_ctx_key key = { .tgid = tgid, .gen = rec->gen };
	struct gm_ctx_info *info;
	__u32 d = rec->ctx_depth;

	*device = rec->rt_device;
	if (!d)
		return GM_CTX_PRIMARY | (__u32)rec->rt_device;
	if (d > GM_CTX_DEPTH) {
		*device = GM_DEVICE_UNKNOWN;
		return 0;
	}
	key.ctx = rec->ctx_stack[(d - 1) & (GM_CTX_DEPTH - 1)];
	if (key.ctx & GM_CTX_PRIMARY) {
		*device = (__s32)(__u32)key.ctx;
		return key.ctx;
	}
	info = bpf_map_lookup_elem(&ctx_infos, &key);
	if (!info) {
		*device = GM_DEVICE_UNKNOWN;
		return key.ctx;
	}
	*device = info->device;
	return info->primary ? GM_CTX_PRIMARY | (__u32)info->device : key.ctx;
}

/* The process's pid as its own pid namespace numbers it (what `ps` shows in its container). */
static __always_inline __u64 namespace_pid(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pid *pid = BPF_CORE_READ(task, group_leader, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	struct upid up = {};

	bpf_probe_read_kernel(&up, sizeof(up), &pid->numbers[level & 31]);
	return (__u64)up.nr;
}

/* Makes the entry of process (tgid, gen) in the first free slot from its home, or finds the
 * one another thread made meanwhile: its slot (*made: this call made it), -1 when the table or
 * procs_made is full there, -2 when another CPU claimed the free slot first. The entry is made
 * whole before procs_made names it, and live after (proc_of() finds it in between). A global
 * function: verified once. */
__noinline int proc_make(__u32 tgid, __u32 gen, __u64 start_ns, __u64 now, __u32 *made)
{
	struct gm_proc_key key = { .tgid = tgid, .gen = gen };
	struct proc_search f = { .tgid = tgid, .gen = gen, .live = -1, .want_free = true };
	struct gm_proc_slot *h, *sl;
	__u32 claim, idx, *owner;

	if (!made)
		return -1;
	owner = bpf_map_lookup_elem(&procs_made, &key);
	if (owner)
		return (int)*owner;
	f.home = gm_proc_home(tgid, gen, proc_mask);
	h = bpf_map_lookup_elem(&procs, &f.home);
	if (!h)
		return -1;
	f.reach = *(volatile __u32 *)&h->span + 1;
	bpf_loop(GM_SLOT_PROBES, proc_slot, &f, 0);
	if (f.live >= 0)
		return f.live;
	sl = f.free;
	if (!sl)
		return -1;
	claim = GM_SLOT_NEXT(f.st, GM_SLOT_BUSY);
	if (__sync_val_compare_and_swap(&sl->state, f.st, claim) != f.st)
		return -2;	/* another new process took the slot first: looked for again */
	idx = (f.home + f.at) & proc_mask;
	sl->key = key;
	__builtin_memset(&sl->stats, 0, sizeof(sl->stats));
	sl->stats.first_seen_ns = now;
	sl->stats.cgroup_id = bpf_get_current_cgroup_id();
	sl->stats.ns_pid = namespace_pid();
	sl->stats.start_ns = start_ns;
	for (int i = 0; i < 8; i++) {	/* the home's span raised to reach it */
		__u32 old = *(volatile __u32 *)&h->span;

		if (old >= f.at || __sync_val_compare_and_swap(&h->span, old, f.at) == old)
			break;
	}
	if (*(volatile __u32 *)&h->span < f.at ||
	    bpf_map_update_elem(&procs_made, &key, &idx, BPF_NOEXIST)) {
		barrier();
		*(volatile __u32 *)&sl->state = GM_SLOT_NEXT(claim, GM_SLOT_FREE);
		owner = bpf_map_lookup_elem(&procs_made, &key);	/* another thread's */
		return owner ? (int)*owner : -1;
	}
	barrier();	/* the entry's stores before the state's (x86: seen in that order) */
#ifdef __TARGET_ARCH_x86
	*(volatile __u32 *)&sl->state = (claim & ~3u) | GM_SLOT_LIVE;
#else
	__sync_lock_test_and_set(&sl->state, (claim & ~3u) | GM_SLOT_LIVE);
#endif
	*made = 1;
	return (int)idx;
}

/* The entry of process (tgid, gen) that another thread is still making: it named its slot in
 * procs_made before making it live, and an allocation may already be counted there (its free
 * must find it too). */
static __noinline struct gm_proc_stats *proc_being_made(__u32 tgid, __u32 gen)
{
	struct gm_proc_key key = { .tgid = tgid, .gen = gen };
	struct gm_proc_slot *sl;
	__u32 *owner;

	owner = bpf_map_lookup_elem(&procs_made, &key);
	if (!owner)
		return NULL;
	sl = bpf_map_lookup_elem(&procs, owner);
	return sl && proc_is(sl, tgid, gen) ? &sl->stats : NULL;
}

/* The numbers of process (tgid, gen) wherever its entry is: live, or being made. */
static __always_inline struct gm_proc_stats *proc_of(__u32 tgid, __u32 gen)
{
	struct gm_proc_stats *ps = proc_find(tgid, gen);

	return ps ? ps : proc_being_made(tgid, gen);
}

/* A new process: userspace is told (and, with -c, it is held until userspace answers). */
static __noinline void proc_announce(__u32 tgid, const struct gm_inflight *rec, __u64 now,
				     __u64 cgroup_id)
{
	struct gm_call_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	/* Only with an event on its way: userspace's SIGCONT answers it. */
	if (hold_new_procs)
		hold(tgid);
	__builtin_memset(e, 0, sizeof(*e));
	e->type = GM_REC_PROCESS_NEW;
	e->py_stack_id = -1;
	e->pid = tgid;
	e->gen = rec->gen;
	e->start_ns = rec->start_ns;
	e->time_ns = now;
	e->cgroup_id = cgroup_id;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

/* The numbers of the calling thread's process, its entry made at its first call. */
static __always_inline struct gm_proc_stats *proc_stats(__u32 tgid,
							 const struct gm_inflight *rec, __u64 now)
{
	struct gm_proc_stats *ps = proc_find(tgid, rec->gen);
	struct gm_proc_slot *sl;
	__u32 made = 0, idx;
	int at;

	if (ps)
		return ps;
	at = -2;
	for (int i = 0; i < GM_ALLOC_TRIES && at == -2; i++)
		at = proc_make(tgid, rec->gen, rec->start_ns, now, &made);
	idx = (__u32)at;
	sl = at >= 0 ? bpf_map_lookup_elem(&procs, &idx) : NULL;
	if (!sl) {
		count(GM_CNT_PROC_MAP_FULL);
		return NULL;
	}
	if (made)
		proc_announce(tgid, rec, now, sl->stats.cgroup_id);
	return &sl->stats;
}

/* The process's record, made at its first call (and, with -c, the hold: see call_enter). A
 * function of its own: inlined into call_enter it outgrew the verifier's view of the stack. */
static __noinline void first_call(__u32 tgid, struct gm_inflight *rec, __u64 now)
{
	proc_stats(tgid, rec, now);
}

/* The numbers of the site key, made if new (*created), and its slot (*slot, GM_NO_SITE with
 * NULL: the table is full, counted). Most often found in its home slot, with no call. */
static __always_inline struct gm_site_stats *site_stats(struct gm_site_key *key, bool *created,
							 __u32 *slot)
{
	__u32 home = gm_site_home(key, site_mask), made = 0, idx;
	struct gm_site_slot *sl = bpf_map_lookup_elem(&sites, &home);
	int at = -2;

	*slot = GM_NO_SITE;
	if (!sl)
		return NULL;
	if (!*(volatile __u32 *)&sl->span) {
		__u32 st = *(volatile __u32 *)&sl->state;

		barrier();	/* the key read after the state that says whose it is */
		if (GM_SLOT_STATE(st) == GM_SLOT_LIVE && site_is(sl, key)) {
			*slot = home;
			return &sl->stats;
		}
	}
	for (int i = 0; i < GM_ALLOC_TRIES && at == -2; i++)
		at = site_slot_of(key, home, &made);
	if (at < 0) {
		count(GM_CNT_SITE_MAP_FULL);
		return NULL;
	}
	idx = (__u32)at;
	sl = bpf_map_lookup_elem(&sites, &idx);
	if (!sl)
		return NULL;
	*created = made;
	*slot = idx;
	return &sl->stats;
}

/* The numbers of the site in slot idx, an allocation's (of process tgid, gen); NULL: none. */
static __always_inline struct gm_site_stats *site_at(__u32 idx, __u32 tgid, __u32 gen)
{
	struct gm_site_slot *sl;

	if (idx == GM_NO_SITE)
		return NULL;
	sl = bpf_map_lookup_elem(&sites, &idx);
	if (!sl || GM_SLOT_STATE(*(volatile __u32 *)&sl->state) != GM_SLOT_LIVE ||
	    sl->key.tgid != tgid || sl->key.gen != gen)
		return NULL;
	return &sl->stats;
}

static __always_inline void raise_max(__u64 *peak_at, __u64 now_bytes)
{
	for (int i = 0; i < 4; i++) {
		__u64 peak = *peak_at;

		if (now_bytes <= peak)
			return;
		if (__sync_val_compare_and_swap(peak_at, peak, now_bytes) == peak)
			return;
	}
}

/* A process's GPU bytes on one device (the last slot: a device not known). */
static __always_inline void add_gpu_bytes(struct gm_proc_stats *ps, __s32 device, __u64 delta)
{
	__u32 slot = device >= 0 && device < GM_MAX_GPUS ? (__u32)device : GM_MAX_GPUS;

	if (slot > GM_MAX_GPUS)
		return;
	__sync_fetch_and_add(&ps->gpu_bytes[slot], delta);
}

static __always_inline __u32 event_gpu(__s32 device)
{
	return device >= 0 ? (__u32)device + 1 : 0;
}

static __always_inline void raise_peak(struct gm_proc_stats *ps, __u64 now_bytes)
{
	raise_max(&ps->peak_bytes, now_bytes);
}

/* A call record of the probe-table row cookie names (tensor events: their USDT cookie). */
static __always_inline void emit_record(__u32 type, __u64 cookie, const struct gm_inflight *rec,
					__u32 tgid, __u32 tid, __s32 stack_id, __s32 py_stack_id,
					__u32 kind, __u64 addr, __u64 size, __s32 error,
					__u64 process_bytes, __u64 tensor_bytes, __s32 device)
{
	struct gm_call_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	e->type = type;
	e->pid = tgid;
	e->tid = tid;
	e->stack_id = stack_id;
	e->time_ns = bpf_ktime_get_ns();
	e->addr = addr;
	e->size = size;
	e->process_bytes = process_bytes;
	e->error = error;
	e->api = GM_COOKIE_API(cookie);
	e->kind = kind;
	e->layer = GM_COOKIE_LAYER(cookie);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->gen = rec->gen;
	e->py_stack_id = py_stack_id;
	e->start_ns = rec->start_ns;
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->tensor_bytes = tensor_bytes;
	e->gpu = event_gpu(device);
	e->pad = 0;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void emit_call(__u32 type, const struct gm_inflight *rec, __u32 tgid,
				      __u32 tid, __s32 stack_id, __s32 py_stack_id, __u32 kind,
				      __u64 addr, __u64 size, __s32 error, __u64 process_bytes,
				      __s32 device)
{
	emit_record(type, rec->cookie, rec, tgid, tid, stack_id, py_stack_id, kind, addr, size,
		    error, process_bytes, 0, device);
}

/* ---- User stacks ---- */

/*
 * The frame-pointer walk of the calling thread, hashed into `stacks`. The kernel's walk
 * (bpf_get_stackid) reads frame after frame until a read faults, and every stack ends in one:
 * main's caller keeps no frame pointer. That fault cost 600 ns of the 3.5 µs a traced pair
 * took. Here every read stays inside the thread's stack mapping (found once per thread, with
 * bpf_find_vma), a frame must lie above the one before, and a window of the stack is read at
 * once: one read for the frames of most calls.
 */
struct vma_bounds {
	__u64 lo, hi;
};

static long stack_vma(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_bounds *b = data;

	b->lo = vma->vm_start;
	b->hi = vma->vm_end;
	return 0;
}

/* The stack mapping around sp, kept per thread; looked up again only when sp leaves it (the
 * main thread's stack grows down, a coroutine runs on a stack of its own). False when it
 * cannot be known now: bpf_find_vma only tries the mmap lock, which a thread that maps
 * memory holds. */
static __always_inline bool stack_bounds(struct stack_scratch *sc, __u64 sp)
{
	struct vma_bounds b = {};

	if (sp >= sc->lo && sp < sc->hi)
		return true;
	if (bpf_find_vma(bpf_get_current_task_btf(), sp, stack_vma, &b, 0) || sp < b.lo ||
	    sp >= b.hi)
		return false;
	sc->lo = b.lo;
	sc->hi = b.hi;
	return true;
}

/* A walk's state, on the BPF stack with the window of the user stack it read last: [base, base
 * + have). On the BPF stack, not in the thread's map value: a read into map memory cost about
 * 125 ns more here, the kernel's check of a heap destination (hardened usercopy, on in
 * Debian's kernels), where a stack destination is told at once. */
struct walk {
	struct gm_user_stack *st;
	__u64 sp, fp, hi, base, have;
	__u64 win[GM_STACK_WINDOW / 8];
};

/* One frame of walk_frames, a bpf_loop callback: the verifier checks its body once (a loop
 * whose index is an array subscript it would check frame by frame). Frame i + 1 of st. */
static long walk_frame(__u64 i, void *data)
{
	struct walk *w = data;
	__u64 fp = w->fp, off, next, ret, len;
	__u32 at = (i + 1) & (GM_MAX_STACK_DEPTH - 1);

	if (fp < w->sp || (fp & 7) || fp + 16 < fp)
		goto end;
	off = fp - w->base;
	if (fp < w->base || off + 16 > w->have) {
		/* The mapping only sizes the read: past it, or where the window does not read (a
		 * page not faulted in yet), a frame at a time, so that whether the mapping was
		 * known never changes a stack. */
		len = fp + 16 <= w->hi ? w->hi - fp : 16;
		if (len > GM_STACK_WINDOW)
			len = GM_STACK_WINDOW;
		if (bpf_probe_read_user(w->win, len, (void *)fp)) {
			if (len == 16 || bpf_probe_read_user(w->win, 16, (void *)fp))
				goto end;
			len = 16;
		}
		w->base = fp;
		w->have = len;
		off = 0;
	}
	off /= 8;
	if (off > GM_STACK_WINDOW / 8 - 2)
		goto end;
	/* The masks are the verifier's proof; the check above keeps both words in what was
	 * read. */
	next = w->win[off & (GM_STACK_WINDOW / 8 - 1)];
	ret = w->win[(off + 1) & (GM_STACK_WINDOW / 8 - 1)];
	if (!ret)
		goto end;
	w->st->ips[at] = ret;
	if (next <= fp) {
		at = (at + 1) & (GM_MAX_STACK_DEPTH - 1);
		goto end;
	}
	w->fp = next;
	return 0;
end:
	if (at)		/* 0: the stack is full, no zero after it */
		w->st->ips[at] = 0;
	return 1;
}

/* The return addresses from fp up, after first, into w->st: a zero after the last. w->win
 * holds w->have bytes from w->sp up (stack_top's read); past them, inside the stack mapping
 * [lo, hi) (hi ~0: not known now) a window is read at once, elsewhere a frame at a time; a
 * read that faults ends the stack, as the kernel's walk ends. */
static __always_inline void walk_frames(struct walk *w, __u64 first, __u64 fp)
{
	w->fp = fp;
	w->base = w->sp;
	w->st->ips[0] = first;
	bpf_loop(GM_MAX_STACK_DEPTH - 1, walk_frame, w, 0);
}

/* a and b up to a's first zero (or all of them). */
static __always_inline bool same_stack(const struct gm_user_stack *a,
				       const struct gm_user_stack *b)
{
	for (__u32 i = 0; i < GM_MAX_STACK_DEPTH; i++) {
		if (a->ips[i] != b->ips[i])
			return false;
		if (!a->ips[i])
			return true;
	}
	return true;
}

/* A stack's id: its hash, then the next ids while another stack holds one (a few tries, then
 * counted: two stacks never share an id). */
static __always_inline __s32 stack_id_of(struct gm_user_stack *st)
{
	struct gm_user_stack *found;
	__u64 h = 0xcbf29ce484222325ULL;
	bool ended = false;
	__u32 id;

	for (__u32 i = 0; i < GM_MAX_STACK_DEPTH; i++) {
		if (!st->ips[i])
			break;
		h = (h ^ st->ips[i]) * 0x100000001b3ULL;
	}
	id = (__u32)(h ^ (h >> 31)) & 0x7fffffff;
	for (int probe = 0; probe < 4; probe++, id = (id + 1) & 0x7fffffff) {
		found = bpf_map_lookup_elem(&stacks, &id);
		if (!found) {
			/* A new stack: zeros after its end, as the map keeps them. */
			for (__u32 i = 0; i < GM_MAX_STACK_DEPTH; i++) {
				if (ended)
					st->ips[i] = 0;
				else if (!st->ips[i])
					ended = true;
			}
			if (bpf_map_update_elem(&stacks, &id, st, BPF_NOEXIST) == 0)
				return (__s32)id;
			found = bpf_map_lookup_elem(&stacks, &id);	/* another CPU's? */
			if (!found)
				return -1;	/* full */
		}
		if (same_stack(found, st))
			return (__s32)id;
	}
	return -1;
}

/* The word at addr, if the window read from sp up holds it (8-aligned, as stack slots are). */
static __always_inline bool window_word(const struct walk *w, __u64 addr, __u64 *val)
{
	__u64 off = addr - w->sp;

	if (addr < w->sp || (off & 7) || off + 8 > w->have)
		return false;
	*val = w->win[(off / 8) & (GM_STACK_WINDOW / 8 - 1)];
	return true;
}

/* The first read of a walk: the stack from w->sp up (inside its mapping, w->hi ~0: not known
 * now), which holds the innermost frames and, at a return, most often the caller's variables
 * the call wrote its results to (one read at a return, not two). Sets w->have, the bytes read:
 * 0 when none (the walk then reads frame by frame from fp, as it would past the window). */
static __always_inline void stack_top(struct walk *w, struct stack_scratch *sc,
				      const struct gm_inflight *rec, int at_entry)
{
	__u64 sp = w->sp, hi = w->hi;
	__u64 len = hi > sp && hi - sp < GM_STACK_WINDOW ? hi - sp : GM_STACK_WINDOW;

	w->have = 0;
	if (len < 16 || bpf_probe_read_user(w->win, len, (void *)sp))
		return;
	w->have = len;
	if (!at_entry) {
		if (window_word(w, rec->out_ptr, &sc->out_val[0]))
			sc->out_have |= 1;
		if (window_word(w, rec->out_pitch, &sc->out_val[1]))
			sc->out_have |= 2;
	}
}

/* at_entry: the probe is on a function's first instruction, where the caller's return address
 * is at sp and fp is still the caller's: the stack starts at the caller. Else (a return probe)
 * the registers are the caller's own. A global function: the verifier checks it once, not in
 * every program that calls it (the walk's loop made that a 10 s load). */
__noinline int gm_user_stack_id(struct pt_regs *ctx, struct thread_state *ts, int at_entry)
{
	struct stack_scratch *sc;
	struct gm_user_stack *st, *last;
	struct walk w;		/* not zeroed: the walk reads only what it read in */
	__u64 first;
	int id = -1;

	if (stack_mode == GM_STACKS_NONE || !ctx || !ts)
		return -1;
	sc = &ts->stack;
	sc->out_have = 0;
	w.sp = PT_REGS_SP(ctx);
	w.hi = stack_bounds(sc, w.sp) ? sc->hi : ~0ULL;
	stack_top(&w, sc, &ts->rec, at_entry);
	first = PT_REGS_IP(ctx);
	if (at_entry) {
		if (w.have >= sizeof(first))
			first = w.win[0];
		else if (bpf_probe_read_user(&first, sizeof(first), (void *)w.sp))
			goto out;
	}
	st = &sc->st[sc->cur & 1];
	last = &sc->st[(sc->cur + 1) & 1];
	w.st = st;
	walk_frames(&w, first, PT_REGS_FP(ctx));
	if (sc->last_id_plus1 && same_stack(last, st))
		return (int)(sc->last_id_plus1 - 1);
	id = stack_id_of(st);
	if (id >= 0) {
		sc->last_id_plus1 = (__u32)id + 1;
		sc->cur ^= 1;
	}
out:
	if (id < 0)
		count(GM_CNT_STACK_ERRORS);
	return id;
}

static __always_inline __s32 user_stack(struct pt_regs *ctx, struct gm_inflight *rec,
					 bool at_entry)
{
	if (stack_mode == GM_STACKS_NONE)
		return -1;
	return gm_user_stack_id(ctx, (struct thread_state *)rec, at_entry);
}

/* ---- CPython frames ---- */

/* Processes running a supported interpreter, with its offsets (filled by userspace). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_MAX_TARGETS);
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
	__u64 win[GM_PY_WINDOW / 8];		/* frames, as read */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct py_scratch);
} py_scratch SEC(".maps");

static __always_inline __u64 read_user_u64(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* A word of the thread state read; 0 past what was read. */
static __always_inline __u64 tstate_word(const struct py_scratch *sc, __u32 off)
{
	if (off > GM_PY_TSTATE_READ - 8)
		return 0;
	return sc->tstate[off / 8];
}

static __always_inline bool tstate_load(struct py_scratch *sc, __u64 tstate)
{
	return bpf_probe_read_user(sc->tstate, sizeof(sc->tstate), (void *)tstate) == 0;
}

/* The 8-byte-aligned word at frame + off, the frame being in the window. The mask keeps any
 * offset inside the buffer (the verifier's proof); userspace keeps off inside frame_read. */
static __always_inline __u64 frame_word(const struct py_scratch *sc, __u64 frame, __u32 off)
{
	return sc->win[((frame - sc->win_base + off) / 8) & (GM_PY_WINDOW / 8 - 1)];
}

/* A field of size bytes (1 or 4) at frame + off, little-endian. */
static __always_inline __u32 frame_field(const struct py_scratch *sc, __u64 frame, __u32 off,
					 __u32 size)
{
	__u64 w = frame_word(sc, frame, off & ~7u) >> ((off & 7) * 8);

	return size == 1 ? (__u32)(w & 0xff) : (__u32)w;
}

/* Makes the frame's first frame_read bytes readable from the window. A frame in the live part
 * of the thread's data stack (3.11+: [chunk, top)) comes with the frames below it, its callers,
 * sc->want bytes (at most GM_PY_WINDOW) in one read: the walk that follows finds them there. Any
 * other frame (a generator's, a C-stack shim, 3.9's and 3.10's heap frames) comes with the rest
 * of its page, where its callers' often are (frames of one size share a page of the heap). */
static __always_inline bool window_load(struct py_scratch *sc, __u64 frame, __u32 frame_read,
					__u64 chunk, __u64 top)
{
	__u64 end = frame + frame_read, base, len, want = sc->want;

	if (frame & 7)
		return false;
	if (want > GM_PY_WINDOW)
		want = GM_PY_WINDOW;
	sc->want = GM_PY_WINDOW;	/* a window that fell short: the next is full */
	if (frame >= chunk && end <= top)
		base = end - chunk > want ? end - want : chunk;
	else
		base = frame & ~4095ull;	/* its page: mapped, and maybe its callers' too */
	len = end - base;
	if (len > GM_PY_WINDOW)
		return false;
	if (bpf_probe_read_user(sc->win, len, (void *)base))
		return false;
	sc->win_base = base;
	sc->win_len = len;
	return true;
}

static __always_inline bool window_has(const struct py_scratch *sc, __u64 frame,
				       __u32 frame_read)
{
	return frame >= sc->win_base && frame + frame_read <= sc->win_base + sc->win_len &&
	       !((frame - sc->win_base) & 7);
}

/* Off for this process for good: the offsets do not describe what runs there. */
static __always_inline void python_mismatch(struct gm_py_proc *pp)
{
	if (__sync_bool_compare_and_swap(&pp->state, GM_PY_ON, GM_PY_MISMATCH))
		count(GM_CNT_PY_MISMATCH);
}

/* The calling thread's id as its interpreter records it: its tid in its own pid namespace
 * (native_thread_id), or pthread_self(), which on x86-64 is the thread's fs base. */
static __always_inline __u64 python_thread_id(const struct gm_py_offsets *o)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pid *pid;
	unsigned int level;
	struct upid up = {};

	if (o->thread_id_kind == GM_PY_TID_PTHREAD) {
#ifdef __TARGET_ARCH_x86
		return BPF_CORE_READ(task, thread.fsbase);
#else
		return 0;	/* userspace registers no such interpreter here */
#endif
	}
	pid = BPF_CORE_READ(task, thread_pid);
	level = BPF_CORE_READ(pid, level);
	bpf_probe_read_kernel(&up, sizeof(up), &pid->numbers[level & 31]);
	return (__u64)up.nr;
}

/* The calling thread's PyThreadState, its first bytes read into sc: the one its record
 * remembers if that one still names this thread, else found in the interpreter's thread list
 * by thread id (the running thread's pointer in _PyRuntime is cleared while ctypes calls out
 * without the GIL). */
static __always_inline __u64 python_thread_state(struct gm_py_proc *pp, struct py_scratch *sc,
						 __u64 *cache)
{
	const struct gm_py_offsets *o = &pp->off;
	__u64 interp = read_user_u64(pp->runtime + o->runtime_interp_head), tstate, tid;

	if (!interp)
		return 0;	/* not initialised yet, or finalised */
	tid = python_thread_id(o);
	if (!tid)
		return 0;
	tstate = *cache;
	if (tstate && tstate_load(sc, tstate) && tstate_word(sc, o->tstate_thread_id) == tid &&
	    tstate_word(sc, o->tstate_interp) == interp)
		return tstate;
	tstate = read_user_u64(interp + o->interp_threads_head);
	for (int i = 0; i < GM_PY_MAX_THREADS && tstate; i++) {
		if (read_user_u64(tstate + o->tstate_thread_id) == tid) {
			if (!tstate_load(sc, tstate) ||
			    tstate_word(sc, o->tstate_interp) != interp) {
				python_mismatch(pp);
				return 0;
			}
			*cache = tstate;
			return tstate;
		}
		tstate = read_user_u64(tstate + o->tstate_next);
	}
	return 0;	/* a thread Python does not know: native frames only */
}

/* The code-unit index of a frame's instruction, or GM_PY_INSTR_NONE. */
static __always_inline __u32 python_instr(const struct gm_py_offsets *o,
					  const struct py_scratch *sc, __u64 frame, __u64 code)
{
	__u64 instr, units;
	__s32 lasti;

	if (o->instr_kind == GM_PY_INSTR_POINTER) {
		instr = frame_word(sc, frame, o->frame_instr);
		units = code + o->code_units;
		return instr >= units && instr - units < 2ull * GM_PY_INSTR_NONE
			       ? (__u32)((instr - units) / 2) : GM_PY_INSTR_NONE;
	}
	lasti = (__s32)frame_field(sc, frame, o->frame_instr, 4);
	if (lasti < 0)
		return GM_PY_INSTR_NONE;	/* not started */
	return o->instr_kind == GM_PY_INSTR_LASTI_BYTES ? (__u32)lasti / 2 : (__u32)lasti;
}

/* Walks the frame chain of the thread state in sc into st; false when a frame cannot be read.
 * The code objects are not checked here: a stack seen before was checked when it was first
 * recorded (python_checked), which spares two reads a frame on every call of a known line. */
/* One frame of python_walk, a bpf_loop callback: the verifier checks its body once, not once
 * per frame (the unrolled walk took 1.3 s of verification in each program that walks). */
struct py_walk {
	struct gm_py_proc *pp;
	struct py_scratch *sc;
	__u64 frame, chunk, top;
	__u32 frame_read;
	bool failed;
};

static long python_frame(__u64 i, void *data)
{
	struct py_walk *w = data;
	const struct gm_py_offsets *o = &w->pp->off;
	struct py_scratch *sc = w->sc;
	struct gm_py_stack *st = &sc->st;
	__u64 frame = w->frame, code;
	__u32 d = st->depth, idx;

	if (!frame)
		return 1;
	if (!window_has(sc, frame, w->frame_read) &&
	    !window_load(sc, frame, w->frame_read, w->chunk, w->top)) {
		w->failed = true;
		return 1;
	}
	if (i == 0)
		sc->first_end = frame + w->frame_read;
	if (frame >= w->chunk && frame < w->top)
		sc->lowest = frame;	/* callers lie below: the last is the lowest */
	code = frame_word(sc, frame, o->frame_code);
	if (o->owner_cstack != GM_PY_OFF_NONE &&
	    frame_field(sc, frame, o->frame_owner, 1) == o->owner_cstack) {
		/* The C stack's shim (3.12+): the frame below it is the first its eval loop ran,
		 * an entry frame. */
		if (d > 0)
			st->instr[(d - 1) & (GM_PY_MAX_FRAMES - 1)] |= GM_PY_INSTR_ENTRY;
		w->frame = frame_word(sc, frame, o->frame_previous);
		return 0;
	}
	if (d >= GM_PY_MAX_FRAMES) {
		st->truncated = 1;
		return 1;
	}
	idx = python_instr(o, sc, frame, code);
	if (o->frame_entry != GM_PY_OFF_NONE && frame_field(sc, frame, o->frame_entry, 1))
		idx |= GM_PY_INSTR_ENTRY;
	st->code[d & (GM_PY_MAX_FRAMES - 1)] = code;
	st->instr[d & (GM_PY_MAX_FRAMES - 1)] = idx;
	st->depth = d + 1;
	w->frame = frame_word(sc, frame, o->frame_previous);
	return 0;
}

static __always_inline bool python_walk(struct gm_py_proc *pp, struct py_scratch *sc)
{
	const struct gm_py_offsets *o = &pp->off;
	struct gm_py_stack *st = &sc->st;
	struct py_walk w = { .pp = pp, .sc = sc, .frame_read = o->frame_read };

	st->depth = 0;
	st->truncated = 0;
	if (w.frame_read < 8 || w.frame_read > GM_PY_FRAME_READ)
		return false;

	if (o->tstate_cframe != GM_PY_OFF_NONE)
		w.frame = read_user_u64(tstate_word(sc, o->tstate_cframe) + o->cframe_frame);
	else
		w.frame = tstate_word(sc, o->cframe_frame);
	if (o->tstate_datastack_chunk != GM_PY_OFF_NONE) {
		w.chunk = tstate_word(sc, o->tstate_datastack_chunk);
		w.top = tstate_word(sc, o->tstate_datastack_top);
	}
	sc->win_base = sc->win_len = 0;
	/* As much data stack as the last walk used, and some: most loops call from one depth. */
	sc->want = sc->span ? sc->span + GM_PY_WINDOW_SLACK : GM_PY_WINDOW;
	sc->first_end = sc->lowest = 0;
	bpf_loop(2 * GM_PY_MAX_FRAMES + 1, python_frame, &w, 0);
	if (w.failed)
		return false;
	sc->span = sc->lowest && sc->lowest < sc->first_end ? sc->first_end - sc->lowest : 0;
	return true;
}

/* Whether every frame's code is a code object: the offsets describe what runs there. Only a
 * stack that passes is recorded, so a name is never read from what is not a code object. */
static __always_inline bool python_checked(const struct gm_py_proc *pp,
					   const struct gm_py_stack *st)
{
	for (int i = 0; i < GM_PY_MAX_FRAMES; i++) {
		if (i >= st->depth)
			break;
		if (read_user_u64(st->code[i] + pp->off.object_type) != pp->code_type)
			return false;
	}
	return true;
}

/* The process is part of the hash: a stack checked in one process is never taken as checked
 * in another that happens to have the same addresses. */
static __always_inline __u32 python_hash(const struct gm_py_stack *st, __u32 tgid)
{
	__u64 h = (0xcbf29ce484222325ull ^ st->truncated ^ ((__u64)tgid << 1)) * 0x100000001b3ull;

	for (int i = 0; i < GM_PY_MAX_FRAMES; i++) {
		if (i >= st->depth)
			break;
		h = (h ^ st->code[i]) * 0x100000001b3ull;
		h = (h ^ st->instr[i]) * 0x100000001b3ull;
	}
	h ^= h >> 29;
	return (__u32)(h ^ (h >> 32)) & 0x7fffffff;
}

static __always_inline bool python_same(const struct gm_py_stack *a, const struct gm_py_stack *b)
{
	if (a->depth != b->depth || a->truncated != b->truncated)
		return false;
	for (int i = 0; i < GM_PY_MAX_FRAMES; i++) {
		if (i >= a->depth)
			break;
		if (a->code[i] != b->code[i] || a->instr[i] != b->instr[i])
			return false;
	}
	return true;
}

/* A new Python stack: userspace reads its code objects while the process lives (held until
 * then, for -c). */
static __always_inline void emit_python_stack(__u32 tgid, __u32 gen, __s32 id,
					      const struct gm_py_stack *st)
{
	struct gm_py_stack_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	e->type = GM_REC_PY_STACK;
	e->pid = tgid;
	e->gen = gen;
	e->py_stack_id = id;
	e->pad = 0;
	bpf_probe_read_kernel(&e->stack, sizeof(e->stack), st);
	e->held = hold_new_procs && hold(tgid);
	bpf_ringbuf_submit(e, 0);
}

/* python_stack() past its first test; none: what *none_cache takes where the process has no
 * interpreter to walk (py_procs_gen's count as read before the lookup + 1, 0: none read). */
static __noinline __s32 python_walked(__u32 tgid, __u32 gen, __u64 *tstate_cache,
				      __u64 *none_cache, __u64 none)
{
	struct gm_py_stack *st, *found;
	struct py_scratch *sc;
	struct gm_py_proc *pp;
	__u64 tstate;
	__u32 id;

	pp = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!pp || pp->state != GM_PY_ON) {
		/* Off stays off: only userspace turns an entry on, and it counts that. */
		*none_cache = none;
		return -1;
	}
	sc = bpf_task_storage_get(&py_scratch, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!sc) {
		count(GM_CNT_PY_STACK_ERRORS);
		return -1;
	}
	st = &sc->st;
	tstate = python_thread_state(pp, sc, tstate_cache);
	if (!tstate)
		return -1;
	if (!python_walk(pp, sc)) {
		python_mismatch(pp);
		return -1;
	}
	if (!st->depth)
		return -1;
	id = python_hash(st, tgid);
	found = bpf_map_lookup_elem(&py_stacks, &id);
	if (found) {
		if (python_same(found, st))
			return (__s32)id;
		count(GM_CNT_PY_STACK_ERRORS);	/* two stacks, one bucket */
		return -1;
	}
	if (!python_checked(pp, st)) {
		python_mismatch(pp);
		return -1;
	}
	if (bpf_map_update_elem(&py_stacks, &id, st, BPF_NOEXIST) == 0) {
		emit_python_stack(tgid, gen, (__s32)id, st);
		return (__s32)id;
	}
	found = bpf_map_lookup_elem(&py_stacks, &id);	/* another CPU's, just made */
	if (found && python_same(found, st))
		return (__s32)id;
	count(GM_CNT_PY_STACK_ERRORS);
	return -1;
}

/* The calling thread's Python stack id, or -1 (no interpreter, no Python frames, lost). A
 * thread of a process without an interpreter is told here, with no call. */
static __always_inline __s32 python_stack(__u32 tgid, __u32 gen, __u64 *tstate_cache,
					  __u64 *none_cache)
{
	__u64 *procs_gen, seen;
	__u32 zero = 0;

	if (!python_frames || stack_mode == GM_STACKS_NONE)
		return -1;
	/* Read before the lookup: an entry made meanwhile is counted after it. */
	procs_gen = bpf_map_lookup_elem(&py_procs_gen, &zero);
	seen = procs_gen ? *(volatile __u64 *)procs_gen : 0;
	if (procs_gen && *none_cache == seen + 1)
		return -1;
	return python_walked(tgid, gen, tstate_cache, none_cache, procs_gen ? seen + 1 : 0);
}

/* Subtracts a freed allocation from its site and process; returns the process's bytes. */
static __always_inline __u64 account_free(__u32 tgid, __u32 gen,
					  const struct gm_alloc_info *info)
{
	struct gm_site_stats *ss = site_at(info->site, tgid, gen);
	struct gm_proc_stats *ps;

	if (ss) {
		__sync_fetch_and_add(&ss->current_bytes, -info->size);
		__sync_fetch_and_add(&ss->current_allocs, -1);
		__sync_fetch_and_add(&ss->free_count, 1);
	}
	ps = proc_of(tgid, gen);
	if (!ps)
		return 0;
	/* A tensor's bytes are inside a segment the process holds: never its own. */
	if (info->layer == GM_LAYER_TENSOR) {
		__sync_fetch_and_add(&ps->tensor_bytes, -info->size);
		return ps->current_bytes;
	}
	if (!is_gpu_kind(info->kind))
		return ps->current_bytes;
	add_gpu_bytes(ps, info->device, -info->size);
	return __sync_fetch_and_add(&ps->current_bytes, -info->size) - info->size;
}

/* Records a live allocation. An entry its key still has is replaced, and its free accounted
 * and counted: the driver handed out an address we still held as live, freed by a call we do
 * not probe. False when the table is full (counted: counting the allocation would make its
 * free look unknown later). */
static __always_inline bool insert_live(struct gm_alloc_key *akey,
					const struct gm_alloc_info *info)
{
	struct gm_alloc_info old = {};
	int rc = alloc_insert(akey, info, &old);

	if (rc < 0) {
		count(GM_CNT_ALLOC_MAP_FULL);
		return false;
	}
	if (rc == 1) {
		count(GM_CNT_REPLACED_ALLOCS);
		account_free(akey->tgid, akey->gen, &old);
	}
	return true;
}

static __always_inline void site_add(struct gm_site_stats *ss, __u64 size)
{
	__sync_fetch_and_add(&ss->current_bytes, size);
	__sync_fetch_and_add(&ss->current_allocs, 1);
	__sync_fetch_and_add(&ss->alloc_count, 1);
	__sync_fetch_and_add(&ss->alloc_bytes_total, size);
}

/* The first allocation of a new site in DWARF mode: the caller's registers and the top of its
 * stack, for userspace to unwind through code built without frame pointers. */
static __always_inline void emit_stack_copy(struct pt_regs *ctx, __u32 tgid, __u32 gen,
					    __u32 tid, __s32 stack_id)
{
	struct gm_stack_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	__u64 sp = PT_REGS_SP(ctx);
	__u32 len = stack_copy_bytes;

	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	e->type = GM_REC_STACK_COPY;
	e->pid = tgid;
	e->tid = tid;
	e->stack_id = stack_id;
	e->regs[GM_REG_IP] = PT_REGS_IP(ctx);
	e->regs[GM_REG_SP] = sp;
	e->regs[GM_REG_BP] = PT_REGS_FP(ctx);
	e->regs[GM_REG_BX] = ctx->bx;
	e->regs[GM_REG_R12] = ctx->r12;
	e->regs[GM_REG_R13] = ctx->r13;
	e->regs[GM_REG_R14] = ctx->r14;
	e->regs[GM_REG_R15] = ctx->r15;
	e->gen = gen;
	if (len > GM_STACK_COPY_MAX)
		len = GM_STACK_COPY_MAX;
	/* Near the top of the stack mapping a long read faults: fall back to a short one. */
	if (bpf_probe_read_user(e->stack, len, (void *)sp)) {
		len = 1024;
		if (bpf_probe_read_user(e->stack, len, (void *)sp))
			len = 0;
	}
	e->len = len;
	bpf_ringbuf_submit(e, 0);
}

/* What the call wrote at ptr (out-pointer i: 0 the result, 1 the pitch), as the stack walk of
 * this return read it, else read now; 0 when it cannot be read. */
static __always_inline __u64 out_word(struct gm_inflight *rec, __u32 i, __u64 ptr)
{
	struct stack_scratch *sc = &((struct thread_state *)rec)->stack;
	__u64 v = 0;

	if (sc->out_have & (1u << i))
		return sc->out_val[i & 1];
	bpf_probe_read_user(&v, sizeof(v), (void *)ptr);
	return v;
}

/* The calling thread's user and Python stack ids, walked by the probe's program itself (their
 * frames fit the 512-byte stack only beside its own, not under alloc_return's or
 * tensor_alloc's) and handed on in one argument: a BPF function takes five. At a return the
 * registers are the caller's, and the user walk reads what the call wrote at rec->out_ptr. */
static __always_inline __u64 call_stacks(struct pt_regs *ctx, struct gm_inflight *rec,
					 __u32 tgid)
{
	__s32 stack_id = user_stack(ctx, rec, false);
	__s32 py_stack_id = python_stack(tgid, rec->gen, &rec->py_tstate,
					 &thread_of(rec)->py_none_gen_plus1);

	return (__u32)stack_id | (__u64)(__u32)py_stack_id << 32;
}

static __always_inline __s32 user_stack_of(__u64 stacks)
{
	return (__s32)(__u32)stacks;
}

static __always_inline __s32 python_stack_of(__u64 stacks)
{
	return (__s32)(stacks >> 32);
}

/* stacks: call_stacks() at the return; id: as bpf_get_current_pid_tgid() returns it. */
static __noinline void alloc_return(struct pt_regs *ctx, struct gm_inflight *rec, __u64 id,
				    __s32 rc, __u64 stacks)
{
	__s32 stack_id = user_stack_of(stacks), py_stack_id = python_stack_of(stacks);
	__u32 tid = (__u32)id, tgid = id >> 32;
	__u32 kind = GM_COOKIE_KIND(rec->cookie);
	__u32 shape = GM_COOKIE_SHAPE(rec->cookie);
	__u64 now = rec->time_ns;	/* the call's start: one clock read per call */
	struct gm_alloc_key akey = { .tgid = tgid, .gen = rec->gen };
	struct gm_alloc_info info = {};
	struct gm_site_key skey = { .tgid = tgid, .gen = rec->gen };
	struct gm_proc_stats *ps;
	struct gm_site_stats *ss;
	__u64 addr = 0, size = rec->size, total = 0;
	bool new_site = false;

	/* The context and device it is charged to (a failure: the device it asked of). */
	info.ctx = current_ctx(rec, tgid, &info.device);
	if (shape == GM_SHAPE_VMM_CREATE && rec->out_pitch)
		info.device = (__s32)rec->out_pitch - 1;	/* its properties' device */
	skey.stack_id = stack_id;
	skey.py_stack_id = py_stack_id;
	skey.api = GM_COOKIE_API(rec->cookie);
	skey.kind = kind;
	skey.gpu = gm_site_gpu(kind, GM_COOKIE_LAYER(rec->cookie), info.device);
	ps = proc_stats(tgid, rec, now);
	ss = site_stats(&skey, &new_site, &info.site);
	if (new_site && ps)
		ps->cgroup_id = bpf_get_current_cgroup_id();	/* followed if it moved */
	if (new_site && stack_mode == GM_STACKS_DWARF && stack_id >= 0)
		emit_stack_copy(ctx, tgid, rec->gen, tid, stack_id);

	if (shape == GM_SHAPE_IMPORT)
		size = 0;	/* another process's memory: its size is not in the handle */
	if (rc != 0) {
		if (shape == GM_SHAPE_ALLOC_PITCH || shape == GM_SHAPE_MALLOC3D)
			size = rec->size * rec->height;	/* requested, unpadded */
		__u64 tensors = 0;

		if (ps) {
			__sync_fetch_and_add(&ps->failed_count, 1);
			total = ps->current_bytes;
			tensors = ps->tensor_bytes;	/* what PyTorch's tensors held of it */
		}
		if (ss)
			__sync_fetch_and_add(&ss->failed_count, 1);
		emit_record(GM_REC_ALLOC_FAILED, rec->cookie, rec, tgid, tid, stack_id, py_stack_id,
			    kind, 0, size, rc, total, tensors, info.device);
		return;
	}

	if (shape == GM_SHAPE_ALLOC_PITCH || shape == GM_SHAPE_MALLOC3D) {
		__u64 pitch = 0;

		pitch = out_word(rec, 1, rec->out_pitch);
		size = pitch;
		if (!mul_bounded(&size, rec->height))
			size = 0;
	}
	if (is_array_shape(shape) && !rec->height)
		count(GM_CNT_UNSIZED_ARRAYS);
	if (shape == GM_SHAPE_REGISTER)
		addr = rec->out_ptr;	/* the caller's own range */
	else
		addr = out_word(rec, 0, rec->out_ptr);
	akey.space = GM_COOKIE_SPACE(rec->cookie);
	akey.addr = addr;
	info.size = size;
	info.time_ns = now;
	info.api = skey.api;
	info.kind = kind;
	info.layer = GM_COOKIE_LAYER(rec->cookie);
	if (!insert_live(&akey, &info))
		return;
	if (ss)
		site_add(ss, size);
	/* The process keeps only what needs a running total (current GPU bytes, peak); its
	 * counts and per-kind bytes are the sums of its sites, added up in userspace. */
	if (ps) {
		if (is_gpu_kind(kind)) {
			total = __sync_fetch_and_add(&ps->current_bytes, size) + size;
			add_gpu_bytes(ps, info.device, size);
			raise_peak(ps, total);
		} else {
			total = ps->current_bytes;
		}
	}
	if (stream_calls())
		emit_call(GM_REC_ALLOC, rec, tgid, tid, stack_id, py_stack_id, kind, addr, size, 0,
			  total, info.device);
}

/* What a context's teardown releases: that process's allocations of that context, but
 * async ones (they belong to their pool, which outlives a context: cudaDeviceReset's rule) and
 * tensors (PyTorch's to free). */
struct release_walk {
	__u32 tgid, gen;
	__u64 ctx;
	__u64 released;
};

static long release_one(struct bpf_map *map, __u32 *idx, struct gm_alloc_slot *sl,
			struct release_walk *w)
{
	__u32 st = *(volatile __u32 *)&sl->state;
	struct gm_alloc_info info;

	(void)map;
	if (GM_SLOT_STATE(st) != GM_SLOT_LIVE || sl->tgid != w->tgid || sl->gen != w->gen ||
	    sl->info.ctx != w->ctx || sl->space == GM_SPACE_TENSOR ||
	    sl->info.kind == GM_KIND_ASYNC)
		return 0;
	if (alloc_take(*idx, st, &info)) {
		account_free(w->tgid, w->gen, &info);
		w->released++;
	}
	return 0;
}

/* One walk of the allocation map (these calls are rare), verified on its own: a global
 * function, so the walk's callback is not explored again along every path of call_return.
 * The released allocations are counted in GM_CNT_CTX_RELEASED. */
__noinline int release_context(__u32 tgid, __u32 gen, __u64 ctx)
{
	struct release_walk w = { .tgid = tgid, .gen = gen, .ctx = ctx };
	__u32 k = GM_CNT_CTX_RELEASED;
	__u64 *v;

	if (!ctx)
		return 0;
	bpf_for_each_map_elem(&allocs, release_one, &w, 0);
	/* No branch on the count: a count the verifier must track exactly would keep it from
	 * ever seeing two runs of the callback as the same. */
	v = bpf_map_lookup_elem(&counters, &k);
	if (v)
		*v += w.released;
	return 0;
}

/* cuCtxDestroy, cuDevicePrimaryCtxReset, cudaDeviceReset returned success: the driver freed
 * what the context held. */
static __noinline void teardown_return(struct gm_inflight *rec, __u32 tgid, __u32 shape)
{
	struct release_walk w = { .tgid = tgid, .gen = rec->gen };

	if (shape == GM_SHAPE_CTX_DESTROY) {
		struct gm_ctx_key key = { .tgid = tgid, .gen = rec->gen, .ctx = rec->addr };
		struct gm_ctx_info *info = bpf_map_lookup_elem(&ctx_infos, &key);

		__u32 d = rec->ctx_depth;

		w.ctx = info && info->primary ? GM_CTX_PRIMARY | (__u32)info->device : rec->addr;
		bpf_map_delete_elem(&ctx_infos, &key);
		/* The driver pops a destroyed context that is current on the calling thread. */
		if (d && d <= GM_CTX_DEPTH && rec->ctx_stack[(d - 1) & (GM_CTX_DEPTH - 1)] == rec->addr)
			rec->ctx_depth = d - 1;
	} else if (shape == GM_SHAPE_PRIMARY_RESET) {
		w.ctx = GM_CTX_PRIMARY | (__u32)rec->addr;
	} else {
		w.ctx = GM_CTX_PRIMARY | (__u32)rec->rt_device;
	}
	release_context(tgid, rec->gen, w.ctx);
}

/* One return program for every shape but the frees (which have none). A return whose stack
 * pointer is not above the recorded entry's belongs to a nested call that was not recorded. The record is the
 * thread's own and no other program runs on this thread meanwhile: it is read in place. The
 * Python walk is called from here, not from alloc_return, so that the two frames never stack
 * up past 512 bytes. */
/* may_be_ctx: false where the probe is known to be of the alloc shape (its cookie unread). */
static __always_inline void call_returned(struct pt_regs *ctx, long ret, bool may_be_ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = task_id(task);
	__u32 shape = may_be_ctx ? GM_COOKIE_SHAPE(bpf_get_attach_cookie(ctx)) : GM_SHAPE_ALLOC;
	struct gm_inflight *rec;

	rec = bpf_task_storage_get(&inflight, task, 0, 0);
	if (!rec)
		return;
	if (is_ctx_shape(shape)) {	/* followed at entry and return, nested or not */
		ctx_return(rec, id >> 32, shape, (__s32)ret);
		return;
	}
	if (!rec->sp || rec->entry_only || PT_REGS_SP(ctx) <= rec->sp)
		return;
	rec->sp = 0;
	shape = GM_COOKIE_SHAPE(rec->cookie);
	if (is_teardown_shape(shape)) {
		if ((__s32)ret == 0)
			teardown_return(rec, id >> 32, shape);
		return;
	}
	alloc_return(ctx, rec, id, (__s32)ret, call_stacks(ctx, rec, id >> 32));
}

SEC("uretprobe")
int BPF_KRETPROBE(call_return, long ret)
{
	call_returned(ctx, ret, true);
	return 0;
}

/* Kernels since 6.13: the alloc shape's entry and return in one session program (loaded
 * instead of enter_alloc, whose calls then have no call_return), its entry saying whether the
 * return has work: a nested driver call (cuMemAlloc_v2 inside cudaMalloc) or a process not
 * traced returns without the return probe's trap. */
SEC("uprobe")
int BPF_KPROBE(session_alloc, void *out_ptr, __u64 size)
{
	if (bpf_session_is_return()) {
		call_returned(ctx, PT_REGS_RC(ctx), false);
		return 0;
	}
	return call_enter(ctx, (__u64)out_ptr, 0, size, 1);
}

/* ---- PyTorch tensors ---- */

/* A tensor handed out by the caching allocator: a site of its own (the api of the cookie's
 * "pytorch:malloc" row) and a live entry in the tensor space, keyed by its address. The
 * process's reserved bytes stay as they are (the segment holding it was counted at its
 * cudaMalloc); its tensor bytes and their peak are running totals of their own. */
static __noinline void tensor_alloc(struct pt_regs *ctx, struct gm_inflight *rec, __u64 ptr,
				    __u64 size, __u64 stacks)
{
	__s32 stack_id = user_stack_of(stacks), py_stack_id = python_stack_of(stacks);
	__u64 id = bpf_get_current_pid_tgid(), cookie = bpf_usdt_cookie(ctx);
	__u32 tid = (__u32)id, tgid = id >> 32;
	__u64 now = bpf_ktime_get_ns(), tensors = 0, reserved = 0;
	struct gm_alloc_key akey = { .tgid = tgid, .gen = rec->gen, .space = GM_SPACE_TENSOR,
				     .addr = ptr };
	struct gm_site_key skey = { .tgid = tgid, .gen = rec->gen };
	struct gm_alloc_info info = {};
	struct gm_proc_stats *ps;
	struct gm_site_stats *ss;
	bool new_site = false;
	long device = GM_DEVICE_UNKNOWN;

	/* c10's DeviceIndex, an int8: a value out of range is a device not known. */
	if (bpf_usdt_arg(ctx, 1, &device) || device < 0 || device > 127)
		device = GM_DEVICE_UNKNOWN;
	skey.stack_id = stack_id;
	skey.py_stack_id = py_stack_id;
	skey.api = GM_COOKIE_API(cookie);
	skey.kind = GM_COOKIE_KIND(cookie);
	skey.gpu = gm_site_gpu(skey.kind, GM_LAYER_TENSOR, device);
	ps = proc_stats(tgid, rec, now);
	ss = site_stats(&skey, &new_site, &info.site);
	if (new_site && stack_mode == GM_STACKS_DWARF && skey.stack_id >= 0)
		emit_stack_copy(ctx, tgid, rec->gen, tid, skey.stack_id);
	info.size = size;
	info.time_ns = now;
	info.api = skey.api;
	info.kind = skey.kind;
	info.layer = GM_LAYER_TENSOR;
	info.device = (__s32)device;	/* its site's; never released with a context */
	info.ctx = 0;
	if (!insert_live(&akey, &info))
		return;
	if (ss)
		site_add(ss, size);
	if (ps) {
		tensors = __sync_fetch_and_add(&ps->tensor_bytes, size) + size;
		raise_max(&ps->tensor_peak_bytes, tensors);
		reserved = ps->current_bytes;
	}
	if (stream_calls())
		emit_record(GM_REC_ALLOC, cookie, rec, tgid, tid, skey.stack_id, py_stack_id,
			    skey.kind, ptr, size, 0, reserved, tensors, (__s32)device);
}

/* The thread's record, for its process's generation and its Python thread state only: a
 * USDT probe is no call, and the call in flight (none, here) is left alone. */
static __always_inline struct gm_inflight *tensor_thread(__u32 tgid)
{
	struct gm_inflight *rec;

	if (!wanted(tgid))
		return NULL;
	rec = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0,
				   BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!rec) {
		count(GM_CNT_INFLIGHT_FULL);
		return NULL;
	}
	identify_process(rec);
	return rec;
}

/* pytorch:malloc(ptr, device, size, stream): the stream is not read (each read looks up the
 * probe's argument spec); the device is read by tensor_alloc. */
SEC("usdt")
int tensor_malloc(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct gm_inflight *rec;
	long ptr = 0, size = 0;

	if (bpf_usdt_arg(ctx, 0, &ptr) || bpf_usdt_arg(ctx, 2, &size) || !ptr || size <= 0)
		return 0;
	rec = tensor_thread(id >> 32);
	if (!rec)
		return 0;
	tensor_alloc(ctx, rec, ptr, size, call_stacks(ctx, rec, id >> 32));
	return 0;
}

/* Subtracts a freed tensor from its site and process (account_free); the process's bytes,
 * reserved and tensors, after it. */
static __always_inline void tensor_account_free(__u32 tgid, __u32 gen,
						const struct gm_alloc_info *info, __u64 *reserved,
						__u64 *tensors)
{
	struct gm_proc_stats *ps;

	*reserved = account_free(tgid, gen, info);
	ps = proc_of(tgid, gen);
	*tensors = ps ? ps->tensor_bytes : 0;
}

/* Fired before the allocator takes the tensor back: its entry is deleted here, so only one of
 * two racing frees counts it. */
SEC("usdt")
int BPF_USDT(tensor_free, __u64 ptr)
{
	__u64 id = bpf_get_current_pid_tgid(), cookie = bpf_usdt_cookie(ctx);
	__u32 tgid = id >> 32, type = GM_REC_FREE;
	struct gm_alloc_key key = { .tgid = tgid, .space = GM_SPACE_TENSOR, .addr = ptr };
	struct gm_alloc_info info = {};
	__u32 seen = 0;
	bool found;
	int at;
	__u64 reserved = 0, tensors = 0;
	struct gm_inflight *rec;

	if (!ptr)
		return 0;
	rec = tensor_thread(tgid);
	if (!rec)
		return 0;
	key.gen = rec->gen;
	at = alloc_find(&key, &seen);
	found = at >= 0;
	if (!found) {
		count(GM_CNT_UNKNOWN_TENSOR_FREES);
		type = GM_REC_UNKNOWN_FREE;
	} else {
		if (!alloc_take((__u32)at, seen, &info))
			return 0;
		tensor_account_free(tgid, key.gen, &info, &reserved, &tensors);
	}
	if (stream_calls())
		emit_record(type, cookie, rec, tgid, (__u32)id, user_stack(ctx, rec, false), -1,
			    GM_COOKIE_KIND(cookie), ptr, info.size, 0, reserved, tensors,
			    found ? info.device : GM_DEVICE_UNKNOWN);
	return 0;
}

static __always_inline void emit_file(__u32 type, __u32 tgid, __u64 ino, __u32 dev,
				      const char *path)
{
	struct gm_file_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	e->type = type;
	e->pid = tgid;
	e->time_ns = bpf_ktime_get_ns();
	e->ino = ino;
	e->dev = dev;
	e->fd = 0;
	e->held = 0;
	e->pad = 0;
	if (path)
		bpf_probe_read_kernel_str(e->path, sizeof(e->path), path);
	else
		e->path[0] = 0;
	bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct file *file = BPF_CORE_READ(bprm, file);

	/* Not filtered: what one process runs, a traced one may run next. The file's identity
	 * goes with its name: the name alone is trusted for nothing. */
	emit_file(GM_REC_EXEC, tgid, BPF_CORE_READ(file, f_inode, i_ino),
		  BPF_CORE_READ(file, f_inode, i_sb, s_dev), BPF_CORE_READ(bprm, filename));
	return 0;
}

/* Children of a followed process are followed too (-c CMD). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (!filter_pids || ptgid == ctgid || !bpf_map_lookup_elem(&targets, &ptgid))
		return 0;
	bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY);
	return 0;
}

/* The executable file mappings of an ending process, which still has its memory map here. */
static __always_inline void emit_module_map(struct task_struct *p, __u32 tgid, __u32 gen)
{
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;

	/* No counter: the iterator bounds the loop, and a counter the verifier must track
	 * precisely made it explore every count (1.7 s to load). */
	bpf_iter_task_vma_new(&it, p, 0);
	while ((vma = bpf_iter_task_vma_next(&it))) {
		struct gm_vma_event *e;
		struct file *file = vma->vm_file;

		if (!file || !(vma->vm_flags & VM_EXEC_FLAG))
			continue;
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e) {
			count(GM_CNT_RINGBUF_DROPPED);
			break;
		}
		e->type = GM_REC_EXIT_VMA;
		e->pid = tgid;
		e->gen = gen;
		e->pad = 0;
		e->start = vma->vm_start;
		e->end = vma->vm_end;
		e->pgoff = vma->vm_pgoff;
		e->ino = BPF_CORE_READ(file, f_inode, i_ino);
		e->dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
		bpf_probe_read_kernel_str(e->name, sizeof(e->name),
					  BPF_CORE_READ(file, f_path.dentry, d_name.name));
		bpf_ringbuf_submit(e, 0);
	}
	bpf_iter_task_vma_destroy(&it);
}

static long forget_one(struct bpf_map *map, struct gm_ctx_key *key, struct gm_ctx_info *val,
		       struct gm_proc_key *ended)
{
	struct gm_ctx_key k;

	(void)map;
	(void)val;
	if (key->tgid != ended->tgid || key->gen != ended->gen)
		return 0;
	k = *key;
	bpf_map_delete_elem(&ctx_infos, &k);
	return 0;
}

/* An ended process's contexts are forgotten with it (a walk of at most GM_MAX_CONTEXTS). */
__noinline int forget_contexts(__u32 tgid, __u32 gen)
{
	struct gm_proc_key ended = { .tgid = tgid, .gen = gen };

	bpf_for_each_map_elem(&ctx_infos, forget_one, &ended, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);
	struct gm_proc_key key = { .tgid = tgid };
	struct gm_call_event *e;
	__u64 start_ns;

	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;	/* not the last thread of its process */
	start_ns = BPF_CORE_READ(p, group_leader, start_boottime);
	key.gen = gm_proc_gen(start_ns);
	if (!bpf_map_lookup_elem(&procs_made, &key) && !bpf_map_lookup_elem(&targets, &tgid))
		return 0;
	forget_contexts(tgid, key.gen);
	emit_module_map(p, tgid, key.gen);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = GM_REC_PROCESS_EXIT;
	e->py_stack_id = -1;
	e->pid = tgid;
	e->gen = key.gen;
	e->start_ns = start_ns;
	e->tid = tid;
	e->time_ns = bpf_ktime_get_ns();
	e->error = BPF_CORE_READ(p, exit_code);	/* a wait status: userspace decodes it */
	e->cgroup_id = bpf_get_current_cgroup_id();	/* p is the current task */
	BPF_CORE_READ_STR_INTO(&e->comm, p, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* What the pins under the agent's directory are, and whose (userspace's only). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gm_agent);
} agent SEC(".maps");

/* Library files userspace has examined, by (kernel dev, inode): opening one costs nothing. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GM_MAX_KNOWN_FILES);
	__type(key, struct gm_file_key);
	__type(value, __u8);
} known_files SEC(".maps");

#define NR_MMAP 9
#define MAP_ANONYMOUS_FLAG 0x20

/* "libcuda.so*" or "libcudart.so*", or PyTorch's "libc10_cuda.so*" (its tensors' USDT
 * probes): the name of the file itself, symlinks resolved. Archives such as
 * libcudart_static.a, which linkers map, do not match. */
static __always_inline bool cuda_library_name(struct file *file)
{
	const unsigned char *name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	static const char c10[] = "libc10_cuda.so";
	char head[16];

	if (bpf_probe_read_kernel(head, sizeof(head), name))
		return false;
	if (head[0] != 'l' || head[1] != 'i' || head[2] != 'b' || head[3] != 'c')
		return false;
	if (head[4] == '1') {
		for (int i = 4; i < (int)sizeof(c10) - 1; i++)
			if (head[i] != c10[i])
				return false;
		return true;
	}
	if (head[4] != 'u' || head[5] != 'd' || head[6] != 'a')
		return false;
	if (head[7] == '.')
		return head[8] == 's' && head[9] == 'o';
	return head[7] == 'r' && head[8] == 't' && head[9] == '.' && head[10] == 's' &&
	       head[11] == 'o';
}

/* A file named like a CUDA library is being mapped by mmap() (the dynamic loader's first
 * mapping of a library, at start-up or dlopen). If userspace has not examined it yet, the
 * process is held (SIGSTOP, taking effect as mmap returns, before the loader relocates it, let
 * alone runs it) until the probes are on. This tracepoint fires only for mmaps that need a
 * placement, so unlike a syscall tracepoint it costs nothing to other system calls. */
SEC("tp_btf/vm_unmapped_area")
int BPF_PROG(on_unmapped_area, unsigned long addr, struct vm_unmapped_area_info *info)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct gm_file_key key = {};
	struct gm_file_event *e;
	struct file **fds, *file;
	long nr, fd;
	__u32 tgid;

	nr = BPF_CORE_READ(regs, orig_ax);
	if (nr != NR_MMAP || (BPF_CORE_READ(regs, r10) & MAP_ANONYMOUS_FLAG))
		return 0;
	fd = (long)BPF_CORE_READ(regs, r8);
	if (fd < 0)
		return 0;
	fds = BPF_CORE_READ(task, files, fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd & 0xffffff]) || !file)
		return 0;
	if (!cuda_library_name(file))
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	/* Every process's new library is attached before that process goes on, traced or not:
	 * it may be moved into a traced cgroup, or its children traced (a few ms, once per
	 * library file on the host). */
	if (tgid == self_tgid)
		return 0;
	key.ino = BPF_CORE_READ(file, f_inode, i_ino);
	key.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	if (bpf_map_lookup_elem(&known_files, &key))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return 0;
	}
	e->type = GM_REC_LIB_OPEN;
	e->pid = tgid;
	e->fd = (__u32)fd;
	e->time_ns = bpf_ktime_get_ns();
	e->ino = key.ino;
	e->dev = key.dev;
	e->pad = 0;
	bpf_probe_read_kernel_str(e->path, sizeof(e->path),
				  BPF_CORE_READ(file, f_path.dentry, d_name.name));
	e->held = hold_new_libs && hold(tgid);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
