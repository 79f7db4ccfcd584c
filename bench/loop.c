/* The benchmark workload: N cudaMalloc/cudaFree pairs through the mock runtime (each call nests
 * one driver call), timed around the loop only, never process start or probe attach. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "mock_cuda.h"

#define DEFAULT_PAIRS 200000UL
#define DEFAULT_SIZE (1UL << 20)
/* Outside the timing: the runtime's first call dlopen()s the driver, a tracer may hold the
 * process at its first allocation, and the first stack of each site is new to the maps. */
#define WARMUP_PAIRS 2000UL

/* One call site per API, each in a frame of its own, as a real program would have. */
static __attribute__((noinline)) int alloc_free_pair(size_t size)
{
	void *ptr = NULL;

	if (cudaMalloc(&ptr, size) != cudaSuccess)
		return -1;
	if (cudaFree(ptr) != cudaSuccess)
		return -1;
	return 0;
}

static __attribute__((noinline)) int run_pairs(unsigned long pairs, size_t size)
{
	for (unsigned long i = 0; i < pairs; i++)
		if (alloc_free_pair(size))
			return -1;
	return 0;
}

static int parse_ulong(const char *text, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(text, &end, 0);
	return errno || !*text || *end || !*out ? -1 : 0;
}

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	unsigned long pairs = DEFAULT_PAIRS, size = DEFAULT_SIZE;
	uint64_t wall_start, wall_end, cpu_start, cpu_end;

	if (argc > 3 || (argc > 1 && parse_ulong(argv[1], &pairs)) ||
	    (argc > 2 && parse_ulong(argv[2], &size))) {
		fprintf(stderr, "usage: %s [PAIRS [SIZE]]\n", argv[0]);
		return 2;
	}
	if (run_pairs(WARMUP_PAIRS, size)) {
		fprintf(stderr, "loop: cudaMalloc/cudaFree failed during warm-up\n");
		return 1;
	}
	/* Wall time, and this thread's CPU time (user and kernel: the probes run in this thread),
	 * which time slices lost to other processes on a busy machine do not inflate. */
	wall_start = clock_ns(CLOCK_MONOTONIC);
	cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	if (run_pairs(pairs, size)) {
		fprintf(stderr, "loop: cudaMalloc/cudaFree failed\n");
		return 1;
	}
	cpu_end = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	wall_end = clock_ns(CLOCK_MONOTONIC);
	/* The pid lets the benchmark find this run in a tracer's report. */
	printf("loop: pid %d, %lu pairs of %lu bytes: %.2f ns/pair wall, %.2f ns/pair cpu\n",
	       (int)getpid(), pairs, size, (double)(wall_end - wall_start) / (double)pairs,
	       (double)(cpu_end - cpu_start) / (double)pairs);
	return 0;
}
