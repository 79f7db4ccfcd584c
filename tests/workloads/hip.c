// SPDX-License-Identifier: GPL-2.0
/* hip LIB SCENARIO: HIP's allocation calls through the runtime at path LIB, opened with dlopen
 * (the mock, build/tests/lib-hip, or AMD's real one, build/amd). Each call prints
 * `call API SIZE ADDR RC`; the numbers each scenario leaves are in its comment.
 *   kinds  (the mock) every kind once: held at the end, device 1 MiB (hipMalloc) + 2 MiB
 *          (hipExtMallocWithFlags) + 10,240 (hipMallocPitch 1000 x 10, pitch 1024), managed
 *          3 MiB, vmm 2 MiB (hipMemCreate, mapped at 8 MiB reserved), host 64 KiB
 *          (hipHostMalloc) + 16 KiB registered; freed: async 4 MiB, host 8 KiB (hipMallocHost),
 *          device 512 KiB.
 *   fail   (AMD's real runtime, no device) hipMalloc 1 MiB, hipHostMalloc 4 KiB,
 *          hipMallocManaged 4 KiB: each fails, 101 (hipErrorInvalidDevice).
 *   hold   kinds, then prints `holding` and waits for a line on stdin before it exits.
 *   tensors  (LIB: the mock libc10_hip.so, PyTorch's ROCm allocator over the mock runtime)
 *          tensors of 256 KiB twice (load_weights) and 1 MiB (activation), the 1 MiB one freed:
 *          512 KiB of tensors held in one 2 MiB segment from hipMalloc. Prints each tensor as
 *          `tensor SIZE ADDR`.
 *   leak   (the mock) 60 steps 50 ms apart, each keeping 1 MiB from hipMalloc (keep_step) and
 *          taking and freeing 4 MiB of scratch (scratch_step): a loop that grows 1 MiB a step. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define NOINLINE __attribute__((noinline))

typedef int (*alloc_fn)(void **, size_t);
typedef int (*alloc_flags_fn)(void **, size_t, unsigned int);
typedef int (*free_fn)(void *);

static void *lib;

static void *sym(const char *name)
{
	void *f = dlsym(lib, name);

	if (!f) {
		fprintf(stderr, "hip: %s: %s\n", name, dlerror());
		exit(1);
	}
	return f;
}

static int report(const char *api, uint64_t size, const void *addr, int rc)
{
	printf("call %s %" PRIu64 " 0x%" PRIxPTR " %d\n", api, size, (uintptr_t)addr, rc);
	fflush(stdout);
	return rc;
}

NOINLINE static int alloc(const char *api, void **p, size_t size)
{
	int rc = ((alloc_fn)sym(api))(p, size);

	return report(api, size, *p, rc);
}

NOINLINE static int alloc_with(const char *api, void **p, size_t size, unsigned int flags)
{
	int rc = ((alloc_flags_fn)sym(api))(p, size, flags);

	return report(api, size, *p, rc);
}

NOINLINE static int hip_free(const char *api, void *p, size_t size)
{
	return report(api, size, p, ((free_fn)sym(api))(p));
}

NOINLINE static int hip_pitch(void **p)
{
	int (*fn)(void **, size_t *, size_t, size_t) = sym("hipMallocPitch");
	size_t pitch = 0;
	int rc = fn(p, &pitch, 1000, 10);

	return report("hipMallocPitch", pitch * 10, *p, rc);
}

NOINLINE static int hip_async(void)
{
	int (*a)(void **, size_t, void *) = sym("hipMallocAsync");
	int (*f)(void *, void *) = sym("hipFreeAsync");
	void *p = NULL;

	if (report("hipMallocAsync", 4 * MIB, p, a(&p, 4 * MIB, NULL)))
		return 1;
	return report("hipFreeAsync", 4 * MIB, p, f(p, NULL));
}

NOINLINE static int hip_register(void)
{
	int (*reg)(void *, size_t, unsigned int) = sym("hipHostRegister");
	void *p = malloc(16 * KIB);

	return report("hipHostRegister", 16 * KIB, p, reg(p, 16 * KIB, 0));
}

NOINLINE static int hip_vmm(void)
{
	int (*create)(uint64_t *, size_t, const void *, unsigned long long) = sym("hipMemCreate");
	int (*reserve)(void **, size_t, size_t, void *, unsigned long long) =
		sym("hipMemAddressReserve");
	int (*map)(void *, size_t, size_t, uint64_t, unsigned long long) = sym("hipMemMap");
	int32_t prop[8] = { 1, 0, 1, 0 };	/* pinned, on device 0 (location at 8) */
	uint64_t handle = 0;
	void *va = NULL;

	int rc = create(&handle, 2 * MIB, prop, 0);

	if (report("hipMemCreate", 2 * MIB, (void *)(uintptr_t)handle, rc))
		return 1;
	rc = reserve(&va, 8 * MIB, 0, NULL, 0);
	if (report("hipMemAddressReserve", 8 * MIB, va, rc))
		return 1;
	return report("hipMemMap", 2 * MIB, va, map(va, 2 * MIB, 0, handle, 0));
}

static int run_kinds(void)
{
	void *p[8] = { NULL };

	if (alloc("hipMalloc", &p[0], 1 * MIB) || alloc_with("hipExtMallocWithFlags", &p[1], 2 * MIB, 0) ||
	    hip_pitch(&p[2]) || alloc_with("hipMallocManaged", &p[3], 3 * MIB, 1) ||
	    alloc_with("hipHostMalloc", &p[4], 64 * KIB, 0) || hip_async() || hip_register() ||
	    hip_vmm())
		return 1;
	if (alloc("hipMallocHost", &p[5], 8 * KIB) || hip_free("hipFreeHost", p[5], 8 * KIB))
		return 1;
	if (alloc("hipMalloc", &p[6], 512 * KIB) || hip_free("hipFree", p[6], 512 * KIB))
		return 1;
	return 0;
}

/* AMD's real runtime with no device: every allocation fails with hipErrorInvalidDevice. */
static int run_fail(void)
{
	void *p = NULL;
	int rc[3];

	rc[0] = alloc("hipMalloc", &p, 1 * MIB);
	rc[1] = alloc_with("hipHostMalloc", &p, 4 * KIB, 0);
	rc[2] = alloc_with("hipMallocManaged", &p, 4 * KIB, 1);
	return rc[0] == 101 && rc[1] == 101 && rc[2] == 101 ? 0 : 1;
}

typedef void *(*tensor_alloc_fn)(size_t);
typedef void (*tensor_free_fn)(void *);

NOINLINE static void *tensor(size_t size)
{
	void *t = ((tensor_alloc_fn)sym("c10_mock_alloc"))(size);

	printf("tensor %zu 0x%" PRIxPTR "\n", size, (uintptr_t)t);
	return t;
}

NOINLINE static int load_weights(void)
{
	return tensor(256 * KIB) && tensor(256 * KIB) ? 0 : 1;
}

NOINLINE static int activation(void)
{
	void *t = tensor(1 * MIB);

	if (!t)
		return 1;
	((tensor_free_fn)sym("c10_mock_free"))(t);
	return 0;
}

static int run_tensors(void)
{
	return load_weights() || activation();
}

NOINLINE static int keep_step(void)
{
	void *p = NULL;

	return alloc("hipMalloc", &p, MIB);
}

NOINLINE static int scratch_step(void)
{
	void *p = NULL;

	return alloc("hipMalloc", &p, 4 * MIB) || hip_free("hipFree", p, 4 * MIB);
}

static int run_leak(void)
{
	const struct timespec step = { .tv_nsec = 50 * 1000 * 1000 };

	for (int i = 0; i < 60; i++) {
		if (keep_step() || scratch_step())
			return 1;
		nanosleep(&step, NULL);
	}
	return 0;
}

static int run_hold(void)
{
	char line[16];

	if (run_kinds())
		return 1;
	printf("holding\n");
	fflush(stdout);
	return fgets(line, sizeof(line), stdin) ? 0 : 1;
}

int main(int argc, char **argv)
{
	int rc;

	if (argc != 3 || (strcmp(argv[2], "kinds") && strcmp(argv[2], "fail") &&
			  strcmp(argv[2], "tensors") && strcmp(argv[2], "hold") &&
			  strcmp(argv[2], "leak"))) {
		fprintf(stderr, "usage: hip LIB kinds|fail|tensors|hold|leak\n");
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "hip: %s\n", dlerror());
		return 1;
	}
	rc = !strcmp(argv[2], "kinds") ? run_kinds() :
	     !strcmp(argv[2], "fail")  ? run_fail() :
	     !strcmp(argv[2], "hold")  ? run_hold() :
	     !strcmp(argv[2], "leak")  ? run_leak() : run_tensors();
	printf("%s\n", rc ? "unexpected result" : "done");
	return rc;
}
