// SPDX-License-Identifier: GPL-2.0
/* The tensor benchmark's workload (bench/tensors.sh): PAIRS tensor malloc+free pairs through
 * the mock caching allocator (a copy of tests' libc10_cuda.so, with PyTorch's USDT probes behind
 * their semaphores), timed in-process on this thread's CPU clock, where the uprobes run.
 *
 * tensor_loop PAIRS: prints "tensors: pid P pairs N: W ns/pair wall, C ns/pair cpu, fired F"
 * (F: the probes the allocator reached, malloc and free: 0 when nothing is attached). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define WARMUP_PAIRS 1000
#define TENSOR_BYTES 4096

void *c10_mock_alloc(size_t size);
void c10_mock_free(void *ptr);
unsigned long c10_mock_fired(int frees);

static unsigned long long now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int pairs(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		void *ptr = c10_mock_alloc(TENSOR_BYTES);

		if (!ptr)
			return -1;
		c10_mock_free(ptr);
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 0) : 0;
	unsigned long long wall, cpu;

	if (!n) {
		fprintf(stderr, "usage: tensor_loop PAIRS\n");
		return 2;
	}
	if (pairs(WARMUP_PAIRS)) {	/* the segment's cudaMalloc happens here */
		fprintf(stderr, "tensor_loop: the mock allocator has no memory\n");
		return 1;
	}
	wall = now_ns(CLOCK_MONOTONIC);
	cpu = now_ns(CLOCK_THREAD_CPUTIME_ID);
	if (pairs(n))
		return 1;
	cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu;
	wall = now_ns(CLOCK_MONOTONIC) - wall;
	printf("tensors: pid %d pairs %lu: %.1f ns/pair wall, %.1f ns/pair cpu, fired %lu\n",
	       getpid(), n, (double)wall / n, (double)cpu / n,
	       c10_mock_fired(0) + c10_mock_fired(1));
	return 0;
}
