// SPDX-License-Identifier: GPL-2.0
/* The probe table (docs/numbers.md, "What is probed"): which symbol gets which BPF program,
 * the names of APIs, layers, kinds and CUDA's error codes, and which files are CUDA's. */
#include <fnmatch.h>
#include <string.h>
#include "base/util.h"
#include "probes/table.h"

#define RT GM_LAYER_RUNTIME
#define DRV GM_LAYER_DRIVER
#define HIP GM_LAYER_HIP

const struct probe_def probe_table[] = {
	{ "cudaMalloc", RT, GM_SHAPE_ALLOC, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cudaMallocPitch", RT, GM_SHAPE_ALLOC_PITCH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cudaMallocManaged", RT, GM_SHAPE_ALLOC, GM_KIND_MANAGED, GM_SPACE_ADDR },
	{ "cudaMallocHost", RT, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cudaHostAlloc", RT, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cudaMallocAsync", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaMallocAsync_ptsz", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaMallocFromPoolAsync", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaMallocFromPoolAsync_ptsz", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaFree", RT, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cudaFreeHost", RT, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cudaFreeAsync", RT, GM_SHAPE_FREE, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaFreeAsync_ptsz", RT, GM_SHAPE_FREE, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAlloc_v2", DRV, GM_SHAPE_ALLOC, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuMemAllocPitch_v2", DRV, GM_SHAPE_ALLOC_PITCH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuMemAllocManaged", DRV, GM_SHAPE_ALLOC, GM_KIND_MANAGED, GM_SPACE_ADDR },
	{ "cuMemAllocHost_v2", DRV, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cuMemHostAlloc", DRV, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cuMemAllocAsync", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAllocAsync_ptsz", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAllocFromPoolAsync", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAllocFromPoolAsync_ptsz", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemFree_v2", DRV, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuMemFreeHost", DRV, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cuMemFreeAsync", DRV, GM_SHAPE_FREE, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemFreeAsync_ptsz", DRV, GM_SHAPE_FREE, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemCreate", DRV, GM_SHAPE_VMM_CREATE, GM_KIND_VMM, GM_SPACE_VMM_HANDLE },
	{ "cuMemRelease", DRV, GM_SHAPE_VMM_RELEASE, GM_KIND_VMM, GM_SPACE_VMM_HANDLE },
	/* Not a symbol: the USDT probes of PyTorch's caching allocator (its tensors' sites). */
	{ "pytorch:malloc", GM_LAYER_TENSOR, GM_SHAPE_TENSOR, GM_KIND_DEVICE, GM_SPACE_ADDR },
	/* Arrays: device memory, keyed by handle in a space of their own. */
	{ "cudaMallocArray", RT, GM_SHAPE_ARRAY_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaMalloc3DArray", RT, GM_SHAPE_ARRAY3D_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaMallocMipmappedArray", RT, GM_SHAPE_MIPMAP_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaFreeArray", RT, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaFreeMipmappedArray", RT, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaMalloc3D", RT, GM_SHAPE_MALLOC3D, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuArrayCreate_v2", DRV, GM_SHAPE_ARRAY_DRV, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuArray3DCreate_v2", DRV, GM_SHAPE_ARRAY3D_DRV, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuMipmappedArrayCreate", DRV, GM_SHAPE_MIPMAP_DRV, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuArrayDestroy", DRV, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuMipmappedArrayDestroy", DRV, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	/* Host memory the caller allocated, page-locked: host kind, by the range's start. */
	{ "cudaHostRegister", RT, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cudaHostUnregister", RT, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cuMemHostRegister_v2", DRV, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cuMemHostRegister", DRV, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cuMemHostUnregister", DRV, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	/* VMM: mappings of memory counted at cuMemCreate, and reserved address space. */
	{ "cuMemMap", DRV, GM_SHAPE_REGISTER, GM_KIND_VMM_MAPPED, GM_SPACE_VMM_MAP },
	{ "cuMemUnmap", DRV, GM_SHAPE_FREE, GM_KIND_VMM_MAPPED, GM_SPACE_VMM_MAP },
	{ "cuMemAddressReserve", DRV, GM_SHAPE_ALLOC, GM_KIND_VMM_RESERVED, GM_SPACE_VMM_RESERVE },
	{ "cuMemAddressFree", DRV, GM_SHAPE_FREE, GM_KIND_VMM_RESERVED, GM_SPACE_VMM_RESERVE },
	/* IPC: another process's memory, opened here. */
	{ "cudaIpcOpenMemHandle", RT, GM_SHAPE_IMPORT, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "cudaIpcCloseMemHandle", RT, GM_SHAPE_FREE, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "cuIpcOpenMemHandle_v2", DRV, GM_SHAPE_IMPORT, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "cuIpcCloseMemHandle", DRV, GM_SHAPE_FREE, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	/* The thread's current context, and the device of each context (no allocation). */
	{ "cudaSetDevice", RT, GM_SHAPE_SET_DEVICE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxSetCurrent", DRV, GM_SHAPE_CTX_SET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxPushCurrent_v2", DRV, GM_SHAPE_CTX_PUSH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxPopCurrent_v2", DRV, GM_SHAPE_CTX_POP, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxCreate_v2", DRV, GM_SHAPE_CTX_CREATE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxCreate_v3", DRV, GM_SHAPE_CTX_CREATE_V3, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxCreate_v4", DRV, GM_SHAPE_CTX_CREATE_V4, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuDevicePrimaryCtxRetain", DRV, GM_SHAPE_CTX_RETAIN, GM_KIND_DEVICE, GM_SPACE_ADDR },
	/* Teardown: what the context held is released. */
	{ "cudaDeviceReset", RT, GM_SHAPE_DEVICE_RESET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxDestroy_v2", DRV, GM_SHAPE_CTX_DESTROY, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuDevicePrimaryCtxReset_v2", DRV, GM_SHAPE_PRIMARY_RESET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	/* AMD's HIP runtime: the CUDA runtime's shapes, by the same rules. */
	{ "hipMalloc", HIP, GM_SHAPE_ALLOC, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipExtMallocWithFlags", HIP, GM_SHAPE_ALLOC, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipMallocPitch", HIP, GM_SHAPE_ALLOC_PITCH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipMalloc3D", HIP, GM_SHAPE_MALLOC3D, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipMallocManaged", HIP, GM_SHAPE_ALLOC, GM_KIND_MANAGED, GM_SPACE_ADDR },
	{ "hipHostMalloc", HIP, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "hipMallocHost", HIP, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "hipHostAlloc", HIP, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "hipMallocAsync", HIP, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "hipMallocFromPoolAsync", HIP, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "hipFree", HIP, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipHostFree", HIP, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "hipFreeHost", HIP, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "hipFreeAsync", HIP, GM_SHAPE_FREE, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "hipMallocArray", HIP, GM_SHAPE_ARRAY_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "hipMalloc3DArray", HIP, GM_SHAPE_ARRAY3D_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "hipMallocMipmappedArray", HIP, GM_SHAPE_MIPMAP_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "hipFreeArray", HIP, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "hipFreeMipmappedArray", HIP, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "hipHostRegister", HIP, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "hipHostUnregister", HIP, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "hipMemCreate", HIP, GM_SHAPE_VMM_CREATE, GM_KIND_VMM, GM_SPACE_VMM_HANDLE },
	{ "hipMemRelease", HIP, GM_SHAPE_VMM_RELEASE, GM_KIND_VMM, GM_SPACE_VMM_HANDLE },
	{ "hipMemMap", HIP, GM_SHAPE_REGISTER, GM_KIND_VMM_MAPPED, GM_SPACE_VMM_MAP },
	{ "hipMemUnmap", HIP, GM_SHAPE_FREE, GM_KIND_VMM_MAPPED, GM_SPACE_VMM_MAP },
	{ "hipMemAddressReserve", HIP, GM_SHAPE_ALLOC, GM_KIND_VMM_RESERVED, GM_SPACE_VMM_RESERVE },
	{ "hipMemAddressFree", HIP, GM_SHAPE_FREE, GM_KIND_VMM_RESERVED, GM_SPACE_VMM_RESERVE },
	{ "hipIpcOpenMemHandle", HIP, GM_SHAPE_IMPORT, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "hipIpcCloseMemHandle", HIP, GM_SHAPE_FREE, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "hipSetDevice", HIP, GM_SHAPE_SET_DEVICE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipCtxSetCurrent", HIP, GM_SHAPE_CTX_SET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipCtxPushCurrent", HIP, GM_SHAPE_CTX_PUSH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipCtxPopCurrent", HIP, GM_SHAPE_CTX_POP, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipCtxCreate", HIP, GM_SHAPE_CTX_CREATE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipDevicePrimaryCtxRetain", HIP, GM_SHAPE_CTX_RETAIN, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipDeviceReset", HIP, GM_SHAPE_DEVICE_RESET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipCtxDestroy", HIP, GM_SHAPE_CTX_DESTROY, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipDevicePrimaryCtxReset", HIP, GM_SHAPE_PRIMARY_RESET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	/* PyTorch's ROCm build: the same USDT probes in libc10_hip.so (hipified from
	 * libc10_cuda's allocator), its tensors AMD's. */
	{ "pytorch:malloc", GM_LAYER_TENSOR, GM_SHAPE_TENSOR, GM_KIND_DEVICE, GM_SPACE_ADDR },
};
const unsigned int probe_count = ARRAY_SIZE(probe_table);

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

bool is_gpu_module(const char *path)
{
	const char *base = path ? base_name(path) : NULL;

	return base && (!strncmp(base, "libcuda", 7) || !strncmp(base, "libamdhip64", 11) ||
			!strncmp(base, "libhsa-runtime64", 16));
}

bool is_tensor_library_path(const char *path)
{
	return path && (fnmatch("libc10_cuda.so*", base_name(path), 0) == 0 ||
			fnmatch("libc10_hip.so*", base_name(path), 0) == 0);
}

int probe_tensor_row(const char *library_name)
{
	if (library_name && !strncmp(base_name(library_name), "libc10_hip", 10))
		return PROBE_ROCM_TENSOR_ROW;
	return probe_find("pytorch:malloc");
}

bool probe_is_tensor(unsigned int api)
{
	return api < probe_count && probe_table[api].layer == GM_LAYER_TENSOR;
}

bool is_gpu_library_path(const char *path)
{
	const char *base;

	if (!is_gpu_module(path))
		return false;
	base = base_name(path);
	return fnmatch("libcuda.so*", base, 0) == 0 || fnmatch("libcudart.so*", base, 0) == 0 ||
	       fnmatch("libamdhip64.so*", base, 0) == 0;
}

const char *probe_api_name(unsigned int api)
{
	return api < probe_count ? probe_table[api].symbol : "unknown";
}

const char *probe_layer_name(unsigned int layer)
{
	if (layer == GM_LAYER_TENSOR)
		return "pytorch";
	if (layer == GM_LAYER_HIP)
		return "hip";
	return layer == GM_LAYER_DRIVER ? "driver" : "runtime";
}

const char *probe_vendor(unsigned int layer)
{
	return layer == GM_LAYER_HIP ? "amd" : "nvidia";
}

const char *probe_api_vendor(unsigned int api)
{
	if (api >= probe_count)
		return "unknown";
	return api == PROBE_ROCM_TENSOR_ROW ? "amd" : probe_vendor(probe_table[api].layer);
}

const char *kind_name(unsigned int kind)
{
	static const char *const names[GM_KIND_COUNT] = {
		[GM_KIND_DEVICE] = "device", [GM_KIND_MANAGED] = "managed",
		[GM_KIND_HOST] = "host",     [GM_KIND_ASYNC] = "async",
		[GM_KIND_VMM] = "vmm",       [GM_KIND_VMM_MAPPED] = "vmm_mapped",
		[GM_KIND_VMM_RESERVED] = "vmm_reserved",
		[GM_KIND_IPC_IMPORTED] = "ipc_imported",
	};

	return kind < GM_KIND_COUNT ? names[kind] : "unknown";
}

uint64_t probe_cookie(unsigned int api)
{
	const struct probe_def *p = &probe_table[api];

	return GM_COOKIE_IN(api, p->kind, p->layer, p->shape, p->space);
}

int probe_find(const char *symbol)
{
	for (unsigned int i = 0; i < probe_count; i++)
		if (strcmp(probe_table[i].symbol, symbol) == 0)
			return (int)i;
	return -1;
}

/* HIP's names (hip_runtime_api.h's hipError_t), where they are not CUDA's runtime's with the
 * prefix changed. */
static const char *hip_error_name(int error)
{
	static const struct {
		int code;
		const char *name;
	} names[] = {
		{ 0, "hipSuccess" }, { 1, "hipErrorInvalidValue" }, { 2, "hipErrorOutOfMemory" },
		{ 3, "hipErrorNotInitialized" }, { 4, "hipErrorDeinitialized" },
		{ 35, "hipErrorInsufficientDriver" }, { 100, "hipErrorNoDevice" },
		{ 101, "hipErrorInvalidDevice" }, { 200, "hipErrorInvalidImage" },
		{ 201, "hipErrorInvalidContext" }, { 304, "hipErrorOperatingSystem" },
		{ 400, "hipErrorInvalidHandle" }, { 700, "hipErrorIllegalAddress" },
		{ 712, "hipErrorHostMemoryAlreadyRegistered" },
		{ 713, "hipErrorHostMemoryNotRegistered" }, { 801, "hipErrorNotSupported" },
		{ 999, "hipErrorUnknown" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (names[i].code == error)
			return names[i].name;
	return "hipErrorUnknown";
}

const char *gpu_error_name(unsigned int layer, int error)
{
	static const struct {
		int code;
		const char *runtime, *driver;
	} names[] = {
		{ 0, "cudaSuccess", "CUDA_SUCCESS" },
		{ 1, "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE" },
		{ 2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY" },
		{ 3, "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED" },
		{ 4, "cudaErrorCudartUnloading", "CUDA_ERROR_DEINITIALIZED" },
		{ 34, "cudaErrorStubLibrary", "CUDA_ERROR_STUB_LIBRARY" },
		{ 35, "cudaErrorInsufficientDriver", NULL },
		{ 36, "cudaErrorCallRequiresNewerDriver", NULL },
		{ 46, "cudaErrorDevicesUnavailable", "CUDA_ERROR_DEVICE_UNAVAILABLE" },
		{ 100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE" },
		{ 101, "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE" },
		{ 200, "cudaErrorInvalidKernelImage", "CUDA_ERROR_INVALID_IMAGE" },
		{ 201, "cudaErrorDeviceUninitialized", "CUDA_ERROR_INVALID_CONTEXT" },
		{ 222, "cudaErrorUnsupportedPtxVersion", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" },
		{ 304, "cudaErrorOperatingSystem", "CUDA_ERROR_OPERATING_SYSTEM" },
		{ 400, "cudaErrorInvalidResourceHandle", "CUDA_ERROR_INVALID_HANDLE" },
		{ 700, "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS" },
		{ 712, "cudaErrorHostMemoryAlreadyRegistered",
		  "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED" },
		{ 713, "cudaErrorHostMemoryNotRegistered", "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED" },
		{ 801, "cudaErrorNotSupported", "CUDA_ERROR_NOT_SUPPORTED" },
		{ 802, "cudaErrorSystemNotReady", "CUDA_ERROR_SYSTEM_NOT_READY" },
		{ 803, "cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" },
		{ 804, "cudaErrorCompatNotSupportedOnDevice",
		  "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" },
		{ 999, "cudaErrorUnknown", "CUDA_ERROR_UNKNOWN" },
	};

	if (layer == GM_LAYER_HIP)
		return hip_error_name(error);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (names[i].code != error)
			continue;
		if (layer == GM_LAYER_DRIVER)
			return names[i].driver ? names[i].driver : "CUDA_ERROR_UNKNOWN";
		return names[i].runtime;
	}
	return layer == GM_LAYER_DRIVER ? "CUDA_ERROR_UNKNOWN" : "cudaErrorUnknown";
}

_Static_assert(ARRAY_SIZE(probe_table) == PROBE_ROWS, "PROBE_ROWS is the table's length");
_Static_assert(PROBE_ROCM_TENSOR_ROW == PROBE_ROWS - 1, "ROCm's tensor row is the last");
