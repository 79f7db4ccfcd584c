// SPDX-License-Identifier: GPL-2.0
/* owners [--wait] [--unlink] [LIB N SIZE]...: memory held by libraries and by the program
 * itself. Each LIB (a path) is opened (--unlink: and its file removed) and its owner_hold(N,
 * SIZE) called (N kept, one more made and freed); then the program keeps one allocation of 64
 * KiB of its own, prints "held", and exits holding it all (--wait: once a line or the end of
 * its input is read). */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mock_cuda.h"

#define OWN_BYTES (64u << 10)

__attribute__((noinline)) static int program_hold(void)
{
	void *p = NULL;

	return cudaMalloc(&p, OWN_BYTES);
}

int main(int argc, char **argv)
{
	bool wait = argc > 1 && !strcmp(argv[1], "--wait"), unlink_libs;
	char line[16];

	if (wait) {
		argv++;
		argc--;
	}
	unlink_libs = argc > 1 && !strcmp(argv[1], "--unlink");
	if (unlink_libs) {
		argv++;
		argc--;
	}
	if ((argc - 1) % 3) {
		fprintf(stderr, "usage: owners [--wait] [--unlink] [LIB N SIZE]...\n");
		return 2;
	}
	for (int i = 1; i + 2 < argc; i += 3) {
		void *lib = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
		int (*hold)(unsigned int, size_t);
		int rc;

		if (!lib) {
			fprintf(stderr, "owners: %s\n", dlerror());
			return 1;
		}
		if (unlink_libs && unlink(argv[i])) {
			perror(argv[i]);
			return 1;
		}
		*(void **)&hold = dlsym(lib, "owner_hold");
		rc = hold ? hold((unsigned int)atoi(argv[i + 1]), strtoull(argv[i + 2], NULL, 0)) : -1;
		if (rc) {
			fprintf(stderr, "owners: %s: owner_hold: %d\n", argv[i], rc);
			return 1;
		}
	}
	if (program_hold())
		return 1;
	printf("held\n");
	fflush(stdout);
	if (wait && !fgets(line, sizeof(line), stdin))
		return 0;
	return 0;
}
