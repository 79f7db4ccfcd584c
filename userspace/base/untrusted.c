// SPDX-License-Identifier: GPL-2.0
/* Files of other processes, opened so that they cannot hang gpumem, be swapped under it, or
 * lead it out of a container's root (docs/threat-model.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>
#include "base/untrusted.h"

#define OPEN_FLAGS (O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
/* How a path is looked up: a handle on what lies there, which opens nothing (a device's open,
 * whatever it does, never runs), to be checked before the file is opened for reading. */
#define LOOKUP_FLAGS (O_PATH | O_CLOEXEC)

/* Regular, and the wanted file: checked on what fd (O_PATH) found; then that very file
 * opened for reading through /proc/self/fd. fd is closed. */
static int open_checked(int fd, const struct file_want *want)
{
	char self[64];
	struct stat st;
	int err = 0, rfd = -1;

	if (fstat(fd, &st))
		err = -errno;
	else if (!S_ISREG(st.st_mode))
		err = -EINVAL;
	else if (want && want->ino && (uint64_t)st.st_ino != want->ino)
		err = -ESTALE;
	else if (want && want->check_dev && st.st_dev != want->dev)
		err = -ESTALE;
	if (!err) {
		fd_path(fd, self, sizeof(self));
		rfd = open(self, OPEN_FLAGS);
		if (rfd < 0)
			err = -errno;
	}
	close(fd);
	return err ? err : rfd;
}

int open_untrusted(const char *path, const struct file_want *want)
{
	int fd;

	if (!path || path[0] != '/')
		return -EINVAL;
	fd = open(path, LOOKUP_FLAGS);
	if (fd < 0)
		return -errno;
	return open_checked(fd, want);
}

static int openat2_in(int dirfd, const char *path, __u64 resolve)
{
	struct open_how how = { .flags = LOOKUP_FLAGS, .resolve = resolve };

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

int open_in_root(int pid, const char *path, const struct file_want *want)
{
	char root[64];
	int rootfd, fd, err;

	if (!path || path[0] != '/')
		return -EINVAL;
	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	fd = openat2_in(rootfd, path + 1, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
	/* No openat2 (before Linux 5.6): refused, since a symlink could lead out of the root;
	 * map_files, tried first, still reaches the very file mapped. */
	err = fd < 0 ? (errno == ENOSYS ? -EOPNOTSUPP : -errno) : 0;
	close(rootfd);
	return err ? err : open_checked(fd, want);
}

int open_beneath(int dirfd, const char *path, const struct file_want *want)
{
	int fd;

	if (!path || !path[0] || path[0] == '/')
		return -EINVAL;
	fd = openat2_in(dirfd, path, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	if (fd < 0)
		return errno == ENOSYS ? -EOPNOTSUPP : -errno;
	return open_checked(fd, want);
}

void fd_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}
