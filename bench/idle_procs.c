// SPDX-License-Identifier: GPL-2.0
/* A busy host for the discovery benchmark: N idle processes, every other one with a CUDA
 * runtime mapped (dlopen), all in one process group for the caller to end. Prints "ready N"
 * once every child is set up, then waits for a signal. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void child(int ready_fd, const char *lib, int map_cuda)
{
	char c = 0;	/* 1: mapped, 2: dlopen failed */

	if (map_cuda)
		c = dlopen(lib, RTLD_NOW) ? 1 : 2;
	if (write(ready_fd, &c, 1) != 1)
		_exit(1);
	close(ready_fd);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	int fds[2], n, mapped = 0, failed = 0;

	if (argc != 3 || (n = atoi(argv[1])) <= 0) {
		fprintf(stderr, "usage: %s COUNT LIBCUDART\n", argv[0]);
		return 2;
	}
	if (setpgid(0, 0) || pipe(fds)) {
		perror("idle_procs");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			fprintf(stderr, "idle_procs: fork %d of %d: %s\n", i + 1, n, strerror(errno));
			kill(0, SIGKILL);
			return 1;
		}
		if (pid == 0) {
			close(fds[0]);
			child(fds[1], argv[2], i % 2);
		}
	}
	close(fds[1]);
	for (int i = 0; i < n; i++) {
		char c;

		if (read(fds[0], &c, 1) != 1) {
			fprintf(stderr, "idle_procs: a child died before it was ready\n");
			kill(0, SIGKILL);
			return 1;
		}
		mapped += c == 1;
		failed += c == 2;
	}
	printf("ready %d (%d with %s mapped, %d failed to map it)\n", n, mapped, argv[2], failed);
	fflush(stdout);
	for (;;)
		pause();
}
