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

static inline void jw_key(struct json_writer *w, const char *key)
{
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
