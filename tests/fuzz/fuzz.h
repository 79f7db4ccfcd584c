/* SPDX-License-Identifier: GPL-2.0 */
/* What every fuzz harness shares: a broken contract aborts with its reason, so libFuzzer
 * keeps the input as a crash (the stack it prints gives the line). */
#ifndef GPUMEM_FUZZ_H
#define GPUMEM_FUZZ_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((format(printf, 2, 3))) static inline void fuzz_check(bool ok, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return;
	fputs("fuzz: contract broken: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* data as a NUL-terminated string in a buffer of exactly size + 1 bytes (ASan sees overreads). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* Whether s[0..n) is well-formed UTF-8 (RFC 3629: no overlongs, surrogates or > U+10FFFF). */
static inline bool fuzz_utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0, len, k;
	uint32_t cp;

	while (i < n) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		if ((s[i] & 0xe0) == 0xc0) {
			len = 2;
			cp = s[i] & 0x1f;
		} else if ((s[i] & 0xf0) == 0xe0) {
			len = 3;
			cp = s[i] & 0x0f;
		} else if ((s[i] & 0xf8) == 0xf0) {
			len = 4;
			cp = s[i] & 0x07;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

#endif
