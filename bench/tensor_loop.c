// SPDX-License-Identifier: GPL-2.0
/* The tensor benchmark's workload (bench/tensors.sh): tensor malloc+free pairs through copies of
 * the mock caching allocator (tests' libc10_cuda.so, with PyTorch's USDT probes behind their
 * semaphores), each copy a file of its own with the probes of its own tracer or none (uprobes
 * are per inode). The pairs go through the copies in turn, BATCH at a time, the first of a
 * turn rotating, each batch timed on this thread's CPU clock, where the uprobes run: what the
 * shared machine does meanwhile falls on every copy alike.
 *
 * tensor_loop PAIRS BATCH LIB...: PAIRS pairs through each LIB; prints "tensors: pid P pairs
 * N", then "LIB: C ns/pair cpu, fired F" for each (F: the probes its allocator reached, malloc
 * and free: 0 when nothing is attached to it). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define WARMUP_PAIRS 1000
#define TENSOR_BYTES 4096
#define MAX_LIBS 8

/* One copy of the allocator, loaded apart (RTLD_LOCAL: its calls stay its own). */
struct allocator {
	const char *path;
	void *(*alloc)(size_t size);
	void (*free)(void *ptr);
	unsigned long (*fired)(int frees);
	unsigned long long cpu_ns;
};

/* Static, not on main's stack: main's frame stays small, so the walk of each event's stack
 * reads the frames it read when the loop had one allocator (512 bytes of copies between the
 * probe and main's frame record would have put it past the walk's first window). */
static struct allocator libs[MAX_LIBS];

static unsigned long long cpu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int pairs(const struct allocator *a, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		void *ptr = a->alloc(TENSOR_BYTES);

		if (!ptr)
			return -1;
		a->free(ptr);
	}
	return 0;
}

static int load(struct allocator *a, const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	a->path = path;
	if (!h) {
		fprintf(stderr, "tensor_loop: %s\n", dlerror());
		return -1;
	}
	a->alloc = (void *(*)(size_t))dlsym(h, "c10_mock_alloc");
	a->free = (void (*)(void *))dlsym(h, "c10_mock_free");
	a->fired = (unsigned long (*)(int))dlsym(h, "c10_mock_fired");
	if (!a->alloc || !a->free || !a->fired) {
		fprintf(stderr, "tensor_loop: %s is no mock caching allocator\n", path);
		return -1;
	}
	/* Outside the timing: the segment's cudaMalloc, and each new site's first stack. */
	if (pairs(a, WARMUP_PAIRS)) {
		fprintf(stderr, "tensor_loop: %s: the mock allocator has no memory\n", path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 3 ? strtoul(argv[1], NULL, 0) : 0;
	unsigned long batch = argc > 3 ? strtoul(argv[2], NULL, 0) : 0;
	int nlibs = argc - 3;

	if (!n || !batch || nlibs < 1 || nlibs > MAX_LIBS) {
		fprintf(stderr, "usage: tensor_loop PAIRS BATCH LIB... (1 to %d copies)\n",
			MAX_LIBS);
		return 2;
	}
	for (int i = 0; i < nlibs; i++)
		if (load(&libs[i], argv[3 + i]))
			return 1;
	for (unsigned long done = 0, turn = 0; done < n; done += batch, turn++) {
		unsigned long k = n - done < batch ? n - done : batch;

		for (int j = 0; j < nlibs; j++) {
			struct allocator *a = &libs[(turn + (unsigned long)j) % (unsigned long)nlibs];
			unsigned long long start = cpu_now_ns();

			if (pairs(a, k))
				return 1;
			a->cpu_ns += cpu_now_ns() - start;
		}
	}
	printf("tensors: pid %d pairs %lu\n", getpid(), n);
	for (int i = 0; i < nlibs; i++)
		printf("%s: %.1f ns/pair cpu, fired %lu\n", libs[i].path,
		       (double)libs[i].cpu_ns / (double)n, libs[i].fired(0) + libs[i].fired(1));
	return 0;
}
