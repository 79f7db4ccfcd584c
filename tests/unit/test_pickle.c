// SPDX-License-Identifier: GPL-2.0
/* The pickle writer: each int at the edges of its opcode, strings (invalid UTF-8 replaced),
 * dicts, lists, None and bools, memo references; byte for byte what Python's pickle.dumps
 * writes for the same values with protocol 2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "export/pickle.h"

#define assert_pickled(p, ...)                                                                     \
	do {                                                                                       \
		const uint8_t want_[] = { __VA_ARGS__ };                                           \
		assert_int_equal((p)->len, sizeof(want_));                                         \
		assert_memory_equal((p)->data, want_, sizeof(want_));                              \
	} while (0)

/* One value pickled whole: PROTO 2, the value, STOP. */
static struct pickle *one_int(int64_t v)
{
	static struct pickle p;

	pk_free(&p);
	pk_begin(&p);
	pk_int(&p, v);
	pk_end(&p);
	return &p;
}

static void test_small_ints_use_binint1_and_binint2(void **state)
{
	(void)state;
	assert_pickled(one_int(0), 0x80, 2, 'K', 0x00, '.');
	assert_pickled(one_int(255), 0x80, 2, 'K', 0xff, '.');
	assert_pickled(one_int(256), 0x80, 2, 'M', 0x00, 0x01, '.');
	assert_pickled(one_int(65535), 0x80, 2, 'M', 0xff, 0xff, '.');
}

static void test_int32_uses_binint(void **state)
{
	(void)state;
	assert_pickled(one_int(65536), 0x80, 2, 'J', 0x00, 0x00, 0x01, 0x00, '.');
	assert_pickled(one_int(-1), 0x80, 2, 'J', 0xff, 0xff, 0xff, 0xff, '.');
	assert_pickled(one_int(INT32_MAX), 0x80, 2, 'J', 0xff, 0xff, 0xff, 0x7f, '.');
	assert_pickled(one_int(INT32_MIN), 0x80, 2, 'J', 0x00, 0x00, 0x00, 0x80, '.');
}

static void test_large_ints_use_the_shortest_long1(void **state)
{
	(void)state;
	/* 2**31 needs a fifth byte for its sign */
	assert_pickled(one_int(2147483648LL), 0x80, 2, 0x8a, 5, 0, 0, 0, 0x80, 0, '.');
	assert_pickled(one_int(1LL << 40), 0x80, 2, 0x8a, 6, 0, 0, 0, 0, 0, 1, '.');
	assert_pickled(one_int(-(1LL << 40)), 0x80, 2, 0x8a, 6, 0, 0, 0, 0, 0, 0xff, '.');
	assert_pickled(one_int(INT64_MIN), 0x80, 2, 0x8a, 8, 0, 0, 0, 0, 0, 0, 0, 0x80, '.');
	/* an address as the kernel hands it out */
	assert_pickled(one_int(0x7e0000000000LL), 0x80, 2, 0x8a, 6, 0, 0, 0, 0, 0, 0x7e, '.');
}

static void test_uint64_above_int64_max_takes_nine_bytes(void **state)
{
	struct pickle p = { 0 };

	(void)state;
	pk_uint(&p, UINT64_MAX);
	assert_pickled(&p, 0x8a, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00);
	pk_free(&p);
	pk_uint(&p, 7);
	assert_pickled(&p, 'K', 7);
	pk_free(&p);
}

static void test_strings_are_binunicode_with_invalid_bytes_replaced(void **state)
{
	struct pickle p = { 0 };

	(void)state;
	pk_str(&p, "\xc3\xa9");
	assert_pickled(&p, 'X', 2, 0, 0, 0, 0xc3, 0xa9);
	pk_free(&p);
	pk_str(&p, "a\xff");
	assert_pickled(&p, 'X', 4, 0, 0, 0, 'a', 0xef, 0xbf, 0xbd);
	pk_free(&p);
	pk_str(&p, "");
	assert_pickled(&p, 'X', 0, 0, 0, 0);
	pk_free(&p);
	pk_str(&p, NULL);
	assert_pickled(&p, 'N');
	pk_free(&p);
}

static void test_dict_list_none_and_bools(void **state)
{
	struct pickle p = { 0 };

	(void)state;
	/* {"a": None, "b": [True, False]} */
	pk_dict_begin(&p);
	pk_str(&p, "a");
	pk_none(&p);
	pk_str(&p, "b");
	pk_list_begin(&p);
	pk_bool(&p, true);
	pk_bool(&p, false);
	pk_list_end(&p);
	pk_dict_end(&p);
	assert_pickled(&p, '}', '(', 'X', 1, 0, 0, 0, 'a', 'N', 'X', 1, 0, 0, 0, 'b', ']', '(',
		       0x88, 0x89, 'e', 'u');
	pk_free(&p);
}

static void test_memo_ids_switch_to_four_bytes_past_255(void **state)
{
	struct pickle p = { 0 };
	uint32_t id;

	(void)state;
	id = pk_memo_put(&p);
	assert_int_equal(id, 0);
	pk_memo_get(&p, id);
	assert_pickled(&p, 'q', 0, 'h', 0);
	pk_free(&p);
	p.next_memo = 256;
	id = pk_memo_put(&p);
	pk_memo_get(&p, id);
	assert_pickled(&p, 'r', 0, 1, 0, 0, 'j', 0, 1, 0, 0);
	pk_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_ints_use_binint1_and_binint2),
		cmocka_unit_test(test_int32_uses_binint),
		cmocka_unit_test(test_large_ints_use_the_shortest_long1),
		cmocka_unit_test(test_uint64_above_int64_max_takes_nine_bytes),
		cmocka_unit_test(test_strings_are_binunicode_with_invalid_bytes_replaced),
		cmocka_unit_test(test_dict_list_none_and_bools),
		cmocka_unit_test(test_memo_ids_switch_to_four_bytes_past_255),
	};

	return cmocka_run_group_tests_name("pickle", tests, NULL, NULL);
}
