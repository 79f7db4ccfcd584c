// SPDX-License-Identifier: GPL-2.0
/* The allocation table from userspace, on a real mapped BPF array: keys found where the
 * probe put them, past collisions, as far as their home's span; a freed slot taken again by
 * the next insert; a take only of the entry a walk saw, once; a full neighbourhood refused; a
 * walk that sees live entries only. The BPF programs follow
 * the same protocol (gpumem.h); the integration tests check them. */
#include <setjmp.h>
#include <stdarg.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "model/alloc_table.h"

#define SLOTS 256u

struct fixture {
	int fd;
	struct alloc_table t;
};

static char skip_reason[160];

static int setup(void **state)
{
	static struct fixture fx;
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);

	memset(&fx, 0, sizeof(fx));
	fx.fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "gm_allocs", sizeof(__u32),
			       sizeof(struct gm_alloc_slot), SLOTS, &opts);
	if (fx.fd < 0) {
		snprintf(skip_reason, sizeof(skip_reason), "cannot create a BPF array: %s%s",
			 strerror(errno), errno == EPERM ? " (run as root or with CAP_BPF)" : "");
		*state = NULL;
		return 0;
	}
	assert_int_equal(alloc_table_open(&fx.t, fx.fd, true), 0);
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	if (fx) {
		alloc_table_close(&fx->t);
		close(fx->fd);
	}
	return 0;
}

static struct fixture *fixture_or_skip(void **state)
{
	if (!*state) {
		print_message("skipped: %s\n", skip_reason);
		skip();
	}
	return *state;
}

static struct gm_alloc_key key_of(uint64_t addr)
{
	return (struct gm_alloc_key){ .tgid = 1234, .gen = 7, .space = GM_SPACE_ADDR,
				      .addr = addr };
}

static uint32_t home_of(const struct gm_alloc_key *k)
{
	return gm_alloc_home(k->tgid, k->gen, k->space, k->addr, SLOTS - 1);
}

/* n addresses whose probes all start at the same slot. */
static size_t colliding(uint64_t *out, size_t n)
{
	struct gm_alloc_key first = key_of(0x7f0000000000);
	size_t got = 0;

	out[got++] = first.addr;
	for (uint64_t a = first.addr + 0x200000; got < n; a += 0x200000) {
		struct gm_alloc_key k = key_of(a);

		if (home_of(&k) == home_of(&first))
			out[got++] = a;
	}
	return got;
}

static struct gm_alloc_info info_of(uint64_t size)
{
	return (struct gm_alloc_info){ .size = size, .site = 3, .kind = GM_KIND_DEVICE };
}

static void test_table_of_a_map_that_is_not_one_is_refused(void **state)
{
	struct alloc_table t;
	int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "gm_h", 8, 8, 16, NULL);

	fixture_or_skip(state);
	assert_true(fd >= 0);
	assert_int_equal(alloc_table_open(&t, fd, false), -EINVAL);
	assert_null(t.slots);
	close(fd);
	assert_int_equal(alloc_table_open(&t, -1, false), -EBADF);
}

static void test_colliding_keys_are_found_past_each_other_and_freed_slots_are_taken_again(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	uint64_t addrs[5];
	struct gm_alloc_info got;
	struct alloc_ref ref;

	assert_int_equal(colliding(addrs, 5), 5);
	for (int i = 0; i < 5; i++) {
		struct gm_alloc_key k = key_of(addrs[i]);
		struct gm_alloc_info in = info_of(4096 * (i + 1));

		assert_int_equal(alloc_table_insert(&fx->t, &k, &in), 0);
	}
	for (int i = 0; i < 5; i++) {
		struct gm_alloc_key k = key_of(addrs[i]);

		assert_int_equal(alloc_table_find(&fx->t, &k, &got, &ref), 0);
		assert_int_equal(got.size, 4096 * (i + 1));
		assert_int_equal(ref.idx, (home_of(&k) + i) & (SLOTS - 1));
	}
	/* The second taken out: a free slot the fifth's lookup passes (the home's span reaches
	 * it), the next insert takes. */
	{
		struct gm_alloc_key k1 = key_of(addrs[1]), k4 = key_of(addrs[4]);
		struct gm_alloc_info in = info_of(1);

		assert_int_equal(alloc_table_find(&fx->t, &k1, &got, &ref), 0);
		assert_true(alloc_table_take(&fx->t, ref));
		assert_int_equal(alloc_table_find(&fx->t, &k1, &got, NULL), -ENOENT);
		assert_int_equal(alloc_table_find(&fx->t, &k4, &got, NULL), 0);
		assert_int_equal(alloc_table_insert(&fx->t, &k1, &in), 0);
		assert_int_equal(alloc_table_find(&fx->t, &k1, &got, &ref), 0);
		assert_int_equal(ref.idx, (home_of(&k1) + 1) & (SLOTS - 1));
		assert_int_equal(got.size, 1);
		assert_int_equal(alloc_table_insert(&fx->t, &k1, &in), -EEXIST);
	}
	/* The home's span: as far as the fifth, whatever was taken out since. */
	assert_int_equal(fx->t.slots[home_of(&(struct gm_alloc_key){ .tgid = 1234, .gen = 7,
			 .space = GM_SPACE_ADDR, .addr = addrs[0] })].span, 4);
	/* The first taken out: its slot, the home itself, is the next insert's. */
	{
		struct gm_alloc_key k0 = key_of(addrs[0]);
		uint64_t more[6];
		struct gm_alloc_key k5;
		struct gm_alloc_info in = info_of(2);

		assert_int_equal(colliding(more, 6), 6);
		k5 = key_of(more[5]);
		assert_int_equal(alloc_table_find(&fx->t, &k0, &got, &ref), 0);
		assert_true(alloc_table_take(&fx->t, ref));
		assert_int_equal(alloc_table_insert(&fx->t, &k5, &in), 0);
		assert_int_equal(alloc_table_find(&fx->t, &k5, &got, &ref), 0);
		assert_int_equal(ref.idx, home_of(&k5));
	}
}

static void test_a_take_succeeds_once_and_only_for_the_entry_seen(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_alloc_key k = key_of(0x7f0000200000);
	struct gm_alloc_info in = info_of(8192), got;
	struct alloc_ref old, now;

	assert_int_equal(alloc_table_insert(&fx->t, &k, &in), 0);
	assert_int_equal(alloc_table_find(&fx->t, &k, &got, &old), 0);
	assert_true(alloc_table_take(&fx->t, old));
	assert_false(alloc_table_take(&fx->t, old));	/* a second free of it */
	/* The address handed out again, in the same slot: the old sight of it takes nothing. */
	assert_int_equal(alloc_table_insert(&fx->t, &k, &in), 0);
	assert_int_equal(alloc_table_find(&fx->t, &k, &got, &now), 0);
	assert_int_equal(now.idx, old.idx);
	assert_int_not_equal(now.seen, old.seen);
	assert_false(alloc_table_take(&fx->t, old));
	assert_int_equal(alloc_table_find(&fx->t, &k, &got, NULL), 0);
	assert_true(alloc_table_take(&fx->t, now));
}

static void test_a_full_neighbourhood_is_refused_and_a_read_only_table_changes_nothing(
	void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	uint64_t addrs[GM_ALLOC_PROBES + 1];
	struct gm_alloc_info in = info_of(4096), got;
	struct alloc_table ro;

	assert_int_equal(colliding(addrs, GM_ALLOC_PROBES + 1), GM_ALLOC_PROBES + 1);
	for (int i = 0; i < GM_ALLOC_PROBES; i++) {
		struct gm_alloc_key k = key_of(addrs[i]);

		assert_int_equal(alloc_table_insert(&fx->t, &k, &in), 0);
	}
	{
		struct gm_alloc_key k = key_of(addrs[GM_ALLOC_PROBES]);

		assert_int_equal(alloc_table_insert(&fx->t, &k, &in), -ENOSPC);
		assert_int_equal(alloc_table_find(&fx->t, &k, &got, NULL), -ENOENT);
	}
	assert_int_equal(alloc_table_open(&ro, fx->fd, false), 0);
	{
		struct gm_alloc_key k = key_of(addrs[0]);
		struct alloc_ref ref;

		assert_int_equal(alloc_table_find(&ro, &k, &got, &ref), 0);
		assert_false(alloc_table_take(&ro, ref));
		assert_int_equal(alloc_table_insert(&ro, &k, &in), -EPERM);
	}
	alloc_table_close(&ro);
}

static void count_live(void *ctx, struct alloc_ref ref, const struct gm_alloc_key *key,
		       const struct gm_alloc_info *info)
{
	uint64_t *bytes = ctx;

	(void)ref;
	assert_int_equal(key->tgid, 1234);
	*bytes += info->size;
}

static void test_a_walk_sees_live_entries_only(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	uint64_t bytes = 0;
	struct alloc_ref ref;
	struct gm_alloc_info got;

	for (uint64_t i = 1; i <= 10; i++) {
		struct gm_alloc_key k = key_of(i << 21);
		struct gm_alloc_info in = info_of(i);

		assert_int_equal(alloc_table_insert(&fx->t, &k, &in), 0);
	}
	for (uint64_t i = 1; i <= 10; i += 2) {
		struct gm_alloc_key k = key_of(i << 21);

		assert_int_equal(alloc_table_find(&fx->t, &k, &got, &ref), 0);
		assert_true(alloc_table_take(&fx->t, ref));
	}
	assert_int_equal(alloc_table_walk(&fx->t, count_live, &bytes), 5);
	assert_int_equal(bytes, 2 + 4 + 6 + 8 + 10);
}

/* Two threads take every entry, racing: each entry is taken exactly once. */
struct racer {
	struct fixture *fx;
	struct alloc_ref *refs;
	size_t n, taken;
};

static void *race(void *arg)
{
	struct racer *r = arg;

	for (size_t i = 0; i < r->n; i++)
		r->taken += alloc_table_take(&r->fx->t, r->refs[i]);
	return NULL;
}

static void test_racing_takes_take_each_entry_once(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct alloc_ref refs[128];
	struct racer a, b;
	pthread_t ta, tb;

	for (int round = 0; round < 50; round++) {
		for (size_t i = 0; i < 128; i++) {
			struct gm_alloc_key k = key_of((uint64_t)(i + 1) << 21);
			struct gm_alloc_info in = info_of(i), got;

			assert_int_equal(alloc_table_insert(&fx->t, &k, &in), 0);
			assert_int_equal(alloc_table_find(&fx->t, &k, &got, &refs[i]), 0);
		}
		a = (struct racer){ .fx = fx, .refs = refs, .n = 128 };
		b = a;
		assert_int_equal(pthread_create(&ta, NULL, race, &a), 0);
		assert_int_equal(pthread_create(&tb, NULL, race, &b), 0);
		pthread_join(ta, NULL);
		pthread_join(tb, NULL);
		assert_int_equal(a.taken + b.taken, 128);
	}
}

/* Two threads insert keys of one home at once: every one is made live, found, and once. */
struct inserter {
	struct fixture *fx;
	const uint64_t *addrs;
	size_t n;
	int failed;
};

static void *insert_all(void *arg)
{
	struct inserter *r = arg;

	for (size_t i = 0; i < r->n; i++) {
		struct gm_alloc_key k = key_of(r->addrs[i]);
		struct gm_alloc_info in = info_of(r->addrs[i]);

		r->failed += alloc_table_insert(&r->fx->t, &k, &in) != 0;
	}
	return NULL;
}

static void test_racing_inserts_of_one_home_all_land(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	uint64_t addrs[40];
	struct inserter a, b;
	pthread_t ta, tb;
	uint64_t bytes = 0;

	assert_int_equal(colliding(addrs, 40), 40);
	a = (struct inserter){ .fx = fx, .addrs = addrs, .n = 20 };
	b = (struct inserter){ .fx = fx, .addrs = addrs + 20, .n = 20 };
	assert_int_equal(pthread_create(&ta, NULL, insert_all, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, insert_all, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	assert_int_equal(a.failed + b.failed, 0);
	for (size_t i = 0; i < 40; i++) {
		struct gm_alloc_key k = key_of(addrs[i]);
		struct gm_alloc_info got;

		assert_int_equal(alloc_table_find(&fx->t, &k, &got, NULL), 0);
		assert_int_equal(got.size, addrs[i]);
	}
	assert_int_equal(alloc_table_walk(&fx->t, count_live, &bytes), 40);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_table_of_a_map_that_is_not_one_is_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_colliding_keys_are_found_past_each_other_and_freed_slots_are_taken_again, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_a_take_succeeds_once_and_only_for_the_entry_seen,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_a_full_neighbourhood_is_refused_and_a_read_only_table_changes_nothing,
			setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_walk_sees_live_entries_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_racing_takes_take_each_entry_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_racing_inserts_of_one_home_all_land, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
