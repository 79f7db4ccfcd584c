// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzzes the JSON writer and text_sanitize (output/json.c). The input is a program: each byte
 * picks a writer call, the bytes after it give its key, string or number. The harness keeps
 * the calls well-formed (keys only in objects, one value per document), records what each
 * call should write, then parses the output with a strict RFC 8259 reader of its own and
 * compares every token: structure, strings (when the input was valid UTF-8), numbers.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>

#include "fuzz.h"
#include "output/json.h"

#define MAX_DEPTH 600
#define MAX_OPS	  4096

/* What a program byte asks for; the letters make seeds readable, any other byte picks one by
 * its value modulo OP_COUNT. */
enum op {
	OP_OBJECT,	/* '{' */
	OP_ARRAY,	/* '[' */
	OP_END,		/* '}' or ']': closes whatever is open */
	OP_STRING,	/* 's' LEN BYTES: jw_string_len */
	OP_CSTRING,	/* 'c' LEN BYTES: jw_string, up to the first NUL */
	OP_U64,		/* 'u' 8 bytes, big-endian */
	OP_I64,		/* 'i' 8 bytes */
	OP_DOUBLE,	/* 'd' 8 bytes, the bits of a double */
	OP_BOOL,	/* 'b' 1 byte */
	OP_NULL,	/* 'n' */
	OP_HEX,		/* 'x' 8 bytes */
	OP_NULL_STRING, /* 'N': jw_string(NULL) */
	OP_NEWLINE,	/* '\n': jw_newline, at depth 0 */
	OP_KV,		/* 'k' WHICH LEN KEY VALUE: jw_kv_*, in an object */
	OP_COUNT,
};

static enum op op_of(uint8_t b)
{
	static const char letters[OP_COUNT] = "{[}scuidbnxN\nk";
	const char *at = b ? memchr(letters, b, OP_COUNT) : NULL;

	if (b == ']')
		return OP_END;
	return at ? (enum op)(at - letters) : (enum op)(b % OP_COUNT);
}

enum tok_type {
	TOK_OBJ_BEGIN,
	TOK_OBJ_END,
	TOK_ARR_BEGIN,
	TOK_ARR_END,
	TOK_KEY,
	TOK_STR,
	TOK_U64,
	TOK_I64,
	TOK_DOUBLE,
	TOK_TRUE,
	TOK_FALSE,
	TOK_NULL,
	TOK_DOC_END,
};

struct tok {
	enum tok_type type;
	char *str; /* TOK_KEY, TOK_STR: what was passed; compared only if valid UTF-8 */
	size_t len;
	uint64_t u;
	int64_t i;
	double d;
};

struct toks {
	struct tok *v;
	size_t count, cap, next; /* next: the one the reader compares against */
};

static struct tok *tok_add(struct toks *t, enum tok_type type)
{
	struct tok *k;

	if (t->count == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 256;
		t->v = realloc(t->v, t->cap * sizeof(*t->v));
		if (!t->v)
			abort();
	}
	k = &t->v[t->count++];
	memset(k, 0, sizeof(*k));
	k->type = type;
	return k;
}

static void tok_add_str(struct toks *t, enum tok_type type, const char *s, size_t len)
{
	struct tok *k = tok_add(t, type);

	k->str = malloc(len + 1);
	if (!k->str)
		abort();
	memcpy(k->str, s, len);
	k->str[len] = '\0';
	k->len = len;
}

static void toks_free(struct toks *t)
{
	size_t i;

	for (i = 0; i < t->count; i++)
		free(t->v[i].str);
	free(t->v);
}

/* The program being read; past its end every read gives zeros. */
struct prog {
	const uint8_t *data;
	size_t size, pos;
};

static uint8_t prog_byte(struct prog *p)
{
	return p->pos < p->size ? p->data[p->pos++] : 0;
}

static uint64_t prog_u64(struct prog *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | prog_byte(p);
	return v;
}

/* A length byte, then that many bytes (fewer at the end of the input). */
static const char *prog_bytes(struct prog *p, size_t *len)
{
	size_t n = prog_byte(p);
	const char *s = (const char *)p->data + p->pos;

	if (n > p->size - p->pos)
		n = p->size - p->pos;
	p->pos += n;
	*len = n;
	return s;
}

/* Sanitized text never holds a control byte or invalid UTF-8, and fits dstlen. */
static void check_sanitize(const char *s, size_t len, size_t dstlen)
{
	char *src = malloc(len + 1), *dst = malloc(dstlen);
	size_t n, i;

	if (!src || !dst)
		abort();
	memcpy(src, s, len);
	src[len] = '\0';
	text_sanitize(dst, dstlen, src);
	n = strnlen(dst, dstlen);
	fuzz_check(n < dstlen, "text_sanitize: not terminated in %zu bytes", dstlen);
	fuzz_check(n <= strlen(src), "text_sanitize: %zu bytes from %zu", n, strlen(src));
	fuzz_check(fuzz_utf8_valid((unsigned char *)dst, n), "text_sanitize: invalid UTF-8");
	for (i = 0; i < n; i++) {
		unsigned char c = dst[i];

		fuzz_check(c >= 0x20 && c != 0x7f, "text_sanitize: control byte %#x", c);
		fuzz_check(!(c == 0xc2 && i + 1 < n && (unsigned char)dst[i + 1] < 0xa0),
			   "text_sanitize: C1 control U+00%02X", (unsigned char)dst[i + 1]);
	}
	free(src);
	free(dst);
}

/* One string from the program: through jw_string_len, or jw_string up to its first NUL. */
static void write_string(struct json_writer *w, struct prog *p, struct toks *t, bool key,
			 bool cstring)
{
	size_t len;
	const char *s = prog_bytes(p, &len);
	char *z;

	check_sanitize(s, len, 1 + len % 7);
	check_sanitize(s, len, len + 1);
	if (cstring || key) {
		z = malloc(len + 1);
		if (!z)
			abort();
		memcpy(z, s, len);
		z[len] = '\0';
		tok_add_str(t, key ? TOK_KEY : TOK_STR, z, strlen(z));
		if (key)
			jw_key(w, z);
		else
			jw_string(w, z);
		free(z);
		return;
	}
	tok_add_str(t, TOK_STR, s, len);
	jw_string_len(w, s, len);
}

static void write_scalar(struct json_writer *w, struct prog *p, struct toks *t, enum op op)
{
	char hex[32];
	struct tok *k;
	uint64_t v;

	switch (op) {
	case OP_STRING:
	case OP_CSTRING:
		write_string(w, p, t, false, op == OP_CSTRING);
		break;
	case OP_U64:
		v = prog_u64(p);
		tok_add(t, TOK_U64)->u = v;
		jw_u64(w, v);
		break;
	case OP_I64:
		v = prog_u64(p);
		tok_add(t, TOK_I64)->i = (int64_t)v;
		jw_i64(w, (int64_t)v);
		break;
	case OP_DOUBLE:
		v = prog_u64(p);
		k = tok_add(t, TOK_DOUBLE);
		memcpy(&k->d, &v, sizeof(k->d));
		if (!isfinite(k->d))
			k->type = TOK_NULL;
		jw_double(w, k->d);
		break;
	case OP_BOOL:
		v = prog_byte(p) & 1;
		tok_add(t, v ? TOK_TRUE : TOK_FALSE);
		jw_bool(w, v);
		break;
	case OP_NULL:
		tok_add(t, TOK_NULL);
		jw_null(w);
		break;
	case OP_HEX:
		v = prog_u64(p);
		snprintf(hex, sizeof(hex), "0x%" PRIx64, v);
		tok_add_str(t, TOK_STR, hex, strlen(hex));
		jw_hex(w, v);
		break;
	default:
		tok_add(t, TOK_NULL);
		jw_string(w, NULL);
		break;
	}
}

/* jw_kv_*: a key and a value in one call. */
static void write_kv(struct json_writer *w, struct prog *p, struct toks *t)
{
	uint8_t which = prog_byte(p) % 7;
	size_t len;
	const char *key = prog_bytes(p, &len);
	char *z = malloc(len + 1), *s;
	struct tok *k;
	uint64_t v;

	if (!z)
		abort();
	memcpy(z, key, len);
	z[len] = '\0';
	tok_add_str(t, TOK_KEY, z, strlen(z));
	switch (which) {
	case 0:
		s = (char *)prog_bytes(p, &len);
		s = strndup(s, len);
		if (!s)
			abort();
		tok_add_str(t, TOK_STR, s, strlen(s));
		jw_kv_string(w, z, s);
		free(s);
		break;
	case 1:
		v = prog_u64(p);
		tok_add(t, TOK_U64)->u = v;
		jw_kv_u64(w, z, v);
		break;
	case 2:
		v = prog_u64(p);
		tok_add(t, TOK_I64)->i = (int64_t)v;
		jw_kv_i64(w, z, (int64_t)v);
		break;
	case 3:
		v = prog_u64(p);
		k = tok_add(t, TOK_DOUBLE);
		memcpy(&k->d, &v, sizeof(k->d));
		if (!isfinite(k->d))
			k->type = TOK_NULL;
		jw_kv_double(w, z, k->d);
		break;
	case 4:
		v = prog_byte(p) & 1;
		tok_add(t, v ? TOK_TRUE : TOK_FALSE);
		jw_kv_bool(w, z, v);
		break;
	case 5: {
		char hex[32];

		v = prog_u64(p);
		snprintf(hex, sizeof(hex), "0x%" PRIx64, v);
		tok_add_str(t, TOK_STR, hex, strlen(hex));
		jw_kv_hex(w, z, v);
		break;
	}
	default:
		tok_add(t, TOK_NULL);
		jw_kv_null(w, z);
		break;
	}
	free(z);
}

/* Drives the writer with the program; records the tokens the output must hold. */
static void run_program(struct json_writer *w, struct prog *p, struct toks *t)
{
	bool in_object[MAX_DEPTH];
	size_t depth = 0, ops;
	bool doc_has_value = false;
	enum op op;

	for (ops = 0; ops < MAX_OPS && p->pos < p->size; ops++) {
		op = op_of(prog_byte(p));
		if (op == OP_END || op == OP_NEWLINE) {
			if (op == OP_END && depth > 0) {
				depth--;
				tok_add(t, in_object[depth] ? TOK_OBJ_END : TOK_ARR_END);
				if (in_object[depth])
					jw_object_end(w);
				else
					jw_array_end(w);
			} else if (op == OP_NEWLINE && depth == 0 && doc_has_value) {
				tok_add(t, TOK_DOC_END);
				jw_newline(w);
				doc_has_value = false;
			}
			continue;
		}
		/* a value: at depth 0 it starts a new document; in an object it needs a key */
		if (depth == 0 && doc_has_value) {
			tok_add(t, TOK_DOC_END);
			jw_newline(w);
		}
		doc_has_value = true;
		if (op == OP_KV && depth > 0 && in_object[depth - 1]) {
			write_kv(w, p, t);
			continue;
		}
		if (depth > 0 && in_object[depth - 1])
			write_string(w, p, t, true, true);
		if ((op == OP_OBJECT || op == OP_ARRAY) && depth < MAX_DEPTH) {
			in_object[depth++] = op == OP_OBJECT;
			tok_add(t, op == OP_OBJECT ? TOK_OBJ_BEGIN : TOK_ARR_BEGIN);
			if (op == OP_OBJECT)
				jw_object_begin(w);
			else
				jw_array_begin(w);
		} else if (op == OP_OBJECT || op == OP_ARRAY) {
			tok_add_str(t, TOK_STR, "", 0); /* too deep: an empty string instead */
			jw_string(w, "");
		} else {
			write_scalar(w, p, t, op); /* OP_KV outside an object: null */
		}
	}
	while (depth > 0) {
		depth--;
		tok_add(t, in_object[depth] ? TOK_OBJ_END : TOK_ARR_END);
		if (in_object[depth])
			jw_object_end(w);
		else
			jw_array_end(w);
	}
	if (doc_has_value) {
		tok_add(t, TOK_DOC_END);
		jw_newline(w);
	}
}

/* A strict reader of the writer's output (compact JSON, one document a line). */
struct reader {
	const char *s;
	size_t n, pos;
	struct toks *expect;
	char *str; /* the last string read, decoded */
	size_t len, cap;
};

static const char *const tok_names[] = {
	[TOK_OBJ_BEGIN] = "{",	   [TOK_OBJ_END] = "}",	 [TOK_ARR_BEGIN] = "[", [TOK_ARR_END] = "]",
	[TOK_KEY] = "key",	   [TOK_STR] = "string", [TOK_U64] = "number",	[TOK_I64] = "i64",
	[TOK_DOUBLE] = "double",   [TOK_TRUE] = "true",	 [TOK_FALSE] = "false", [TOK_NULL] = "null",
	[TOK_DOC_END] = "newline",
};

static const struct tok *expect_next(struct reader *r, enum tok_type type)
{
	const struct tok *k;

	fuzz_check(r->expect->next < r->expect->count,
		   "output has a %s past the last call at "
		   "byte %zu",
		   tok_names[type], r->pos);
	k = &r->expect->v[r->expect->next++];
	fuzz_check(k->type == type ||
			   (type == TOK_U64 && (k->type == TOK_I64 || k->type == TOK_DOUBLE)),
		   "byte %zu: read a %s where a %s was written", r->pos, tok_names[type],
		   tok_names[k->type]);
	return k;
}

static void str_put(struct reader *r, const char *b, size_t n)
{
	if (r->len + n > r->cap) {
		r->cap = (r->len + n) * 2;
		r->str = realloc(r->str, r->cap);
		if (!r->str)
			abort();
	}
	memcpy(r->str + r->len, b, n);
	r->len += n;
}

static unsigned int read_hex4(struct reader *r)
{
	unsigned int v = 0, i;
	char c;

	fuzz_check(r->pos + 4 <= r->n, "byte %zu: \\u escape cut", r->pos);
	for (i = 0; i < 4; i++) {
		c = r->s[r->pos++];
		fuzz_check((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
				   (c >= 'A' && c <= 'F'),
			   "byte %zu: \\u escape with '%c'", r->pos, c);
		v = v << 4 | (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return v;
}

static void put_code_point(struct reader *r, uint32_t cp)
{
	char b[4];

	if (cp < 0x80) {
		b[0] = cp;
		str_put(r, b, 1);
	} else if (cp < 0x800) {
		b[0] = 0xc0 | cp >> 6;
		b[1] = 0x80 | (cp & 0x3f);
		str_put(r, b, 2);
	} else if (cp < 0x10000) {
		b[0] = 0xe0 | cp >> 12;
		b[1] = 0x80 | (cp >> 6 & 0x3f);
		b[2] = 0x80 | (cp & 0x3f);
		str_put(r, b, 3);
	} else {
		b[0] = 0xf0 | cp >> 18;
		b[1] = 0x80 | (cp >> 12 & 0x3f);
		b[2] = 0x80 | (cp >> 6 & 0x3f);
		b[3] = 0x80 | (cp & 0x3f);
		str_put(r, b, 4);
	}
}

/* A string into r->str; raw bytes were checked as UTF-8 with the whole output. */
static void read_string(struct reader *r)
{
	static const char plain[] = "\"\\/\b\f\n\r\t", escaped[] = "\"\\/bfnrt";
	unsigned char c;
	const char *e;
	uint32_t cp, lo;

	r->len = 0;
	fuzz_check(r->pos < r->n && r->s[r->pos] == '"', "byte %zu: a string expected", r->pos);
	r->pos++;
	for (;;) {
		fuzz_check(r->pos < r->n, "unterminated string");
		c = r->s[r->pos++];
		if (c == '"')
			return;
		fuzz_check(c >= 0x20, "byte %zu: raw control byte %#x in a string", r->pos - 1, c);
		if (c != '\\') {
			str_put(r, (const char *)&c, 1);
			continue;
		}
		fuzz_check(r->pos < r->n, "string ends in a backslash");
		c = r->s[r->pos++];
		e = c ? strchr(escaped, c) : NULL;
		if (e) {
			str_put(r, &plain[e - escaped], 1);
			continue;
		}
		fuzz_check(c == 'u', "byte %zu: escape \\%c", r->pos - 1, c);
		cp = read_hex4(r);
		if (cp >= 0xd800 && cp <= 0xdbff) {
			fuzz_check(r->pos + 2 <= r->n && r->s[r->pos] == '\\' &&
					   r->s[r->pos + 1] == 'u',
				   "byte %zu: lone high surrogate", r->pos);
			r->pos += 2;
			lo = read_hex4(r);
			fuzz_check(lo >= 0xdc00 && lo <= 0xdfff, "byte %zu: bad low surrogate",
				   r->pos);
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		} else {
			fuzz_check(cp < 0xdc00 || cp > 0xdfff, "byte %zu: lone low surrogate",
				   r->pos);
		}
		put_code_point(r, cp);
	}
}

static void compare_string(struct reader *r, const struct tok *k)
{
	if (!fuzz_utf8_valid((unsigned char *)k->str, k->len))
		return;
	fuzz_check(r->len == k->len && (!k->len || memcmp(r->str, k->str, k->len) == 0),
		   "string of %zu bytes read back as %zu different bytes", k->len, r->len);
}

static bool digit_at(const struct reader *r)
{
	return r->pos < r->n && r->s[r->pos] >= '0' && r->s[r->pos] <= '9';
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static void read_number(struct reader *r)
{
	size_t start = r->pos, digits;
	const struct tok *k;
	char text[64];

	if (r->s[r->pos] == '-')
		r->pos++;
	fuzz_check(digit_at(r), "byte %zu: number without digits", r->pos);
	if (r->s[r->pos] == '0') {
		r->pos++;
		fuzz_check(!digit_at(r), "byte %zu: number with a leading zero", r->pos);
	}
	while (digit_at(r))
		r->pos++;
	if (r->pos < r->n && r->s[r->pos] == '.') {
		r->pos++;
		for (digits = 0; digit_at(r); digits++)
			r->pos++;
		fuzz_check(digits > 0, "byte %zu: no digits after '.'", r->pos);
	}
	if (r->pos < r->n && (r->s[r->pos] == 'e' || r->s[r->pos] == 'E')) {
		r->pos++;
		if (r->pos < r->n && (r->s[r->pos] == '+' || r->s[r->pos] == '-'))
			r->pos++;
		for (digits = 0; digit_at(r); digits++)
			r->pos++;
		fuzz_check(digits > 0, "byte %zu: no digits in the exponent", r->pos);
	}
	fuzz_check(r->pos - start < sizeof(text), "a number of %zu bytes", r->pos - start);
	memcpy(text, r->s + start, r->pos - start);
	text[r->pos - start] = '\0';
	k = expect_next(r, TOK_U64);
	if (k->type == TOK_U64)
		fuzz_check(strtoull(text, NULL, 10) == k->u && text[0] != '-', "%s is not %" PRIu64,
			   text, k->u);
	else if (k->type == TOK_I64)
		fuzz_check(strtoll(text, NULL, 10) == k->i, "%s is not %" PRId64, text, k->i);
	else
		fuzz_check(strtod(text, NULL) == k->d, "%s is not %.17g", text, k->d);
}

static void read_literal(struct reader *r, const char *word, enum tok_type type)
{
	size_t n = strlen(word);

	fuzz_check(r->n - r->pos >= n && memcmp(r->s + r->pos, word, n) == 0,
		   "byte %zu: not a value", r->pos);
	r->pos += n;
	expect_next(r, type);
}

static void read_value(struct reader *r, unsigned int depth);

static void read_container(struct reader *r, unsigned int depth, bool object)
{
	const struct tok *k;
	char close = object ? '}' : ']';

	expect_next(r, object ? TOK_OBJ_BEGIN : TOK_ARR_BEGIN);
	r->pos++;
	fuzz_check(depth < MAX_DEPTH + 1, "nested deeper than written");
	if (r->pos < r->n && r->s[r->pos] == close) {
		r->pos++;
		expect_next(r, object ? TOK_OBJ_END : TOK_ARR_END);
		return;
	}
	for (;;) {
		if (object) {
			read_string(r);
			k = expect_next(r, TOK_KEY);
			compare_string(r, k);
			fuzz_check(r->pos < r->n && r->s[r->pos] == ':', "byte %zu: ':' expected",
				   r->pos);
			r->pos++;
		}
		read_value(r, depth + 1);
		fuzz_check(r->pos < r->n, "output ends inside a container");
		if (r->s[r->pos] == close)
			break;
		fuzz_check(r->s[r->pos] == ',', "byte %zu: ',' or '%c' expected, not '%c'", r->pos,
			   close, r->s[r->pos]);
		r->pos++;
	}
	r->pos++;
	expect_next(r, object ? TOK_OBJ_END : TOK_ARR_END);
}

static void read_value(struct reader *r, unsigned int depth)
{
	const struct tok *k;
	char c;

	fuzz_check(r->pos < r->n, "output ends where a value should be");
	c = r->s[r->pos];
	if (c == '{' || c == '[') {
		read_container(r, depth, c == '{');
	} else if (c == '"') {
		read_string(r);
		k = expect_next(r, TOK_STR);
		compare_string(r, k);
	} else if (c == '-' || (c >= '0' && c <= '9')) {
		read_number(r);
	} else if (c == 't') {
		read_literal(r, "true", TOK_TRUE);
	} else if (c == 'f') {
		read_literal(r, "false", TOK_FALSE);
	} else {
		read_literal(r, "null", TOK_NULL);
	}
}

static void check_output(const char *out, size_t n, struct toks *t)
{
	struct reader r = { .s = out, .n = n, .expect = t };

	fuzz_check(fuzz_utf8_valid((const unsigned char *)out, n), "output is not valid UTF-8");
	while (r.pos < r.n) {
		read_value(&r, 0);
		fuzz_check(r.pos < r.n && r.s[r.pos] == '\n',
			   "byte %zu: a document not ended by "
			   "a newline",
			   r.pos);
		r.pos++;
		expect_next(&r, TOK_DOC_END);
	}
	fuzz_check(t->next == t->count, "%zu calls wrote nothing", t->count - t->next);
	free(r.str);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prog p = { .data = data, .size = size };
	struct toks t = { 0 };
	struct json_writer *w;
	char *out = NULL;
	size_t outlen = 0;
	FILE *f;

	f = open_memstream(&out, &outlen);
	if (!f)
		abort();
	w = jw_new(f);
	if (!w)
		abort();
	run_program(w, &p, &t);
	jw_free(w);
	fclose(f);
	check_output(out, outlen, &t);
	free(out);
	toks_free(&t);
	return 0;
}
