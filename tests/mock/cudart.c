/* Mock libcudart.so.13 for tests without a GPU: like NVIDIA's runtime it does not link the
 * driver but dlopen()s libcuda.so.1 on first use, so each runtime call nests one driver call. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>

#include "mock_cuda.h"

#define GM_RUNTIME_VERSION 13000
#define GM_PITCH_ELEMENT_BYTES 4

/*
 * With GPUMEM_MOCK_RUNTIME_PRIVATE=1 the driver is reached through cuMockGetPrivateTable()
 * (internal entry points, as cuGetProcAddress hands out), so no driver uprobe fires inside a
 * runtime call. Otherwise through the exported symbols, found with dlsym().
 */
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static struct gm_mock_driver_api driver;
static bool driver_ready;
static __thread cudaError_t last_error;

static bool load_exported(void *lib)
{
	struct {
		const char *name;
		void **slot;
	} syms[] = {
		{ "cuInit", (void **)&driver.init },
		{ "cuMemAlloc_v2", (void **)&driver.mem_alloc },
		{ "cuMemAllocPitch_v2", (void **)&driver.mem_alloc_pitch },
		{ "cuMemAllocManaged", (void **)&driver.mem_alloc_managed },
		{ "cuMemAllocHost_v2", (void **)&driver.mem_alloc_host },
		{ "cuMemHostAlloc", (void **)&driver.mem_host_alloc },
		{ "cuMemAllocAsync", (void **)&driver.mem_alloc_async },
		{ "cuMemAllocAsync_ptsz", (void **)&driver.mem_alloc_async_ptsz },
		{ "cuMemAllocFromPoolAsync", (void **)&driver.mem_alloc_from_pool_async },
		{ "cuMemAllocFromPoolAsync_ptsz", (void **)&driver.mem_alloc_from_pool_async_ptsz },
		{ "cuMemFree_v2", (void **)&driver.mem_free },
		{ "cuMemFreeHost", (void **)&driver.mem_free_host },
		{ "cuMemFreeAsync", (void **)&driver.mem_free_async },
		{ "cuMemFreeAsync_ptsz", (void **)&driver.mem_free_async_ptsz },
	};

	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(lib, syms[i].name);
		if (!*syms[i].slot)
			return false;
	}
	return true;
}

static bool load_private(void *lib)
{
	__typeof__(cuMockGetPrivateTable) *get_table = dlsym(lib, "cuMockGetPrivateTable");
	const struct gm_mock_driver_api *table;

	if (!get_table)
		return false;
	table = get_table();
	if (!table)
		return false;
	driver = *table;
	return true;
}

static void load_driver(void)
{
	const char *private_env = getenv("GPUMEM_MOCK_RUNTIME_PRIVATE");
	bool private_path = private_env && !strcmp(private_env, "1");
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

	if (!lib)
		return;
	if (!(private_path ? load_private(lib) : load_exported(lib)))
		return;
	driver_ready = driver.init(0) == CUDA_SUCCESS;
}

static bool have_driver(void)
{
	pthread_once(&driver_once, load_driver);
	return driver_ready;
}

/* Maps a driver result to the runtime's code and records it for cudaGetLastError(). */
static cudaError_t runtime_result(CUresult rc)
{
	cudaError_t err;

	switch ((int)rc) {
	case CUDA_SUCCESS:
		return cudaSuccess;
	case CUDA_ERROR_INVALID_VALUE:
		err = cudaErrorInvalidValue;
		break;
	case CUDA_ERROR_OUT_OF_MEMORY:
		err = cudaErrorMemoryAllocation;
		break;
	case CUDA_ERROR_NOT_INITIALIZED:
		err = cudaErrorInitializationError;
		break;
	default:
		err = cudaErrorUnknown;
		break;
	}
	last_error = err;
	return err;
}

static cudaError_t no_driver(void)
{
	last_error = cudaErrorInsufficientDriver;
	return cudaErrorInsufficientDriver;
}

/* Stores a device address into the caller's void * on success. */
static cudaError_t device_result(CUresult rc, CUdeviceptr dptr, void **out)
{
	if (rc == CUDA_SUCCESS)
		*out = (void *)(uintptr_t)dptr;
	return runtime_result(rc);
}

/* Exported API. Each begins with push %rbp like NVIDIA's (checked by check_prologues.sh). */
#define GM_EXPORT __attribute__((noinline, visibility("default")))

GM_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	CUdeviceptr dptr = 0;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!devPtr)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = driver.mem_alloc(&dptr, size);
	return device_result(rc, dptr, devPtr);
}

GM_EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	CUdeviceptr dptr = 0;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!devPtr)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = driver.mem_alloc_pitch(&dptr, pitch, width, height, GM_PITCH_ELEMENT_BYTES);
	return device_result(rc, dptr, devPtr);
}

GM_EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	CUdeviceptr dptr = 0;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!devPtr)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = driver.mem_alloc_managed(&dptr, size, flags);
	return device_result(rc, dptr, devPtr);
}

GM_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.mem_alloc_host(ptr, size));
}

GM_EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.mem_host_alloc(pHost, size, flags));
}

GM_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
	CUdeviceptr dptr = 0;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!devPtr)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = driver.mem_alloc_async(&dptr, size, hStream);
	return device_result(rc, dptr, devPtr);
}

GM_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
	CUdeviceptr dptr = 0;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!devPtr)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = driver.mem_alloc_async_ptsz(&dptr, size, hStream);
	return device_result(rc, dptr, devPtr);
}

GM_EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
					      cudaStream_t stream)
{
	CUdeviceptr dptr = 0;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!ptr)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = driver.mem_alloc_from_pool_async(&dptr, size, memPool, stream);
	return device_result(rc, dptr, ptr);
}

GM_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
						   cudaStream_t stream)
{
	CUdeviceptr dptr = 0;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!ptr)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = driver.mem_alloc_from_pool_async_ptsz(&dptr, size, memPool, stream);
	return device_result(rc, dptr, ptr);
}

GM_EXPORT cudaError_t cudaFree(void *devPtr)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.mem_free((uintptr_t)devPtr));
}

GM_EXPORT cudaError_t cudaFreeHost(void *ptr)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.mem_free_host(ptr));
}

GM_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.mem_free_async((uintptr_t)devPtr, hStream));
}

GM_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.mem_free_async_ptsz((uintptr_t)devPtr, hStream));
}

GM_EXPORT cudaError_t cudaDeviceSynchronize(void)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return cudaSuccess;
}

GM_EXPORT cudaError_t cudaGetLastError(void)
{
	cudaError_t err = last_error;

	gm_keep_frame();
	last_error = cudaSuccess;
	return err;
}

GM_EXPORT cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
	gm_keep_frame();
	if (!runtimeVersion)
		return cudaErrorInvalidValue;
	*runtimeVersion = GM_RUNTIME_VERSION;
	return cudaSuccess;
}

GM_EXPORT const char *cudaGetErrorName(cudaError_t error)
{
	gm_keep_frame();
	switch ((int)error) {
	case cudaSuccess:
		return "cudaSuccess";
	case cudaErrorInvalidValue:
		return "cudaErrorInvalidValue";
	case cudaErrorMemoryAllocation:
		return "cudaErrorMemoryAllocation";
	case cudaErrorInitializationError:
		return "cudaErrorInitializationError";
	case cudaErrorInsufficientDriver:
		return "cudaErrorInsufficientDriver";
	case cudaErrorUnknown:
		return "cudaErrorUnknown";
	default:
		return "unrecognized error code";
	}
}

GM_EXPORT const char *cudaGetErrorString(cudaError_t error)
{
	gm_keep_frame();
	switch ((int)error) {
	case cudaSuccess:
		return "no error";
	case cudaErrorInvalidValue:
		return "invalid argument";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	case cudaErrorInitializationError:
		return "initialization error";
	case cudaErrorInsufficientDriver:
		return "CUDA driver version is insufficient for CUDA runtime version";
	case cudaErrorUnknown:
		return "unknown error";
	default:
		return "unrecognized error code";
	}
}
