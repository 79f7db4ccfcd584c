/* Test workloads for gpumem: each scenario makes CUDA calls whose numbers the tests know, from
 * named functions a tracer can report, and prints one `call API SIZE ADDR RC` line per call. */
#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef GM_DLOPEN_ONLY
#include "mock_cuda.h"
#endif

/* Keeps each call site in a function of its own, under its own name, with its own frame. */
#if defined(__GNUC__) && !defined(__clang__)
#define GM_CALL_SITE __attribute__((noipa))
#else
#define GM_CALL_SITE __attribute__((noinline))
#endif

enum exit_code {
	EXIT_OK = 0,
	EXIT_UNEXPECTED = 1,	/* a call failed that should not have */
	EXIT_USAGE = 2,
	EXIT_NOT_REUSED = 3,	/* reuse: the second allocation got a different address */
};

struct scenario {
	const char *name;
	int nargs;
	const char *args;
	int (*run)(char **argv);
};

static void report(const char *api, uint64_t size, uint64_t addr, int rc)
{
	printf("call %s %" PRIu64 " 0x%" PRIx64 " %d\n", api, size, addr, rc);
	fflush(stdout);
}

static void say(const char *line)
{
	printf("%s\n", line);
	fflush(stdout);
}

/* Returns at a newline or at end of input. */
static void wait_for_line(void)
{
	int c;

	do {
		c = getchar();
	} while (c != EOF && c != '\n');
}

static int parse_u64(const char *text, uint64_t *out)
{
	char *end;

	if (!*text)
		return -1;
	*out = strtoull(text, &end, 0);
	return *end ? -1 : 0;
}

#ifndef GM_DLOPEN_ONLY

static uint64_t addr_of(const void *p)
{
	return (uintptr_t)p;
}

/* ---- leak STEPS SIZE ---- */

GM_CALL_SITE static int step_scratch(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	if (rc)
		return rc;
	rc = cudaFree(p);
	report("cudaFree", size, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int keep_feature_map(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	return rc;
}

static int run_leak(char **argv)
{
	uint64_t steps, size;

	if (parse_u64(argv[0], &steps) || parse_u64(argv[1], &size))
		return EXIT_USAGE;
	for (uint64_t i = 0; i < steps; i++) {
		if (step_scratch(size) || keep_feature_map(size))
			return EXIT_UNEXPECTED;
	}
	return EXIT_OK;
}

/* ---- deep N SIZE: one allocation N levels deep, each a frame with 128 bytes of its own and
 * an inlined one (a stack a few KiB deep, near the top of the main thread's stack) ---- */

static volatile unsigned char deep_sink;

GM_CALL_SITE static int deep_step(uint64_t n, size_t size);
/* A frame of its own in the stack, inlined in deep_step's code: two frames a level. */
static inline __attribute__((always_inline)) int deep_inlined(uint64_t n, size_t size)
{
	return deep_step(n, size);
}

GM_CALL_SITE static int deep_step(uint64_t n, size_t size)
{
	volatile unsigned char pad[128];
	void *p = NULL;
	int rc;

	pad[0] = (unsigned char)n;
	if (!n) {
		rc = cudaMalloc(&p, size);
		report("cudaMalloc", size, addr_of(p), rc);
	} else {
		rc = deep_inlined(n - 1, size);
	}
	deep_sink = pad[0];
	return rc;
}

static int run_deep(char **argv)
{
	uint64_t n, size;

	if (parse_u64(argv[0], &n) || parse_u64(argv[1], &size) || n > 1000)
		return EXIT_USAGE;
	return deep_step(n, size) ? EXIT_UNEXPECTED : EXIT_OK;
}

/* ---- deeptwice N SIZE: two allocations from one thread, each N levels deep: through
 * deep_wide's 448-byte frames, then through deep_step's 128-byte frames (two walks of one
 * thread over the same stack addresses, whose frame records lie in other places: the second
 * reads where the first read other frames) ---- */

GM_CALL_SITE static int deep_wide(uint64_t n, size_t size)
{
	volatile unsigned char pad[448];
	void *p = NULL;
	int rc;

	pad[0] = (unsigned char)n;
	if (!n) {
		rc = cudaMalloc(&p, size);
		report("cudaMalloc", size, addr_of(p), rc);
	} else {
		rc = deep_wide(n - 1, size);
	}
	deep_sink = pad[0];
	return rc;
}

static int run_deeptwice(char **argv)
{
	uint64_t n, size;

	if (parse_u64(argv[0], &n) || parse_u64(argv[1], &size) || n > 1000)
		return EXIT_USAGE;
	return deep_wide(n, size) || deep_step(n, size) ? EXIT_UNEXPECTED : EXIT_OK;
}

/* ---- sameline N SIZE: several calls on one line of code, one call site ---- */

GM_CALL_SITE static int sameline_wrap(void **p, size_t size)
{
	int rc = cudaMalloc(p, size);

	report("cudaMalloc", size, addr_of(*p), rc);
	return rc;
}

/* Three cudaMalloc calls on one line, N times: one site of 3N allocations (3 with
 * --by-address); then two calls of a wrapper on one line: one site of 2N more. */
GM_CALL_SITE static int sameline_calls(uint64_t n, size_t size)
{
	void *a = NULL, *b = NULL, *c = NULL;
	int rc = 0;

	for (uint64_t i = 0; i < n && !rc; i++) {
		rc = cudaMalloc(&a, size) | cudaMalloc(&b, size) | cudaMalloc(&c, size);
		report("cudaMalloc", 3 * size, 0, rc);
	}
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = sameline_wrap(&a, 2 * size) | sameline_wrap(&b, 2 * size);
	return rc;
}

static int run_sameline(char **argv)
{
	uint64_t n, size;

	if (parse_u64(argv[0], &n) || parse_u64(argv[1], &size))
		return EXIT_USAGE;
	return sameline_calls(n, size) ? EXIT_UNEXPECTED : EXIT_OK;
}

/* ---- kinds ---- */

struct kinds_buffers {
	void *device, *pitched, *managed, *host, *host_alloc, *async, *async_ptsz, *pool,
		*pool_ptsz;
};

GM_CALL_SITE static int kind_device(void **p)
{
	int rc = cudaMalloc(p, 1000);

	report("cudaMalloc", 1000, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int kind_pitch(void **p)
{
	size_t pitch = 0;
	int rc = cudaMallocPitch(p, &pitch, 1000, 10);

	report("cudaMallocPitch", (uint64_t)pitch * 10, addr_of(*p), rc);
	return rc || pitch != 1024;
}

GM_CALL_SITE static int kind_managed(void **p)
{
	int rc = cudaMallocManaged(p, 3000, cudaMemAttachGlobal);

	report("cudaMallocManaged", 3000, addr_of(*p), rc);
	if (!rc)
		memset(*p, 0xab, 3000);	/* managed memory is usable by the CPU */
	return rc;
}

GM_CALL_SITE static int kind_host(void **p)
{
	int rc = cudaMallocHost(p, 4000);

	report("cudaMallocHost", 4000, addr_of(*p), rc);
	if (!rc)
		memset(*p, 0xab, 4000);
	return rc;
}

GM_CALL_SITE static int kind_host_alloc(void **p)
{
	int rc = cudaHostAlloc(p, 5000, cudaHostAllocDefault);

	report("cudaHostAlloc", 5000, addr_of(*p), rc);
	if (!rc)
		memset(*p, 0xab, 5000);
	return rc;
}

GM_CALL_SITE static int kind_async(void **p)
{
	int rc = cudaMallocAsync(p, 6000, NULL);

	report("cudaMallocAsync", 6000, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int kind_async_ptsz(void **p)
{
	int rc = cudaMallocAsync_ptsz(p, 7000, NULL);

	report("cudaMallocAsync_ptsz", 7000, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int kind_pool(void **p)
{
	int rc = cudaMallocFromPoolAsync(p, 8000, NULL, NULL);

	report("cudaMallocFromPoolAsync", 8000, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int kind_pool_ptsz(void **p)
{
	int rc = cudaMallocFromPoolAsync_ptsz(p, 9000, NULL, NULL);

	report("cudaMallocFromPoolAsync_ptsz", 9000, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int alloc_every_kind(struct kinds_buffers *b)
{
	return kind_device(&b->device) || kind_pitch(&b->pitched) || kind_managed(&b->managed) ||
	       kind_host(&b->host) || kind_host_alloc(&b->host_alloc) ||
	       kind_async(&b->async) || kind_async_ptsz(&b->async_ptsz) ||
	       kind_pool(&b->pool) || kind_pool_ptsz(&b->pool_ptsz);
}

GM_CALL_SITE static int free_device_kind(void *p)
{
	int rc = cudaFree(p);

	report("cudaFree", 1000, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int free_host_kind(void *p)
{
	int rc = cudaFreeHost(p);

	report("cudaFreeHost", 4000, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int free_async_kind(void *p)
{
	int rc = cudaFreeAsync(p, NULL);

	report("cudaFreeAsync", 6000, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int free_async_ptsz_kind(void *p)
{
	int rc = cudaFreeAsync_ptsz(p, NULL);

	report("cudaFreeAsync_ptsz", 7000, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int free_null(void)
{
	int rc = cudaFree(NULL);

	report("cudaFree", 0, 0, rc);
	return rc;
}

static int run_kinds(char **argv)
{
	struct kinds_buffers b = { 0 };

	(void)argv;
	if (alloc_every_kind(&b))
		return EXIT_UNEXPECTED;
	if (free_device_kind(b.device) || free_host_kind(b.host) || free_async_kind(b.async) ||
	    free_async_ptsz_kind(b.async_ptsz) || free_null())
		return EXIT_UNEXPECTED;
	return EXIT_OK;
}

/* ---- driver ---- */

struct driver_buffers {
	CUdeviceptr device, pitched, managed, async, async_ptsz, pool, pool_ptsz;
	void *host, *host_alloc;
	CUmemGenericAllocationHandle kept_handle, released_handle;
};

GM_CALL_SITE static int driver_init(void)
{
	int rc = cuInit(0);

	report("cuInit", 0, 0, rc);
	return rc;
}

GM_CALL_SITE static int driver_device(CUdeviceptr *p)
{
	int rc = cuMemAlloc_v2(p, 1100);

	report("cuMemAlloc_v2", 1100, *p, rc);
	return rc;
}

GM_CALL_SITE static int driver_pitch(CUdeviceptr *p)
{
	size_t pitch = 0;
	int rc = cuMemAllocPitch_v2(p, &pitch, 1000, 20, 4);

	report("cuMemAllocPitch_v2", (uint64_t)pitch * 20, *p, rc);
	return rc || pitch != 1024;
}

GM_CALL_SITE static int driver_managed(CUdeviceptr *p)
{
	int rc = cuMemAllocManaged(p, 3100, CU_MEM_ATTACH_GLOBAL);

	report("cuMemAllocManaged", 3100, *p, rc);
	if (!rc)
		memset((void *)(uintptr_t)*p, 0xab, 3100);
	return rc;
}

GM_CALL_SITE static int driver_host(void **p)
{
	int rc = cuMemAllocHost_v2(p, 4100);

	report("cuMemAllocHost_v2", 4100, addr_of(*p), rc);
	if (!rc)
		memset(*p, 0xab, 4100);
	return rc;
}

GM_CALL_SITE static int driver_host_alloc(void **p)
{
	int rc = cuMemHostAlloc(p, 5100, CU_MEMHOSTALLOC_PORTABLE);

	report("cuMemHostAlloc", 5100, addr_of(*p), rc);
	if (!rc)
		memset(*p, 0xab, 5100);
	return rc;
}

GM_CALL_SITE static int driver_async(CUdeviceptr *p)
{
	int rc = cuMemAllocAsync(p, 6100, NULL);

	report("cuMemAllocAsync", 6100, *p, rc);
	return rc;
}

GM_CALL_SITE static int driver_async_ptsz(CUdeviceptr *p)
{
	int rc = cuMemAllocAsync_ptsz(p, 6200, NULL);

	report("cuMemAllocAsync_ptsz", 6200, *p, rc);
	return rc;
}

GM_CALL_SITE static int driver_pool(CUdeviceptr *p)
{
	int rc = cuMemAllocFromPoolAsync(p, 6300, NULL, NULL);

	report("cuMemAllocFromPoolAsync", 6300, *p, rc);
	return rc;
}

GM_CALL_SITE static int driver_pool_ptsz(CUdeviceptr *p)
{
	int rc = cuMemAllocFromPoolAsync_ptsz(p, 6400, NULL, NULL);

	report("cuMemAllocFromPoolAsync_ptsz", 6400, *p, rc);
	return rc;
}

GM_CALL_SITE static int driver_create(CUmemGenericAllocationHandle *handle, size_t size)
{
	CUmemAllocationProp prop;
	int rc;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	rc = cuMemCreate(handle, size, &prop, 0);
	report("cuMemCreate", size, *handle, rc);
	return rc;
}

GM_CALL_SITE static int alloc_every_driver_kind(struct driver_buffers *b)
{
	return driver_device(&b->device) || driver_pitch(&b->pitched) ||
	       driver_managed(&b->managed) || driver_host(&b->host) ||
	       driver_host_alloc(&b->host_alloc) || driver_async(&b->async) ||
	       driver_async_ptsz(&b->async_ptsz) || driver_pool(&b->pool) ||
	       driver_pool_ptsz(&b->pool_ptsz) || driver_create(&b->kept_handle, 2097152) ||
	       driver_create(&b->released_handle, 4194304);
}

GM_CALL_SITE static int driver_release(CUmemGenericAllocationHandle handle)
{
	int rc = cuMemRelease(handle);

	report("cuMemRelease", 4194304, handle, rc);
	return rc;
}

GM_CALL_SITE static int driver_free_device(CUdeviceptr p)
{
	int rc = cuMemFree_v2(p);

	report("cuMemFree_v2", 1100, p, rc);
	return rc;
}

GM_CALL_SITE static int driver_free_host(void *p)
{
	int rc = cuMemFreeHost(p);

	report("cuMemFreeHost", 4100, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int driver_free_async(CUdeviceptr p)
{
	int rc = cuMemFreeAsync(p, NULL);

	report("cuMemFreeAsync", 6100, p, rc);
	return rc;
}

GM_CALL_SITE static int driver_free_async_ptsz(CUdeviceptr p)
{
	int rc = cuMemFreeAsync_ptsz(p, NULL);

	report("cuMemFreeAsync_ptsz", 6200, p, rc);
	return rc;
}

static int run_driver(char **argv)
{
	struct driver_buffers b = { 0 };

	(void)argv;
	if (driver_init() || alloc_every_driver_kind(&b))
		return EXIT_UNEXPECTED;
	if (driver_release(b.released_handle) || driver_free_device(b.device) ||
	    driver_free_host(b.host) || driver_free_async(b.async) ||
	    driver_free_async_ptsz(b.async_ptsz))
		return EXIT_UNEXPECTED;
	return EXIT_OK;
}

/* ---- nested N SIZE, private N SIZE ---- */

GM_CALL_SITE static int nested_alloc(void **p, size_t size)
{
	int rc = cudaMalloc(p, size);

	report("cudaMalloc", size, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int nested_free(void *p, size_t size)
{
	int rc = cudaFree(p);

	report("cudaFree", size, addr_of(p), rc);
	return rc;
}

/* Allocates n buffers and frees all but the first. */
static int alloc_n_keep_one(uint64_t n, size_t size)
{
	void **bufs = calloc(n ? n : 1, sizeof(*bufs));
	int status = EXIT_OK;

	if (!bufs)
		return EXIT_UNEXPECTED;
	for (uint64_t i = 0; i < n && status == EXIT_OK; i++)
		if (nested_alloc(&bufs[i], size))
			status = EXIT_UNEXPECTED;
	for (uint64_t i = 1; i < n && status == EXIT_OK; i++)
		if (nested_free(bufs[i], size))
			status = EXIT_UNEXPECTED;
	free(bufs);
	return status;
}

static int run_nested(char **argv)
{
	uint64_t n, size;

	if (parse_u64(argv[0], &n) || parse_u64(argv[1], &size))
		return EXIT_USAGE;
	return alloc_n_keep_one(n, size);
}

static int run_private(char **argv)
{
	/* Read by the mock runtime at its first call; an explicit setting is left alone. */
	setenv("GPUMEM_MOCK_RUNTIME_PRIVATE", "1", 0);
	return run_nested(argv);
}

/* ---- reuse SIZE ---- */

GM_CALL_SITE static int reuse_first(void **p, size_t size)
{
	int rc = cudaMalloc(p, size);

	report("cudaMalloc", size, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int reuse_free(void *p, size_t size)
{
	int rc = cudaFree(p);

	report("cudaFree", size, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int reuse_again(void **p, size_t size)
{
	int rc = cudaMalloc(p, size);

	report("cudaMalloc", size, addr_of(*p), rc);
	return rc;
}

static int run_reuse(char **argv)
{
	void *first = NULL, *again = NULL;
	uint64_t size;

	if (parse_u64(argv[0], &size))
		return EXIT_USAGE;
	if (reuse_first(&first, size) || reuse_free(first, size) || reuse_again(&again, size))
		return EXIT_UNEXPECTED;
	return again == first ? EXIT_OK : EXIT_NOT_REUSED;
}

/* ---- handoff N SIZE ----
 * The main thread allocates and hands each buffer to a consumer thread, which frees it from
 * one frame every time and makes no other CUDA call between its frees; the driver hands the
 * freed address out again, so the consumer frees one address N times in a row. Each free is
 * a free of its own (none is inside the one before: that one returned). */

struct handoff {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	void *item;		/* NULL: the slot is empty */
	uint64_t n;
	int rc;
};

GM_CALL_SITE static int handoff_free(void *p)
{
	return cudaFree(p) ? -1 : 0;
}

static void *handoff_consumer(void *arg)
{
	struct handoff *h = arg;

	for (uint64_t i = 0; i < h->n; i++) {
		void *p;

		pthread_mutex_lock(&h->lock);
		while (!h->item)
			pthread_cond_wait(&h->cond, &h->lock);
		p = h->item;
		h->item = NULL;
		pthread_cond_broadcast(&h->cond);
		pthread_mutex_unlock(&h->lock);
		if (handoff_free(p))
			h->rc = -1;
	}
	return NULL;
}

GM_CALL_SITE static int handoff_alloc(void **p, size_t size)
{
	return cudaMalloc(p, size) ? -1 : 0;
}

static int run_handoff(char **argv)
{
	struct handoff h = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0 };
	uint64_t size, reused = 0;
	void *first = NULL;
	pthread_t consumer;

	if (parse_u64(argv[0], &h.n) || parse_u64(argv[1], &size) || !h.n)
		return EXIT_USAGE;
	if (pthread_create(&consumer, NULL, handoff_consumer, &h))
		return EXIT_UNEXPECTED;
	for (uint64_t i = 0; i < h.n; i++) {
		void *p = NULL;

		pthread_mutex_lock(&h.lock);
		while (h.item)
			pthread_cond_wait(&h.cond, &h.lock);
		pthread_mutex_unlock(&h.lock);
		/* The consumer's last free may still be on its way: wait until it freed, so that
		 * the driver can hand the address out again. */
		if (i)
			usleep(2000);
		if (handoff_alloc(&p, size))
			return EXIT_UNEXPECTED;
		if (!first)
			first = p;
		reused += p == first;
		pthread_mutex_lock(&h.lock);
		h.item = p;
		pthread_cond_broadcast(&h.cond);
		pthread_mutex_unlock(&h.lock);
	}
	pthread_join(consumer, NULL);
	printf("handoff %" PRIu64 " frees, %" PRIu64 " of one address\n", h.n, reused);
	if (h.rc)
		return EXIT_UNEXPECTED;
	return reused == h.n ? EXIT_OK : EXIT_NOT_REUSED;
}

/* ---- wrongfree SIZE ----
 * cudaFree of pinned host memory and cudaFreeHost of device memory, which the driver refuses
 * (the memory stays), each followed by the right free. */
static int run_wrongfree(char **argv)
{
	void *host = NULL, *dev = NULL;
	uint64_t size;

	if (parse_u64(argv[0], &size))
		return EXIT_USAGE;
	if (cudaMallocHost(&host, size) || cudaMalloc(&dev, size))
		return EXIT_UNEXPECTED;
	if (cudaFree(host) == cudaSuccess || cudaFreeHost(dev) == cudaSuccess)
		return EXIT_UNEXPECTED;	/* the mock took what the driver refuses */
	if (cudaFreeHost(host) || cudaFree(dev))
		return EXIT_UNEXPECTED;
	return EXIT_OK;
}

/* ---- threads T N SIZE ---- */

struct thread_job {
	pthread_t thread;
	uint64_t pairs;
	size_t size;
	uint64_t allocs, frees, failures;
};

GM_CALL_SITE static int thread_churn(struct thread_job *job)
{
	void *p = NULL;

	if (cudaMalloc(&p, job->size))
		return -1;
	job->allocs++;
	if (cudaFree(p))
		return -1;
	job->frees++;
	return 0;
}

GM_CALL_SITE static int thread_keep(struct thread_job *job)
{
	void *p = NULL;

	if (cudaMalloc(&p, job->size))
		return -1;
	job->allocs++;
	return 0;
}

static void *thread_main(void *arg)
{
	struct thread_job *job = arg;

	for (uint64_t i = 0; i < job->pairs; i++)
		if (thread_churn(job))
			job->failures++;
	if (thread_keep(job))
		job->failures++;
	return NULL;
}

static int run_threads(char **argv)
{
	uint64_t nthreads, pairs, size, allocs = 0, frees = 0, failures = 0;
	struct thread_job *jobs;

	if (parse_u64(argv[0], &nthreads) || parse_u64(argv[1], &pairs) ||
	    parse_u64(argv[2], &size) || !nthreads)
		return EXIT_USAGE;
	jobs = calloc(nthreads, sizeof(*jobs));
	if (!jobs)
		return EXIT_UNEXPECTED;
	for (uint64_t i = 0; i < nthreads; i++) {
		jobs[i].pairs = pairs;
		jobs[i].size = size;
		if (pthread_create(&jobs[i].thread, NULL, thread_main, &jobs[i])) {
			nthreads = i;
			failures++;
			break;
		}
	}
	for (uint64_t i = 0; i < nthreads; i++) {
		pthread_join(jobs[i].thread, NULL);
		allocs += jobs[i].allocs;
		frees += jobs[i].frees;
		failures += jobs[i].failures;
	}
	free(jobs);
	printf("threads %" PRIu64 " allocs %" PRIu64 " frees %" PRIu64 " bytes %" PRIu64
	       " failures %" PRIu64 "\n",
	       nthreads, allocs, frees, (allocs - frees) * size, failures);
	fflush(stdout);
	return failures ? EXIT_UNEXPECTED : EXIT_OK;
}

/* ---- slowexit MS FDS SIZE ---- */

/* A thread that works MS ms of CPU and ends slowly, closing FDS files (as many as
 * RLIMIT_NOFILE allows) of a file table of its own after it has woken its joiner: the
 * process's last thread (main, which only joined it) ends while it is still ending. The
 * process's CPU time at its end is the worker's, nearly. Prints "slowexit raced" when the
 * worker was still there as main ended, else "slowexit: the worker ended first". */
struct slow_job {
	uint64_t ms, fds;
	pid_t tid;
	int failed;
};

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *slow_exit_main(void *arg)
{
	struct slow_job *job = arg;
	uint64_t end = thread_cpu_ns() + job->ms * 1000000u;
	volatile uint64_t spin = 0;

	job->tid = gettid();
	if (unshare(CLONE_FILES)) {
		job->failed = 1;
		return NULL;
	}
	/* Files of their own, not duplicates: each close is a file's release, not a count. */
	for (uint64_t i = 0; i < job->fds; i++)
		if (open("/dev/null", O_RDONLY) < 0) {
			job->failed = errno != EMFILE;	/* the limit: as many as it allows */
			break;
		}
	while (thread_cpu_ns() < end)
		spin++;
	return NULL;
}

/* Room for n more descriptors, as far as this process may raise its limit. */
static void allow_descriptors(uint64_t n)
{
	struct rlimit lim, want = { n + 64, n + 64 };

	if (getrlimit(RLIMIT_NOFILE, &lim) || lim.rlim_cur >= want.rlim_cur)
		return;
	if (want.rlim_max < lim.rlim_max)
		want.rlim_max = lim.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &want)) {	/* above the hard limit: root only */
		lim.rlim_cur = lim.rlim_max;
		setrlimit(RLIMIT_NOFILE, &lim);
	}
}

static int run_slowexit(char **argv)
{
	struct slow_job job = { 0 };
	char task[64];
	pthread_t thread;
	uint64_t size;
	void *p = NULL;

	if (parse_u64(argv[0], &job.ms) || parse_u64(argv[1], &job.fds) ||
	    parse_u64(argv[2], &size))
		return EXIT_USAGE;
	allow_descriptors(job.fds);
	if (cudaMalloc(&p, size)) {
		report("cudaMalloc", size, 0, 1);
		return EXIT_UNEXPECTED;
	}
	report("cudaMalloc", size, addr_of(p), 0);
	if (pthread_create(&thread, NULL, slow_exit_main, &job))
		return EXIT_UNEXPECTED;
	pthread_join(thread, NULL);
	if (job.failed) {
		say("slowexit: the worker could not set up its descriptors");
		return EXIT_UNEXPECTED;
	}
	/* Still listed: not released yet (its end's last step). */
	snprintf(task, sizeof(task), "/proc/self/task/%d", (int)job.tid);
	say(access(task, F_OK) == 0 ? "slowexit raced" : "slowexit: the worker ended first");
	_exit(EXIT_OK);	/* at once, while the worker is still ending */
}

/* ---- fail SIZE MAX ---- */

GM_CALL_SITE static int oom_step(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	return rc;
}

static int run_fail(char **argv)
{
	uint64_t size, max, done = 0;
	int rc = 0;

	if (parse_u64(argv[0], &size) || parse_u64(argv[1], &max))
		return EXIT_USAGE;
	while (done < max) {
		rc = oom_step(size);
		if (rc)
			break;
		done++;
	}
	if (!rc) {
		say("failure none");
		return EXIT_UNEXPECTED;
	}
	printf("failure %" PRIu64 " %d %s\n", done, rc, cudaGetErrorName((cudaError_t)rc));
	fflush(stdout);
	return rc == cudaErrorMemoryAllocation ? EXIT_OK : EXIT_UNEXPECTED;
}

/* ---- storm N SIZE: N allocations in a row that the mock fails (GPUMEM_MOCK_FAIL_AFTER=0),
 * as an inference loop that keeps retrying after an out-of-memory does ---- */

GM_CALL_SITE static int storm_step(size_t size)
{
	void *p = NULL;

	return cudaMalloc(&p, size);
}

static int run_storm(char **argv)
{
	uint64_t n, size, failed = 0;

	if (parse_u64(argv[0], &n) || parse_u64(argv[1], &size))
		return EXIT_USAGE;
	for (uint64_t i = 0; i < n; i++)
		failed += storm_step(size) != 0;
	printf("storm %" PRIu64 " failed\n", failed);
	fflush(stdout);
	return failed == n ? EXIT_OK : EXIT_UNEXPECTED;
}

/* ---- prefree N SIZE ---- */

GM_CALL_SITE static int prefree_alloc(void **p, size_t size)
{
	int rc = cudaMalloc(p, size);

	report("cudaMalloc", size, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int prefree_free(void *p, size_t size)
{
	int rc = cudaFree(p);

	report("cudaFree", size, addr_of(p), rc);
	return rc;
}

static int run_prefree(char **argv)
{
	uint64_t n, size;
	void **bufs;
	int status = EXIT_OK;

	if (parse_u64(argv[0], &n) || parse_u64(argv[1], &size))
		return EXIT_USAGE;
	bufs = calloc(n ? n : 1, sizeof(*bufs));
	if (!bufs)
		return EXIT_UNEXPECTED;
	for (uint64_t i = 0; i < n && status == EXIT_OK; i++)
		if (prefree_alloc(&bufs[i], size))
			status = EXIT_UNEXPECTED;
	if (status == EXIT_OK) {
		say("allocated");
		wait_for_line();
	}
	for (uint64_t i = 0; i < n && status == EXIT_OK; i++)
		if (prefree_free(bufs[i], size))
			status = EXIT_UNEXPECTED;
	free(bufs);
	return status;
}

/* ---- hold SIZE ---- */

GM_CALL_SITE static int hold_alloc(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	return rc;
}

static int run_hold(char **argv)
{
	uint64_t size;

	if (parse_u64(argv[0], &size))
		return EXIT_USAGE;
	if (hold_alloc(size))
		return EXIT_UNEXPECTED;
	say("holding");
	wait_for_line();
	return EXIT_OK;
}

/* ---- exec N SIZE: N allocations of SIZE kept, then the process execs itself into `hold
 * SIZE`: the new image holds SIZE; what the old one held went with its address space ---- */

GM_CALL_SITE static int before_exec(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	return rc;
}

static int run_exec(char **argv)
{
	uint64_t n, size;

	if (parse_u64(argv[0], &n) || parse_u64(argv[1], &size))
		return EXIT_USAGE;
	for (uint64_t i = 0; i < n; i++)
		if (before_exec(size))
			return EXIT_UNEXPECTED;
	say("execing");
	execl("/proc/self/exe", "workload", "hold", argv[1], (char *)NULL);
	fprintf(stderr, "workload: cannot exec itself: %s\n", strerror(errno));
	return EXIT_UNEXPECTED;
}

/* ---- children K SIZE ---- */

GM_CALL_SITE static int child_alloc(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int parent_alloc(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	return rc;
}

static int run_children(char **argv)
{
	uint64_t nchildren, size, started = 0;
	int status = EXIT_OK;

	if (parse_u64(argv[0], &nchildren) || parse_u64(argv[1], &size))
		return EXIT_USAGE;
	for (; started < nchildren; started++) {
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid < 0) {
			status = EXIT_UNEXPECTED;
			break;
		}
		if (pid == 0)
			exit(child_alloc(size) ? EXIT_UNEXPECTED : EXIT_OK);
	}
	for (uint64_t i = 0; i < started; i++) {
		int wstatus;
		pid_t pid = wait(&wstatus);

		if (pid < 0 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus)) {
			status = EXIT_UNEXPECTED;
			if (pid < 0)
				break;
		}
		printf("child %d %d\n", (int)pid, WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
		fflush(stdout);
	}
	if (parent_alloc(size))
		status = EXIT_UNEXPECTED;
	return status;
}

/* ---- exitcode CODE ---- */

GM_CALL_SITE static int alloc_before_exit(void)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, 4096);

	report("cudaMalloc", 4096, addr_of(p), rc);
	return rc;
}

static int run_exitcode(char **argv)
{
	uint64_t code;

	if (parse_u64(argv[0], &code) || code > 255)
		return EXIT_USAGE;
	if (alloc_before_exit())
		return EXIT_UNEXPECTED;
	say("done");
	exit((int)code);
}

/* ---- steps STEPS PERIOD_MS SIZE: a training loop with a known period and a planted leak ---- */

GM_CALL_SITE static int step_activations(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	if (rc)
		return rc;
	rc = cudaFree(p);
	report("cudaFree", size, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int step_keep_loss(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	return rc;
}

static int run_steps(char **argv)
{
	uint64_t steps, period_ms, size;

	if (parse_u64(argv[0], &steps) || parse_u64(argv[1], &period_ms) ||
	    parse_u64(argv[2], &size))
		return EXIT_USAGE;
	for (uint64_t i = 0; i < steps; i++) {
		/* Two scratch buffers a step, one kept: the rates are 2:1. */
		if (step_activations(4 * size) || step_activations(4 * size) ||
		    step_keep_loss(size))
			return EXIT_UNEXPECTED;
		usleep((useconds_t)(period_ms * 1000));
	}
	return EXIT_OK;
}

/* ---- plateau STEPS PERIOD_MS K SIZE: a cache that fills to K buffers, then recycles ---- */

GM_CALL_SITE static int cache_insert(void **slot, size_t size)
{
	int rc;

	if (*slot) {
		rc = cudaFree(*slot);
		report("cudaFree", size, addr_of(*slot), rc);
		if (rc)
			return rc;
	}
	*slot = NULL;
	rc = cudaMalloc(slot, size);
	report("cudaMalloc", size, addr_of(*slot), rc);
	return rc;
}

static int run_plateau(char **argv)
{
	uint64_t steps, period_ms, k, size;
	void **cache;
	int status = EXIT_OK;

	if (parse_u64(argv[0], &steps) || parse_u64(argv[1], &period_ms) ||
	    parse_u64(argv[2], &k) || parse_u64(argv[3], &size) || !k)
		return EXIT_USAGE;
	cache = calloc(k, sizeof(*cache));
	if (!cache)
		return EXIT_UNEXPECTED;
	for (uint64_t i = 0; i < steps && status == EXIT_OK; i++) {
		if (cache_insert(&cache[i % k], size))
			status = EXIT_UNEXPECTED;
		usleep((useconds_t)(period_ms * 1000));
	}
	free(cache);
	return status;
}

/* ---- hidden STEPS PERIOD_MS BIG SMALL: a small leak under a large steady allocation ---- */

GM_CALL_SITE static int load_weights(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int hidden_workspace(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	if (rc)
		return rc;
	rc = cudaFree(p);
	report("cudaFree", size, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int hidden_leak(size_t size)
{
	void *p = NULL;
	int rc = cudaMalloc(&p, size);

	report("cudaMalloc", size, addr_of(p), rc);
	return rc;
}

static int run_hidden(char **argv)
{
	uint64_t steps, period_ms, big, small;

	if (parse_u64(argv[0], &steps) || parse_u64(argv[1], &period_ms) ||
	    parse_u64(argv[2], &big) || parse_u64(argv[3], &small))
		return EXIT_USAGE;
	if (load_weights(big))
		return EXIT_UNEXPECTED;
	for (uint64_t i = 0; i < steps; i++) {
		if (hidden_workspace(big / 4) || hidden_leak(small))
			return EXIT_UNEXPECTED;
		usleep((useconds_t)(period_ms * 1000));
	}
	return EXIT_OK;
}

/* ---- manyhold N SIZE: N live allocations held until a line arrives ---- */

GM_CALL_SITE static int manyhold_alloc(size_t size)
{
	void *p = NULL;

	return cudaMalloc(&p, size);	/* silent: N may be large */
}

static int run_manyhold(char **argv)
{
	uint64_t n, size;

	if (parse_u64(argv[0], &n) || parse_u64(argv[1], &size))
		return EXIT_USAGE;
	for (uint64_t i = 0; i < n; i++)
		if (manyhold_alloc(size))
			return EXIT_UNEXPECTED;
	say("holding");
	wait_for_line();
	return EXIT_OK;
}

/* ---- driven: allocations and frees as stdin says, one command a line, for tests that need
 * exact numbers across events they time themselves (an agent killed and restarted):
 *   a SIZE   cudaMalloc from drive_alloc (a failure is reported, not fatal)
 *   b SIZE   cudaMalloc from drive_other (a second call site)
 *   f        cudaFree of the oldest live allocation
 *   n N SIZE N cudaMalloc calls from drive_quiet, kept when they succeed, one line at the end
 *            ("calls N failed F")
 *   q        exit 0
 * Each command answers with its call line, then "ok". ---- */

GM_CALL_SITE static int drive_alloc(size_t size, void **p)
{
	int rc = cudaMalloc(p, size);

	report("cudaMalloc", size, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int drive_other(size_t size, void **p)
{
	int rc = cudaMalloc(p, size);

	report("cudaMalloc", size, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int drive_quiet(size_t size, void **p)
{
	int rc = cudaMalloc(p, size);

	__asm__ volatile("" ::: "memory");	/* no tail call: this frame is the call site */
	return rc;
}

#define DRIVE_MAX 4096

static int run_driven(char **argv)
{
	static void *live[DRIVE_MAX];
	static uint64_t sizes[DRIVE_MAX];
	size_t head = 0, tail = 0;
	char line[64];

	(void)argv;
	say("driven");
	while (fgets(line, sizeof(line), stdin)) {
		unsigned long long size = 0, n = 0;
		void *p = NULL;

		if (line[0] == 'q')
			return EXIT_OK;
		if ((line[0] == 'a' || line[0] == 'b') && sscanf(line + 1, "%llu", &size) == 1) {
			int rc = line[0] == 'a' ? drive_alloc(size, &p) : drive_other(size, &p);

			if (rc == 0 && tail - head < DRIVE_MAX) {
				sizes[tail % DRIVE_MAX] = size;
				live[tail++ % DRIVE_MAX] = p;
			}
		} else if (line[0] == 'n' && sscanf(line + 1, "%llu %llu", &n, &size) == 2) {
			unsigned long long failed = 0;

			for (unsigned long long i = 0; i < n; i++) {
				p = NULL;
				if (drive_quiet(size, &p)) {
					failed++;
				} else if (tail - head < DRIVE_MAX) {
					sizes[tail % DRIVE_MAX] = size;
					live[tail++ % DRIVE_MAX] = p;
				}
			}
			printf("calls %llu failed %llu\n", n, failed);
		} else if (line[0] == 'f' && head < tail) {
			int rc = cudaFree(live[head % DRIVE_MAX]);

			report("cudaFree", sizes[head % DRIVE_MAX], addr_of(live[head % DRIVE_MAX]), rc);
			head++;
		} else if (line[0] != 'f' && line[0] != 'n') {
			fprintf(stderr, "workload: driven: unknown command %s", line);
			return EXIT_USAGE;
		}
		say("ok");
	}
	return EXIT_OK;
}

#endif /* !GM_DLOPEN_ONLY */

/* ---- dlopen PATH SIZE (workload_dl only: nothing CUDA is mapped before the dlopen) ---- */

#ifdef GM_DLOPEN_ONLY
/* cudaErrorInsufficientDriver: what NVIDIA's own runtime returns on a machine with no driver. */
#define GM_NO_DRIVER 35

typedef int (*cuda_malloc_fn)(void **devPtr, size_t size);

GM_CALL_SITE static int alloc_after_dlopen(cuda_malloc_fn cuda_malloc, size_t size)
{
	void *p = NULL;
	int rc = cuda_malloc(&p, size);

	report("cudaMalloc", size, (uintptr_t)p, rc);
	return rc;
}

static int run_dlopen(char **argv)
{
	cuda_malloc_fn cuda_malloc;
	uint64_t size;
	void *lib;
	int rc;

	if (parse_u64(argv[1], &size))
		return EXIT_USAGE;
	say("waiting");
	wait_for_line();
	lib = dlopen(argv[0], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "workload: cannot dlopen %s: %s\n", argv[0], dlerror());
		return EXIT_UNEXPECTED;
	}
	cuda_malloc = (cuda_malloc_fn)dlsym(lib, "cudaMalloc");
	if (!cuda_malloc) {
		fprintf(stderr, "workload: %s has no cudaMalloc\n", argv[0]);
		return EXIT_UNEXPECTED;
	}
	rc = alloc_after_dlopen(cuda_malloc, size);
	return rc == 0 || rc == GM_NO_DRIVER ? EXIT_OK : EXIT_UNEXPECTED;
}

/* dlopenkeep PATH SIZE: dlopen then allocate at once, as dlopen does; then "holding" until a
 * line is read, the allocation kept. */
static int run_dlopen_keep(char **argv)
{
	int rc = run_dlopen(argv);

	if (rc != EXIT_OK)
		return rc;
	say("holding");
	wait_for_line();
	return EXIT_OK;
}

/* dlopenstep PATH SIZE: each step once a line is read: dlopen (then "opened"), allocate (then
 * "holding"), end. Nothing else is opened between the dlopen and the first call, when the
 * runtime opens the driver. dlopenfd PATH SIZE: the same, and right after the dlopen another
 * regular file is opened (and kept open): it takes the descriptor number the loader opened
 * PATH with and closed. */
static int dlopen_in_steps(char **argv, bool take_fd)
{
	cuda_malloc_fn cuda_malloc;
	uint64_t size;
	void *lib;
	int rc, fd = -1;

	if (parse_u64(argv[1], &size))
		return EXIT_USAGE;
	say("waiting");
	wait_for_line();
	lib = dlopen(argv[0], RTLD_NOW);
	if (take_fd)
		fd = open("/etc/passwd", O_RDONLY);
	cuda_malloc = lib ? (cuda_malloc_fn)dlsym(lib, "cudaMalloc") : NULL;
	if (!cuda_malloc || (take_fd && fd < 0)) {
		fprintf(stderr, "workload: no cudaMalloc from %s: %s\n", argv[0], dlerror());
		return EXIT_UNEXPECTED;
	}
	if (take_fd) {
		printf("opened %d\n", fd);
		fflush(stdout);
	} else {
		say("opened");
	}
	wait_for_line();
	rc = alloc_after_dlopen(cuda_malloc, size);
	if (rc != 0 && rc != GM_NO_DRIVER)
		return EXIT_UNEXPECTED;
	say("holding");
	wait_for_line();
	if (fd >= 0)
		close(fd);
	return EXIT_OK;
}

static int run_dlopen_step(char **argv)
{
	return dlopen_in_steps(argv, false);
}

static int run_dlopen_fd(char **argv)
{
	return dlopen_in_steps(argv, true);
}
#endif

static const struct scenario scenarios[] = {
#ifdef GM_DLOPEN_ONLY
	{ "dlopenfd", 2, "PATH SIZE", run_dlopen_fd },
	{ "dlopen", 2, "PATH SIZE", run_dlopen },
	{ "dlopenkeep", 2, "PATH SIZE", run_dlopen_keep },
	{ "dlopenstep", 2, "PATH SIZE", run_dlopen_step },
#else
	{ "leak", 2, "STEPS SIZE", run_leak },
	{ "sameline", 2, "N SIZE", run_sameline },
	{ "deep", 2, "N SIZE", run_deep },
	{ "deeptwice", 2, "N SIZE", run_deeptwice },
	{ "kinds", 0, "", run_kinds },
	{ "driver", 0, "", run_driver },
	{ "nested", 2, "N SIZE", run_nested },
	{ "reuse", 1, "SIZE", run_reuse },
	{ "handoff", 2, "N SIZE", run_handoff },
	{ "wrongfree", 1, "SIZE", run_wrongfree },
	{ "threads", 3, "T N SIZE", run_threads },
	{ "slowexit", 3, "MS FDS SIZE", run_slowexit },
	{ "fail", 2, "SIZE MAX", run_fail },
	{ "prefree", 2, "N SIZE", run_prefree },
	{ "storm", 2, "N SIZE", run_storm },
	{ "hold", 1, "SIZE", run_hold },
	{ "exec", 2, "N SIZE", run_exec },
	{ "children", 2, "K SIZE", run_children },
	{ "exitcode", 1, "CODE", run_exitcode },
	{ "private", 2, "N SIZE", run_private },
	{ "steps", 3, "STEPS PERIOD_MS SIZE", run_steps },
	{ "plateau", 4, "STEPS PERIOD_MS K SIZE", run_plateau },
	{ "hidden", 4, "STEPS PERIOD_MS BIG SMALL", run_hidden },
	{ "manyhold", 2, "N SIZE", run_manyhold },
	{ "driven", 0, "", run_driven },
#endif
};

static int usage(const char *prog)
{
	fprintf(stderr, "usage: %s [--wait] SCENARIO [ARGS]\n", prog);
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		fprintf(stderr, "  %s %s\n", scenarios[i].name, scenarios[i].args);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	const struct scenario *chosen = NULL;
	int first = 1, status;

	if (argc > 1 && !strcmp(argv[1], "--wait"))
		first = 2;
	if (argc <= first)
		return usage(argv[0]);
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (!strcmp(argv[first], scenarios[i].name))
			chosen = &scenarios[i];
	if (!chosen || argc - first - 1 != chosen->nargs)
		return usage(argv[0]);
	if (first == 2) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		wait_for_line();
	}
	status = chosen->run(&argv[first + 1]);
	if (status == EXIT_USAGE)
		return usage(argv[0]);
	say("done");
	return status;
}
