// SPDX-License-Identifier: GPL-2.0
/* The site and process tables, from userspace: the BPF programs' protocol (gpumem.h) in C11
 * atomics on the mapped array. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "model/slot_table.h"

/* The words every slot begins with. */
struct slot_head {
	uint32_t state;
	uint32_t span;
};

static uint32_t site_home(const void *key, uint32_t mask)
{
	return gm_site_home(key, mask);
}

static uint32_t proc_home(const void *key, uint32_t mask)
{
	const struct gm_proc_key *k = key;

	return gm_proc_home(k->tgid, k->gen, mask);
}

const struct slot_layout site_slots = {
	.what = "site table",
	.key_size = sizeof(struct gm_site_key),
	.value_size = sizeof(struct gm_site_stats),
	.home = site_home,
};

const struct slot_layout proc_slots = {
	.what = "process table",
	.key_size = sizeof(struct gm_proc_key),
	.value_size = sizeof(struct gm_proc_stats),
	.home = proc_home,
};

_Static_assert(sizeof(struct gm_site_slot) ==
	       sizeof(struct slot_head) + sizeof(struct gm_site_key) + sizeof(struct gm_site_stats),
	       "gm_site_slot is {state, span, key, value}");
_Static_assert(sizeof(struct gm_proc_slot) ==
	       sizeof(struct slot_head) + sizeof(struct gm_proc_key) + sizeof(struct gm_proc_stats),
	       "gm_proc_slot is {state, span, key, value}");
_Static_assert(sizeof(struct gm_proc_key) <= SLOT_KEY_MAX &&
	       sizeof(struct gm_site_stats) <= SLOT_VALUE_MAX, "SLOT_*_MAX cover every layout");

static size_t slot_size(const struct slot_layout *l)
{
	return sizeof(struct slot_head) + l->key_size + l->value_size;
}

static struct slot_head *slot_at(const struct slot_table *t, uint32_t idx)
{
	return (struct slot_head *)(void *)(t->slots + (size_t)idx * slot_size(t->layout));
}

static const unsigned char *key_of(const struct slot_head *h)
{
	return (const unsigned char *)(h + 1);
}

int table_map(int fd, size_t slot_size, bool writable, void **base, uint32_t *nslots,
	      size_t *len)
{
	struct bpf_map_info info = { 0 };
	__u32 info_len = sizeof(info);
	long page = sysconf(_SC_PAGESIZE);
	size_t bytes;
	void *p;

	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &info_len))
		return fd < 0 ? -EBADF : -errno;
	if (info.type != BPF_MAP_TYPE_ARRAY || info.value_size != slot_size ||
	    !info.max_entries || (info.max_entries & (info.max_entries - 1)))
		return -EINVAL;
	bytes = (size_t)info.max_entries * slot_size;
	bytes = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
	p = mmap(NULL, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*base = p;
	*nslots = info.max_entries;
	*len = bytes;
	return 0;
}

int slot_table_open(struct slot_table *t, int fd, bool writable, const struct slot_layout *l)
{
	void *base;
	int err;

	memset(t, 0, sizeof(*t));
	err = table_map(fd, slot_size(l), writable, &base, &t->nslots, &t->len);
	if (err)
		return err;
	t->layout = l;
	t->slots = base;
	t->writable = writable;
	return 0;
}

void slot_table_close(struct slot_table *t)
{
	if (t->slots)
		munmap(t->slots, t->len);
	memset(t, 0, sizeof(*t));
}

static uint32_t load_state(const struct slot_head *h)
{
	return __atomic_load_n(&h->state, __ATOMIC_ACQUIRE);
}

/* A live slot's key and value (either may be NULL): read between two loads of its state. */
static bool read_slot(const struct slot_table *t, const struct slot_head *h, uint32_t *seen,
		      void *key, void *value)
{
	const struct slot_layout *l = t->layout;
	uint32_t st = load_state(h);

	if (GM_SLOT_STATE(st) != GM_SLOT_LIVE)
		return false;
	if (key)
		memcpy(key, key_of(h), l->key_size);
	if (value)
		memcpy(value, key_of(h) + l->key_size, l->value_size);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (load_state(h) != st)
		return false;
	*seen = st;
	return true;
}

uint64_t slot_table_walk(const struct slot_table *t, slot_walk_fn cb, void *ctx)
{
	unsigned char key[SLOT_KEY_MAX], value[SLOT_VALUE_MAX];
	uint64_t live = 0;

	for (uint32_t i = 0; t->slots && i < t->nslots; i++) {
		uint32_t seen;

		if (!read_slot(t, slot_at(t, i), &seen, key, value))
			continue;
		live++;
		cb(ctx, (struct slot_ref){ .idx = i, .seen = seen }, key, value);
	}
	return live;
}

bool slot_table_key(const struct slot_table *t, uint32_t idx, void *key)
{
	uint32_t seen;

	return t->slots && idx < t->nslots && read_slot(t, slot_at(t, idx), &seen, key, NULL);
}

int slot_table_find(const struct slot_table *t, const void *key, void *value,
		    struct slot_ref *ref)
{
	const struct slot_layout *l = t->layout;
	unsigned char k[SLOT_KEY_MAX];
	uint32_t mask = t->nslots - 1, home, reach;

	if (!t->slots)
		return -ENOENT;
	home = l->home(key, mask);
	reach = __atomic_load_n(&slot_at(t, home)->span, __ATOMIC_ACQUIRE) + 1;
	for (uint32_t i = 0; i < GM_SLOT_PROBES && i < reach; i++) {
		uint32_t idx = (home + i) & mask, seen;

		/* Key and value in one read: the value is that key's. */
		if (!read_slot(t, slot_at(t, idx), &seen, k, value) || memcmp(k, key, l->key_size))
			continue;
		if (ref)
			*ref = (struct slot_ref){ .idx = idx, .seen = seen };
		return (int)idx;
	}
	return -ENOENT;
}

static bool claim(uint32_t *word, uint32_t from, uint32_t to)
{
	return __atomic_compare_exchange_n(word, &from, to, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

bool slot_table_take(struct slot_table *t, struct slot_ref ref)
{
	if (!t->slots || !t->writable || ref.idx >= t->nslots)
		return false;
	return claim(&slot_at(t, ref.idx)->state, ref.seen, GM_SLOT_NEXT(ref.seen, GM_SLOT_FREE));
}

/* As the BPF programs raise a home's span. */
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

int slot_table_insert(struct slot_table *t, const void *key, const void *value)
{
	const struct slot_layout *l;
	uint32_t mask = t->nslots - 1, home;

	if (!t->slots || !t->writable)
		return -EPERM;
	l = t->layout;
	home = l->home(key, mask);
	if (slot_table_find(t, key, NULL, NULL) >= 0)
		return -EEXIST;
	for (int round = 0; round < GM_ALLOC_TRIES; round++) {
		struct slot_head *h = NULL;
		uint32_t st = 0, at = 0, busy;

		for (uint32_t i = 0; !h && i < GM_SLOT_PROBES; i++) {
			struct slot_head *s = slot_at(t, (home + i) & mask);

			st = load_state(s);
			if (GM_SLOT_STATE(st) == GM_SLOT_FREE) {
				h = s;
				at = i;
			}
		}
		if (!h)
			return -ENOSPC;
		busy = GM_SLOT_NEXT(st, GM_SLOT_BUSY);
		if (!claim(&h->state, st, busy))
			continue;
		memcpy((unsigned char *)(h + 1), key, l->key_size);
		memcpy((unsigned char *)(h + 1) + l->key_size, value, l->value_size);
		if (!raise_span(&slot_at(t, home)->span, at)) {
			__atomic_store_n(&h->state, GM_SLOT_NEXT(busy, GM_SLOT_FREE),
					 __ATOMIC_RELEASE);
			return -ENOSPC;
		}
		__atomic_store_n(&h->state, (busy & ~3u) | GM_SLOT_LIVE, __ATOMIC_RELEASE);
		return (int)((home + at) & mask);
	}
	return -ENOSPC;
}
