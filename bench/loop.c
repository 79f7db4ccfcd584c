/* The benchmark workload: N cudaMalloc/cudaFree pairs through the mock runtime (each call nests
 * one driver call), timed around the loop only, never process start or probe attach.
 *
 * With --dirs, each directory's runtime and driver (copies, each with probes of its own
 * tracer or none) are loaded apart (a link-map namespace each, so each runtime opens its own
 * driver), and the pairs go through them in turn, a batch at a time: every configuration is
 * measured in the same moments, and what the shared machine does meanwhile falls on all. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* --dirs: one directory's runtime. */
struct runtime {
	const char *dir;
	__typeof__(cudaMalloc) *malloc_fn;
	__typeof__(cudaFree) *free_fn;
	uint64_t cpu_ns;	/* the thread's CPU time in its batches */
	double *batch_ns;	/* each batch's ns per pair */
};

static __attribute__((noinline)) int alloc_free_pair_in(const struct runtime *rt, size_t size)
{
	void *ptr = NULL;

	if (rt->malloc_fn(&ptr, size) != cudaSuccess)
		return -1;
	if (rt->free_fn(ptr) != cudaSuccess)
		return -1;
	return 0;
}

static __attribute__((noinline)) int run_pairs_in(const struct runtime *rt, unsigned long pairs,
						  size_t size)
{
	for (unsigned long i = 0; i < pairs; i++)
		if (alloc_free_pair_in(rt, size))
			return -1;
	return 0;
}

/* The runtime of dir in a namespace of its own, its driver loaded there first (the runtime
 * dlopen()s libcuda.so.1 by name: in the namespace, the one already there). */
static int load_runtime(struct runtime *rt, const char *dir)
{
	char path[4096];
	Lmid_t lmid;
	void *drv, *lib;

	rt->dir = dir;
	snprintf(path, sizeof(path), "%s/libcuda.so.1", dir);
	drv = dlmopen(LM_ID_NEWLM, path, RTLD_NOW);
	if (!drv || dlinfo(drv, RTLD_DI_LMID, &lmid)) {
		fprintf(stderr, "loop: cannot load %s: %s\n", path, dlerror());
		return -1;
	}
	snprintf(path, sizeof(path), "%s/libcudart.so.13", dir);
	lib = dlmopen(lmid, path, RTLD_NOW);
	rt->malloc_fn = lib ? (__typeof__(cudaMalloc) *)dlsym(lib, "cudaMalloc") : NULL;
	rt->free_fn = lib ? (__typeof__(cudaFree) *)dlsym(lib, "cudaFree") : NULL;
	if (!rt->malloc_fn || !rt->free_fn) {
		fprintf(stderr, "loop: cannot load %s: %s\n", path, dlerror());
		return -1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
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

/* The timed turns of --dirs: BATCH pairs through each runtime in turn (the order rotated each
 * turn), each batch timed on the thread's CPU clock. Inlined: at depth 0 the stack is the one
 * the loop always had (run_dirs, then run_pairs_in). */
struct turns {
	struct runtime *rts;
	size_t n;
	unsigned long turns, batch, size;
};

static inline __attribute__((always_inline)) int run_turns(const struct turns *tt)
{
	for (unsigned long t = 0; t < tt->turns; t++) {
		for (size_t k = 0; k < tt->n; k++) {
			struct runtime *rt = &tt->rts[(k + t) % tt->n];
			uint64_t start = clock_ns(CLOCK_THREAD_CPUTIME_ID), ns;

			if (run_pairs_in(rt, tt->batch, tt->size)) {
				fprintf(stderr, "loop: %s: cudaMalloc/cudaFree failed\n", rt->dir);
				return 1;
			}
			ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - start;
			rt->cpu_ns += ns;
			rt->batch_ns[t] = (double)ns / (double)tt->batch;
		}
	}
	return 0;
}

/* LOOP_STACK_DEPTH=N: the turns made N frames deeper, each with STACK_FRAME_BYTES of its own
 * and its frame record, as a program built with frame pointers allocates from under its
 * framework's frames (an interpreter's, a C++ library's): what a stack walk costs where stacks
 * are deep. turns_at_depth(d): d + 1 such frames. */
#define STACK_FRAME_BYTES 384

static __attribute__((noinline)) int turns_at_depth(unsigned long depth, const struct turns *tt)
{
	volatile char pad[STACK_FRAME_BYTES];
	int rc;

	pad[0] = (char)depth;
	rc = depth ? turns_at_depth(depth - 1, tt) : run_turns(tt);
	return rc + pad[0] - (char)depth;	/* pad is read after the call: no tail call */
}

/* loop --dirs DIR[:DIR...] PAIRS SIZE BATCH: PAIRS through each, BATCH at a time in turn (the
 * order rotated each turn); a line per directory. */
static int run_dirs(char *dirs, unsigned long pairs, unsigned long size, unsigned long batch)
{
	struct runtime rts[16];
	struct turns tt = { .rts = rts, .turns = pairs / batch, .batch = batch, .size = size };
	const char *depth_env = getenv("LOOP_STACK_DEPTH");
	unsigned long depth = 0;
	size_t n = 0;

	if (depth_env && *depth_env && strcmp(depth_env, "0") &&
	    (parse_ulong(depth_env, &depth) || depth > 1000)) {
		fprintf(stderr, "loop: LOOP_STACK_DEPTH must be 0 to 1000, not '%s'\n", depth_env);
		return 2;
	}
	for (char *d = strtok(dirs, ":"); d; d = strtok(NULL, ":")) {
		if (n == sizeof(rts) / sizeof(rts[0])) {
			fprintf(stderr, "loop: 16 directories at most\n");
			return 2;
		}
		memset(&rts[n], 0, sizeof(rts[n]));
		if (load_runtime(&rts[n], d))
			return 1;
		rts[n].batch_ns = calloc(tt.turns, sizeof(double));
		if (!rts[n].batch_ns || run_pairs_in(&rts[n], WARMUP_PAIRS, size)) {
			fprintf(stderr, "loop: %s: cudaMalloc/cudaFree failed during warm-up\n", d);
			return 1;
		}
		n++;
	}
	tt.n = n;
	if (depth ? turns_at_depth(depth - 1, &tt) : run_turns(&tt))
		return 1;
	for (size_t k = 0; k < n; k++) {
		double *b = rts[k].batch_ns;
		unsigned long turns = tt.turns;

		qsort(b, turns, sizeof(*b), cmp_double);
		printf("loop: pid %d, %s: %lu pairs of %lu bytes in %lu batches: %.2f ns/pair cpu, "
		       "batches p10 %.2f median %.2f p90 %.2f\n", (int)getpid(), rts[k].dir,
		       turns * batch, size, turns, (double)rts[k].cpu_ns / (double)(turns * batch),
		       b[turns / 10], b[turns / 2], b[turns * 9 / 10]);
		free(b);
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long pairs = DEFAULT_PAIRS, size = DEFAULT_SIZE;
	uint64_t wall_start, wall_end, cpu_start, cpu_end;
	unsigned long batch;

	if (argc == 6 && !strcmp(argv[1], "--dirs")) {
		if (parse_ulong(argv[3], &pairs) || parse_ulong(argv[4], &size) ||
		    parse_ulong(argv[5], &batch) || batch > pairs) {
			fprintf(stderr, "usage: %s --dirs DIR[:DIR...] PAIRS SIZE BATCH\n", argv[0]);
			return 2;
		}
		return run_dirs(argv[2], pairs, size, batch);
	}
	if (argc > 3 || (argc > 1 && parse_ulong(argv[1], &pairs)) ||
	    (argc > 2 && parse_ulong(argv[2], &size))) {
		fprintf(stderr, "usage: %s [PAIRS [SIZE]] | --dirs DIR[:DIR...] PAIRS SIZE BATCH\n",
			argv[0]);
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
