// SPDX-License-Identifier: GPL-2.0
/* The escaping writer of the Prometheus text exposition format: HELP, TYPE and samples. */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "output/json.h"
#include "output/prom_writer.h"

#define REPLACEMENT "\xef\xbf\xbd"	/* U+FFFD, for what a label value cannot carry */

/* Whether the valid sequence of n bytes at s is a C1 control (U+0080..U+009F). */
static bool is_c1(const unsigned char *s, size_t n)
{
	return n == 2 && s[0] == 0xc2 && s[1] < 0xa0;
}

/* The bytes from s on that go out as they are: printable ASCII but the escaped ones, and
 * whole valid UTF-8 sequences that are no C1 control. */
static size_t plain_run(const unsigned char *s, size_t len, bool quote)
{
	size_t i = 0, n;

	while (i < len) {
		unsigned char c = s[i];

		if (c >= 0x20 && c < 0x7f) {
			if (c == '\\' || (quote && c == '"'))
				break;
			i++;
			continue;
		}
		if (c < 0x80)
			break;
		n = utf8_seq_len(s + i, len - i);
		if (!n || is_c1(s + i, n))
			break;
		i += n;
	}
	return i;
}

/* One character that needs escaping or replacing; returns the bytes it took. */
static size_t escape_one(FILE *out, const unsigned char *s, size_t len)
{
	size_t n;

	switch (*s) {
	case '\\':
		fputs_unlocked("\\\\", out);
		return 1;
	case '"':
		fputs_unlocked("\\\"", out);
		return 1;
	case '\n':
		fputs_unlocked("\\n", out);
		return 1;
	}
	fputs_unlocked(REPLACEMENT, out);
	n = *s >= 0x80 ? utf8_seq_len(s, len) : 0;
	return is_c1(s, n) ? n : 1;	/* a C1 control is replaced whole; a bad byte alone */
}

/* quote: a label value (double quotes escaped), else HELP text (quotes kept, as the format
 * has it). */
static void put_escaped(FILE *out, const char *str, bool quote)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	size_t len = strlen((const char *)s), i = 0, n;

	while (i < len) {
		n = plain_run(s + i, len - i, quote);
		if (n) {
			fwrite_unlocked(s + i, 1, n, out);
			i += n;
		}
		if (i < len)
			i += escape_one(out, s + i, len - i);
	}
}

void prom_label_value(FILE *out, const char *s)
{
	put_escaped(out, s, true);
}

void prom_label_add(struct prom_labels *ls, const char *name, const char *value)
{
	if (ls->n >= PROM_MAX_LABELS)
		return;
	ls->l[ls->n].name = name;
	ls->l[ls->n].value = value;
	ls->n++;
}

void prom_family(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s ", name);
	put_escaped(out, help, false);
	fprintf(out, "\n# TYPE %s %s\n", name, type);
}

static void sample_name(FILE *out, const char *name, const struct prom_labels *ls)
{
	fputs_unlocked(name, out);
	for (size_t i = 0; ls && i < ls->n; i++) {
		fprintf(out, "%c%s=\"", i ? ',' : '{', ls->l[i].name);
		put_escaped(out, ls->l[i].value, true);
		putc_unlocked('"', out);
	}
	if (ls && ls->n)
		putc_unlocked('}', out);
}

void prom_sample(FILE *out, const char *name, const struct prom_labels *ls, uint64_t value)
{
	sample_name(out, name, ls);
	fprintf(out, " %" PRIu64 "\n", value);
}

void prom_sample_double(FILE *out, const char *name, const struct prom_labels *ls, double value)
{
	sample_name(out, name, ls);
	fprintf(out, " %.9g\n", value);
}
