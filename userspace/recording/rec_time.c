// SPDX-License-Identifier: GPL-2.0
/* Parsing TIME and DURATION for recordings (--at, --since, --until, --retention), and
 * resolving a TIME against a recording's span. Local time is the TZ of the reader. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "recording/rec_time.h"

#define NS_PER_S 1000000000ull
#define DURATION_MAX_S (100.0 * 365 * 86400)

static const struct {
	const char *name;
	double seconds;
} units[] = { { "ms", 1e-3 }, { "s", 1 }, { "m", 60 }, { "h", 3600 }, { "d", 86400 } };

int rec_duration_parse(const char *s, double *seconds)
{
	double v, scale = 1;
	char *end;

	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s)
		return -EINVAL;
	if (*end) {
		size_t i;

		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (!strcmp(end, units[i].name))
				break;
		if (i == sizeof(units) / sizeof(units[0]))
			return -EINVAL;
		scale = units[i].seconds;
	}
	v *= scale;
	if (!isfinite(v) || v < 0 || v > DURATION_MAX_S)
		return -EINVAL;
	*seconds = v;
	return 0;
}

/* "HH:MM[:SS[.frac]]" at s; returns the characters read (0: none), *ns since midnight. */
static size_t parse_clock(const char *s, uint64_t *ns)
{
	unsigned int h, m, sec = 0;
	int n = 0, n2 = 0;
	double frac = 0;

	if (sscanf(s, "%2u:%2u%n", &h, &m, &n) != 2 || n != 5 || h > 23 || m > 59)
		return 0;
	if (s[n] == ':') {
		if (sscanf(s + n + 1, "%2u%n", &sec, &n2) != 1 || n2 != 2 || sec > 60)
			return 0;
		n += 3;
		if (s[n] == '.' && isdigit((unsigned char)s[n + 1])) {
			char *end;

			frac = strtod(s + n, &end);
			n = (int)(end - s);
		}
	}
	*ns = ((uint64_t)h * 3600 + m * 60 + sec) * NS_PER_S + (uint64_t)llround(frac * 1e9);
	return (size_t)n;
}

/* "Z", "+HH:MM" or "-HH:MM" at s: seconds east of UTC. */
static int parse_zone(const char *s, long *east)
{
	unsigned int h, m;
	int n = 0;

	if (!strcmp(s, "Z") || !strcmp(s, "z")) {
		*east = 0;
		return 0;
	}
	if ((s[0] != '+' && s[0] != '-') || sscanf(s + 1, "%2u:%2u%n", &h, &m, &n) != 2 ||
	    n != 5 || s[6] || h > 23 || m > 59)
		return -EINVAL;
	*east = (s[0] == '-' ? -1 : 1) * (long)(h * 3600 + m * 60);
	return 0;
}

/* "YYYY-MM-DD[T ]HH:MM[:SS[.frac]][zone]": with a zone, as it says; without, local time. */
static int parse_date_time(const char *s, uint64_t *ns)
{
	struct tm tm = { 0 };
	unsigned int y, mo, d;
	uint64_t clock_ns;
	long east = 0;
	size_t n;
	time_t t;
	int used = 0;

	if (sscanf(s, "%4u-%2u-%2u%n", &y, &mo, &d, &used) != 3 || used != 10 || mo < 1 ||
	    mo > 12 || d < 1 || d > 31 || (s[10] != 'T' && s[10] != 't' && s[10] != ' '))
		return -EINVAL;
	n = parse_clock(s + 11, &clock_ns);
	if (!n || (s[11 + n] && parse_zone(s + 11 + n, &east)))
		return -EINVAL;
	tm.tm_year = (int)y - 1900;
	tm.tm_mon = (int)mo - 1;
	tm.tm_mday = (int)d;
	tm.tm_isdst = -1;
	t = s[11 + n] ? timegm(&tm) - east : mktime(&tm);
	if (t == (time_t)-1 || t < 0)
		return -EINVAL;
	*ns = (uint64_t)t * NS_PER_S + clock_ns;
	return 0;
}

int rec_time_parse(const char *s, struct rec_time *out)
{
	double secs;
	size_t n;

	if (!s || !*s)
		return -EINVAL;
	if (!strcmp(s, "start") || !strcmp(s, "end")) {
		out->kind = s[0] == 's' ? REC_TIME_FROM_START : REC_TIME_FROM_END;
		out->ns = 0;
		return 0;
	}
	if (s[0] == '+' || s[0] == '-') {
		if (rec_duration_parse(s + 1, &secs))
			return -EINVAL;
		out->kind = s[0] == '+' ? REC_TIME_FROM_START : REC_TIME_FROM_END;
		out->ns = (uint64_t)llround(secs * 1e9);
		return 0;
	}
	n = parse_clock(s, &out->ns);
	if (n && !s[n]) {
		out->kind = REC_TIME_OF_DAY;
		return 0;
	}
	out->kind = REC_TIME_ABSOLUTE;
	return parse_date_time(s, &out->ns);
}

/* Local midnight of the day wall_ns falls on. */
static uint64_t local_midnight(uint64_t wall_ns)
{
	time_t t = (time_t)(wall_ns / NS_PER_S);
	struct tm tm;

	localtime_r(&t, &tm);
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	tm.tm_isdst = -1;
	t = mktime(&tm);
	return t < 0 ? 0 : (uint64_t)t * NS_PER_S;
}

uint64_t rec_time_resolve(const struct rec_time *t, uint64_t start_ns, uint64_t end_ns)
{
	uint64_t at;

	switch (t->kind) {
	case REC_TIME_FROM_START:
		return start_ns + t->ns;
	case REC_TIME_FROM_END:
		return end_ns > t->ns ? end_ns - t->ns : 0;
	case REC_TIME_OF_DAY:
		/* On the day of the end, or the day before when that is after the end. */
		at = local_midnight(end_ns);
		if (at + t->ns > end_ns && at > 0)
			at = local_midnight(at - 1);
		return at + t->ns;
	case REC_TIME_ABSOLUTE:
		break;
	}
	return t->ns;
}
