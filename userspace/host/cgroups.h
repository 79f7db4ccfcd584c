/* SPDX-License-Identifier: GPL-2.0 */
/* Cgroup ids (what the BPF side records at a process's calls) to cgroup v2 paths, cached:
 * each id is looked up once, a vanished cgroup included, and the cache is bounded. */
#ifndef GPUMEM_CGROUPS_H
#define GPUMEM_CGROUPS_H

#include <stdint.h>

#define CGROUP_CACHE_MAX 4096	/* ids remembered; the oldest half goes when it is full */

struct cgroup_cache;

struct cgroup_cache *cgroup_cache_new(void);
void cgroup_cache_free(struct cgroup_cache *c);
/* The path of cgroup id as /proc/PID/cgroup prints it, or NULL when no cgroup has that id
 * (any more). pid's own /proc entry is tried first; the tree is walked only when that fails,
 * and only once per id. The string stays valid until the next call. */
const char *cgroup_cache_path(struct cgroup_cache *c, uint64_t id, int pid);

#endif
