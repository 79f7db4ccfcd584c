/* SPDX-License-Identifier: GPL-2.0 */
/* For unit tests that check that a descriptor is let go: this process's open ones. */
#ifndef GPUMEM_TEST_OPEN_FDS_H
#define GPUMEM_TEST_OPEN_FDS_H

#include <dirent.h>

/* This process's open descriptors (with the one reading them, and . and ..). */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

#endif
