/* SPDX-License-Identifier: GPL-2.0 */
/* The files gpumem writes where a user says (-o): never through a symlink, 0644, truncated;
 * every write error reported once, with the path. */
#ifndef GPUMEM_BASE_OUTFILE_H
#define GPUMEM_BASE_OUTFILE_H

#include <stdio.h>

/* Creates (or truncates) path for writing, 0644; a symlink is refused. Returns the FILE or
 * NULL after one p_err(). */
FILE *outfile_create(const char *path);
/* The directory path (made 0755 when missing; a symlink is refused), as an O_DIRECTORY fd,
 * or -errno after one p_err(). */
int outfile_open_dir(const char *path);
/* name inside the directory dirfd, as outfile_create does it. */
FILE *outfile_create_in(int dirfd, const char *dir, const char *name);
/* Flushes and closes f; a write error (of any earlier write too) is reported with path and
 * returned as -errno. */
int outfile_close(FILE *f, const char *path);

#endif
