/* SPDX-License-Identifier: GPL-2.0 */
/* A process's environment as it is now, read from its memory through its C library's
 * __environ: what it set since it started (setenv; os.environ in Python), which
 * /proc/PID/environ, the environment it started with, does not show. */
#ifndef GPUMEM_ENVIRON_H
#define GPUMEM_ENVIRON_H

#include <stddef.h>
#include "host/procs.h"

#define ENVIRON_MAX_VARS 4096	/* entries of the array looked at, at most */
#define ENVIRON_VALUE_MAX 4096	/* a variable longer than this is left out */

/*
 * The variables of pid named in names (NULL-terminated), as /proc/PID/environ has them
 * ("NAME=value", each NUL-terminated), in buf (cap bytes; *n of them used), read through the
 * __environ of the C library mm maps (glibc's or musl's). 0 when the environment was read
 * (named ones missing from it are not there); -ENOENT when no C library or no __environ is
 * mapped (a static program), or -errno. Untrusted: the process makes its memory what it
 * likes; every read is bounded and a variable cut short is left out.
 */
int environ_read_live(int pid, const struct module_map *mm, const char *const *names,
		      char *buf, size_t cap, size_t *n);

#endif
