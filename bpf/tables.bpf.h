/* SPDX-License-Identifier: GPL-2.0 */
/* The allocation, site and process tables, arrays in open addressing (gpumem.h): found, made
 * and taken out lock-free, each slot's state changed by compare-and-swap. */
#ifndef GPUMEM_TABLES_BPF_H
#define GPUMEM_TABLES_BPF_H

#include "base.bpf.h"

/* ---- Allocations ---- */

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

/* ---- Call sites ---- */

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

/* ---- Processes ---- */

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

#endif /* GPUMEM_TABLES_BPF_H */
