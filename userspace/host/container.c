// SPDX-License-Identifier: GPL-2.0
/* Container runtime, container id, pod UID and QoS class from a cgroup v2 path; the pid inside
 * a process's own pid namespace; the cgroup v2 mount and the cgroup id of a cgroup directory. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "host/container.h"

/* One component of a cgroup path: not NUL-terminated. */
struct comp {
	const char *s;
	size_t n;
};

/* Container scopes named "<prefix><64 hex>[.scope]", as each runtime's cgroup driver names
 * them (systemd driver: docker-ID.scope; cgroupfs driver of podman: libpod-ID). */
static const struct {
	const char *prefix;
	const char *runtime;
} container_prefixes[] = {
	{ "docker-", "docker" },
	{ "cri-containerd-", "containerd" },
	{ "crio-", "cri-o" },
	{ "libpod-", "podman" },
	{ "nerdctl-", "containerd" },
};

static bool comp_is(struct comp c, const char *word)
{
	return c.n == strlen(word) && memcmp(c.s, word, c.n) == 0;
}

static bool comp_starts(struct comp c, const char *prefix)
{
	size_t n = strlen(prefix);

	return c.n >= n && memcmp(c.s, prefix, n) == 0;
}

static bool comp_ends(struct comp c, const char *suffix)
{
	size_t n = strlen(suffix);

	return c.n >= n && memcmp(c.s + c.n - n, suffix, n) == 0;
}

static struct comp comp_skip(struct comp c, size_t n)
{
	return (struct comp){ c.s + n, c.n - n };
}

static bool all_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

static void copy_lower(char *dst, const char *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = tolower((unsigned char)src[i]);
	dst[n] = '\0';
}

static void set_str(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src);
}

/*
 * A pod UID as kubelet writes it into a cgroup name: a UUID with '-' (cgroupfs driver) or
 * '_' (systemd driver, which reserves '-' as its slice separator), or the 32 hex digits of a
 * static pod's config hash. Stored lowercase, with '-'.
 */
static bool parse_pod_uid(struct comp c, char *out)
{
	size_t i;

	if (c.n == 32 && all_hex(c.s, c.n)) {
		copy_lower(out, c.s, c.n);
		return true;
	}
	if (c.n != 36)
		return false;
	for (i = 0; i < c.n; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (c.s[i] != '-' && c.s[i] != '_')
				return false;
			out[i] = '-';
		} else if (isxdigit((unsigned char)c.s[i])) {
			out[i] = tolower((unsigned char)c.s[i]);
		} else {
			return false;
		}
	}
	out[c.n] = '\0';
	return true;
}

/* "burstable" or "besteffort" at the start of c; its length, or 0. */
static size_t parse_qos(struct comp c, struct container_info *out)
{
	static const char *const classes[] = { "burstable", "besteffort" };
	size_t i, n;

	for (i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
		n = strlen(classes[i]);
		if (comp_starts(c, classes[i]) && (c.n == n || c.s[n] == '-')) {
			if (!out->has_pod)
				set_str(out->qos, sizeof(out->qos), classes[i]);
			return n;
		}
	}
	return 0;
}

static void set_pod(struct container_info *out, struct comp uid)
{
	char buf[sizeof(out->pod_uid)];

	/* the outermost pod wins: a pod inside a pod (kind) is a test cluster's, not the node's */
	if (out->has_pod || !parse_pod_uid(uid, buf))
		return;
	memcpy(out->pod_uid, buf, sizeof(buf));
	out->has_pod = true;
}

/*
 * kubelet's systemd driver: "kubepods.slice", "kubepods-<qos>.slice",
 * "kubepods[-<qos>]-pod<uid>.slice" (no qos level for guaranteed pods).
 */
static bool parse_kube_slice(struct comp c, struct container_info *out)
{
	size_t n;

	if (!comp_starts(c, "kubepods") || !comp_ends(c, ".slice"))
		return false;
	c.n -= strlen(".slice");
	c = comp_skip(c, strlen("kubepods"));
	if (c.n == 0)
		return true;
	if (c.s[0] != '-')
		return false;
	c = comp_skip(c, 1);
	n = parse_qos(c, out);
	if (n) {
		c = comp_skip(c, n);
		if (c.n == 0)
			return true;
		c = comp_skip(c, 1);	/* the '-' parse_qos checked */
	}
	if (comp_starts(c, "pod"))
		set_pod(out, comp_skip(c, strlen("pod")));
	return true;
}

/* kubelet's cgroupfs driver, below a "kubepods" component: "<qos>", "pod<uid>". */
static void parse_kube_dir(struct comp c, struct container_info *out)
{
	if (comp_is(c, "burstable") || comp_is(c, "besteffort"))
		parse_qos(c, out);
	else if (comp_starts(c, "pod"))
		set_pod(out, comp_skip(c, strlen("pod")));
}

static void set_container(struct container_info *out, const char *runtime, const char *id)
{
	set_str(out->runtime, sizeof(out->runtime), runtime);
	copy_lower(out->id, id, CONTAINER_ID_LEN);
	out->has_id = true;
}

/* A container's own cgroup; parent is the component above it (for bare ids). */
static bool parse_container(struct comp c, struct comp parent, struct container_info *out)
{
	struct comp rest;
	const char *id;
	size_t i;

	if (c.n == CONTAINER_ID_LEN && all_hex(c.s, c.n)) {
		/* cgroupfs drivers name the cgroup by the bare id: only docker says whose it is */
		set_container(out, comp_is(parent, "docker") ? "docker" : "", c.s);
		return true;
	}
	for (i = 0; i < sizeof(container_prefixes) / sizeof(container_prefixes[0]); i++) {
		if (!comp_starts(c, container_prefixes[i].prefix))
			continue;
		rest = comp_skip(c, strlen(container_prefixes[i].prefix));
		id = rest.s;
		if (rest.n < CONTAINER_ID_LEN || !all_hex(id, CONTAINER_ID_LEN))
			continue;
		rest = comp_skip(rest, CONTAINER_ID_LEN);
		if (rest.n && !comp_is(rest, ".scope"))
			continue;
		set_container(out, container_prefixes[i].runtime, id);
		return true;
	}
	return false;
}

int container_parse_cgroup(const char *cgroup_path, struct container_info *out)
{
	struct comp c, parent = { "", 0 }, last = { "", 0 };
	const char *p, *end;
	bool in_kube = false;

	if (!cgroup_path || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	p = cgroup_path;
	if (strncmp(p, "0::", 3) == 0)	/* a whole line of /proc/PID/cgroup */
		p += 3;
	end = p + strcspn(p, "\n");
	while (p < end) {
		c.s = p;
		c.n = strcspn(p, "/\n");
		if (c.s + c.n > end)
			c.n = end - c.s;
		p += c.n + (p + c.n < end);
		/* empty and ".." components: "//" and paths seen from another cgroup namespace */
		if (c.n == 0 || comp_is(c, ".") || comp_is(c, ".."))
			continue;
		if (comp_is(c, "kubepods"))
			in_kube = true;
		else if (parse_kube_slice(c, out))
			in_kube = true;
		else if (!parse_container(c, parent, out) && in_kube)
			parse_kube_dir(c, out);
		parent = c;
		last = c;
	}
	if (!out->has_pod)
		out->qos[0] = '\0';	/* a QoS slice with no pod below it */
	else if (!out->qos[0])
		set_str(out->qos, sizeof(out->qos), "guaranteed");
	/* a systemd unit (session, service, app scope) that is no container */
	if (!out->has_id && !out->has_pod && (comp_ends(last, ".scope") ||
					       comp_ends(last, ".service")))
		set_str(out->runtime, sizeof(out->runtime), "systemd");
	return 0;
}

bool container_id_matches(const struct container_info *ci, const char *prefix)
{
	const char *scheme;
	size_t n;

	if (!ci || !prefix || !ci->has_id)
		return false;
	scheme = strstr(prefix, "://");
	if (scheme)
		prefix = scheme + 3;
	n = strlen(prefix);
	if (n == 0 || n > CONTAINER_ID_LEN || !all_hex(prefix, n))
		return false;
	return strncasecmp(ci->id, prefix, n) == 0;
}

int proc_parse_ns_pid(const char *status_text, int *ns_pid)
{
	const char *line = status_text;
	long last = -1, v;
	char *end;

	if (!status_text || !ns_pid)
		return -EINVAL;
	while (strncmp(line, "NSpid:", 6) != 0) {
		line = strchr(line, '\n');
		if (!line)
			return -ENOENT;
		line++;
	}
	line += 6;
	/* one pid per nested namespace, the outermost first */
	for (;;) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (*line == '\n' || *line == '\0')
			break;
		if (!isdigit((unsigned char)*line))
			return -EINVAL;
		errno = 0;
		v = strtol(line, &end, 10);
		if (errno || v <= 0 || v > INT32_MAX)
			return -EINVAL;
		last = v;
		line = end;
	}
	if (last < 0)
		return -EINVAL;
	*ns_pid = (int)last;
	return 0;
}

/* The whole of a /proc file, NUL-terminated, in a malloc'd buffer. */
static int read_text_file(const char *path, char **text)
{
	size_t cap = 4096, got = 0;
	char *buf, *bigger;
	ssize_t r;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		err = -ENOMEM;
		goto out_close;
	}
	for (;;) {
		if (got + 1 == cap) {
			bigger = realloc(buf, cap * 2);
			if (!bigger) {
				err = -ENOMEM;
				goto out_free;
			}
			buf = bigger;
			cap *= 2;
		}
		r = read(fd, buf + got, cap - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			goto out_free;
		}
		if (r == 0)
			break;
		got += r;
	}
	buf[got] = '\0';
	*text = buf;
	goto out_close;
out_free:
	free(buf);
out_close:
	close(fd);
	return err;
}

int proc_ns_pid(int pid, int *ns_pid)
{
	char path[64], *text;
	int err;

	if (pid <= 0 || !ns_pid)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	err = read_text_file(path, &text);
	if (err)
		return err;
	err = proc_parse_ns_pid(text, ns_pid);
	free(text);
	return err;
}

/* A mountinfo field with its octal escapes ("\040" for a space) undone. */
static int unescape_field(const char *s, size_t n, char *buf, size_t len)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		if (o + 1 >= len)
			return -ENAMETOOLONG;
		if (s[i] == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' &&
		    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
			buf[o++] = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');
			i += 3;
		} else {
			buf[o++] = s[i];
		}
	}
	buf[o] = '\0';
	return 0;
}

/* How deep a mount's root sits: ".." counts -1, a name +1. The least deep sees the most. */
static int root_depth(const char *s, size_t n)
{
	struct comp c;
	size_t i = 0;
	int depth = 0;

	while (i < n) {
		c.s = s + i;
		c.n = 0;
		while (i + c.n < n && s[i + c.n] != '/')
			c.n++;
		i += c.n + 1;
		if (comp_is(c, ".."))
			depth--;
		else if (c.n && !comp_is(c, "."))
			depth++;
	}
	return depth;
}

int cgroup_v2_mount_parse(const char *mountinfo, char *mnt, size_t mntlen, char *root,
			  size_t rootlen)
{
	const char *line = mountinfo, *eol, *f[5], *sep;
	size_t flen[5];
	int i, depth, best = 0, err;
	bool found = false;

	if (!mountinfo || !mnt || !mntlen || (root && !rootlen))
		return -EINVAL;
	for (; *line; line = *eol ? eol + 1 : eol) {
		eol = line + strcspn(line, "\n");
		/* ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE ... */
		sep = line;
		for (i = 0; i < 5; i++) {
			f[i] = sep;
			flen[i] = strcspn(sep, " \n");
			sep += flen[i];
			if (sep >= eol)
				break;
			sep++;
		}
		if (i < 5)
			continue;
		sep = strstr(sep, " - ");
		if (!sep || sep > eol || strncmp(sep + 3, "cgroup2 ", 8) != 0)
			continue;
		depth = root_depth(f[3], flen[3]);
		if (found && depth >= best)
			continue;
		err = unescape_field(f[4], flen[4], mnt, mntlen);
		if (!err && root)
			err = unescape_field(f[3], flen[3], root, rootlen);
		if (err)
			return err;
		best = depth;
		found = true;
	}
	return found ? 0 : -ENOENT;
}

int cgroup_v2_mount(char *buf, size_t len)
{
	char *text;
	int err;

	err = read_text_file("/proc/self/mountinfo", &text);
	if (err)
		return err;
	err = cgroup_v2_mount_parse(text, buf, len, NULL, 0);
	free(text);
	return err;
}

int cgroup_fs_path(const char *mnt, const char *mnt_root, const char *cgroup_path, char *buf,
		   size_t len)
{
	const char *rest;
	size_t rn;
	int n;

	if (!mnt || !mnt_root || !cgroup_path || !buf || !len)
		return -EINVAL;
	rn = strlen(mnt_root);
	while (rn && mnt_root[rn - 1] == '/')
		rn--;
	if (strncmp(cgroup_path, mnt_root, rn) != 0)
		return -EXDEV;
	rest = cgroup_path + rn;
	if (*rest && *rest != '/')
		return -EXDEV;		/* "/a/bc" is not below "/a/b" */
	for (const char *c = rest; (c = strstr(c, "/..")); c += 3)
		if (c[3] == '/' || c[3] == '\0')
			return -EXDEV;	/* a ".." anywhere may climb above the mount's root */
	if (strcmp(rest, "/") == 0)
		rest = "";
	n = snprintf(buf, len, "%s%s", mnt, rest);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int cgroup_id_of_path(const char *cgroup_fs_path, uint64_t *id)
{
	struct statfs sfs;
	struct stat st;

	if (!cgroup_fs_path || !id)
		return -EINVAL;
	if (statfs(cgroup_fs_path, &sfs))
		return -errno;
	if (sfs.f_type != CGROUP2_SUPER_MAGIC)
		return -EINVAL;
	if (stat(cgroup_fs_path, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -EINVAL;
	/* kernfs gives each node a 64-bit id and uses it as the inode number (Linux 5.5+) */
	*id = st.st_ino;
	return 0;
}

/* Depth-first, each directory once (no symlinks followed: cgroupfs has none). */
static int walk_dir(char *path, size_t len, size_t cap, unsigned int depth, cgroup_visit_fn fn,
		    void *ctx)
{
	struct dirent *de;
	struct stat st;
	DIR *dir;
	int stop;

	if (lstat(path, &st) || !S_ISDIR(st.st_mode))
		return 0;
	stop = fn(ctx, path, &st);
	if (stop || depth >= CGROUP_WALK_MAX_DEPTH)
		return stop;
	dir = opendir(path);
	if (!dir)
		return 0;
	while (!stop && (de = readdir(dir))) {
		int n;

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n = snprintf(path + len, cap - len, "/%s", de->d_name);
		if (n < 0 || (size_t)n >= cap - len)
			continue;
		stop = walk_dir(path, len + (size_t)n, cap, depth + 1, fn, ctx);
		path[len] = 0;
	}
	closedir(dir);
	return stop;
}

int cgroup_walk(const char *root, cgroup_visit_fn fn, void *ctx)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s", root);

	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	return walk_dir(path, (size_t)n, sizeof(path), 0, fn, ctx);
}
