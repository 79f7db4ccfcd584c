// SPDX-License-Identifier: GPL-2.0
/* The allocation table, from userspace: the BPF programs' protocol (gpumem.h) in C11 atomics
 * on the mapped array. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "model/alloc_table.h"
#include "model/slot_table.h"

int alloc_table_open(struct alloc_table *t, int fd, bool writable)
{
	void *base;
	int err;

	memset(t, 0, sizeof(*t));
	err = table_map(fd, sizeof(struct gm_alloc_slot), writable, &base, &t->nslots, &t->len);
	if (err)
		return err;
	t->slots = base;
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

static bool claim(uint32_t *word, uint32_t from, uint32_t to)
{
	return __atomic_compare_exchange_n(word, &from, to, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

bool alloc_table_take(struct alloc_table *t, struct alloc_ref ref)
{
	if (!t->slots || !t->writable || ref.idx >= t->nslots)
		return false;
	return claim(&t->slots[ref.idx].state, ref.seen, GM_SLOT_NEXT(ref.seen, GM_SLOT_FREE));
}

/* The word a slot's space shares with its span (high half). */
static uint32_t *space_span(struct gm_alloc_slot *sl)
{
	return (uint32_t *)(void *)&sl->space;
}

int alloc_table_find(const struct alloc_table *t, const struct gm_alloc_key *key,
		     struct gm_alloc_info *info, struct alloc_ref *ref)
{
	uint32_t mask = t->nslots - 1, home, reach;

	if (!t->slots)
		return -ENOENT;
	home = gm_alloc_home(key->tgid, key->gen, key->space, key->addr, mask);
	reach = (__atomic_load_n(space_span(&t->slots[home]), __ATOMIC_ACQUIRE) >> 16) + 1;
	for (uint32_t i = 0; i < GM_ALLOC_PROBES && i < reach; i++) {
		uint32_t idx = (home + i) & mask, seen;
		struct gm_alloc_key k;

		if (read_slot(&t->slots[idx], &seen, &k, info) && k.addr == key->addr &&
		    k.tgid == key->tgid && k.gen == key->gen && k.space == key->space) {
			if (ref)
				*ref = (struct alloc_ref){ .idx = idx, .seen = seen };
			return 0;
		}
	}
	return -ENOENT;
}

/* As the BPF programs set a slot's space and raise a home's span (see alloc_insert). */
static bool set_word(uint32_t *w, uint32_t keep_mask, uint32_t value, bool raise)
{
	for (int i = 0; i < 8; i++) {
		uint32_t old = __atomic_load_n(w, __ATOMIC_ACQUIRE);

		if (raise && (old >> 16) >= (value >> 16))
			return true;
		if (claim(w, old, (old & keep_mask) | value))
			return true;
	}
	return false;
}

int alloc_table_insert(struct alloc_table *t, const struct gm_alloc_key *key,
		       const struct gm_alloc_info *info)
{
	uint32_t mask = t->nslots - 1, home;

	if (!t->slots || !t->writable)
		return -EPERM;
	home = gm_alloc_home(key->tgid, key->gen, key->space, key->addr, mask);
	if (!alloc_table_find(t, key, &(struct gm_alloc_info){ 0 }, NULL))
		return -EEXIST;
	for (int round = 0; round < GM_ALLOC_TRIES; round++) {
		struct gm_alloc_slot *sl = NULL;
		uint32_t st = 0, at = 0, busy;

		for (uint32_t i = 0; !sl && i < GM_ALLOC_PROBES; i++) {
			struct gm_alloc_slot *s = &t->slots[(home + i) & mask];

			st = load_state(s);
			if (GM_SLOT_STATE(st) == GM_SLOT_FREE) {
				sl = s;
				at = i;
			}
		}
		if (!sl)
			return -ENOSPC;
		busy = GM_SLOT_NEXT(st, GM_SLOT_BUSY);
		if (!claim(&sl->state, st, busy))
			continue;
		sl->tgid = key->tgid;
		sl->gen = key->gen;
		sl->addr = key->addr;
		sl->info = *info;
		if (!set_word(space_span(sl), 0xffff0000u, key->space & 0xffffu, false) ||
		    !set_word(space_span(&t->slots[home]), 0xffffu, at << 16, true)) {
			__atomic_store_n(&sl->state, GM_SLOT_NEXT(busy, GM_SLOT_FREE),
					 __ATOMIC_RELEASE);
			return -ENOSPC;
		}
		__atomic_store_n(&sl->state, (busy & ~3u) | GM_SLOT_LIVE, __ATOMIC_RELEASE);
		return 0;
	}
	return -ENOSPC;
}
