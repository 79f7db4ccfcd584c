/* samepid FIRST [ARGS] -- SECOND [ARGS]: runs FIRST (stdin from /dev/null) until it ends, reaps
 * it, then starts SECOND on the very pid FIRST had (clone3 with set_tid: root only), so a
 * tracer sees one pid numbering two processes back to back. SECOND keeps samepid's stdin and
 * stdout. Prints `first PID STATUS`, then `second PID` before SECOND runs; exits with SECOND's
 * status, or 125 if the pid could not be had again. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_NO_REUSE 125

/* go: a pipe to wait on until the parent has said what it runs (-1: none). */
static void run(char **argv, bool quiet_stdin, int go)
{
	char c;

	if (go >= 0 && read(go, &c, 1) != 1)
		_exit(127);
	if (quiet_stdin) {
		int fd = open("/dev/null", O_RDONLY);

		if (fd < 0 || dup2(fd, 0) < 0)
			_exit(127);
		close(fd);
	}
	execvp(argv[0], argv);
	fprintf(stderr, "samepid: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* A child on exactly pid (which must be free), or -errno. */
static pid_t spawn_on(pid_t pid)
{
	struct clone_args args;
	long got;

	memset(&args, 0, sizeof(args));
	args.exit_signal = SIGCHLD;
	args.set_tid = (uint64_t)(uintptr_t)&pid;
	args.set_tid_size = 1;
	got = syscall(SYS_clone3, &args, sizeof(args));
	return got < 0 ? -errno : (pid_t)got;
}

int main(int argc, char **argv)
{
	char **second = NULL;
	pid_t first, again;
	int status, go[2];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			argv[i] = NULL;
			second = &argv[i + 1];
			break;
		}
	}
	if (argc < 2 || !second || !second[0] || !argv[1]) {
		fprintf(stderr, "usage: %s FIRST [ARGS] -- SECOND [ARGS]\n", argv[0]);
		return 2;
	}
	fflush(stdout);
	first = fork();
	if (first < 0)
		return 1;
	if (first == 0)
		run(&argv[1], true, -1);
	if (waitpid(first, &status, 0) != first)
		return 1;
	printf("first %d %d\n", (int)first, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	fflush(stdout);
	if (pipe(go))
		return 1;
	again = spawn_on(first);
	if (again == 0) {
		close(go[1]);
		run(second, false, go[0]);
	}
	close(go[0]);
	if (again < 0) {
		fprintf(stderr, "samepid: cannot start a process on pid %d: %s\n", (int)first,
			strerror((int)-again));
		return EXIT_NO_REUSE;
	}
	printf("second %d\n", (int)again);
	fflush(stdout);
	if (write(go[1], "g", 1) != 1)
		return 1;
	close(go[1]);
	if (waitpid(again, &status, 0) != again)
		return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
