/* SPDX-License-Identifier: GPL-2.0 */
/* Opening files that traced processes and containers control (their paths, their roots, what
 * those hold): regular files only, never a relative path, symlinks inside a process's root
 * resolved inside that root. A path is looked up first (O_PATH, which opens nothing: a device
 * or FIFO at a path a container names is never opened), the file found checked (regular, its
 * inode and device), and only then opened for reading, through /proc/self/fd. */
#ifndef GPUMEM_UNTRUSTED_H
#define GPUMEM_UNTRUSTED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What the opened file must be; zero fields are not checked. */
struct file_want {
	uint64_t ino;
	dev_t dev;
	bool check_dev;
};

/* An absolute path (or a /proc magic link: map_files, fd, exe, which name the very file).
 * Returns a read-only descriptor, or -errno: -EINVAL for a relative path or anything but a
 * regular file, -ESTALE when it is not the wanted file. */
int open_untrusted(const char *path, const struct file_want *want);
/* path as process pid sees it: resolved inside its root (/proc/PID/root), absolute symlinks
 * and ".." included, with openat2(RESOLVE_IN_ROOT); where the kernel has no openat2, it is
 * refused (-EOPNOTSUPP). */
int open_in_root(int pid, const char *path, const struct file_want *want);
/* path (relative) below the directory dirfd, with no symlink in any of its components and no
 * ".." out of it (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): for files that a container
 * runtime writes on behalf of what it runs. -ELOOP for a symlink on the way, -EXDEV for a path
 * that leaves dirfd, -EINVAL for an absolute path or anything but a regular file; where the
 * kernel has no openat2, -EOPNOTSUPP. */
int open_beneath(int dirfd, const char *path, const struct file_want *want);
/* "/proc/self/fd/N": the name under which an opened file is parsed and attached, so that it
 * cannot be swapped between the check and the use. */
void fd_path(int fd, char *buf, size_t len);

#endif
