// SPDX-License-Identifier: GPL-2.0
/* The JSON writer: nesting and commas, escapes, invalid UTF-8, null strings, hex; and the
 * plain-text sanitizer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "output/json.h"

struct capture {
	char *buf;
	size_t len;
	FILE *f;
	struct json_writer *w;
};

static int capture_setup(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));

	if (!c)
		return -1;
	c->f = open_memstream(&c->buf, &c->len);
	c->w = c->f ? jw_new(c->f) : NULL;
	if (!c->w)
		return -1;
	*state = c;
	return 0;
}

static int capture_teardown(void **state)
{
	struct capture *c = *state;

	jw_free(c->w);
	fclose(c->f);
	free(c->buf);
	free(c);
	return 0;
}

/* What the writer has produced so far. */
static const char *output(void **state)
{
	struct capture *c = *state;

	fflush(c->f);
	return c->buf;
}

static struct json_writer *writer(void **state)
{
	return ((struct capture *)*state)->w;
}

static void test_json_nested_objects_and_arrays_get_commas(void **state)
{
	struct json_writer *w = writer(state);

	jw_object_begin(w);
	jw_kv_u64(w, "version", 1);
	jw_key(w, "processes");
	jw_array_begin(w);
	jw_object_begin(w);
	jw_kv_i64(w, "pid", 42);
	jw_key(w, "frames");
	jw_array_begin(w);
	jw_u64(w, 1);
	jw_u64(w, 2);
	jw_array_begin(w);
	jw_array_end(w);
	jw_object_begin(w);
	jw_object_end(w);
	jw_array_end(w);
	jw_kv_bool(w, "alive", false);
	jw_object_end(w);
	jw_object_begin(w);
	jw_kv_bool(w, "alive", true);
	jw_object_end(w);
	jw_array_end(w);
	jw_kv_null(w, "container");
	jw_object_end(w);
	assert_string_equal(output(state),
			    "{\"version\":1,\"processes\":[{\"pid\":42,\"frames\":[1,2,[],{}],"
			    "\"alive\":false},{\"alive\":true}],\"container\":null}");
}

static void test_json_empty_containers(void **state)
{
	struct json_writer *w = writer(state);

	jw_object_begin(w);
	jw_key(w, "a");
	jw_array_begin(w);
	jw_array_end(w);
	jw_key(w, "o");
	jw_object_begin(w);
	jw_object_end(w);
	jw_object_end(w);
	assert_string_equal(output(state), "{\"a\":[],\"o\":{}}");
}

static void test_json_deep_nesting_keeps_commas(void **state)
{
	struct json_writer *w = writer(state);
	char expect[1024];
	size_t n = 0;
	int i;

	for (i = 0; i < 100; i++)
		jw_array_begin(w);
	jw_u64(w, 1);
	jw_u64(w, 2);
	for (i = 0; i < 100; i++)
		jw_array_end(w);
	jw_u64(w, 3);	/* top level: no comma between documents */
	for (i = 0; i < 100; i++)
		expect[n++] = '[';
	n += sprintf(expect + n, "1,2");
	for (i = 0; i < 100; i++)
		expect[n++] = ']';
	strcpy(expect + n, "3");
	assert_string_equal(output(state), expect);
}

static void test_json_newline_separates_documents(void **state)
{
	struct json_writer *w = writer(state);

	jw_object_begin(w);
	jw_kv_string(w, "event", "alloc");
	jw_object_end(w);
	jw_newline(w);
	jw_object_begin(w);
	jw_kv_string(w, "event", "free");
	jw_object_end(w);
	jw_newline(w);
	assert_string_equal(output(state), "{\"event\":\"alloc\"}\n{\"event\":\"free\"}\n");
}

static void test_json_escapes_quote_and_backslash(void **state)
{
	jw_string(writer(state), "a\"b\\c/d");
	assert_string_equal(output(state), "\"a\\\"b\\\\c/d\"");
}

static void test_json_escapes_control_chars(void **state)
{
	jw_string(writer(state), "\n\t\r\b\f\x01\x1f\x7f|");
	assert_string_equal(output(state), "\"\\n\\t\\r\\b\\f\\u0001\\u001f\\u007f|\"");
}

static void test_json_escapes_embedded_nul_with_length(void **state)
{
	jw_string_len(writer(state), "a\0b", 3);
	assert_string_equal(output(state), "\"a\\u0000b\"");
}

static void test_json_string_len_stops_at_len(void **state)
{
	jw_string_len(writer(state), "python3 train.py", 7);
	assert_string_equal(output(state), "\"python3\"");
}

static void test_json_keys_are_escaped(void **state)
{
	struct json_writer *w = writer(state);

	jw_object_begin(w);
	jw_kv_u64(w, "k\"\n", 1);
	jw_object_end(w);
	assert_string_equal(output(state), "{\"k\\\"\\n\":1}");
}

/* A key the compiler knows to be plain goes out unscanned; one it does not know (text that came
 * from outside, in a buffer) is escaped however it is spelled. */
static void test_json_only_plain_literal_keys_skip_the_escape(void **state)
{
	struct json_writer *w = writer(state);
	const char *env = getenv("GPUMEM_UNIT_NO_SUCH_VARIABLE");
	char outside[8];

	snprintf(outside, sizeof(outside), "%s", env ? env : "k\"\x01");
	jw_object_begin(w);
	jw_kv_u64(w, "time_ns", 1);
	jw_kv_u64(w, outside, 2);
	jw_key(w, "api");
	jw_string_spelled(w, "cudaMalloc");
	jw_object_end(w);
	assert_string_equal(output(state),
			    "{\"time_ns\":1,\"k\\\"\\u0001\":2,\"api\":\"cudaMalloc\"}");
}

/* The escape of one byte as the writer's contract says (a lone byte of 0x80 and above is
 * invalid UTF-8). */
static void expected_escape(unsigned char c, char *out, size_t len)
{
	if (c == '"' || c == '\\')
		snprintf(out, len, "\\%c", c);
	else if (c == '\n')
		snprintf(out, len, "\\n");
	else if (c >= 0x80)
		snprintf(out, len, "\\ufffd");
	else if (c < 0x20 || c == 0x7f)
		snprintf(out, len, "\\u%04x", c);
	else
		snprintf(out, len, "%c", c);
}

/* Plain strings are scanned eight bytes at a time: a byte that needs escaping is found at
 * every position of every word and of the tail, in values and in keys. */
static void test_json_escapes_at_every_position_of_a_word(void **state)
{
	static const unsigned char specials[] = { '"', '\\', '\n', 0x01, 0x1f, 0x20, 0x7e, 0x7f,
						  0x80, 0xff };
	(void)state;

	for (size_t len = 1; len <= 20; len++) {
		for (size_t pos = 0; pos < len; pos++) {
			for (size_t k = 0; k < sizeof(specials); k++) {
				char in[32], want[96], esc[8], *buf = NULL;
				size_t blen = 0;
				FILE *f = open_memstream(&buf, &blen);
				struct json_writer *w = f ? jw_new(f) : NULL;

				assert_non_null(w);
				memset(in, 'x', len);
				in[pos] = (char)specials[k];
				in[len] = '\0';
				expected_escape(specials[k], esc, sizeof(esc));
				snprintf(want, sizeof(want), "{\"%.*s%s%.*s\":\"%.*s%s%.*s\"}",
					 (int)pos, in, esc, (int)(len - pos - 1), in + pos + 1,
					 (int)pos, in, esc, (int)(len - pos - 1), in + pos + 1);
				jw_object_begin(w);
				jw_key(w, in);
				jw_string_len(w, in, len);
				jw_object_end(w);
				jw_free(w);
				fclose(f);
				assert_string_equal(buf, want);
				free(buf);
			}
		}
	}
}

/* Members written by the caller take their place among the others: commas before and after. */
static void test_json_members_in_one_piece_get_commas(void **state)
{
	struct json_writer *w = writer(state);

	jw_object_begin(w);
	jw_members(w, "\"a\":null", 8);
	jw_kv_u64(w, "b", 1);
	jw_members(w, "\"c\":2,\"d\":3", 11);
	jw_object_end(w);
	assert_string_equal(output(state), "{\"a\":null,\"b\":1,\"c\":2,\"d\":3}");
}

static void test_json_valid_utf8_passes_through(void **state)
{
	/* 2-, 3- and 4-byte sequences: é, €, U+10FFFF, 😀 */
	jw_string(writer(state), "\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf\xf0\x9f\x98\x80");
	assert_string_equal(output(state),
			    "\"\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf\xf0\x9f\x98\x80\"");
}

static void test_json_invalid_utf8_becomes_replacement_char(void **state)
{
	struct json_writer *w = writer(state);

	jw_array_begin(w);
	jw_string(w, "a\xff" "b");		/* never valid */
	jw_string(w, "\xc3");			/* truncated at end */
	jw_string(w, "\xc3(");			/* bad continuation */
	jw_string(w, "\xc0\xaf");		/* overlong '/' */
	jw_string(w, "\xe0\x80\xaf");		/* overlong 3-byte */
	jw_string(w, "\xed\xa0\x80");		/* surrogate U+D800 */
	jw_string(w, "\xf4\x90\x80\x80");	/* above U+10FFFF */
	jw_string(w, "\x80z");			/* lone continuation */
	jw_array_end(w);
	assert_string_equal(output(state),
			    "[\"a\\ufffdb\",\"\\ufffd\",\"\\ufffd(\",\"\\ufffd\\ufffd\","
			    "\"\\ufffd\\ufffd\\ufffd\",\"\\ufffd\\ufffd\\ufffd\","
			    "\"\\ufffd\\ufffd\\ufffd\\ufffd\",\"\\ufffdz\"]");
}

static void test_json_null_string_writes_null(void **state)
{
	struct json_writer *w = writer(state);

	jw_array_begin(w);
	jw_string(w, NULL);
	jw_string_len(w, NULL, 5);
	jw_string(w, "");
	jw_array_end(w);
	jw_object_begin(w);
	jw_kv_string(w, "symbol", NULL);
	jw_object_end(w);
	assert_string_equal(output(state), "[null,null,\"\"]{\"symbol\":null}");
}

static void test_json_hex_is_a_lowercase_string(void **state)
{
	struct json_writer *w = writer(state);

	jw_array_begin(w);
	jw_hex(w, 0x1a2b);
	jw_hex(w, 0);
	jw_hex(w, UINT64_MAX);
	jw_array_end(w);
	jw_object_begin(w);
	jw_kv_hex(w, "addr", 0x7f00deadbeefULL);
	jw_object_end(w);
	assert_string_equal(output(state),
			    "[\"0x1a2b\",\"0x0\",\"0xffffffffffffffff\"]"
			    "{\"addr\":\"0x7f00deadbeef\"}");
}

static void test_json_numbers_full_range(void **state)
{
	struct json_writer *w = writer(state);

	jw_array_begin(w);
	jw_u64(w, UINT64_MAX);
	jw_i64(w, INT64_MIN);
	jw_i64(w, -1);
	jw_bool(w, true);
	jw_null(w);
	jw_array_end(w);
	assert_string_equal(output(state),
			    "[18446744073709551615,-9223372036854775808,-1,true,null]");
}

static void test_text_sanitize_replaces_control_chars(void **state)
{
	char dst[64];

	(void)state;
	text_sanitize(dst, sizeof(dst), "a\nb\tc\x1b[31md\x7f");
	assert_string_equal(dst, "a?b?c?[31md?");
}

static void test_text_sanitize_replaces_invalid_utf8_and_c1(void **state)
{
	char dst[64];

	(void)state;
	/* é stays; a lone 0x9b (8-bit CSI), U+009B encoded, and 0xff become '?' */
	text_sanitize(dst, sizeof(dst), "\xc3\xa9\x9b\xc2\x9bx\xff");
	assert_string_equal(dst, "\xc3\xa9??x?");
}

static void test_text_sanitize_truncates_at_char_boundary(void **state)
{
	char dst[5];

	(void)state;
	text_sanitize(dst, sizeof(dst), "abc\xe2\x82\xac");	/* "abc€" needs 7 bytes */
	assert_string_equal(dst, "abc");
	text_sanitize(dst, sizeof(dst), "abcdefgh");
	assert_string_equal(dst, "abcd");
	text_sanitize(dst, sizeof(dst), NULL);
	assert_string_equal(dst, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, capture_setup, capture_teardown)
		T(test_json_nested_objects_and_arrays_get_commas),
		T(test_json_empty_containers),
		T(test_json_deep_nesting_keeps_commas),
		T(test_json_newline_separates_documents),
		T(test_json_escapes_quote_and_backslash),
		T(test_json_escapes_control_chars),
		T(test_json_escapes_embedded_nul_with_length),
		T(test_json_string_len_stops_at_len),
		T(test_json_keys_are_escaped),
		T(test_json_only_plain_literal_keys_skip_the_escape),
		T(test_json_members_in_one_piece_get_commas),
		cmocka_unit_test(test_json_escapes_at_every_position_of_a_word),
		T(test_json_valid_utf8_passes_through),
		T(test_json_invalid_utf8_becomes_replacement_char),
		T(test_json_null_string_writes_null),
		T(test_json_hex_is_a_lowercase_string),
		T(test_json_numbers_full_range),
#undef T
		cmocka_unit_test(test_text_sanitize_replaces_control_chars),
		cmocka_unit_test(test_text_sanitize_replaces_invalid_utf8_and_c1),
		cmocka_unit_test(test_text_sanitize_truncates_at_char_boundary),
	};

	return cmocka_run_group_tests_name("json", tests, NULL, NULL);
}
