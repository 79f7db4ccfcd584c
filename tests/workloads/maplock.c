/* maplock SECONDS PROGRAM [ARGS]: runs PROGRAM again and again for SECONDS; while each run
 * lives, writes "5" to its /proc/PID/clear_refs in a loop (each write takes the run's mmap_lock
 * for writing: resetting its peak RSS), so its ends and first calls meet a memory map another
 * task keeps locking. Prints `RUNS runs WRITES writes`; exits 1 if a run failed. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long runs = 0, writes = 0;
	double end;
	int failed = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s SECONDS PROGRAM [ARGS]\n", argv[0]);
		return 2;
	}
	end = now_s() + atof(argv[1]);
	while (now_s() < end) {
		char path[64];
		int status, fd;
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			int devnull = open("/dev/null", O_WRONLY);

			dup2(devnull, 1);
			execvp(argv[2], argv + 2);
			perror(argv[2]);
			_exit(127);
		}
		snprintf(path, sizeof(path), "/proc/%d/clear_refs", pid);
		fd = open(path, O_WRONLY);
		while (waitpid(pid, &status, WNOHANG) == 0)
			if (fd >= 0 && write(fd, "5", 1) == 1)
				writes++;
		if (fd >= 0)
			close(fd);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
		runs++;
	}
	printf("%ld runs %ld writes\n", runs, writes);
	return failed;
}
