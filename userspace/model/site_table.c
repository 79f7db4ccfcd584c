// SPDX-License-Identifier: GPL-2.0
/* The site table, from userspace: the BPF programs' protocol (gpumem.h) in C11 atomics on the
 * mapped array. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "site_table.h"

int site_table_open(struct site_table *t, int fd, bool writable)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	memset(t, 0, sizeof(*t));
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
		return fd < 0 ? -EBADF : -errno;
	if (info.type != BPF_MAP_TYPE_ARRAY || info.value_size != sizeof(struct gm_site_slot) ||
	    !info.max_entries || (info.max_entries & (info.max_entries - 1)))
		return -EINVAL;
	t->len = (size_t)info.max_entries * sizeof(struct gm_site_slot);
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

void site_table_close(struct site_table *t)
{
	if (t->slots)
		munmap(t->slots, t->len);
	memset(t, 0, sizeof(*t));
}

static uint32_t load_state(const struct gm_site_slot *sl)
{
	return __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
}

/* A live slot's key and numbers: read between two loads of its state. */
static bool read_slot(const struct gm_site_slot *sl, uint32_t *seen, struct gm_site_key *key,
		      struct gm_site_stats *stats)
{
	uint32_t st = load_state(sl);

	if (GM_SLOT_STATE(st) != GM_SLOT_LIVE)
		return false;
	*key = sl->key;
	if (stats)
		*stats = sl->stats;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (load_state(sl) != st)
		return false;
	*seen = st;
	return true;
}

uint64_t site_table_walk(const struct site_table *t, site_walk_fn cb, void *ctx)
{
	uint64_t live = 0;

	for (uint32_t i = 0; t->slots && i < t->nslots; i++) {
		struct gm_site_key key;
		struct gm_site_stats stats;
		uint32_t seen;

		if (!read_slot(&t->slots[i], &seen, &key, &stats))
			continue;
		live++;
		cb(ctx, (struct site_ref){ .idx = i, .seen = seen }, &key, &stats);
	}
	return live;
}

bool site_table_key(const struct site_table *t, uint32_t idx, struct gm_site_key *key)
{
	uint32_t seen;

	return t->slots && idx < t->nslots && read_slot(&t->slots[idx], &seen, key, NULL);
}

static bool claim(uint32_t *word, uint32_t from, uint32_t to)
{
	return __atomic_compare_exchange_n(word, &from, to, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

bool site_table_take(struct site_table *t, struct site_ref ref)
{
	if (!t->slots || !t->writable || ref.idx >= t->nslots)
		return false;
	return claim(&t->slots[ref.idx].state, ref.seen, GM_SLOT_NEXT(ref.seen, GM_SLOT_FREE));
}

static bool same_key(const struct gm_site_key *a, const struct gm_site_key *b)
{
	return !memcmp(a, b, sizeof(*a));
}

/* As the BPF programs raise a home's span (raise_site_span). */
static bool raise_span(uint32_t *span, uint32_t to)
{
	for (int i = 0; i < 8; i++) {
		uint32_t old = __atomic_load_n(span, __ATOMIC_ACQUIRE);

		if (old >= to)
			return true;
		if (claim(span, old, to))
			return true;
	}
	return false;
}

int site_table_find(const struct site_table *t, const struct gm_site_key *key,
		    struct gm_site_stats *stats, struct site_ref *ref)
{
	uint32_t mask = t->nslots - 1, home, reach;

	if (!t->slots)
		return -ENOENT;
	home = gm_site_home(key, mask);
	reach = __atomic_load_n(&t->slots[home].span, __ATOMIC_ACQUIRE) + 1;
	for (uint32_t i = 0; i < GM_SITE_PROBES && i < reach; i++) {
		uint32_t idx = (home + i) & mask, seen;
		struct gm_site_key k;
		struct gm_site_stats st;

		if (read_slot(&t->slots[idx], &seen, &k, &st) && same_key(&k, key)) {
			if (stats)
				*stats = st;
			if (ref)
				*ref = (struct site_ref){ .idx = idx, .seen = seen };
			return (int)idx;
		}
	}
	return -ENOENT;
}

int site_table_insert(struct site_table *t, const struct gm_site_key *key,
		      const struct gm_site_stats *stats)
{
	uint32_t mask = t->nslots - 1, home;

	if (!t->slots || !t->writable)
		return -EPERM;
	home = gm_site_home(key, mask);
	if (site_table_find(t, key, NULL, NULL) >= 0)
		return -EEXIST;
	for (int round = 0; round < GM_ALLOC_TRIES; round++) {
		struct gm_site_slot *sl = NULL;
		uint32_t st = 0, at = 0, busy;

		for (uint32_t i = 0; !sl && i < GM_SITE_PROBES; i++) {
			struct gm_site_slot *s = &t->slots[(home + i) & mask];

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
		sl->key = *key;
		sl->stats = *stats;
		if (!raise_span(&t->slots[home].span, at)) {
			__atomic_store_n(&sl->state, GM_SLOT_NEXT(busy, GM_SLOT_FREE),
					 __ATOMIC_RELEASE);
			return -ENOSPC;
		}
		__atomic_store_n(&sl->state, (busy & ~3u) | GM_SLOT_LIVE, __ATOMIC_RELEASE);
		return (int)((home + at) & mask);
	}
	return -ENOSPC;
}
