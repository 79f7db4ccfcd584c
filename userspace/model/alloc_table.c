// SPDX-License-Identifier: GPL-2.0
/* The allocation table, from userspace: the BPF programs' protocol (gpumem.h) in C11 atomics
 * on the mapped array. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "alloc_table.h"

int alloc_table_open(struct alloc_table *t, int fd, bool writable)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	memset(t, 0, sizeof(*t));
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
		return fd < 0 ? -EBADF : -errno;
	if (info.type != BPF_MAP_TYPE_ARRAY || info.value_size != sizeof(struct gm_alloc_slot) ||
	    !info.max_entries || (info.max_entries & (info.max_entries - 1)))
		return -EINVAL;
	t->len = (size_t)info.max_entries * sizeof(struct gm_alloc_slot);
	t->len = (t->len + (size_t)page - 1) / (size_t)page * (size_t)page;
	p = mmap(NULL, t->len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		t->len = 0;
		return -errno;
	}
	t->slots = p;
	t->nslots = info.max_entries;
	t->writable = writable;
	return 0;
}

void alloc_table_close(struct alloc_table *t)
{
	if (t->slots)
		munmap(t->slots, t->len);
	memset(t, 0, sizeof(*t));
}

static uint32_t load_state(const struct gm_alloc_slot *sl)
{
	return __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
}

static bool slot_has(const struct gm_alloc_slot *sl, const struct gm_alloc_key *k)
{
	return sl->addr == k->addr && sl->tgid == k->tgid && sl->gen == k->gen &&
	       sl->space == k->space;
}

/* A live slot's key and info as one whole: read between two loads of its state. */
static bool read_slot(const struct gm_alloc_slot *sl, uint32_t *seen, struct gm_alloc_key *key,
		      struct gm_alloc_info *info)
{
	uint32_t st = load_state(sl);

	if (GM_SLOT_STATE(st) != GM_SLOT_LIVE)
		return false;
	*key = (struct gm_alloc_key){ .tgid = sl->tgid, .gen = sl->gen, .space = sl->space,
				      .addr = sl->addr };
	*info = sl->info;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (load_state(sl) != st)
		return false;
	*seen = st;
	return true;
}

uint64_t alloc_table_walk(const struct alloc_table *t, alloc_walk_fn cb, void *ctx)
{
	uint64_t live = 0;

	for (uint32_t i = 0; t->slots && i < t->nslots; i++) {
		struct gm_alloc_key key;
		struct gm_alloc_info info;
		uint32_t seen;

		if (!read_slot(&t->slots[i], &seen, &key, &info))
			continue;
		live++;
		cb(ctx, (struct alloc_ref){ .idx = i, .seen = seen }, &key, &info);
	}
	return live;
}

static bool claim(struct gm_alloc_slot *sl, uint32_t from, uint32_t to)
{
	return __atomic_compare_exchange_n(&sl->state, &from, to, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

bool alloc_table_take(struct alloc_table *t, struct alloc_ref ref)
{
	if (!t->slots || !t->writable || ref.idx >= t->nslots)
		return false;
	return claim(&t->slots[ref.idx], ref.seen, GM_SLOT_NEXT(ref.seen, GM_SLOT_TOMB));
}

int alloc_table_find(const struct alloc_table *t, const struct gm_alloc_key *key,
		     struct gm_alloc_info *info, struct alloc_ref *ref)
{
	uint32_t mask = t->nslots - 1, home;

	if (!t->slots)
		return -ENOENT;
	home = gm_alloc_home(key->tgid, key->gen, key->space, key->addr, mask);
	for (uint32_t i = 0; i < GM_ALLOC_PROBES; i++) {
		uint32_t idx = (home + i) & mask, seen;
		const struct gm_alloc_slot *sl = &t->slots[idx];
		struct gm_alloc_key k;

		if (GM_SLOT_STATE(load_state(sl)) == GM_SLOT_EMPTY)
			break;
		if (read_slot(sl, &seen, &k, info) && k.addr == key->addr && k.tgid == key->tgid &&
		    k.gen == key->gen && k.space == key->space) {
			if (ref)
				*ref = (struct alloc_ref){ .idx = idx, .seen = seen };
			return 0;
		}
	}
	return -ENOENT;
}

int alloc_table_insert(struct alloc_table *t, const struct gm_alloc_key *key,
		       const struct gm_alloc_info *info)
{
	uint32_t mask = t->nslots - 1, home;

	if (!t->slots || !t->writable)
		return -EPERM;
	home = gm_alloc_home(key->tgid, key->gen, key->space, key->addr, mask);
	for (int round = 0; round < 2; round++) {
		struct gm_alloc_slot *free_sl = NULL;
		uint32_t free_st = 0, busy;

		for (uint32_t i = 0; i < GM_ALLOC_PROBES; i++) {
			struct gm_alloc_slot *sl = &t->slots[(home + i) & mask];
			uint32_t st = load_state(sl);

			if (GM_SLOT_STATE(st) == GM_SLOT_LIVE && slot_has(sl, key))
				return -EEXIST;
			if (GM_SLOT_STATE(st) == GM_SLOT_EMPTY || GM_SLOT_STATE(st) == GM_SLOT_TOMB) {
				if (!free_sl) {
					free_sl = sl;
					free_st = st;
				}
				if (GM_SLOT_STATE(st) == GM_SLOT_EMPTY)
					break;
			}
		}
		if (!free_sl)
			return -ENOSPC;
		busy = GM_SLOT_NEXT(free_st, GM_SLOT_BUSY);
		if (!claim(free_sl, free_st, busy))
			continue;
		free_sl->tgid = key->tgid;
		free_sl->gen = key->gen;
		free_sl->space = key->space;
		free_sl->addr = key->addr;
		free_sl->info = *info;
		__atomic_store_n(&free_sl->state, (busy & ~3u) | GM_SLOT_LIVE, __ATOMIC_RELEASE);
		return 0;
	}
	return -ENOSPC;
}
