// SPDX-License-Identifier: GPL-2.0
/* The exporters' replay of call events (timeline.c): an address allocated again before the
 * free event of its last allocation arrives (another thread's free returns late) frees that
 * allocation first, and the late free event is taken as done. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "export/timeline.h"

#define PID 4242
#define ADDR 0x7e0000000000ull

static void apply_gen(struct timeline *t, uint32_t type, int32_t stack_id, uint64_t size,
		      uint32_t gen, struct tl_change *ch)
{
	struct gm_call_event ev = { .type = type, .pid = PID, .tid = PID, .stack_id = stack_id,
				    .addr = ADDR, .size = size, .gen = gen };
	struct snap_event se = { .ev = &ev, .wall_ns = 1000, .stack_id = stack_id };

	timeline_apply(t, &se, ch);
}

static void apply(struct timeline *t, uint32_t type, int32_t stack_id, uint64_t size,
		  struct tl_change *ch)
{
	apply_gen(t, type, stack_id, size, 1, ch);
}

/* A pid's next process whose predecessor's exit record was lost: its own record, and its
 * allocation at the predecessor's address is no reuse of it. */
static void test_another_generation_on_a_pid_is_another_process(void **state)
{
	struct timeline t = { 0 };
	struct tl_change ch;

	(void)state;
	apply_gen(&t, GM_REC_ALLOC, 1, 4096, 1, &ch);
	apply_gen(&t, GM_REC_ALLOC, 1, 8192, 2, &ch);
	assert_int_equal(t.nprocs, 2);
	assert_false(ch.early_free);
	assert_ptr_equal(ch.p, t.procs[1]);
	assert_int_equal(t.procs[0]->nlive, 1);
	timeline_free(&t);
}

static void test_an_address_reused_before_its_free_event_frees_the_old_allocation(void **state)
{
	struct timeline t = { 0 };
	struct tl_change ch;

	(void)state;
	apply(&t, GM_REC_ALLOC, 1, 4096, &ch);	/* thread A's */
	assert_int_equal(ch.what, TL_ALLOC);
	assert_false(ch.early_free);
	apply(&t, GM_REC_ALLOC, 2, 8192, &ch);	/* B's, at the address A is freeing */
	assert_int_equal(ch.what, TL_ALLOC);
	assert_true(ch.early_free);
	assert_int_equal(ch.early.size, 4096);
	assert_int_equal(ch.early_site->bytes, 0);	/* A's site holds nothing now */
	assert_int_equal(ch.site->bytes, 8192);
	apply(&t, GM_REC_FREE, 1, 4096, &ch);	/* A's free event, late: already done */
	assert_int_equal(ch.what, TL_NONE);
	assert_int_equal(t.procs[0]->nlive, 1);
	apply(&t, GM_REC_FREE, 2, 8192, &ch);	/* B's own */
	assert_int_equal(ch.what, TL_FREE);
	assert_int_equal(ch.alloc.size, 8192);
	assert_int_equal(t.procs[0]->nlive, 0);
	assert_int_equal(t.procs[0]->unmatched_frees, 0);
	timeline_free(&t);
}

static void test_a_free_with_no_allocation_is_counted(void **state)
{
	struct timeline t = { 0 };
	struct tl_change ch;

	(void)state;
	apply(&t, GM_REC_FREE, 1, 4096, &ch);
	assert_int_equal(ch.what, TL_NONE);
	assert_int_equal(t.procs[0]->unmatched_frees, 1);
	timeline_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_an_address_reused_before_its_free_event_frees_the_old_allocation),
		cmocka_unit_test(test_a_free_with_no_allocation_is_counted),
		cmocka_unit_test(test_another_generation_on_a_pid_is_another_process),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
