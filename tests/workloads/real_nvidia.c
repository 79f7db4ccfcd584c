/* Calls NVIDIA's real libraries, opened with dlopen by path (scripts/nvidia.sh fetches the
 * driver and CUDA 11.8's runtime; CUDA 13's comes with the Toolkit), so that tests can trace
 * them on a host with no GPU and no kernel module. Prints one `call API SIZE ADDR RC` line per
 * probed call, `init RC`, `errname RC NAME` (the library's own name of each code it returned)
 * and, for cuGetProcAddress, `proc NAME VERSION FLAGS RC STATUS GOT EXPORT DLSYM`.
 * Usage: real_nvidia driver LIBCUDA
 *        real_nvidia runtime LIBCUDART
 *        real_nvidia procaddr LIBCUDA NAME:VERSION:FLAGS:EXPORT...
 * Prototypes are written out here (no CUDA header needed): the ABI is the documented one. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#define GM_CALL_SITE __attribute__((noipa))
#else
#define GM_CALL_SITE __attribute__((noinline))
#endif

#define ALLOC_BYTES (1u << 20)	/* each call asks a size of its own: ALLOC_BYTES + i * 4096 */
#define FREE_ADDR 0x1000u	/* never allocated: a free the driver refuses */
#define MAX_CODES 16

typedef unsigned long long devptr_t;	/* CUdeviceptr */
typedef int (*name_fn)(int code, const char **name);	/* cuGetErrorName */
typedef const char *(*rt_name_fn)(int code);		/* cudaGetErrorName */

static void *lib;
static int codes[MAX_CODES];
static unsigned int ncodes;

static void *need(const char *symbol)
{
	void *fn = dlsym(lib, symbol);

	if (!fn) {
		fprintf(stderr, "real_nvidia: %s not exported\n", symbol);
		exit(2);
	}
	return fn;
}

static void report(const char *api, uint64_t size, uint64_t addr, int rc)
{
	unsigned int i;

	printf("call %s %" PRIu64 " 0x%" PRIx64 " %d\n", api, size, addr, rc);
	for (i = 0; i < ncodes && codes[i] != rc; i++)
		;
	if (i == ncodes && ncodes < MAX_CODES)
		codes[ncodes++] = rc;
}

static uint64_t size_of(unsigned int i)
{
	return ALLOC_BYTES + (uint64_t)i * 4096;
}

/* Each API of gpumem's driver probe table, in its order, with no context. */
GM_CALL_SITE static void driver_calls(void)
{
	int (*alloc)(devptr_t *, size_t) = need("cuMemAlloc_v2");
	int (*pitch)(devptr_t *, size_t *, size_t, size_t, unsigned int) =
		need("cuMemAllocPitch_v2");
	int (*managed)(devptr_t *, size_t, unsigned int) = need("cuMemAllocManaged");
	int (*host)(void **, size_t) = need("cuMemAllocHost_v2");
	int (*host_alloc)(void **, size_t, unsigned int) = need("cuMemHostAlloc");
	static const char *const async_names[] = { "cuMemAllocAsync", "cuMemAllocAsync_ptsz" };
	static const char *const pool_names[] = { "cuMemAllocFromPoolAsync",
						  "cuMemAllocFromPoolAsync_ptsz" };
	static const char *const free_async_names[] = { "cuMemFreeAsync", "cuMemFreeAsync_ptsz" };
	int (*create)(unsigned long long *, size_t, const void *, unsigned long long) =
		need("cuMemCreate");
	int (*release)(unsigned long long) = need("cuMemRelease");
	int (*free_dev)(devptr_t) = need("cuMemFree_v2");
	int (*free_host)(void *) = need("cuMemFreeHost");
	unsigned long long handle = 0;
	devptr_t dptr = 0;
	void *hptr = NULL;
	size_t pitch_bytes = 0;
	unsigned int i = 0;

	report("cuMemAlloc_v2", size_of(i), dptr, alloc(&dptr, size_of(i)));
	i++;
	/* width size_of(i), height 2: gpumem records width * height */
	report("cuMemAllocPitch_v2", 2 * size_of(i), dptr,
	       pitch(&dptr, &pitch_bytes, size_of(i), 2, 4));
	i++;
	report("cuMemAllocManaged", size_of(i), dptr, managed(&dptr, size_of(i), 1));
	i++;
	report("cuMemAllocHost_v2", size_of(i), (uintptr_t)hptr, host(&hptr, size_of(i)));
	i++;
	report("cuMemHostAlloc", size_of(i), (uintptr_t)hptr, host_alloc(&hptr, size_of(i), 0));
	for (unsigned int k = 0; k < 2; k++) {
		int (*async)(devptr_t *, size_t, void *) = need(async_names[k]);

		i++;
		report(async_names[k], size_of(i), dptr, async(&dptr, size_of(i), NULL));
	}
	for (unsigned int k = 0; k < 2; k++) {
		int (*pool)(devptr_t *, size_t, void *, void *) = need(pool_names[k]);

		i++;
		report(pool_names[k], size_of(i), dptr, pool(&dptr, size_of(i), NULL, NULL));
	}
	i++;
	report("cuMemCreate", size_of(i), handle, create(&handle, size_of(i), NULL, 0));
	report("cuMemFree_v2", 0, FREE_ADDR, free_dev(FREE_ADDR));
	report("cuMemFreeHost", 0, FREE_ADDR, free_host((void *)(uintptr_t)FREE_ADDR));
	for (unsigned int k = 0; k < 2; k++) {
		int (*free_async)(devptr_t, void *) = need(free_async_names[k]);

		report(free_async_names[k], 0, FREE_ADDR, free_async(FREE_ADDR, NULL));
	}
	report("cuMemRelease", 0, FREE_ADDR, release(FREE_ADDR));
}

static int run_driver(void)
{
	int (*init)(unsigned int) = need("cuInit");
	name_fn name = need("cuGetErrorName");
	int rc = init(0);

	printf("init %d\n", rc);
	report("cuInit", 0, 0, rc);	/* not probed: the test finds no failure of it */
	driver_calls();
	for (unsigned int i = 0; i < ncodes; i++) {
		const char *s = NULL;

		printf("errname %d %s\n", codes[i], name(codes[i], &s) == 0 && s ? s : "-");
	}
	return 0;
}

/* The runtime's allocation APIs of gpumem's probe table, each once, in its order. */
GM_CALL_SITE static void runtime_calls(void)
{
	int (*dmalloc)(void **, size_t) = need("cudaMalloc");
	int (*pitch)(void **, size_t *, size_t, size_t) = need("cudaMallocPitch");
	int (*managed)(void **, size_t, unsigned int) = need("cudaMallocManaged");
	int (*host)(void **, size_t) = need("cudaMallocHost");
	int (*host_alloc)(void **, size_t, unsigned int) = need("cudaHostAlloc");
	static const char *const async_names[] = { "cudaMallocAsync", "cudaMallocAsync_ptsz" };
	static const char *const pool_names[] = { "cudaMallocFromPoolAsync",
						  "cudaMallocFromPoolAsync_ptsz" };
	int (*dfree)(void *) = need("cudaFree");
	int (*free_host)(void *) = need("cudaFreeHost");
	void *p = NULL;
	size_t pitch_bytes = 0;
	unsigned int i = 0;

	report("cudaMalloc", size_of(i), (uintptr_t)p, dmalloc(&p, size_of(i)));
	i++;
	report("cudaMallocPitch", 2 * size_of(i), (uintptr_t)p,
	       pitch(&p, &pitch_bytes, size_of(i), 2));
	i++;
	report("cudaMallocManaged", size_of(i), (uintptr_t)p, managed(&p, size_of(i), 1));
	i++;
	report("cudaMallocHost", size_of(i), (uintptr_t)p, host(&p, size_of(i)));
	i++;
	report("cudaHostAlloc", size_of(i), (uintptr_t)p, host_alloc(&p, size_of(i), 0));
	for (unsigned int k = 0; k < 2; k++) {
		int (*async)(void **, size_t, void *) = need(async_names[k]);

		i++;
		report(async_names[k], size_of(i), (uintptr_t)p, async(&p, size_of(i), NULL));
	}
	for (unsigned int k = 0; k < 2; k++) {
		int (*pool)(void **, size_t, void *, void *) = need(pool_names[k]);

		i++;
		report(pool_names[k], size_of(i), (uintptr_t)p, pool(&p, size_of(i), NULL, NULL));
	}
	report("cudaFree", 0, FREE_ADDR, dfree((void *)(uintptr_t)FREE_ADDR));
	report("cudaFreeHost", 0, FREE_ADDR, free_host((void *)(uintptr_t)FREE_ADDR));
}

static int run_runtime(void)
{
	rt_name_fn name = need("cudaGetErrorName");
	int (*driver_version)(int *) = need("cudaDriverGetVersion");
	int (*runtime_version)(int *) = need("cudaRuntimeGetVersion");
	int dv = -1, rv = -1, drc, rrc;

	runtime_calls();
	drc = driver_version(&dv);
	rrc = runtime_version(&rv);
	printf("versions driver %d %d runtime %d %d\n", drc, dv, rrc, rv);
	for (unsigned int i = 0; i < ncodes; i++)
		printf("errname %d %s\n", codes[i], name(codes[i]));
	return 0;
}

/* NAME:VERSION:FLAGS:EXPORT: what cuGetProcAddress hands out against dlsym of EXPORT. */
static int run_procaddr(int argc, char **argv)
{
	int (*get_v2)(const char *, void **, int, unsigned long long, int *) =
		dlsym(lib, "cuGetProcAddress_v2");

	if (!get_v2) {
		fprintf(stderr, "real_nvidia: cuGetProcAddress_v2 not exported\n");
		return 2;
	}
	for (int i = 0; i < argc; i++) {
		char name[128], exported[128];
		unsigned long long flags;
		void *got = NULL;
		int version, status = -1, rc;

		if (sscanf(argv[i], "%127[^:]:%d:%llu:%127s", name, &version, &flags,
			   exported) != 4) {
			fprintf(stderr, "real_nvidia: %s is not NAME:VERSION:FLAGS:EXPORT\n",
				argv[i]);
			return 2;
		}
		rc = get_v2(name, &got, version, flags, &status);
		printf("proc %s %d %llu %d %d %p %s %p\n", name, version, flags, rc, status, got,
		       exported, dlsym(lib, exported));
	}
	return 0;
}

int main(int argc, char **argv)
{
	int rc;

	if (argc < 3) {
		fprintf(stderr, "usage: real_nvidia driver|runtime|procaddr LIBRARY [ARG...]\n");
		return 2;
	}
	lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "real_nvidia: %s\n", dlerror());
		return 2;
	}
	if (strcmp(argv[1], "driver") == 0)
		rc = run_driver();
	else if (strcmp(argv[1], "runtime") == 0)
		rc = run_runtime();
	else if (strcmp(argv[1], "procaddr") == 0)
		rc = run_procaddr(argc - 3, argv + 3);
	else {
		fprintf(stderr, "real_nvidia: unknown mode %s\n", argv[1]);
		rc = 2;
	}
	printf("done\n");
	fflush(stdout);
	return rc;
}
