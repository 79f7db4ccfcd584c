/* SPDX-License-Identifier: GPL-2.0 */
/* Sizes, rates and ages as leaks, oom and top print them: B/KiB/MiB/GiB (or exact with
 * --bytes), per second, and ages like 3m12s. */
#ifndef GPUMEM_VIEWS_UNITS_H
#define GPUMEM_VIEWS_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "12.3 MiB", or "12897484" when exact. */
void fmt_size(char *buf, size_t len, uint64_t bytes, bool exact);
/* A signed amount: "+1.0 KiB", "-3 B", "0". */
void fmt_delta(char *buf, size_t len, double bytes, bool exact);
/* Nanoseconds as "850ms", "45s", "3m12s", "2h05m", "3d04h"; 0 gives "-". */
void fmt_age(char *buf, size_t len, uint64_t ns);
/* Events per second: "0", "12", "3.4k". */
void fmt_rate(char *buf, size_t len, double per_s);

#endif
