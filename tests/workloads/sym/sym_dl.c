// SPDX-License-Identifier: GPL-2.0
/* Symbolization workload: `sym_dl LIB [--delete] [--wait]` loads LIB with dlopen, optionally
 * deletes it from disk, allocates through it, prints "allocated", and with --wait holds until
 * a line (or EOF) on stdin so a test can take a snapshot while it lives. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	void *(*level1)(size_t);
	bool delete_lib = false, wait_stdin = false;
	char line[16];
	void *h, *p;

	if (argc < 2) {
		fprintf(stderr, "usage: sym_dl LIB [--delete] [--wait]\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		delete_lib |= strcmp(argv[i], "--delete") == 0;
		wait_stdin |= strcmp(argv[i], "--wait") == 0;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "sym_dl: %s\n", dlerror());
		return 1;
	}
	if (delete_lib && unlink(argv[1])) {
		perror("sym_dl: unlink");
		return 1;
	}
	*(void **)&level1 = dlsym(h, "symdl_level1");
	if (!level1)
		return 1;
	p = level1(1 << 20);
	printf("allocated %p\n", p);
	fflush(stdout);
	if (wait_stdin && !fgets(line, sizeof(line), stdin))
		line[0] = 0;
	return p ? 0 : 1;
}
