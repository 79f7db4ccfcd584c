/* SPDX-License-Identifier: GPL-2.0 */
/* A process's environment as it is now, read from its memory through its C library's
 * __environ: what it set since it started (setenv; os.environ in Python), which
 * /proc/PID/environ, the environment it started with, does not show. */
#ifndef GPUMEM_ENVIRON_H
#define GPUMEM_ENVIRON_H

#include <stddef.h>
#include "host/procs.h"

#define ENVIRON_MAX_VARS 4096	/* entries of the array looked at, at most */
#define ENVIRON_VALUE_MAX 4096	/* a wanted variable longer than this: not known */

/*
 * The variables of pid named in names (NULL-terminated, 32 at most, each 30 characters at
 * most), as /proc/PID/environ has them ("NAME=value", each NUL-terminated), in buf (cap
 * bytes; *n of them used), read through the __environ of the program or C library (glibc's
 * or musl's) mm maps. Of a name set twice, the first, as getenv takes it. 0 when the
 * environment was read whole (a name missing from it is unset); -ENOENT when no __environ is
 * mapped (a static program); -E2BIG past ENVIRON_MAX_VARS variables, or for a wanted one
 * longer than ENVIRON_VALUE_MAX or past cap (not known); -ESTALE when the process exec'd
 * during the read (AT_RANDOM, or the random bytes there, changed) or rewrote a wanted
 * variable's name meanwhile; or -errno. Untrusted: the process makes its memory what it
 * likes; every read is bounded to its page, at most about 10 + ENVIRON_MAX_VARS * 2 + 32 * 2
 * of them.
 */
int environ_read_live(int pid, const struct module_map *mm, const char *const *names,
		      char *buf, size_t cap, size_t *n);

#endif
