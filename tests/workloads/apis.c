/* Workloads for the allocation APIs beyond cudaMalloc: arrays sized from their descriptors,
 * registered host memory, VMM mappings and reservations, IPC imports. Each scenario's numbers
 * are in its comment; it prints one `call API SIZE ADDR RC` line per call. */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mock_cuda.h"

#if defined(__GNUC__) && !defined(__clang__)
#define GM_CALL_SITE __attribute__((noipa))
#else
#define GM_CALL_SITE __attribute__((noinline))
#endif

#define MIB (1ull << 20)

static void report(const char *api, uint64_t size, uint64_t addr, int rc)
{
	printf("call %s %" PRIu64 " 0x%" PRIx64 " %d\n", api, size, addr, rc);
	fflush(stdout);
}

static uint64_t addr_of(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

static struct cudaChannelFormatDesc channels(int bits, int n, enum cudaChannelFormatKind f)
{
	struct cudaChannelFormatDesc d = { .f = f };

	d.x = bits;
	d.y = n > 1 ? bits : 0;
	d.z = n > 2 ? bits : 0;
	d.w = n > 3 ? bits : 0;
	return d;
}

/* ---- arrays: the runtime's, each nesting a driver call ----
 * kept: 16,000 (float4 100x10) + 21,760 (float 64x64, 4 levels) + 30,720 (cudaMalloc3D 1000 B
 * x 10 x 3, pitch 1024); freed: 2,048 (uchar 32x16x4), 15,360 (uchar4 32x32, 3 layers,
 * 2 levels). */

GM_CALL_SITE static int rt_array(cudaArray_t *a)
{
	struct cudaChannelFormatDesc d = channels(32, 4, cudaChannelFormatKindFloat);
	int rc = cudaMallocArray(a, &d, 100, 10, 0);

	report("cudaMallocArray", 16000, addr_of(*a), rc);
	return rc;
}

GM_CALL_SITE static int rt_array3d(cudaArray_t *a)
{
	struct cudaChannelFormatDesc d = channels(8, 1, cudaChannelFormatKindUnsigned);
	struct cudaExtent e = { 32, 16, 4 };
	int rc = cudaMalloc3DArray(a, &d, e, 0);

	report("cudaMalloc3DArray", 2048, addr_of(*a), rc);
	return rc;
}

GM_CALL_SITE static int rt_mipmap(cudaMipmappedArray_t *a)
{
	struct cudaChannelFormatDesc d = channels(32, 1, cudaChannelFormatKindFloat);
	struct cudaExtent e = { 64, 64, 0 };
	int rc = cudaMallocMipmappedArray(a, &d, e, 4, 0);

	report("cudaMallocMipmappedArray", 21760, addr_of(*a), rc);
	return rc;
}

GM_CALL_SITE static int rt_layered_mipmap(cudaMipmappedArray_t *a)
{
	struct cudaChannelFormatDesc d = channels(8, 4, cudaChannelFormatKindUnsigned);
	struct cudaExtent e = { 32, 32, 3 };
	int rc = cudaMallocMipmappedArray(a, &d, e, 2, cudaArrayLayered);

	report("cudaMallocMipmappedArray", 15360, addr_of(*a), rc);
	return rc;
}

GM_CALL_SITE static int rt_malloc3d(struct cudaPitchedPtr *p)
{
	struct cudaExtent e = { 1000, 10, 3 };
	int rc = cudaMalloc3D(p, e);

	report("cudaMalloc3D", (uint64_t)p->pitch * 30, addr_of(p->ptr), rc);
	return rc || p->pitch != 1024;
}

GM_CALL_SITE static int rt_free_array(cudaArray_t a)
{
	int rc = cudaFreeArray(a);

	report("cudaFreeArray", 2048, addr_of(a), rc);
	return rc;
}

GM_CALL_SITE static int rt_free_mipmap(cudaMipmappedArray_t a)
{
	int rc = cudaFreeMipmappedArray(a);

	report("cudaFreeMipmappedArray", 15360, addr_of(a), rc);
	return rc;
}

static int run_arrays(void)
{
	cudaArray_t kept = NULL, freed = NULL;
	cudaMipmappedArray_t mip = NULL, layered = NULL;
	struct cudaPitchedPtr pitched = { 0 };

	if (rt_array(&kept) || rt_array3d(&freed) || rt_mipmap(&mip) ||
	    rt_layered_mipmap(&layered) || rt_malloc3d(&pitched))
		return 1;
	return rt_free_array(freed) || rt_free_mipmap(layered);
}

/* ---- drvarrays: the driver's ----
 * kept: 8,000 (FLOAT x2, 50x20), 1,344 (HALF x4, 16x8, 3 levels), an NV12 64x64 array gpumem
 * cannot size (0 bytes, unsized_arrays 1); freed: 1,024 (UNSIGNED_INT16, 8x8x8). Then an array
 * of 16 MiB fails (GPUMEM_MOCK_FAIL_SIZE), cuArrayDestroy of a handle never made fails, and
 * cuMemFree_v2 of a live array's handle fails: a handle is no device address. */

GM_CALL_SITE static int drv_array(CUarray *a, CUarray_format format, unsigned int nchan,
				  size_t width, size_t height, uint64_t bytes)
{
	CUDA_ARRAY_DESCRIPTOR d = { .Width = width, .Height = height, .Format = format,
				    .NumChannels = nchan };
	int rc = cuArrayCreate_v2(a, &d);

	report("cuArrayCreate_v2", bytes, addr_of(*a), rc);
	return rc;
}

GM_CALL_SITE static int drv_array3d(CUarray *a)
{
	CUDA_ARRAY3D_DESCRIPTOR d = { .Width = 8, .Height = 8, .Depth = 8,
				      .Format = CU_AD_FORMAT_UNSIGNED_INT16, .NumChannels = 1 };
	int rc = cuArray3DCreate_v2(a, &d);

	report("cuArray3DCreate_v2", 1024, addr_of(*a), rc);
	return rc;
}

GM_CALL_SITE static int drv_mipmap(CUmipmappedArray *a)
{
	CUDA_ARRAY3D_DESCRIPTOR d = { .Width = 16, .Height = 8, .Format = CU_AD_FORMAT_HALF,
				      .NumChannels = 4 };
	int rc = cuMipmappedArrayCreate(a, &d, 3);

	report("cuMipmappedArrayCreate", 1344, addr_of(*a), rc);
	return rc;
}

GM_CALL_SITE static int drv_destroy(CUarray a, uint64_t bytes)
{
	int rc = cuArrayDestroy(a);

	report("cuArrayDestroy", bytes, addr_of(a), rc);
	return rc;
}

GM_CALL_SITE static int drv_free_handle_as_address(CUarray a)
{
	int rc = cuMemFree_v2((CUdeviceptr)(uintptr_t)a);

	report("cuMemFree_v2", 0, addr_of(a), rc);
	return rc;
}

static int run_drvarrays(void)
{
	CUarray kept = NULL, freed = NULL, nv12 = NULL, big = NULL;
	CUmipmappedArray mip = NULL;

	if (cuInit(0) || drv_array(&kept, CU_AD_FORMAT_FLOAT, 2, 50, 20, 8000) ||
	    drv_array3d(&freed) || drv_mipmap(&mip) ||
	    drv_array(&nv12, CU_AD_FORMAT_NV12, 1, 64, 64, 0))
		return 1;
	if (drv_destroy(freed, 1024))
		return 1;
	if (drv_array(&big, CU_AD_FORMAT_FLOAT, 4, 1024, 1024, 16 * MIB) != CUDA_ERROR_OUT_OF_MEMORY)
		return 1;
	if (drv_destroy((CUarray)(uintptr_t)0x5a5a5a5a0000ull, 0) != CUDA_ERROR_INVALID_VALUE)
		return 1;
	return drv_free_handle_as_address(kept) != CUDA_ERROR_INVALID_VALUE;
}

/* ---- register: page-locked host ranges the program allocated itself ----
 * cudaHostRegister 65,536 (kept), cuMemHostRegister_v2 8,192 (unregistered), cudaHostRegister
 * of the kept range again (712 cudaErrorHostMemoryAlreadyRegistered), cudaHostUnregister of a
 * range never registered (713: a failed free). */

GM_CALL_SITE static int rt_register(void *p, size_t bytes)
{
	int rc = cudaHostRegister(p, bytes, 0);

	report("cudaHostRegister", bytes, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int drv_register(void *p, size_t bytes)
{
	int rc = cuMemHostRegister_v2(p, bytes, 0);

	report("cuMemHostRegister_v2", bytes, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int drv_unregister(void *p)
{
	int rc = cuMemHostUnregister(p);

	report("cuMemHostUnregister", 8192, addr_of(p), rc);
	return rc;
}

GM_CALL_SITE static int rt_unregister(void *p)
{
	int rc = cudaHostUnregister(p);

	report("cudaHostUnregister", 0, addr_of(p), rc);
	return rc;
}

static int run_register(void)
{
	void *kept = aligned_alloc(4096, 65536), *brief = aligned_alloc(4096, 8192);
	void *never = aligned_alloc(4096, 4096);

	if (!kept || !brief || !never)
		return 1;
	if (rt_register(kept, 65536) || drv_register(brief, 8192) || drv_unregister(brief))
		return 1;
	if (rt_register(kept, 65536) != cudaErrorHostMemoryAlreadyRegistered)
		return 1;
	return rt_unregister(never) != cudaErrorHostMemoryNotRegistered;
}

/* ---- vmm: physical memory once, mappings and reservations beside it ----
 * Two 2 MiB handles mapped into an 8 MiB reservation; the second unmapped and released. Held
 * at the end: vmm 2 MiB, mapped 2 MiB, reserved 8 MiB; GPU memory 2 MiB, peak 4 MiB. A map of
 * a handle that does not exist fails (CUDA_ERROR_INVALID_VALUE). */

GM_CALL_SITE static int vmm_create(CUmemGenericAllocationHandle *h, int device)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED };
	int rc;

	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = device;
	rc = cuMemCreate(h, 2 * MIB, &prop, 0);
	report("cuMemCreate", 2 * MIB, *h, rc);
	return rc;
}

GM_CALL_SITE static int vmm_reserve(CUdeviceptr *va)
{
	int rc = cuMemAddressReserve(va, 8 * MIB, 0, 0, 0);

	report("cuMemAddressReserve", 8 * MIB, *va, rc);
	return rc;
}

GM_CALL_SITE static int vmm_map(CUdeviceptr va, CUmemGenericAllocationHandle h)
{
	int rc = cuMemMap(va, 2 * MIB, 0, h, 0);

	report("cuMemMap", 2 * MIB, va, rc);
	return rc;
}

GM_CALL_SITE static int vmm_unmap(CUdeviceptr va)
{
	int rc = cuMemUnmap(va, 2 * MIB);

	report("cuMemUnmap", 2 * MIB, va, rc);
	return rc;
}

GM_CALL_SITE static int vmm_release(CUmemGenericAllocationHandle h)
{
	int rc = cuMemRelease(h);

	report("cuMemRelease", 2 * MIB, h, rc);
	return rc;
}

static int run_vmm(void)
{
	CUmemGenericAllocationHandle kept = 0, brief = 0;
	CUdeviceptr va = 0;

	if (cuInit(0) || vmm_create(&kept, 0) || vmm_reserve(&va) || vmm_map(va, kept) ||
	    vmm_create(&brief, 0) || vmm_map(va + 2 * MIB, brief) || vmm_unmap(va + 2 * MIB) ||
	    vmm_release(brief))
		return 1;
	return vmm_map(va + 4 * MIB, 0xdead) != CUDA_ERROR_INVALID_VALUE;
}

/* ---- ipc: a parent exports two buffers, a child imports them ----
 * The parent holds 1 MiB + 256 KiB of device memory. The child opens both handles, closes the
 * second, fails to open a handle of zeros (cudaErrorInvalidValue) and ends holding one import:
 * no GPU memory of its own. */

GM_CALL_SITE static int ipc_export(void **p, size_t bytes, cudaIpcMemHandle_t *h)
{
	int rc = cudaMalloc(p, bytes);

	report("cudaMalloc", bytes, addr_of(*p), rc);
	if (rc)
		return rc;
	rc = cudaIpcGetMemHandle(h, *p);
	report("cudaIpcGetMemHandle", 0, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int ipc_import(void **p, cudaIpcMemHandle_t h)
{
	int rc = cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess);

	report("cudaIpcOpenMemHandle", 0, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int ipc_close(void *p)
{
	int rc = cudaIpcCloseMemHandle(p);

	report("cudaIpcCloseMemHandle", 0, addr_of(p), rc);
	return rc;
}

static int ipc_child(cudaIpcMemHandle_t a, cudaIpcMemHandle_t b)
{
	cudaIpcMemHandle_t zeros;
	void *pa = NULL, *pb = NULL, *pz = NULL;

	memset(&zeros, 0, sizeof(zeros));
	if (ipc_import(&pa, a) || ipc_import(&pb, b) || ipc_close(pb))
		return 1;
	return ipc_import(&pz, zeros) != cudaErrorInvalidValue;
}

static int run_ipc(void)
{
	cudaIpcMemHandle_t a, b;
	void *pa = NULL, *pb = NULL;
	int wstatus;
	pid_t pid;

	if (ipc_export(&pa, MIB, &a) || ipc_export(&pb, 256 << 10, &b))
		return 1;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0)
		exit(ipc_child(a, b));
	if (waitpid(pid, &wstatus, 0) != pid || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus))
		return 1;
	printf("child %d 0\n", (int)pid);
	return 0;
}

/* ---- contexts: a teardown releases what its context held ----
 * Primary (cudaSetDevice 0): 1,000 device, 2,000 async, 3,000 host. A created context: 4,000
 * device, 5,000 host; popped: 6,000 on the primary; pushed again: 7,000; destroyed: 4,000,
 * 5,000 and 7,000 released. 8,000 on the primary; cudaDeviceReset: 1,000, 3,000, 6,000 and
 * 8,000 released, the async 2,000 kept (its pool outlives the context). 9,000, then
 * cuDevicePrimaryCtxReset_v2(0) releases it. A thread creates a context and allocates 11,000
 * in it while the main thread's 12,000 stays on the primary; the main thread destroys the
 * thread's context (11,000 released). cuCtxCreate_v4, 10,000 in it, held at the end; a
 * cuCtxDestroy_v2 of a context never made fails. Held: 2,000 + 12,000 + 10,000. */

GM_CALL_SITE static int rt_alloc(void **p, size_t bytes)
{
	int rc = cudaMalloc(p, bytes);

	report("cudaMalloc", bytes, addr_of(*p), rc);
	return rc;
}

GM_CALL_SITE static int drv_alloc(CUdeviceptr *p, size_t bytes)
{
	int rc = cuMemAlloc_v2(p, bytes);

	report("cuMemAlloc_v2", bytes, *p, rc);
	return rc;
}

GM_CALL_SITE static int ctx_create(CUcontext *c)
{
	int rc = cuCtxCreate_v2(c, 0, 0);

	report("cuCtxCreate_v2", 0, addr_of(*c), rc);
	return rc;
}

GM_CALL_SITE static int ctx_create_v3(CUcontext *c, CUdevice dev)
{
	int rc = cuCtxCreate_v3(c, NULL, 0, 0, dev);

	report("cuCtxCreate_v3", 0, addr_of(*c), rc);
	return rc;
}

GM_CALL_SITE static int ctx_destroy(CUcontext c)
{
	int rc = cuCtxDestroy_v2(c);

	report("cuCtxDestroy_v2", 0, addr_of(c), rc);
	return rc;
}

struct ctx_thread {
	CUcontext ctx;
	int rc;
};

static void *ctx_thread_main(void *arg)
{
	struct ctx_thread *t = arg;
	CUdeviceptr p = 0;

	t->rc = ctx_create(&t->ctx) || drv_alloc(&p, 11000);
	return NULL;
}

static int run_contexts(void)
{
	void *a, *b, *h, *c, *d, *e, *f;
	CUdeviceptr p, q, r;
	CUcontext made = NULL, popped = NULL, v4 = NULL;
	struct ctx_thread t = { 0 };
	pthread_t thread;

	if (cudaSetDevice(0) || rt_alloc(&a, 1000) || cudaMallocAsync(&b, 2000, NULL) ||
	    cudaMallocHost(&h, 3000))
		return 1;
	if (ctx_create(&made) || drv_alloc(&p, 4000) || cuMemAllocHost_v2(&c, 5000) ||
	    cuCtxPopCurrent_v2(&popped) || popped != made || rt_alloc(&d, 6000) ||
	    cuCtxPushCurrent_v2(made) || drv_alloc(&q, 7000) || ctx_destroy(made))
		return 1;
	if (rt_alloc(&e, 8000) || cudaDeviceReset() || rt_alloc(&f, 9000) ||
	    cuDevicePrimaryCtxReset_v2(0))
		return 1;
	if (pthread_create(&thread, NULL, ctx_thread_main, &t) || pthread_join(thread, NULL) ||
	    t.rc || rt_alloc(&f, 12000) || ctx_destroy(t.ctx))
		return 1;
	if (cuCtxCreate_v4(&v4, NULL, 0, 0) || drv_alloc(&r, 10000))
		return 1;
	return ctx_destroy((CUcontext)(uintptr_t)0x5a5a0000) != CUDA_ERROR_INVALID_CONTEXT;
}

/* ---- devices (GPUMEM_MOCK_DEVICES=2): each thread's own device ----
 * Main: cudaSetDevice(1), 1,000 on GPU 1. A thread starts on GPU 0: 2,000 there, switches to 1:
 * 3,000, back to 0: 4,000. Main, still on 1: 5,000; a context made on GPU 0 (cuCtxCreate_v3,
 * its device the fifth argument): 6,000 there;
 * popped: 7,000 on GPU 1 again; cudaSetDevice(7) fails (cudaErrorInvalidDevice) and changes
 * nothing: 8,000 on GPU 1. Held: GPU 0 12,000, GPU 1 24,000. */

GM_CALL_SITE static int set_device(int device)
{
	int rc = cudaSetDevice(device);

	report("cudaSetDevice", 0, (uint64_t)device, rc);
	return rc;
}

static void *device_thread_main(void *arg)
{
	void *p;

	*(int *)arg = rt_alloc(&p, 2000) || set_device(1) || rt_alloc(&p, 3000) || set_device(0) ||
		      rt_alloc(&p, 4000);
	return NULL;
}

static int run_devices(void)
{
	CUcontext made = NULL, popped = NULL;
	CUdeviceptr d0, d1;
	pthread_t thread;
	int thread_rc = 1;
	void *p;

	if (set_device(1) || rt_alloc(&p, 1000))
		return 1;
	if (pthread_create(&thread, NULL, device_thread_main, &thread_rc) ||
	    pthread_join(thread, NULL) || thread_rc)
		return 1;
	if (rt_alloc(&p, 5000) || ctx_create_v3(&made, 0) || drv_alloc(&d0, 6000) ||
	    cuCtxPopCurrent_v2(&popped) || drv_alloc(&d1, 7000))
		return 1;
	if (set_device(7) != cudaErrorInvalidDevice)
		return 1;
	return rt_alloc(&p, 8000);
}

/* ---- samesite (GPUMEM_MOCK_DEVICES=2): one call site on two devices ----
 * One line allocates 1,000 on GPU 0, 2,000 on GPU 1, 1,000 on GPU 0 again: two sites of one
 * stack, GPU 0 2,000 in 2, GPU 1 2,000 in 1. */
static int run_samesite(void)
{
	static const int devices[] = { 0, 1, 0 };
	void *p;

	for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
		if (set_device(devices[i]) || rt_alloc(&p, 1000 * (uint64_t)(devices[i] + 1)))
			return 1;
	}
	return 0;
}

/* ---- vmmdevice (GPUMEM_MOCK_DEVICES=2): cuMemCreate on the device its properties name ----
 * With GPU 0 current: 2 MiB on GPU 1, then 2 MiB on GPU 0. */
static int run_vmmdevice(void)
{
	CUmemGenericAllocationHandle on1 = 0, on0 = 0;

	return set_device(0) || vmm_create(&on1, 1) || vmm_create(&on0, 0);
}

/* ---- sitefree (GPUMEM_MOCK_DEVICES=2): that site's memory given back ----
 * As samesite, then with GPU 1 current: cudaFree of the first GPU 0 allocation, and
 * cudaDeviceReset, which releases GPU 1's. Left: GPU 0 1,000 in 1 (2 allocs, 1 free), GPU 1
 * nothing (1 alloc, 1 free). */
static int run_sitefree(void)
{
	static const int devices[] = { 0, 1, 0 };
	void *p[3];

	for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
		if (set_device(devices[i]) || rt_alloc(&p[i], 1000 * (uint64_t)(devices[i] + 1)))
			return 1;
	}
	return set_device(1) || cudaFree(p[0]) || cudaDeviceReset();
}

static const struct {
	const char *name;
	int (*run)(void);
} scenarios[] = {
	{ "arrays", run_arrays },   { "drvarrays", run_drvarrays }, { "register", run_register },
	{ "vmm", run_vmm },	    { "ipc", run_ipc },		    { "contexts", run_contexts },
	{ "devices", run_devices }, { "samesite", run_samesite }, { "sitefree", run_sitefree },
	{ "vmmdevice", run_vmmdevice },
};

int main(int argc, char **argv)
{
	int c;

	for (size_t i = 0; argc == 2 && i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		if (strcmp(argv[1], scenarios[i].name))
			continue;
		if (scenarios[i].run()) {
			printf("unexpected result\n");
			return 1;
		}
		printf("done\n");
		fflush(stdout);
		if (getenv("GPUMEM_APIS_HOLD")) {	/* held alive until a line on stdin */
			while ((c = getchar()) != EOF && c != '\n')
				;
		}
		return 0;
	}
	fprintf(stderr, "usage: %s arrays|drvarrays|register|vmm|ipc|contexts|devices|samesite|sitefree|vmmdevice\n", argv[0]);
	return 2;
}
