/* SPDX-License-Identifier: GPL-2.0 */
/* The one escaping JSON writer (compact output, commas kept by a nesting stack), and the
 * plain-text sanitizer for readable views. Strings from processes are untrusted input. */
#ifndef GPUMEM_JSON_H
#define GPUMEM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct json_writer;

struct json_writer *jw_new(FILE *out);
void jw_free(struct json_writer *w);

void jw_object_begin(struct json_writer *w);
void jw_object_end(struct json_writer *w);
void jw_array_begin(struct json_writer *w);
void jw_array_end(struct json_writer *w);

/* The next value belongs to key (escaped like any string; its length is the compiler's
 * when key is a literal, as most are: jw_key and the jw_kv_ functions are inline). */
void jw_key_len(struct json_writer *w, const char *key, size_t len);
/* A string gpumem's own source spells (a key, a name from its tables): plain JSON text by
 * construction, written without the scan for bytes to escape; never text from outside. */
void jw_key_spelled(struct json_writer *w, const char *key, size_t len);
void jw_string_spelled(struct json_writer *w, const char *s);

/* The bytes a JSON string cannot hold as they are (or that need a look at their UTF-8). */
#define JW_NOT_PLAIN "\"\\\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f" \
	"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f" \
	"\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f" \
	"\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f" \
	"\xa0\xa1\xa2\xa3\xa4\xa5\xa6\xa7\xa8\xa9\xaa\xab\xac\xad\xae\xaf" \
	"\xb0\xb1\xb2\xb3\xb4\xb5\xb6\xb7\xb8\xb9\xba\xbb\xbc\xbd\xbe\xbf" \
	"\xc0\xc1\xc2\xc3\xc4\xc5\xc6\xc7\xc8\xc9\xca\xcb\xcc\xcd\xce\xcf" \
	"\xd0\xd1\xd2\xd3\xd4\xd5\xd6\xd7\xd8\xd9\xda\xdb\xdc\xdd\xde\xdf" \
	"\xe0\xe1\xe2\xe3\xe4\xe5\xe6\xe7\xe8\xe9\xea\xeb\xec\xed\xee\xef" \
	"\xf0\xf1\xf2\xf3\xf4\xf5\xf6\xf7\xf8\xf9\xfa\xfb\xfc\xfd\xfe\xff"

/* A key whose text the compiler knows and finds plain (a literal of gpumem's: both fold) goes
 * out without the scan; any other is escaped. */
static inline void jw_key(struct json_writer *w, const char *key)
{
	if (key && __builtin_constant_p(__builtin_strcspn(key, JW_NOT_PLAIN) ==
					__builtin_strlen(key)) &&
	    __builtin_strcspn(key, JW_NOT_PLAIN) == __builtin_strlen(key))
		jw_key_spelled(w, key, __builtin_strlen(key));
	else
		jw_key_len(w, key, key ? __builtin_strlen(key) : 0);
}

/* NULL writes null. Invalid UTF-8 becomes U+FFFD; control characters are escaped. */
void jw_string(struct json_writer *w, const char *s);
void jw_string_len(struct json_writer *w, const char *s, size_t len);
void jw_u64(struct json_writer *w, uint64_t v);
void jw_i64(struct json_writer *w, int64_t v);
/* A number; NaN and infinities (which JSON cannot say) write null. */
void jw_double(struct json_writer *w, double v);
void jw_bool(struct json_writer *w, bool v);
void jw_null(struct json_writer *w);
/* A value already written as JSON by a writer of its own (one complete value). */
void jw_raw(struct json_writer *w, const char *json, size_t len);
/* Members of the object being written, already written as JSON by the caller
 * ("\"a\":1,\"b\":null": keys and values of its own, never untrusted text), in one piece. */
void jw_members(struct json_writer *w, const char *json, size_t len);
/* A string "0x1a2b". */
void jw_hex(struct json_writer *w, uint64_t v);

static inline void jw_kv_string(struct json_writer *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_string(w, s);
}

static inline void jw_kv_u64(struct json_writer *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	jw_u64(w, v);
}

static inline void jw_kv_i64(struct json_writer *w, const char *key, int64_t v)
{
	jw_key(w, key);
	jw_i64(w, v);
}

static inline void jw_kv_double(struct json_writer *w, const char *key, double v)
{
	jw_key(w, key);
	jw_double(w, v);
}

static inline void jw_kv_bool(struct json_writer *w, const char *key, bool v)
{
	jw_key(w, key);
	jw_bool(w, v);
}

static inline void jw_kv_hex(struct json_writer *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	jw_hex(w, v);
}

static inline void jw_kv_null(struct json_writer *w, const char *key)
{
	jw_key(w, key);
	jw_null(w);
}

/* Ends the current line ("\n") and hands it to the FILE (which the caller flushes when the
 * line must be out): for one-object-per-line output. Only valid at depth 0; the next value
 * then starts a new top-level document. */
void jw_newline(struct json_writer *w);

/* Length of the valid UTF-8 sequence at s (at most n bytes, n > 0), or 0 when it is not
 * valid: overlong forms, surrogates and code points above U+10FFFF are invalid. The one
 * UTF-8 check of every escaping writer. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

/* Copies src into dst (always NUL-terminated, truncated at a character boundary) with
 * control characters, C1 controls and bytes that are not valid UTF-8 replaced by '?'. */
void text_sanitize(char *dst, size_t dstlen, const char *src);

#endif
