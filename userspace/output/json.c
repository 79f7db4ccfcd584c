// SPDX-License-Identifier: GPL-2.0
/* The escaping JSON writer, and the plain-text sanitizer for readable views. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "output/json.h"

/* What a writer holds before it goes to its FILE in one write: a value's many small pieces
 * (keys, numbers, strings) cost a stdio call each otherwise, most of what trace --json spent. */
#define JW_BUF 16384

struct json_writer {
	FILE *out;
	size_t len;	/* bytes in buf not written yet */
	bool *first;	/* per nesting level: no value written yet at this level */
	size_t depth;
	size_t cap;
	size_t untracked;	/* levels opened while out of memory for the stack */
	bool after_key;	/* a key was written; its value needs no separator */
	char buf[JW_BUF];
};

static void jw_flush(struct json_writer *w)
{
	if (w->len)
		fwrite_unlocked(w->buf, 1, w->len, w->out);
	w->len = 0;
}

static void jw_put(struct json_writer *w, const void *s, size_t n)
{
	if (n > JW_BUF - w->len) {
		jw_flush(w);
		if (n > JW_BUF) {
			fwrite_unlocked(s, 1, n, w->out);
			return;
		}
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

static void jw_putc(struct json_writer *w, char c)
{
	if (w->len == JW_BUF)
		jw_flush(w);
	w->buf[w->len++] = c;
}

static void jw_puts(struct json_writer *w, const char *s)
{
	jw_put(w, s, strlen(s));
}

/* A value ended: at the top level, out before anything else the caller writes. */
static void jw_done(struct json_writer *w)
{
	if (!w->depth && !w->untracked)
		jw_flush(w);
}

struct json_writer *jw_new(FILE *out)
{
	struct json_writer *w;

	w = malloc(sizeof(*w));	/* not zeroed: buf is written before it is read */
	if (!w)
		return NULL;
	memset(w, 0, offsetof(struct json_writer, buf));
	w->cap = 16;
	w->first = calloc(w->cap, sizeof(*w->first));
	if (!w->first) {
		free(w);
		return NULL;
	}
	w->out = out;
	w->first[0] = true;
	return w;
}

void jw_free(struct json_writer *w)
{
	if (!w)
		return;
	jw_flush(w);
	free(w->first);
	free(w);
}

/* v in base 10 (a '-' before it when minus) or 16, as printf's %llu / %llx would write it, in
 * one write (numbers are most of what trace --json writes). The base is a constant in each
 * loop: a division by a variable is tens of cycles a digit, by 10 a multiplication. */
static void put_decimal(struct json_writer *w, uint64_t v, bool minus)
{
	char buf[24];
	size_t i = sizeof(buf);

	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	if (minus)
		buf[--i] = '-';
	jw_put(w, buf + i, sizeof(buf) - i);
}

static void put_hex(struct json_writer *w, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	char buf[16];
	size_t i = sizeof(buf);

	do {
		buf[--i] = digits[v & 0xf];
		v >>= 4;
	} while (v);
	jw_put(w, buf + i, sizeof(buf) - i);
}

/* Writes the comma that separates this value (or key) from the previous one. */
static void jw_separate(struct json_writer *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (w->depth > 0 && !w->first[w->depth])
		jw_putc(w, ',');
	w->first[w->depth] = false;
}

static void jw_push(struct json_writer *w, char open)
{
	jw_separate(w);
	jw_putc(w, open);
	if (w->depth + 1 >= w->cap) {
		size_t cap = w->cap * 2;
		bool *first = realloc(w->first, cap * sizeof(*first));

		/* Out of memory: commas at deeper levels follow the deepest level kept. */
		if (!first) {
			w->untracked++;
			return;
		}
		w->first = first;
		w->cap = cap;
	}
	w->depth++;
	w->first[w->depth] = true;
}

static void jw_pop(struct json_writer *w, char close)
{
	if (w->untracked > 0)
		w->untracked--;
	else if (w->depth > 0)
		w->depth--;
	w->after_key = false;
	jw_putc(w, close);
	jw_done(w);
}

void jw_object_begin(struct json_writer *w)
{
	jw_push(w, '{');
}

void jw_object_end(struct json_writer *w)
{
	jw_pop(w, '}');
}

void jw_array_begin(struct json_writer *w)
{
	jw_push(w, '[');
}

void jw_array_end(struct json_writer *w)
{
	jw_pop(w, ']');
}

size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len, i;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
		return 0;
	if (len == 4 && (cp < 0x10000 || cp > 0x10ffff))
		return 0;
	return len;
}

/* Printable ASCII but '"' (0x22) and '\\' (0x5c): the bytes a string's scan passes. */
static const bool ascii_plain[256] = {
	[0x20 ... 0x21] = true, [0x23 ... 0x5b] = true, [0x5d ... 0x7e] = true,
};

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Non-zero when a byte of x is zero (the classic word-at-a-time test, exact as a whole). */
static uint64_t has_zero(uint64_t x)
{
	return (x - ONES) & ~x & HIGHS;
}

/* Whether any of the eight bytes of x is below 0x20, above 0x7e, '"' or '\\': the scan of
 * plain strings (keys, names, paths) goes a word at a time until one does. */
static bool word_needs_care(uint64_t x)
{
	return ((x - ONES * 0x20) & ~x & HIGHS) | (((x + ONES) | x) & HIGHS) |
	       has_zero(x ^ (ONES * '"')) | has_zero(x ^ (ONES * '\\'));
}

/* The bytes from s on that go out as they are: printable ASCII but '"' and '\\', and whole
 * valid UTF-8 sequences. */
static size_t plain_run(const unsigned char *s, size_t len)
{
	size_t i = 0, n;
	uint64_t x;

	while (len - i >= 8) {
		memcpy(&x, s + i, 8);
		if (word_needs_care(x))
			break;
		i += 8;
	}
	while (i < len) {
		if (ascii_plain[s[i]]) {
			i++;
			continue;
		}
		if (s[i] < 0x80)
			break;
		n = utf8_seq_len(s + i, len - i);
		if (!n)
			break;
		i += n;
	}
	return i;
}

/* One byte that needs escaping (or is not valid UTF-8); returns the bytes it took. */
static size_t escape_one(struct json_writer *w, const unsigned char *s)
{
	switch (*s) {
	case '"':
		jw_puts(w, "\\\"");
		break;
	case '\\':
		jw_puts(w, "\\\\");
		break;
	case '\n':
		jw_puts(w, "\\n");
		break;
	case '\t':
		jw_puts(w, "\\t");
		break;
	case '\r':
		jw_puts(w, "\\r");
		break;
	case '\b':
		jw_puts(w, "\\b");
		break;
	case '\f':
		jw_puts(w, "\\f");
		break;
	default:
		if (*s < 0x20 || *s == 0x7f) {
			char u[8];

			snprintf(u, sizeof(u), "\\u%04x", *s);
			jw_puts(w, u);
		}
		else
			jw_puts(w, "\\ufffd");	/* not valid UTF-8 */
	}
	return 1;
}

/* Plain text s (n bytes) quoted into the buffer, with room left for extra bytes after it
 * (n + 2 + extra <= JW_BUF). */
static void put_quoted(struct json_writer *w, const char *s, size_t n, size_t extra)
{
	if (n + 2 + extra > JW_BUF - w->len)
		jw_flush(w);
	w->buf[w->len] = '"';
	memcpy(w->buf + w->len + 1, s, n);
	w->buf[w->len + 1 + n] = '"';
	w->len += n + 2;
}

/* Plain runs go out in one write each: the writer's hot loop (trace --json) is here. */
static void jw_escaped(struct json_writer *w, const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, n;

	if (len + 2 <= JW_BUF - w->len) {	/* most strings: plain, written in one piece */
		n = plain_run(s, len);
		if (n == len) {
			put_quoted(w, str, len, 0);
			return;
		}
	}
	jw_putc(w, '"');
	while (i < len) {
		n = plain_run(s + i, len - i);
		if (n) {
			jw_put(w, s + i, n);
			i += n;
		}
		if (i < len)
			i += escape_one(w, s + i);
	}
	jw_putc(w, '"');
}

void jw_key_len(struct json_writer *w, const char *key, size_t n)
{
	jw_separate(w);
	jw_escaped(w, key ? key : "", n);	/* a plain key in one piece, as any plain string */
	jw_putc(w, ':');
	w->after_key = true;
}

void jw_key_spelled(struct json_writer *w, const char *key, size_t n)
{
	if (n + 3 > JW_BUF) {
		jw_key_len(w, key, n);
		return;
	}
	jw_separate(w);
	put_quoted(w, key, n, 1);
	w->buf[w->len++] = ':';
	w->after_key = true;
}

void jw_string_spelled(struct json_writer *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (!s || n + 2 > JW_BUF) {
		jw_string(w, s);
		return;
	}
	jw_separate(w);
	put_quoted(w, s, n, 0);	jw_done(w);
}

void jw_string_len(struct json_writer *w, const char *s, size_t len)
{
	if (!s) {
		jw_null(w);
		return;
	}
	jw_separate(w);
	jw_escaped(w, s, len);	jw_done(w);
}

void jw_string(struct json_writer *w, const char *s)
{
	jw_string_len(w, s, s ? strlen(s) : 0);
}

void jw_u64(struct json_writer *w, uint64_t v)
{
	jw_separate(w);
	put_decimal(w, v, false);	jw_done(w);
}

void jw_i64(struct json_writer *w, int64_t v)
{
	jw_separate(w);
	put_decimal(w, v < 0 ? -(uint64_t)v : (uint64_t)v, v < 0);	jw_done(w);
}

void jw_double(struct json_writer *w, double v)
{
	char buf[32];

	if (!isfinite(v)) {
		jw_null(w);	/* JSON has no NaN or infinity */
		return;
	}
	jw_separate(w);
	/* The shortest form that reads back the same, as JSON allows it (no "1e+05" quirks). */
	snprintf(buf, sizeof(buf), "%.17g", v);
	for (int prec = 1; prec < 17; prec++) {
		char try[32];

		snprintf(try, sizeof(try), "%.*g", prec, v);
		if (strtod(try, NULL) == v) {
			memcpy(buf, try, sizeof(buf));
			break;
		}
	}
	jw_puts(w, buf);	jw_done(w);
}

void jw_bool(struct json_writer *w, bool v)
{
	jw_separate(w);
	jw_puts(w, v ? "true" : "false");	jw_done(w);
}

void jw_raw(struct json_writer *w, const char *json, size_t len)
{
	jw_separate(w);
	jw_put(w, json, len);	jw_done(w);
}

void jw_null(struct json_writer *w)
{
	jw_separate(w);
	jw_put(w, "null", 4);	jw_done(w);
}

void jw_members(struct json_writer *w, const char *json, size_t len)
{
	jw_separate(w);
	jw_put(w, json, len);
}

void jw_hex(struct json_writer *w, uint64_t v)
{
	jw_separate(w);
	jw_puts(w, "\"0x");
	put_hex(w, v);
	jw_putc(w, '"');	jw_done(w);
}

void jw_newline(struct json_writer *w)
{
	jw_putc(w, '\n');
	jw_flush(w);
	w->after_key = false;
	w->first[0] = true;
}

void text_sanitize(char *dst, size_t dstlen, const char *src)
{
	const unsigned char *s = (const unsigned char *)(src ? src : "");
	size_t len = strlen((const char *)s);
	size_t i = 0, o = 0, n;

	if (dstlen == 0)
		return;
	while (i < len && o + 1 < dstlen) {
		unsigned char c = s[i];

		n = utf8_seq_len(s + i, len - i);
		/* C0, DEL, C1 (U+0080..U+009F, encoded c2 80..c2 9f) and invalid bytes */
		if (n == 0 || c < 0x20 || c == 0x7f || (c == 0xc2 && s[i + 1] < 0xa0)) {
			dst[o++] = '?';
			i += n ? n : 1;
			continue;
		}
		if (o + n >= dstlen)
			break;
		memcpy(dst + o, s + i, n);
		o += n;
		i += n;
	}
	dst[o] = '\0';
}
