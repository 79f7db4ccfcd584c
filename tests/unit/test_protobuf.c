// SPDX-License-Identifier: GPL-2.0
/* The protocol-buffers encoder: varints at their boundaries, tags, strings, nested messages
 * and packed fields, byte for byte as the protobuf encoding documentation spells them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "export/protobuf.h"

#define assert_encoded(buf, ...)                                                                   \
	do {                                                                                       \
		const uint8_t want_[] = { __VA_ARGS__ };                                           \
		assert_int_equal((buf)->len, sizeof(want_));                                       \
		assert_memory_equal((buf)->data, want_, sizeof(want_));                            \
	} while (0)

static void test_varint_boundaries(void **state)
{
	struct pb_buf b = { 0 };

	(void)state;
	pb_varint(&b, 0);
	assert_encoded(&b, 0x00);
	pb_reset(&b);
	pb_varint(&b, 127);
	assert_encoded(&b, 0x7f);
	pb_reset(&b);
	pb_varint(&b, 128);
	assert_encoded(&b, 0x80, 0x01);
	pb_reset(&b);
	pb_varint(&b, 300);
	assert_encoded(&b, 0xac, 0x02);
	pb_reset(&b);
	pb_varint(&b, UINT64_MAX);
	assert_encoded(&b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	pb_free(&b);
}

static void test_negative_int64_takes_ten_bytes(void **state)
{
	struct pb_buf b = { 0 };

	(void)state;
	pb_field_varint(&b, 3, (uint64_t)(int64_t)-1);
	assert_encoded(&b, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	pb_free(&b);
}

static void test_varint_field_150(void **state)
{
	struct pb_buf b = { 0 };

	(void)state;
	pb_field_varint(&b, 1, 150);
	assert_encoded(&b, 0x08, 0x96, 0x01);
	pb_free(&b);
}

static void test_string_field_and_empty_string(void **state)
{
	struct pb_buf b = { 0 };

	(void)state;
	pb_field_string(&b, 2, "testing");
	assert_encoded(&b, 0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g');
	pb_reset(&b);
	pb_field_string(&b, 6, NULL);
	assert_encoded(&b, 0x32, 0x00);
	pb_free(&b);
}

static void test_nested_message_is_length_delimited(void **state)
{
	struct pb_buf outer = { 0 }, inner = { 0 };

	(void)state;
	pb_field_varint(&inner, 1, 150);
	pb_field_message(&outer, 3, &inner);
	assert_encoded(&outer, 0x1a, 0x03, 0x08, 0x96, 0x01);
	pb_free(&outer);
	pb_free(&inner);
}

static void test_packed_repeated_varints(void **state)
{
	const uint64_t v[] = { 3, 270, 86942 };
	struct pb_buf b = { 0 };

	(void)state;
	pb_field_packed(&b, 4, v, 3);
	assert_encoded(&b, 0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05);
	pb_reset(&b);
	pb_field_packed(&b, 4, v, 0);
	assert_int_equal(b.len, 0);
	pb_free(&b);
}

static void test_large_field_numbers_and_long_payloads(void **state)
{
	struct pb_buf b = { 0 };
	char text[200];

	(void)state;
	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	pb_field_string(&b, 16, text);	/* tag 16<<3|2 = 130: two bytes; length 199: two */
	assert_int_equal(b.len, 2 + 2 + 199);
	assert_int_equal(b.data[0], 0x82);
	assert_int_equal(b.data[1], 0x01);
	assert_int_equal(b.data[2], 0xc7);
	assert_int_equal(b.data[3], 0x01);
	assert_int_equal(b.data[4], 'x');
	pb_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varint_boundaries),
		cmocka_unit_test(test_negative_int64_takes_ten_bytes),
		cmocka_unit_test(test_varint_field_150),
		cmocka_unit_test(test_string_field_and_empty_string),
		cmocka_unit_test(test_nested_message_is_length_delimited),
		cmocka_unit_test(test_packed_repeated_varints),
		cmocka_unit_test(test_large_field_numbers_and_long_payloads),
	};

	return cmocka_run_group_tests_name("protobuf", tests, NULL, NULL);
}
