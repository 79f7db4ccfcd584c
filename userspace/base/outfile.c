// SPDX-License-Identifier: GPL-2.0
/* The files gpumem writes where a user says (-o): created without following a symlink (another
 * user's link must not make root write its target), 0644, truncated; a directory for the
 * exports of many files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/util.h"
#include "base/outfile.h"

static void open_error(const char *path, int err)
{
	if (err == ELOOP)
		p_err("cannot write %s: it is a symbolic link, which -o does not follow", path);
	else if (err == ENXIO || err == ESPIPE)
		p_err("cannot write %s: it is a FIFO or a socket, which -o does not write (a reader "
		      "that never comes would hang gpumem)", path);
	else
		p_err("cannot write %s: %s", path, strerror(err));
}

/* A regular file, or a terminal or /dev/null: nothing where an open or a write can wait for
 * another process (a FIFO without a reader blocks open() for ever). */
static int writable_kind(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))
		return 0;
	return S_ISDIR(st.st_mode) ? -EISDIR : -ESPIPE;
}

static FILE *create_at(int dirfd, const char *name, const char *shown)
{
	/* O_NONBLOCK: a FIFO's open returns at once (ENXIO without a reader), to be refused. */
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
			O_NONBLOCK, 0644), err;
	FILE *f;

	if (fd < 0) {
		open_error(shown, errno);
		return NULL;
	}
	err = writable_kind(fd);
	if (!err && fcntl(fd, F_SETFL, 0))
		err = -errno;
	if (!err && ftruncate(fd, 0) && errno != EINVAL)	/* a character device: nothing */
		err = -errno;
	if (err) {
		open_error(shown, -err);
		close(fd);
		return NULL;
	}
	f = fdopen(fd, "w");
	if (!f) {
		p_err("cannot write %s: %s", shown, strerror(errno));
		close(fd);
	}
	return f;
}

FILE *outfile_create(const char *path)
{
	return create_at(AT_FDCWD, path, path);
}

FILE *outfile_create_in(int dirfd, const char *dir, const char *name)
{
	char shown[4096];

	snprintf(shown, sizeof(shown), "%s/%s", dir, name);
	return create_at(dirfd, name, shown);
}

int outfile_open_dir(const char *path)
{
	int fd;

	if (mkdir(path, 0755) && errno != EEXIST) {
		p_err("cannot make the directory %s: %s", path, strerror(errno));
		return -errno;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;
		struct stat st;

		/* O_DIRECTORY | O_NOFOLLOW on a link says ENOTDIR: name the link for what it is */
		if (err == ENOTDIR && !lstat(path, &st) && S_ISLNK(st.st_mode))
			err = ELOOP;
		if (err == ELOOP)
			p_err("cannot write into %s: it is a symbolic link, which -o does not follow",
			      path);
		else if (err == ENOTDIR)
			p_err("cannot write into %s: it is not a directory (memviz writes one file "
			      "per process into the directory -o names)", path);
		else
			p_err("cannot open the directory %s: %s", path, strerror(err));
		return -err;
	}
	return fd;
}

int outfile_close(FILE *f, const char *path)
{
	int err = 0;

	errno = 0;
	if (fflush(f) || ferror(f))
		err = errno ? errno : EIO;
	if (fclose(f) && !err)
		err = errno ? errno : EIO;
	if (!err)
		return 0;
	p_err("cannot write %s: %s", path, strerror(err));
	return -err;
}
