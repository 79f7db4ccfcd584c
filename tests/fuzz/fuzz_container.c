// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzzes model/container.c. The input is up to four NUL-separated fields: a text (read as a
 * cgroup path, a /proc/PID/status and a mountinfo), a container id prefix, a mount root and a
 * mount point; the last two default to what the mountinfo parse found.
 */
#include <ctype.h>
#include <errno.h>
#include <strings.h>

#include "host/container.h"
#include "fuzz.h"

#define FIELDS 4

static bool lower_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return true;
}

static bool is_one_of(const char *s, const char *const *words, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(s, words[i]) == 0)
			return true;
	return false;
}

static bool valid_pod_uid(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 32)
		return lower_hex(s, n);
	if (n != 36)
		return false;
	for (i = 0; i < n; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!lower_hex(s + i, 1)) {
			return false;
		}
	}
	return true;
}

static void check_info(const struct container_info *ci, const char *path)
{
	static const char *const runtimes[] = {
		"", "docker", "containerd", "cri-o", "podman", "systemd",
	};
	static const char *const classes[] = { "guaranteed", "burstable", "besteffort" };

	fuzz_check(memchr(ci->runtime, 0, sizeof(ci->runtime)) &&
			   memchr(ci->id, 0, sizeof(ci->id)) &&
			   memchr(ci->pod_uid, 0, sizeof(ci->pod_uid)) &&
			   memchr(ci->qos, 0, sizeof(ci->qos)),
		   "a field is not NUL-terminated");
	fuzz_check(is_one_of(ci->runtime, runtimes, sizeof(runtimes) / sizeof(runtimes[0])),
		   "runtime \"%s\"", ci->runtime);
	fuzz_check(ci->has_id == (ci->id[0] != '\0'), "has_id %d with id \"%s\"", ci->has_id,
		   ci->id);
	fuzz_check(!ci->has_id || (strlen(ci->id) == CONTAINER_ID_LEN &&
				   lower_hex(ci->id, CONTAINER_ID_LEN)),
		   "id \"%s\"", ci->id);
	fuzz_check(!ci->has_id || strcasestr(path, ci->id), "id \"%s\" is not in the path", ci->id);
	fuzz_check(ci->has_pod == (ci->pod_uid[0] != '\0'), "has_pod %d with pod \"%s\"",
		   ci->has_pod, ci->pod_uid);
	fuzz_check(!ci->has_pod || valid_pod_uid(ci->pod_uid), "pod uid \"%s\"", ci->pod_uid);
	fuzz_check(ci->has_pod ? is_one_of(ci->qos, classes, 3) : ci->qos[0] == '\0',
		   "qos \"%s\" with has_pod %d", ci->qos, ci->has_pod);
	fuzz_check(strcmp(ci->runtime, "systemd") != 0 || (!ci->has_id && !ci->has_pod),
		   "a systemd unit with a container or pod");
}

/* What container.h promises for --container: scheme ignored, 1..64 hex digits, any case. */
static bool expect_match(const struct container_info *ci, const char *prefix)
{
	const char *scheme = strstr(prefix, "://");
	size_t n, i;

	if (scheme)
		prefix = scheme + 3;
	n = strlen(prefix);
	if (!ci->has_id || n == 0 || n > CONTAINER_ID_LEN)
		return false;
	for (i = 0; i < n; i++)
		if (!isxdigit((unsigned char)prefix[i]))
			return false;
	return strncasecmp(ci->id, prefix, n) == 0;
}

static void check_id_matches(const struct container_info *ci, const char *prefix)
{
	char upper[CONTAINER_ID_LEN + 16];
	size_t i;

	fuzz_check(container_id_matches(ci, prefix) == expect_match(ci, prefix),
		   "container_id_matches(\"%s\", \"%s\") is wrong", ci->id, prefix);
	fuzz_check(container_id_matches(ci, ci->id) == ci->has_id, "id does not match itself");
	if (!ci->has_id)
		return;
	snprintf(upper, sizeof(upper), "cri-o://%.12s", ci->id);
	for (i = 0; upper[i]; i++)
		upper[i] = toupper((unsigned char)upper[i]);
	fuzz_check(container_id_matches(ci, upper), "\"%s\" does not match \"%s\"", upper, ci->id);
	snprintf(upper, sizeof(upper), "%s0", ci->id);
	fuzz_check(!container_id_matches(ci, upper), "65 digits matched");
}

static void check_ns_pid(const char *text)
{
	int ns_pid = -1, err;

	err = proc_parse_ns_pid(text, &ns_pid);
	fuzz_check(err == 0 || err == -ENOENT || err == -EINVAL, "proc_parse_ns_pid: %d", err);
	fuzz_check(err != 0 || ns_pid > 0, "ns pid %d", ns_pid);
}

/* Into buffers of exactly mntlen and rootlen bytes; 0 means "fits". */
static int mount_parse(const char *text, size_t mntlen, size_t rootlen, bool want_root,
		       char *mnt_out, char *root_out)
{
	char *mnt = malloc(mntlen), *root = want_root ? malloc(rootlen) : NULL;
	int err;

	if (!mnt || (want_root && !root))
		abort();
	err = cgroup_v2_mount_parse(text, mnt, mntlen, root, rootlen);
	fuzz_check(err == 0 || err == -ENOENT || err == -ENAMETOOLONG, "cgroup_v2_mount_parse: %d",
		   err);
	if (err == 0) {
		fuzz_check(strnlen(mnt, mntlen) < mntlen, "mount point not terminated");
		fuzz_check(!root || strnlen(root, rootlen) < rootlen, "mount root not terminated");
		if (mnt_out)
			strcpy(mnt_out, mnt);
		if (root_out)
			strcpy(root_out, root);
	}
	free(mnt);
	free(root);
	return err;
}

static void check_fs_path(const char *mnt, const char *root, const char *path, size_t len)
{
	char *buf = malloc(len);
	int err;

	if (!buf)
		abort();
	err = cgroup_fs_path(mnt, root, path, buf, len);
	fuzz_check(err == 0 || err == -EXDEV || err == -ENAMETOOLONG, "cgroup_fs_path: %d", err);
	if (err == 0) {
		fuzz_check(strnlen(buf, len) < len, "cgroup_fs_path: not terminated");
		fuzz_check(strncmp(buf, mnt, strlen(mnt)) == 0, "\"%s\" is not under \"%s\"", buf,
			   mnt);
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = fuzz_strndup(data, size), *field[FIELDS] = { 0 }, *p = copy;
	size_t whole = size + sizeof("/sys/fs/cgroup"); /* any field of the input fits */
	char *mnt = malloc(whole), *root = malloc(whole), *fs_mnt, *fs_root;
	struct container_info ci;
	int i, err, err_noroot;
	char unused;

	if (!mnt || !root)
		abort();
	strcpy(mnt, "/sys/fs/cgroup");
	strcpy(root, "/");
	/* the fields lie in copy; a missing one stays NULL */
	for (i = 0; i < FIELDS && p <= copy + size; i++) {
		field[i] = p;
		p += strlen(p) + 1;
	}

	err = container_parse_cgroup(field[0], &ci);
	fuzz_check(err == 0, "container_parse_cgroup: %d", err);
	check_info(&ci, field[0]);
	fuzz_check(container_parse_cgroup(NULL, &ci) == -EINVAL, "NULL path taken");
	fuzz_check(container_parse_cgroup(field[0], NULL) == -EINVAL, "NULL out taken");
	check_id_matches(&ci, field[1] ? field[1] : "");
	fuzz_check(!container_id_matches(NULL, field[0]), "NULL info matched");

	check_ns_pid(field[0]);

	/* which mount wins does not depend on whether its root is asked for */
	err = mount_parse(field[0], whole, whole, true, mnt, root);
	err_noroot = mount_parse(field[0], whole, 0, false, NULL, NULL);
	fuzz_check(err == err_noroot, "the mount is %d with its root, %d without", err, err_noroot);
	mount_parse(field[0], 1, 1, true, NULL, NULL);
	mount_parse(field[0], 16, 2, true, NULL, NULL);

	fs_mnt = field[3] ? field[3] : mnt;
	fs_root = field[2] ? field[2] : root;
	check_fs_path(fs_mnt, fs_root, field[0], whole + size);
	check_fs_path(fs_mnt, fs_root, field[0], 16);
	check_fs_path(fs_mnt, fs_root, field[0], 1);
	fuzz_check(cgroup_fs_path(fs_mnt, fs_root, field[0], &unused, 0) == -EINVAL,
		   "a 0-byte buffer taken");
	free(mnt);
	free(root);
	free(copy);
	return 0;
}
