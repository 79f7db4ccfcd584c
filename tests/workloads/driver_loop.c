/* N calls of cuMemAlloc_v2 in the driver at PATH, dlopen'ed (bench/probeplace.sh,
 * test_probe_place.py), timed on this thread's CPU clock around the loop only, after 2,000
 * untimed. A call that succeeds (a mock driver) is followed by cuMemFree_v2, also timed: the
 * result is per call made. NVIDIA's driver without its kernel module returns 3
 * (CUDA_ERROR_NOT_INITIALIZED). */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define WARMUP_CALLS 2000UL
#define ALLOC_SIZE 512UL

typedef int (*mem_alloc_fn)(unsigned long long *dptr, size_t bytes);
typedef int (*mem_free_fn)(unsigned long long dptr);

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Returns the calls made, or 0 when a free failed. */
static __attribute__((noinline)) unsigned long run_calls(mem_alloc_fn mem_alloc,
							 mem_free_fn mem_free, unsigned long n,
							 int *last_rc)
{
	unsigned long calls = 0;

	for (unsigned long i = 0; i < n; i++) {
		unsigned long long dptr = 0;

		*last_rc = mem_alloc(&dptr, ALLOC_SIZE);
		calls++;
		if (*last_rc == 0) {
			if (mem_free(dptr) != 0)
				return 0;
			calls++;
		}
	}
	return calls;
}

int main(int argc, char **argv)
{
	uint64_t wall_start, wall_end, cpu_start, cpu_end;
	unsigned long n, calls;
	mem_alloc_fn mem_alloc;
	mem_free_fn mem_free;
	char *end;
	void *lib;
	int rc = -1;

	if (argc != 3) {
		fprintf(stderr, "usage: %s LIBCUDA CALLS\n", argv[0]);
		return 2;
	}
	errno = 0;
	n = strtoul(argv[2], &end, 0);
	if (errno || !*argv[2] || *end || !n) {
		fprintf(stderr, "driver_loop: bad count %s\n", argv[2]);
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "driver_loop: cannot dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
	mem_alloc = (mem_alloc_fn)dlsym(lib, "cuMemAlloc_v2");
	mem_free = (mem_free_fn)dlsym(lib, "cuMemFree_v2");
	if (!mem_alloc || !mem_free) {
		fprintf(stderr, "driver_loop: %s lacks cuMemAlloc_v2 or cuMemFree_v2\n", argv[1]);
		return 1;
	}
	if (!run_calls(mem_alloc, mem_free, WARMUP_CALLS, &rc)) {
		fprintf(stderr, "driver_loop: cuMemFree_v2 failed\n");
		return 1;
	}
	wall_start = clock_ns(CLOCK_MONOTONIC);
	cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	calls = run_calls(mem_alloc, mem_free, n, &rc);
	cpu_end = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	wall_end = clock_ns(CLOCK_MONOTONIC);
	if (!calls) {
		fprintf(stderr, "driver_loop: cuMemFree_v2 failed\n");
		return 1;
	}
	printf("driver_loop: pid %d, %lu calls, rc %d: %.1f ns/call wall, %.1f ns/call cpu\n",
	       (int)getpid(), calls, rc, (double)(wall_end - wall_start) / (double)calls,
	       (double)(cpu_end - cpu_start) / (double)calls);
	return 0;
}
