// SPDX-License-Identifier: GPL-2.0
/* --cgroup, --container and --pod: which cgroup v2 directories they select. The BPF side then
 * traces tasks in those cgroups or below them (bpf_current_task_under_cgroup), so processes of
 * other containers cost only the trap. A container started after gpumem is selected only by
 * --cgroup or --pod of a parent cgroup that already exists. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "base/util.h"
#include "discover/select.h"
#include "host/container.h"

struct scan {
	const struct selection *sel;
	size_t mnt_len;
	char ***dirs;
	size_t *n;
};

static void add_dir(char ***dirs, size_t *n, const char *path)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*dirs)[i], path) == 0)
			return;
	*dirs = xrealloc(*dirs, (*n + 1) * sizeof(**dirs));
	(*dirs)[(*n)++] = xstrdup(path);
}

/* The directory selects what it holds: a pod's own slice, not each of its containers. */
static bool parent_matches(const char *path, const struct selection *sel, size_t mnt_len)
{
	char parent[PATH_MAX];
	struct container_info ci;
	char *slash;

	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (!slash || (size_t)(slash - parent) <= mnt_len)
		return false;
	*slash = 0;
	container_parse_cgroup(parent + mnt_len, &ci);
	if (strcmp(sel->kind, "pod") == 0)
		return ci.has_pod && strcasecmp(ci.pod_uid, sel->value) == 0;
	return container_id_matches(&ci, sel->value);
}

static int visit(void *ctx, const char *path, const struct stat *st)
{
	const struct scan *sc = ctx;
	struct container_info ci;
	bool match;

	(void)st;
	container_parse_cgroup(path + sc->mnt_len, &ci);
	if (strcmp(sc->sel->kind, "pod") == 0)
		match = ci.has_pod && strcasecmp(ci.pod_uid, sc->sel->value) == 0;
	else
		match = container_id_matches(&ci, sc->sel->value);
	if (match && !parent_matches(path, sc->sel, sc->mnt_len))
		add_dir(sc->dirs, sc->n, path);
	return 0;
}

static int select_one(const struct selection *sel, const char *mnt, char ***dirs, size_t *n)
{
	char path[PATH_MAX];
	struct stat st;
	size_t before = *n;

	if (strcmp(sel->kind, "cgroup") == 0) {
		/* As /proc/PID/cgroup and gpumem's JSON print it, or a path on the mount. */
		snprintf(path, sizeof(path), "%s%s", mnt, sel->value);
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			add_dir(dirs, n, path);
		else if (stat(sel->value, &st) == 0 && S_ISDIR(st.st_mode))
			add_dir(dirs, n, sel->value);
	} else {
		struct scan sc = { .sel = sel, .mnt_len = strlen(mnt), .dirs = dirs, .n = n };

		cgroup_walk(mnt, visit, &sc);
	}
	if (*n == before) {
		p_err("no cgroup matches --%s %s (looked under %s)", sel->kind, sel->value, mnt);
		return -ENOENT;
	}
	return 0;
}

int select_cgroups(const struct selection *sel, size_t nsel, char ***dirs, size_t *n)
{
	char mnt[PATH_MAX];
	int err;

	*dirs = NULL;
	*n = 0;
	if (!nsel)
		return 0;
	err = cgroup_v2_mount(mnt, sizeof(mnt));
	if (err) {
		p_err("--%s needs cgroup v2, and no cgroup2 file system is mounted", sel[0].kind);
		return err;
	}
	for (size_t i = 0; i < nsel; i++) {
		err = select_one(&sel[i], mnt, dirs, n);
		if (err) {
			selection_free(*dirs, *n);
			*dirs = NULL;
			*n = 0;
			return err;
		}
	}
	return 0;
}

void selection_free(char **dirs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(dirs[i]);
	free(dirs);
}
