// SPDX-License-Identifier: GPL-2.0
/* Sizes, rates and ages for the views that people read at a glance. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include "output/units.h"

void fmt_size(char *buf, size_t len, uint64_t bytes, bool exact)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	unsigned int u = 0;

	if (exact || bytes < 1024) {
		snprintf(buf, len, "%" PRIu64 "%s", bytes, exact ? "" : " B");
		return;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
}

void fmt_delta(char *buf, size_t len, double bytes, bool exact)
{
	char mag[32];
	double a = fabs(bytes);

	if (a < 0.5) {
		snprintf(buf, len, "0");
		return;
	}
	fmt_size(mag, sizeof(mag), (uint64_t)llround(a), exact);
	snprintf(buf, len, "%c%s", bytes < 0 ? '-' : '+', mag);
}

void fmt_age(char *buf, size_t len, uint64_t ns)
{
	uint64_t s = ns / 1000000000;

	if (!ns)
		snprintf(buf, len, "-");
	else if (s == 0)
		snprintf(buf, len, "%" PRIu64 "ms", ns / 1000000);
	else if (s < 60)
		snprintf(buf, len, "%" PRIu64 "s", s);
	else if (s < 3600)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s % 3600 / 60);
	else
		snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s % 86400 / 3600);
}

void fmt_rate(char *buf, size_t len, double per_s)
{
	if (per_s < 0.05)
		snprintf(buf, len, "0");
	else if (per_s < 10)
		snprintf(buf, len, "%.1f", per_s);
	else if (per_s < 10000)
		snprintf(buf, len, "%.0f", per_s);
	else if (per_s < 10000000)
		snprintf(buf, len, "%.1fk", per_s / 1000);
	else
		snprintf(buf, len, "%.1fM", per_s / 1e6);
}
