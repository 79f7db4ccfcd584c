// SPDX-License-Identifier: GPL-2.0
/* The agent's pins under its directory of the BPF file system: which maps and links are
 * pinned and by what name, whether pinned state can be adopted (same layout, same
 * capacities), the agent record that says who owns it, and their removal (serve --reset). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "base/util.h"
#include "loader/pin.h"

static bool is_bpffs(const char *dir)
{
	struct statfs st;

	return statfs(dir, &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

int pin_path(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Maps that stay with the pins: every map but the object's own data sections and its kconfig
 * values (each program keeps the ones it was loaded with), the holds, which all instances
 * share elsewhere, and libbpf's USDT specs, which describe the USDT links of this run only
 * (never pinned). */
bool pin_keeps_map(const struct bpf_map *m)
{
	const char *name = bpf_map__name(m);

	return name[0] != '.' && !strstr(name, ".rodata") && !strstr(name, ".bss") &&
	       !strstr(name, ".data") && !strstr(name, ".kconfig") && strcmp(name, "holds") != 0 &&
	       strncmp(name, "__bpf_usdt", 10) != 0;
}

/* A directory for the pins on a BPF file system: created when missing, refused when it is
 * not on one (a pin there would fail later, one map at a time). */
static int make_pin_dir(const char *dir)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(dir, '/');

	/* Nothing is made where a pin could not live. */
	snprintf(parent, sizeof(parent), "%.*s", slash && slash != dir ? (int)(slash - dir) : 1,
		 slash ? dir : ".");
	if (access(dir, F_OK) && !is_bpffs(parent)) {
		p_err("%s is not on a BPF file system (mount one: mount -t bpf bpf /sys/fs/bpf)",
		      dir);
		return -ENOTSUP;
	}
	if (mkdir(dir, 0700) && errno != EEXIST) {
		p_err("cannot create %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (!is_bpffs(dir)) {
		p_err("%s is not on a BPF file system (mount one: mount -t bpf bpf /sys/fs/bpf)",
		      dir);
		return -ENOTSUP;
	}
	return 0;
}

/* Why a pinned map cannot be taken over by m, in a few words, or NULL when it can. */
const char *pin_map_mismatch(int fd, const struct bpf_map *m, char *why, size_t len)
{
	struct bpf_map_info info = { 0 };
	__u32 ilen = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &ilen)) {
		snprintf(why, len, "map %s cannot be read: %s", bpf_map__name(m), strerror(errno));
		return why;
	}
	if (info.type != bpf_map__type(m) || info.key_size != bpf_map__key_size(m) ||
	    info.value_size != bpf_map__value_size(m))
		snprintf(why, len, "map %s has another layout", bpf_map__name(m));
	else if (info.max_entries != bpf_map__max_entries(m))
		snprintf(why, len, "map %s has %u entries, this agent asks for %u",
			 bpf_map__name(m), info.max_entries, bpf_map__max_entries(m));
	else
		return NULL;
	return why;
}

static int refuse(const char *dir, const char *why)
{
	p_err("the pinned state in %s cannot be adopted: %s; stop its agent and reset it with "
	      "`gpumem serve --reset --pin-dir %s` (or start with the capacities it was made with)",
	      dir, why, dir);
	return -EEXIST;
}

/* The pinned agent map of dir, or -errno. */
static int open_agent_map(const char *dir)
{
	char path[PATH_MAX];
	int fd;

	if (pin_path(path, sizeof(path), dir, "agent"))
		return -ENAMETOOLONG;
	fd = bpf_obj_get(path);
	return fd < 0 ? -errno : fd;
}

int pin_read_agent(const char *dir, struct gm_agent *out)
{
	__u32 key = 0;
	int fd = open_agent_map(dir), err;

	if (fd < 0)
		return fd;
	err = bpf_map_lookup_elem(fd, &key, out) ? -errno : 0;
	close(fd);
	if (!err && !out->layout)
		err = -ENOENT;	/* made, never written: a start that failed half way */
	return err;
}

bool pin_agent_running(const struct gm_agent *a)
{
	/* Signed: a heartbeat ahead of this clock (another time namespace) is fresh too. */
	int64_t age = (int64_t)(now_ns() - a->heartbeat_ns);

	return a->pid && age <= (int64_t)GM_AGENT_FRESH_NS && age >= -(int64_t)GM_AGENT_FRESH_NS &&
	       pid_is_gpumem(a->pid);
}

bool pid_is_gpumem(uint32_t pid)
{
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = 0;
	fclose(f);
	return strncmp(comm, "gpumem", 6) == 0;
}

int pin_prepare(struct bpf_object *obj, const char *dir, const struct gm_agent *want,
		bool *adopting)
{
	char path[PATH_MAX], why[160];
	struct gm_agent a;
	struct bpf_map *m;
	int err = make_pin_dir(dir);

	if (err)
		return err;
	*adopting = pin_read_agent(dir, &a) == 0;
	if (*adopting && a.layout != GM_LAYOUT_VERSION) {
		snprintf(why, sizeof(why), "layout %u, this gpumem has layout %u", a.layout,
			 GM_LAYOUT_VERSION);
		return refuse(dir, why);
	}
	if (*adopting && (a.stack_mode != want->stack_mode || a.stack_bytes != want->stack_bytes ||
			  a.python_frames != want->python_frames))
		return refuse(dir, "its probes were loaded with other --unwind, --stack-bytes or "
			      "--no-python options");
	if (*adopting && a.uprobe_sessions != want->uprobe_sessions)
		return refuse(dir, a.uprobe_sessions ? "its probes are uprobe sessions, which this "
				   "kernel has not"
				 : "its probes are no uprobe sessions");
	if (*adopting && pin_agent_running(&a)) {
		p_err("an agent already runs on %s (PID %u)", dir, a.pid);
		return -EBUSY;
	}
	bpf_object__for_each_map(m, obj) {
		int fd;

		if (!pin_keeps_map(m))
			continue;
		if (pin_path(path, sizeof(path), dir, bpf_map__name(m)))
			return -ENAMETOOLONG;
		fd = bpf_obj_get(path);
		if (fd >= 0) {
			const char *bad = pin_map_mismatch(fd, m, why, sizeof(why));

			close(fd);
			if (bad)
				return refuse(dir, bad);
		} else if (*adopting) {
			snprintf(why, sizeof(why), "map %s is missing", bpf_map__name(m));
			return refuse(dir, why);
		}
		err = bpf_map__set_pin_path(m, path);
		if (err)
			return err;
	}
	return 0;
}

/* The name of a file's link for one program, by the file's kernel device and inode. */
int pin_file_link_name(char *buf, size_t len, const char *dir, uint64_t kdev, uint64_t ino,
		       unsigned int prog)
{
	int n = snprintf(buf, len, "%s/file-%llx-%llu-%u", dir, (unsigned long long)kdev,
			 (unsigned long long)ino, prog);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

bool pin_file_linked(const char *dir, uint64_t kdev, uint64_t ino)
{
	char path[PATH_MAX];

	for (unsigned int i = 0; i < PIN_FILE_PROGS; i++)
		if (!pin_file_link_name(path, sizeof(path), dir, kdev, ino, i) &&
		    access(path, F_OK) == 0)
			return true;
	return false;
}

int pin_drop_file_links(const char *dir, uint64_t kdev, uint64_t ino)
{
	char path[PATH_MAX];
	int n = 0;

	for (unsigned int i = 0; i < PIN_FILE_PROGS; i++) {
		int fd;

		if (pin_file_link_name(path, sizeof(path), dir, kdev, ino, i))
			continue;
		/* Held across the unlink: the close releases the link, and its probes are gone
		 * when this returns (the pin's own put is deferred to a worker). */
		fd = bpf_obj_get(path);
		if (unlink(path) == 0)
			n++;
		if (fd >= 0)
			close(fd);
	}
	return n;
}

int pin_fd(int fd, const char *path)
{
	if (bpf_obj_pin(fd, path)) {
		int err = -errno;

		p_err("cannot pin %s: %s", path, strerror(-err));
		return err;
	}
	return 0;
}

int pin_write_agent(const char *dir, const struct gm_agent *a)
{
	__u32 key = 0;
	int fd = open_agent_map(dir), err;

	if (fd < 0)
		return fd;
	err = bpf_map_update_elem(fd, &key, a, BPF_ANY) ? -errno : 0;
	close(fd);
	return err;
}

/* Whether name is one gpumem pins: the agent record, a map of the object (names), a lifecycle
 * link (link-PROG), or a file's link (file-DEV-INO-PROG). */
static bool pinned_by_gpumem(const char *name, const char *const *names, size_t n)
{
	unsigned long long dev, ino;
	unsigned int prog;
	char end;

	if (!strcmp(name, "agent") || !strncmp(name, "link-", 5))
		return true;
	if (sscanf(name, "file-%llx-%llu-%u%c", &dev, &ino, &prog, &end) == 3)
		return true;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

int pin_unlink_stale_files(const char *dir, bool (*in_use)(void *ctx, uint64_t kdev, uint64_t ino),
			   void *ctx)
{
	unsigned long long kdev, ino;
	unsigned int prog, n = 0;
	struct dirent *e;
	char end;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (sscanf(e->d_name, "file-%llx-%llu-%u%c", &kdev, &ino, &prog, &end) == 3 &&
		    !in_use(ctx, kdev, ino) && unlinkat(dirfd(d), e->d_name, 0) == 0)
			n++;
	}
	closedir(d);
	return (int)n;
}

/* The agent record makes a directory gpumem's: without one, nothing in it is removed. */
static int check_ours(const char *dir)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	int fd = open_agent_map(dir), err = 0;

	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) ||
	    info.value_size != sizeof(struct gm_agent) || info.key_size != sizeof(__u32)) {
		p_err("%s holds no gpumem agent's record: not removing anything there (--reset "
		      "removes only what an agent pinned)", dir);
		err = -ENOENT;
	}
	if (fd >= 0)
		close(fd);
	return err;
}

int pin_reset(const char *dir, const char *const *names, size_t nnames)
{
	unsigned int n = 0, foreign = 0;
	struct gm_agent a;
	struct dirent *e;
	DIR *d;

	if (access(dir, F_OK) && errno == ENOENT) {
		fprintf(stderr, "gpumem: nothing is pinned in %s\n", dir);
		return 0;
	}
	if (!is_bpffs(dir)) {
		p_err("%s is not on a BPF file system: not removing anything there", dir);
		return -ENOTSUP;
	}
	if (check_ours(dir))
		return -ENOENT;
	if (pin_read_agent(dir, &a) == 0 && pin_agent_running(&a)) {
		p_err("an agent runs on %s (PID %u): stop it before --reset", dir, a.pid);
		return -EBUSY;
	}
	d = opendir(dir);
	if (!d) {
		p_err("cannot read %s: %s", dir, strerror(errno));
		return -errno;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (!pinned_by_gpumem(e->d_name, names, nnames))
			foreign++;
		else if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			n++;
		else
			p_err("cannot remove %s/%s: %s", dir, e->d_name, strerror(errno));
	}
	closedir(d);
	if (!foreign && rmdir(dir))
		p_err("cannot remove %s: %s", dir, strerror(errno));
	/* A link goes when its last pin does: the probes are off now. */
	fprintf(stderr, "gpumem: removed %u pins from %s: the agent's probes are detached%s\n", n,
		dir, foreign ? "; what gpumem did not pin there is left" : "");
	return 0;
}

int pin_open_maps(const char *dir, struct pin_maps *out)
{
	static const char *const names[] = { "procs", "sites", "allocs", "stacks", "counters" };
	int *fds[] = { &out->procs, &out->sites, &out->allocs, &out->stacks, &out->counters };
	char path[PATH_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		*fds[i] = -1;
	out->py_procs = out->py_stacks = -1;
	if (!pin_path(path, sizeof(path), dir, "py_procs"))
		out->py_procs = bpf_obj_get(path);
	if (!pin_path(path, sizeof(path), dir, "py_stacks"))
		out->py_stacks = bpf_obj_get(path);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (pin_path(path, sizeof(path), dir, names[i]))
			goto fail;
		*fds[i] = bpf_obj_get(path);
		if (*fds[i] < 0) {
			p_err("cannot open the agent's map %s: %s", path, strerror(errno));
			goto fail;
		}
	}
	return 0;
fail:
	pin_close_maps(out);
	return -ENOENT;
}

void pin_close_maps(struct pin_maps *m)
{
	int *fds[] = { &m->procs, &m->sites, &m->allocs, &m->stacks, &m->counters, &m->py_procs,
			&m->py_stacks };

	for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}
