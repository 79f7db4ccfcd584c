// SPDX-License-Identifier: GPL-2.0
/* The site and process tables from userspace, on real mapped BPF arrays: sites found past
 * others of the same home, as far as the home's span; a slot taken out made again by the next
 * site; a take only of the entry a walk saw, once; a full neighbourhood refused; an
 * allocation's slot named back to its site's key; a process table of the other layout. The
 * BPF programs follow the same protocol (gpumem.h); the integration tests check them. */
#include <setjmp.h>
#include <stdarg.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "model/slot_table.h"

#define SLOTS 64u	/* GM_SLOT_PROBES: a key may look at every slot */

struct fixture {
	int fd;
	struct slot_table t;
};

static char skip_reason[160];

static int setup(void **state)
{
	static struct fixture fx;
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);

	memset(&fx, 0, sizeof(fx));
	fx.fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "gm_sites", sizeof(__u32),
			       sizeof(struct gm_site_slot), SLOTS, &opts);
	if (fx.fd < 0) {
		snprintf(skip_reason, sizeof(skip_reason), "cannot create a BPF array: %s%s",
			 strerror(errno), errno == EPERM ? " (run as root or with CAP_BPF)" : "");
		*state = NULL;
		return 0;
	}
	assert_int_equal(slot_table_open(&fx.t, fx.fd, true, &site_slots), 0);
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	if (fx) {
		slot_table_close(&fx->t);
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

static struct gm_site_key key_of(int32_t stack_id)
{
	return (struct gm_site_key){ .tgid = 1234, .gen = 7, .stack_id = stack_id, .api = 0,
				     .kind = GM_KIND_DEVICE, .py_stack_id = -1, .gpu = 1 };
}

/* n stack ids whose sites' probes all start at the same slot. */
static size_t colliding(int32_t *out, size_t n)
{
	struct gm_site_key first = key_of(1);
	uint32_t home = gm_site_home(&first, SLOTS - 1);
	size_t got = 0;

	out[got++] = 1;
	for (int32_t id = 2; got < n; id++) {
		struct gm_site_key k = key_of(id);

		if (gm_site_home(&k, SLOTS - 1) == home)
			out[got++] = id;
	}
	return got;
}

static struct gm_site_stats stats_of(uint64_t bytes)
{
	return (struct gm_site_stats){ .current_bytes = bytes, .current_allocs = 1,
				       .alloc_count = 1, .alloc_bytes_total = bytes };
}

static void test_table_of_a_map_that_is_not_one_is_refused(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct slot_table t;
	int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "gm_h", 8, 8, 16, NULL);

	assert_true(fd >= 0);
	assert_int_equal(slot_table_open(&t, fd, false, &site_slots), -EINVAL);
	assert_null(t.slots);
	close(fd);
	assert_int_equal(slot_table_open(&t, -1, false, &site_slots), -EBADF);
	/* A site table is no process table: its slots are of another size. */
	assert_int_equal(slot_table_open(&t, fx->fd, false, &proc_slots), -EINVAL);
}

static void test_colliding_sites_are_found_past_each_other_and_a_freed_slot_is_made_again(
	void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_site_stats got, want;
	struct gm_site_key k;
	struct slot_ref ref;
	int32_t ids[4];
	int slot[4];

	assert_int_equal(colliding(ids, 4), 4);
	for (int i = 0; i < 4; i++) {
		k = key_of(ids[i]);
		want = stats_of(4096u * (i + 1));
		slot[i] = slot_table_insert(&fx->t, &k, &want);
		assert_int_equal(slot[i], (gm_site_home(&k, SLOTS - 1) + i) & (SLOTS - 1));
		assert_int_equal(slot_table_insert(&fx->t, &k, &want), -EEXIST);
	}
	for (int i = 0; i < 4; i++) {
		k = key_of(ids[i]);
		want = stats_of(4096u * (i + 1));
		assert_int_equal(slot_table_find(&fx->t, &k, &got, NULL), slot[i]);
		assert_memory_equal(&got, &want, sizeof(got));
	}
	/* The second taken out: the third is still found past the hole; the next new site of
	 * that home takes the hole. */
	k = key_of(ids[1]);
	assert_true(slot_table_find(&fx->t, &k, NULL, &ref) >= 0);
	assert_true(slot_table_take(&fx->t, ref));
	assert_int_equal(slot_table_find(&fx->t, &k, NULL, NULL), -ENOENT);
	k = key_of(ids[2]);
	assert_int_equal(slot_table_find(&fx->t, &k, NULL, NULL), slot[2]);
	k = key_of(ids[1]);
	want = stats_of(1);
	assert_int_equal(slot_table_insert(&fx->t, &k, &want), slot[1]);
}

static void test_a_take_succeeds_once_and_only_for_the_entry_seen(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_site_key k = key_of(5);
	struct gm_site_stats v = stats_of(100);
	struct slot_ref first, again;

	assert_true(slot_table_insert(&fx->t, &k, &v) >= 0);
	assert_true(slot_table_find(&fx->t, &k, NULL, &first) >= 0);
	assert_true(slot_table_take(&fx->t, first));
	assert_false(slot_table_take(&fx->t, first));
	/* Made again in the same slot: the old sighting does not take the new entry. */
	assert_int_equal(slot_table_insert(&fx->t, &k, &v), (int)first.idx);
	assert_true(slot_table_find(&fx->t, &k, NULL, &again) >= 0);
	assert_int_equal(again.idx, first.idx);
	assert_int_not_equal(again.seen, first.seen);
	assert_false(slot_table_take(&fx->t, first));
	assert_true(slot_table_take(&fx->t, again));
}

static void test_a_full_neighbourhood_is_refused_and_a_read_only_table_changes_nothing(
	void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_site_stats v = stats_of(1);
	struct slot_table ro;
	struct gm_site_key k;
	int made = 0, refused = 0;

	/* Every key may look at every slot (SLOTS): the table is full at SLOTS sites. */
	for (int32_t id = 1; made < (int)SLOTS + 1; id++) {
		k = key_of(id);
		if (slot_table_insert(&fx->t, &k, &v) >= 0) {
			made++;
			continue;
		}
		refused++;
		break;
	}
	assert_int_equal(made, SLOTS);
	assert_int_equal(refused, 1);
	assert_int_equal(slot_table_open(&ro, fx->fd, false, &site_slots), 0);
	k = key_of(1);
	assert_int_equal(slot_table_insert(&ro, &k, &v), -EPERM);
	assert_false(slot_table_take(&ro, (struct slot_ref){ .idx = 0, .seen = 2 }));
	slot_table_close(&ro);
}

static void count_live(void *ctx, struct slot_ref ref, const void *key, const void *value)
{
	const struct gm_site_stats *stats = value;
	uint64_t *bytes = ctx;

	(void)ref;
	(void)key;
	*bytes += stats->current_bytes;
}

static void test_a_walk_sees_live_entries_and_a_slot_names_its_key(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_site_key k, got;
	struct gm_site_stats v;
	struct slot_ref ref;
	uint64_t bytes = 0;
	int slot = -1;

	for (int32_t id = 1; id <= 3; id++) {
		k = key_of(id);
		v = stats_of(1000u * id);
		slot = slot_table_insert(&fx->t, &k, &v);
		assert_true(slot >= 0);
	}
	assert_true(slot_table_key(&fx->t, (uint32_t)slot, &got));
	assert_memory_equal(&got, &k, sizeof(k));
	assert_true(slot_table_find(&fx->t, &k, NULL, &ref) >= 0);
	assert_true(slot_table_take(&fx->t, ref));
	assert_false(slot_table_key(&fx->t, (uint32_t)slot, &got));
	assert_false(slot_table_key(&fx->t, GM_NO_SITE, &got));
	assert_int_equal(slot_table_walk(&fx->t, count_live, &bytes), 2);
	assert_int_equal(bytes, 3000);
}

/* The process table's layout: keys of two words, values of a process's numbers. */
static void test_a_process_table_finds_and_takes_its_entries(void **state)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
	struct gm_proc_stats v = { .current_bytes = 4096, .peak_bytes = 8192 }, got;
	struct gm_proc_key a = { 4000001, 7 }, b = { 4000001, 8 };
	struct slot_table t;
	struct slot_ref ref;
	int fd, slot;

	fixture_or_skip(state);
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "gm_procs", sizeof(__u32),
			    sizeof(struct gm_proc_slot), SLOTS, &opts);
	assert_true(fd >= 0);
	assert_int_equal(slot_table_open(&t, fd, true, &proc_slots), 0);
	slot = slot_table_insert(&t, &a, &v);
	assert_int_equal(slot, gm_proc_home(a.tgid, a.gen, SLOTS - 1));
	assert_int_equal(slot_table_find(&t, &b, NULL, NULL), -ENOENT);	/* another generation */
	assert_int_equal(slot_table_find(&t, &a, &got, &ref), slot);
	assert_memory_equal(&got, &v, sizeof(got));
	assert_true(slot_table_take(&t, ref));
	assert_int_equal(slot_table_find(&t, &a, NULL, NULL), -ENOENT);
	slot_table_close(&t);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_table_of_a_map_that_is_not_one_is_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_colliding_sites_are_found_past_each_other_and_a_freed_slot_is_made_again,
			setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_take_succeeds_once_and_only_for_the_entry_seen,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_a_full_neighbourhood_is_refused_and_a_read_only_table_changes_nothing,
			setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_walk_sees_live_entries_and_a_slot_names_its_key,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_process_table_finds_and_takes_its_entries,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
