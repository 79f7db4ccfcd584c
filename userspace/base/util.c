// SPDX-License-Identifier: GPL-2.0
/* Error reporting, verbosity and small helpers shared by every userspace file. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/util.h"

bool verbose;

static void p_line(const char *fmt, va_list ap)
{
	fputs("gpumem: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void p_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	p_line(fmt, ap);
	va_end(ap);
}

void p_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	p_line(fmt, ap);
	va_end(ap);
}

void p_debug(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	fputs("gpumem: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t realtime_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

static void *check_alloc(void *p)
{
	if (!p) {
		p_err("out of memory");
		exit(1);
	}
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	return check_alloc(calloc(n ? n : 1, size ? size : 1));
}

void *xrealloc(void *p, size_t size)
{
	return check_alloc(realloc(p, size ? size : 1));
}

volatile sig_atomic_t gm_stop_requested;

char *xstrndup(const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	char *p;

	if (n == max)	/* cut before a UTF-8 continuation byte: never half a character */
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	p = xcalloc(1, n + 1);
	memcpy(p, s, n);
	return p;
}

char *xstrdup(const char *s)
{
	return check_alloc(strdup(s ? s : ""));
}
