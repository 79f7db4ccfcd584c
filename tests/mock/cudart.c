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
static __thread int current_device;	/* cudaSetDevice's, 0 until then */

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
		{ "cuArrayCreate_v2", (void **)&driver.array_create },
		{ "cuArray3DCreate_v2", (void **)&driver.array3d_create },
		{ "cuMipmappedArrayCreate", (void **)&driver.mipmapped_array_create },
		{ "cuArrayDestroy", (void **)&driver.array_destroy },
		{ "cuMipmappedArrayDestroy", (void **)&driver.mipmapped_array_destroy },
		{ "cuMemHostRegister_v2", (void **)&driver.mem_host_register },
		{ "cuMemHostUnregister", (void **)&driver.mem_host_unregister },
		{ "cuIpcGetMemHandle", (void **)&driver.ipc_get_mem_handle },
		{ "cuIpcOpenMemHandle_v2", (void **)&driver.ipc_open_mem_handle },
		{ "cuIpcCloseMemHandle", (void **)&driver.ipc_close_mem_handle },
		{ "cuDevicePrimaryCtxRetain", (void **)&driver.primary_ctx_retain },
		{ "cuCtxSetCurrent", (void **)&driver.ctx_set_current },
		{ "cuDevicePrimaryCtxReset_v2", (void **)&driver.primary_ctx_reset },
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
	/* Local: the runtime reaches the driver through its handle only (and a global open in a
	 * dlmopen() namespace, bench/loop.c --dirs, is one glibc 2.36 cannot do). */
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

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
	case CUDA_ERROR_INVALID_DEVICE:
		err = cudaErrorInvalidDevice;
		break;
	case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
		err = cudaErrorHostMemoryAlreadyRegistered;
		break;
	case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
		err = cudaErrorHostMemoryNotRegistered;
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
	gm_say_return_probe("cudaMalloc", __builtin_return_address(0));
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

/* A channel description as the driver's format and channel count: equal channels of 8, 16 or
 * 32 bits, signed, unsigned or float (16-bit float is half). */
static CUresult driver_format(const struct cudaChannelFormatDesc *d, CUarray_format *format,
			      unsigned int *channels)
{
	static const struct {
		enum cudaChannelFormatKind kind;
		int bits;
		CUarray_format format;
	} formats[] = {
		{ cudaChannelFormatKindSigned, 8, CU_AD_FORMAT_SIGNED_INT8 },
		{ cudaChannelFormatKindSigned, 16, CU_AD_FORMAT_SIGNED_INT16 },
		{ cudaChannelFormatKindSigned, 32, CU_AD_FORMAT_SIGNED_INT32 },
		{ cudaChannelFormatKindUnsigned, 8, CU_AD_FORMAT_UNSIGNED_INT8 },
		{ cudaChannelFormatKindUnsigned, 16, CU_AD_FORMAT_UNSIGNED_INT16 },
		{ cudaChannelFormatKindUnsigned, 32, CU_AD_FORMAT_UNSIGNED_INT32 },
		{ cudaChannelFormatKindFloat, 16, CU_AD_FORMAT_HALF },
		{ cudaChannelFormatKindFloat, 32, CU_AD_FORMAT_FLOAT },
	};
	int bits[4], n = 0;

	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	bits[0] = d->x;
	bits[1] = d->y;
	bits[2] = d->z;
	bits[3] = d->w;
	while (n < 4 && bits[n])
		n++;
	for (int i = 1; i < 4; i++)
		if ((i < n && bits[i] != bits[0]) || (i >= n && bits[i]))
			return CUDA_ERROR_INVALID_VALUE;
	if (n == 3 || n == 0)
		return CUDA_ERROR_INVALID_VALUE;
	*channels = (unsigned int)n;
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		if (formats[i].kind == d->f && formats[i].bits == bits[0]) {
			*format = formats[i].format;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult array3d_desc(const struct cudaChannelFormatDesc *desc, struct cudaExtent extent,
			     unsigned int flags, CUDA_ARRAY3D_DESCRIPTOR *d)
{
	memset(d, 0, sizeof(*d));
	d->Width = extent.width;
	d->Height = extent.height;
	d->Depth = extent.depth;
	d->Flags = flags & cudaArrayLayered ? CUDA_ARRAY3D_LAYERED : 0;
	return driver_format(desc, &d->Format, &d->NumChannels);
}

GM_EXPORT cudaError_t cudaMallocArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
				      size_t width, size_t height, unsigned int flags)
{
	CUDA_ARRAY_DESCRIPTOR d = { .Width = width, .Height = height };
	CUarray handle = NULL;
	CUresult rc;

	gm_keep_frame();
	(void)flags;
	if (!have_driver())
		return no_driver();
	if (!array)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = driver_format(desc, &d.Format, &d.NumChannels);
	if (rc == CUDA_SUCCESS)
		rc = driver.array_create(&handle, &d);
	if (rc == CUDA_SUCCESS)
		*array = (cudaArray_t)handle;
	return runtime_result(rc);
}

GM_EXPORT cudaError_t cudaMalloc3DArray(cudaArray_t *array,
					const struct cudaChannelFormatDesc *desc,
					struct cudaExtent extent, unsigned int flags)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	CUarray handle = NULL;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!array)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = array3d_desc(desc, extent, flags, &d);
	if (rc == CUDA_SUCCESS)
		rc = driver.array3d_create(&handle, &d);
	if (rc == CUDA_SUCCESS)
		*array = (cudaArray_t)handle;
	return runtime_result(rc);
}

GM_EXPORT cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t *mipmappedArray,
					       const struct cudaChannelFormatDesc *desc,
					       struct cudaExtent extent, unsigned int numLevels,
					       unsigned int flags)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	CUmipmappedArray handle = NULL;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!mipmappedArray)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = array3d_desc(desc, extent, flags, &d);
	if (rc == CUDA_SUCCESS)
		rc = driver.mipmapped_array_create(&handle, &d, numLevels);
	if (rc == CUDA_SUCCESS)
		*mipmappedArray = (cudaMipmappedArray_t)handle;
	return runtime_result(rc);
}

/* Rows of width bytes, height x depth of them, each padded to the driver's pitch. */
GM_EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)
{
	size_t rows = (extent.height ? extent.height : 1) * (extent.depth ? extent.depth : 1);
	CUdeviceptr dptr = 0;
	size_t pitch = 0;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!pitchedDevPtr)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	rc = driver.mem_alloc_pitch(&dptr, &pitch, extent.width, rows, GM_PITCH_ELEMENT_BYTES);
	if (rc == CUDA_SUCCESS) {
		pitchedDevPtr->ptr = (void *)(uintptr_t)dptr;
		pitchedDevPtr->pitch = pitch;
		pitchedDevPtr->xsize = extent.width;
		pitchedDevPtr->ysize = extent.height;
	}
	return runtime_result(rc);
}

GM_EXPORT cudaError_t cudaFreeArray(cudaArray_t array)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!array)
		return cudaSuccess;
	return runtime_result(driver.array_destroy((CUarray)array));
}

GM_EXPORT cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!mipmappedArray)
		return cudaSuccess;
	return runtime_result(driver.mipmapped_array_destroy((CUmipmappedArray)mipmappedArray));
}

GM_EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.mem_host_register(ptr, size, flags));
}

GM_EXPORT cudaError_t cudaHostUnregister(void *ptr)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.mem_host_unregister(ptr));
}

GM_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.ipc_get_mem_handle((CUipcMemHandle *)handle,
							(uintptr_t)devPtr));
}

GM_EXPORT cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
					   unsigned int flags)
{
	CUipcMemHandle h;
	CUdeviceptr dptr = 0;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	if (!devPtr)
		return runtime_result(CUDA_ERROR_INVALID_VALUE);
	memcpy(&h, &handle, sizeof(h));
	rc = driver.ipc_open_mem_handle(&dptr, h, flags);
	return device_result(rc, dptr, devPtr);
}

GM_EXPORT cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.ipc_close_mem_handle((uintptr_t)devPtr));
}

/* The device's primary context, made current on the thread. */
GM_EXPORT cudaError_t cudaSetDevice(int device)
{
	CUcontext ctx = NULL;
	CUresult rc;

	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	rc = driver.primary_ctx_retain(&ctx, device);
	if (rc == CUDA_SUCCESS)
		rc = driver.ctx_set_current(ctx);
	if (rc == CUDA_SUCCESS)
		current_device = device;
	return runtime_result(rc);
}

GM_EXPORT cudaError_t cudaGetDevice(int *device)
{
	gm_keep_frame();
	if (!device)
		return cudaErrorInvalidValue;
	*device = current_device;
	return cudaSuccess;
}

/* The thread's device's primary context is reset: what it held is freed. */
GM_EXPORT cudaError_t cudaDeviceReset(void)
{
	gm_keep_frame();
	if (!have_driver())
		return no_driver();
	return runtime_result(driver.primary_ctx_reset(current_device));
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
	case cudaErrorInvalidDevice:
		return "cudaErrorInvalidDevice";
	case cudaErrorHostMemoryAlreadyRegistered:
		return "cudaErrorHostMemoryAlreadyRegistered";
	case cudaErrorHostMemoryNotRegistered:
		return "cudaErrorHostMemoryNotRegistered";
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
