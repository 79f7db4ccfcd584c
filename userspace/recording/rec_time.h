/* SPDX-License-Identifier: GPL-2.0 */
/* Times and durations as the command line gives them for recordings: --at/--since/--until
 * (absolute, a time of day, or relative to the recording's start or end) and --retention. */
#ifndef GPUMEM_REC_TIME_H
#define GPUMEM_REC_TIME_H

#include <stdbool.h>
#include <stdint.h>

enum rec_time_kind {
	REC_TIME_ABSOLUTE,	/* wall-clock ns since the epoch */
	REC_TIME_OF_DAY,	/* local HH:MM[:SS[.frac]]: the last such time not after the end */
	REC_TIME_FROM_START,	/* +DURATION: after the recording's start ("start" is +0) */
	REC_TIME_FROM_END,	/* -DURATION: before the recording's end ("end" is -0) */
};

struct rec_time {
	enum rec_time_kind kind;
	uint64_t ns;		/* absolute time, offset, or nanoseconds since local midnight */
};

/*
 * Parses TIME: RFC 3339 ("2026-12-01T03:12:00Z", "...T03:12:00.5+01:00"), "YYYY-MM-DD
 * HH:MM[:SS[.frac]]" in local time, "HH:MM[:SS[.frac]]" (local time of day), "+30s" or "-10m"
 * (from the start or the end; units ms, s, m, h, d), "start", "end". Returns 0 or -EINVAL.
 */
int rec_time_parse(const char *s, struct rec_time *out);
/* The wall-clock time t names in a recording that spans [start_ns, end_ns]. */
uint64_t rec_time_resolve(const struct rec_time *t, uint64_t start_ns, uint64_t end_ns);
/* DURATION: a number with an optional unit (ms, s, m, h, d; none is seconds), "1h", "30m",
 * "90s", "1.5h". Returns 0 or -EINVAL (not finite, negative, or beyond 100 years). */
int rec_duration_parse(const char *s, double *seconds);

#endif
