// SPDX-License-Identifier: GPL-2.0
/* Cgroup id -> path, cached per id (negative answers too), bounded by CGROUP_CACHE_MAX. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "base/util.h"
#include "host/cgroups.h"
#include "host/container.h"
#include "host/procs.h"

struct cgroup_entry {
	uint64_t id;
	char *path;	/* NULL: no cgroup has this id */
};

struct cgroup_cache {
	struct cgroup_entry *v;	/* oldest first */
	size_t n;
	char mnt[PATH_MAX];
	int mount_err;	/* 1: not looked up yet */
	char *last;	/* a copy of the answer, which survives eviction until the next call */
};

struct cgroup_cache *cgroup_cache_new(void)
{
	struct cgroup_cache *c = xcalloc(1, sizeof(*c));

	c->mount_err = 1;
	return c;
}

static void drop_oldest(struct cgroup_cache *c, size_t k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k; i++)
		free(c->v[i].path);
	memmove(c->v, c->v + k, (c->n - k) * sizeof(*c->v));
	c->n -= k;
}

void cgroup_cache_free(struct cgroup_cache *c)
{
	if (!c)
		return;
	drop_oldest(c, c->n);
	free(c->v);
	free(c->last);
	free(c);
}

static int mount_of(struct cgroup_cache *c)
{
	if (c->mount_err != 1)
		return c->mount_err;
	c->mount_err = cgroup_v2_mount(c->mnt, sizeof(c->mnt));
	return c->mount_err;
}

/* /proc/PID/cgroup, if that cgroup is the one with this id. */
static char *from_proc(struct cgroup_cache *c, uint64_t id, int pid)
{
	char path[PATH_MAX], fs[PATH_MAX];
	uint64_t got;

	if (pid <= 0 || proc_read_cgroup(pid, path, sizeof(path)))
		return NULL;
	if (snprintf(fs, sizeof(fs), "%s%s", c->mnt, strcmp(path, "/") ? path : "") >=
	    (int)sizeof(fs))
		return NULL;
	if (cgroup_id_of_path(fs, &got) || got != id)
		return NULL;
	return xstrdup(path);
}

struct id_search {
	uint64_t id;
	size_t mnt_len;
	char *found;
};

static int match_id(void *ctx, const char *path, const struct stat *st)
{
	struct id_search *s = ctx;

	if (st->st_ino != s->id)
		return 0;
	s->found = xstrdup(path[s->mnt_len] ? path + s->mnt_len : "/");
	return 1;
}

static char *from_walk(struct cgroup_cache *c, uint64_t id)
{
	struct id_search s = { .id = id, .mnt_len = strlen(c->mnt) };

	cgroup_walk(c->mnt, match_id, &s);
	return s.found;
}

const char *cgroup_cache_path(struct cgroup_cache *c, uint64_t id, int pid)
{
	char *path;

	if (!id || mount_of(c))
		return NULL;
	for (size_t i = c->n; i-- > 0;) {
		if (c->v[i].id != id)
			continue;
		free(c->last);
		c->last = c->v[i].path ? xstrdup(c->v[i].path) : NULL;
		return c->last;
	}
	path = from_proc(c, id, pid);
	if (!path)
		path = from_walk(c, id);
	if (c->n == CGROUP_CACHE_MAX)
		drop_oldest(c, CGROUP_CACHE_MAX / 2);
	if (c->n % 64 == 0)
		c->v = xrealloc(c->v, (c->n + 64) * sizeof(*c->v));
	c->v[c->n++] = (struct cgroup_entry){ .id = id, .path = path };
	free(c->last);
	c->last = path ? xstrdup(path) : NULL;
	return c->last;
}
