// SPDX-License-Identifier: GPL-2.0
/* The probe table against the documented list of symbols (docs/numbers.md), the attach cookie's packing, and the
 * names views print for layers, kinds and CUDA return codes. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gpumem.h"
#include "probes/table.h"

#define RT GM_LAYER_RUNTIME
#define DRV GM_LAYER_DRIVER
#define HIP GM_LAYER_HIP

/* docs/numbers.md "What is probed", written out independently of userspace/probes.c. Frees carry no
 * kind that anything reads, so their kind is not checked. */
static const struct probe_def design_table[] = {
	{ "cudaMalloc", RT, GM_SHAPE_ALLOC, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cudaMallocPitch", RT, GM_SHAPE_ALLOC_PITCH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cudaMallocManaged", RT, GM_SHAPE_ALLOC, GM_KIND_MANAGED, GM_SPACE_ADDR },
	{ "cudaMallocHost", RT, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cudaHostAlloc", RT, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cudaMallocAsync", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaMallocAsync_ptsz", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaMallocFromPoolAsync", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaMallocFromPoolAsync_ptsz", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaFree", RT, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "cudaFreeHost", RT, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "cudaFreeAsync", RT, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "cudaFreeAsync_ptsz", RT, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "cuMemAlloc_v2", DRV, GM_SHAPE_ALLOC, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuMemAllocPitch_v2", DRV, GM_SHAPE_ALLOC_PITCH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuMemAllocManaged", DRV, GM_SHAPE_ALLOC, GM_KIND_MANAGED, GM_SPACE_ADDR },
	{ "cuMemAllocHost_v2", DRV, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cuMemHostAlloc", DRV, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cuMemAllocAsync", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAllocAsync_ptsz", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAllocFromPoolAsync", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAllocFromPoolAsync_ptsz", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemFree_v2", DRV, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "cuMemFreeHost", DRV, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "cuMemFreeAsync", DRV, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "cuMemFreeAsync_ptsz", DRV, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "cuMemCreate", DRV, GM_SHAPE_VMM_CREATE, GM_KIND_VMM, GM_SPACE_VMM_HANDLE },
	{ "cuMemRelease", DRV, GM_SHAPE_VMM_RELEASE, GM_KIND_VMM, GM_SPACE_VMM_HANDLE },
	/* docs/python.md "PyTorch tensors": a USDT probe, not a symbol. */
	{ "pytorch:malloc", GM_LAYER_TENSOR, GM_SHAPE_TENSOR, GM_KIND_DEVICE, GM_SPACE_ADDR },
	/* docs/numbers.md: every allocation API (issue 13 item 3). */
	{ "cudaMallocArray", RT, GM_SHAPE_ARRAY_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaMalloc3DArray", RT, GM_SHAPE_ARRAY3D_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaMallocMipmappedArray", RT, GM_SHAPE_MIPMAP_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaFreeArray", RT, GM_SHAPE_FREE, 0, GM_SPACE_ARRAY },
	{ "cudaFreeMipmappedArray", RT, GM_SHAPE_FREE, 0, GM_SPACE_ARRAY },
	{ "cudaMalloc3D", RT, GM_SHAPE_MALLOC3D, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuArrayCreate_v2", DRV, GM_SHAPE_ARRAY_DRV, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuArray3DCreate_v2", DRV, GM_SHAPE_ARRAY3D_DRV, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuMipmappedArrayCreate", DRV, GM_SHAPE_MIPMAP_DRV, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuArrayDestroy", DRV, GM_SHAPE_FREE, 0, GM_SPACE_ARRAY },
	{ "cuMipmappedArrayDestroy", DRV, GM_SHAPE_FREE, 0, GM_SPACE_ARRAY },
	{ "cudaHostRegister", RT, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cudaHostUnregister", RT, GM_SHAPE_FREE, 0, GM_SPACE_HOST_REGISTERED },
	{ "cuMemHostRegister_v2", DRV, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cuMemHostRegister", DRV, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cuMemHostUnregister", DRV, GM_SHAPE_FREE, 0, GM_SPACE_HOST_REGISTERED },
	{ "cuMemMap", DRV, GM_SHAPE_REGISTER, GM_KIND_VMM_MAPPED, GM_SPACE_VMM_MAP },
	{ "cuMemUnmap", DRV, GM_SHAPE_FREE, 0, GM_SPACE_VMM_MAP },
	{ "cuMemAddressReserve", DRV, GM_SHAPE_ALLOC, GM_KIND_VMM_RESERVED, GM_SPACE_VMM_RESERVE },
	{ "cuMemAddressFree", DRV, GM_SHAPE_FREE, 0, GM_SPACE_VMM_RESERVE },
	{ "cudaIpcOpenMemHandle", RT, GM_SHAPE_IMPORT, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "cudaIpcCloseMemHandle", RT, GM_SHAPE_FREE, 0, GM_SPACE_IPC },
	{ "cuIpcOpenMemHandle_v2", DRV, GM_SHAPE_IMPORT, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "cuIpcCloseMemHandle", DRV, GM_SHAPE_FREE, 0, GM_SPACE_IPC },
	/* Contexts: followed per thread, and what a teardown releases. */
	{ "cudaSetDevice", RT, GM_SHAPE_SET_DEVICE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxSetCurrent", DRV, GM_SHAPE_CTX_SET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxPushCurrent_v2", DRV, GM_SHAPE_CTX_PUSH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxPopCurrent_v2", DRV, GM_SHAPE_CTX_POP, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxCreate_v2", DRV, GM_SHAPE_CTX_CREATE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxCreate_v3", DRV, GM_SHAPE_CTX_CREATE_V3, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxCreate_v4", DRV, GM_SHAPE_CTX_CREATE_V4, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuDevicePrimaryCtxRetain", DRV, GM_SHAPE_CTX_RETAIN, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cudaDeviceReset", RT, GM_SHAPE_DEVICE_RESET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxDestroy_v2", DRV, GM_SHAPE_CTX_DESTROY, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuDevicePrimaryCtxReset_v2", DRV, GM_SHAPE_PRIMARY_RESET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	/* docs/numbers.md "AMD's HIP runtime": the CUDA runtime's shapes (hip_runtime_api.h). */
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
	{ "hipFree", HIP, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "hipHostFree", HIP, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "hipFreeHost", HIP, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "hipFreeAsync", HIP, GM_SHAPE_FREE, 0, GM_SPACE_ADDR },
	{ "hipMallocArray", HIP, GM_SHAPE_ARRAY_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "hipMalloc3DArray", HIP, GM_SHAPE_ARRAY3D_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "hipMallocMipmappedArray", HIP, GM_SHAPE_MIPMAP_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "hipFreeArray", HIP, GM_SHAPE_FREE, 0, GM_SPACE_ARRAY },
	{ "hipFreeMipmappedArray", HIP, GM_SHAPE_FREE, 0, GM_SPACE_ARRAY },
	{ "hipHostRegister", HIP, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "hipHostUnregister", HIP, GM_SHAPE_FREE, 0, GM_SPACE_HOST_REGISTERED },
	{ "hipMemCreate", HIP, GM_SHAPE_VMM_CREATE, GM_KIND_VMM, GM_SPACE_VMM_HANDLE },
	{ "hipMemRelease", HIP, GM_SHAPE_VMM_RELEASE, GM_KIND_VMM, GM_SPACE_VMM_HANDLE },
	{ "hipMemMap", HIP, GM_SHAPE_REGISTER, GM_KIND_VMM_MAPPED, GM_SPACE_VMM_MAP },
	{ "hipMemUnmap", HIP, GM_SHAPE_FREE, 0, GM_SPACE_VMM_MAP },
	{ "hipMemAddressReserve", HIP, GM_SHAPE_ALLOC, GM_KIND_VMM_RESERVED, GM_SPACE_VMM_RESERVE },
	{ "hipMemAddressFree", HIP, GM_SHAPE_FREE, 0, GM_SPACE_VMM_RESERVE },
	{ "hipIpcOpenMemHandle", HIP, GM_SHAPE_IMPORT, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "hipIpcCloseMemHandle", HIP, GM_SHAPE_FREE, 0, GM_SPACE_IPC },
	{ "hipSetDevice", HIP, GM_SHAPE_SET_DEVICE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipCtxSetCurrent", HIP, GM_SHAPE_CTX_SET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipCtxPushCurrent", HIP, GM_SHAPE_CTX_PUSH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipCtxPopCurrent", HIP, GM_SHAPE_CTX_POP, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipCtxCreate", HIP, GM_SHAPE_CTX_CREATE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipDevicePrimaryCtxRetain", HIP, GM_SHAPE_CTX_RETAIN, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipDeviceReset", HIP, GM_SHAPE_DEVICE_RESET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipCtxDestroy", HIP, GM_SHAPE_CTX_DESTROY, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "hipDevicePrimaryCtxReset", HIP, GM_SHAPE_PRIMARY_RESET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	/* docs/numbers.md "AMD's HIP runtime": PyTorch's ROCm build, the same USDT probe. */
	{ "pytorch:malloc", GM_LAYER_TENSOR, GM_SHAPE_TENSOR, GM_KIND_DEVICE, GM_SPACE_ADDR },
};
#define DESIGN_COUNT (sizeof(design_table) / sizeof(design_table[0]))

static const struct probe_def *design_row(const char *symbol)
{
	for (size_t i = 0; i < DESIGN_COUNT; i++)
		if (strcmp(design_table[i].symbol, symbol) == 0)
			return &design_table[i];
	return NULL;
}

static void test_table_holds_exactly_the_101_design_symbols_and_the_tensor_rows(void **state)
{
	(void)state;
	assert_int_equal(DESIGN_COUNT, 103);
	assert_int_equal(probe_count, 103);
	for (unsigned int i = 0; i < probe_count; i++) {
		if (!design_row(probe_table[i].symbol))
			fail_msg("probe table row %u (%s) is not in the documented table", i,
				 probe_table[i].symbol);
	}
	for (size_t i = 0; i < DESIGN_COUNT; i++) {
		if (probe_find(design_table[i].symbol) < 0)
			fail_msg("documented symbol %s is missing from the probe table",
				 design_table[i].symbol);
	}
}

/* Once per vendor: the tensor probe is CUDA's and ROCm's. */
static void test_table_has_no_duplicate_symbols(void **state)
{
	(void)state;
	for (unsigned int i = 0; i < probe_count; i++)
		for (unsigned int j = i + 1; j < probe_count; j++)
			if (strcmp(probe_table[i].symbol, probe_table[j].symbol) == 0 &&
			    j != PROBE_ROCM_TENSOR_ROW)
				fail_msg("%s is in rows %u and %u", probe_table[i].symbol, i, j);
}

static void test_each_row_has_design_layer_shape_and_kind(void **state)
{
	(void)state;
	for (unsigned int i = 0; i < probe_count; i++) {
		const struct probe_def *p = &probe_table[i], *want = design_row(p->symbol);

		assert_non_null(want);
		if (p->layer != want->layer)
			fail_msg("%s: layer %d, want %d", p->symbol, p->layer, want->layer);
		if (p->shape != want->shape)
			fail_msg("%s: shape %d, want %d", p->symbol, p->shape, want->shape);
		if (p->shape != GM_SHAPE_FREE && p->kind != want->kind)
			fail_msg("%s: kind %d, want %d", p->symbol, p->kind, want->kind);
		/* A free looks where its allocation was put: a handle never meets an address. */
		if (p->space != want->space)
			fail_msg("%s: space %d, want %d", p->symbol, p->space, want->space);
	}
}

static void test_table_splits_25_runtime_38_driver_and_38_hip_rows(void **state)
{
	unsigned int runtime = 0, driver = 0, hip = 0, allocs = 0, frees = 0, pitch = 0;

	(void)state;
	for (unsigned int i = 0; i < probe_count; i++) {
		runtime += probe_table[i].layer == GM_LAYER_RUNTIME;
		driver += probe_table[i].layer == GM_LAYER_DRIVER;
		hip += probe_table[i].layer == GM_LAYER_HIP;
		allocs += probe_table[i].shape == GM_SHAPE_ALLOC;
		frees += probe_table[i].shape == GM_SHAPE_FREE;
		pitch += probe_table[i].shape == GM_SHAPE_ALLOC_PITCH;
	}
	assert_int_equal(runtime, 25);
	assert_int_equal(driver, 38);
	assert_int_equal(hip, 38);
	assert_int_equal(allocs, 26);
	assert_int_equal(pitch, 3);
	assert_int_equal(frees, 28);
}

static void test_probe_find_returns_the_row_of_each_symbol(void **state)
{
	(void)state;
	for (unsigned int i = 0; i < probe_count; i++) {
		if (i != PROBE_ROCM_TENSOR_ROW)
			assert_int_equal(probe_find(probe_table[i].symbol), (int)i);
		assert_string_equal(probe_api_name(i), probe_table[i].symbol);
	}
	assert_int_equal(probe_find("cudaMalloc"), 0);
	assert_int_equal(probe_find("cuMemRelease"), 27);
	assert_int_equal(probe_find("cuMemAlloc"), -1);	/* the v1 ABI is not probed */
	assert_int_equal(probe_find("cudaMallocArray"), 29);
	assert_int_equal(probe_find("cuArrayCreate"), -1);	/* v1: 32-bit descriptor fields */
	assert_int_equal(probe_find("cudamalloc"), -1);
	assert_int_equal(probe_find(""), -1);
	assert_int_equal(probe_find("pytorch:malloc"), 28);
	assert_true(probe_is_tensor(28));
	assert_false(probe_is_tensor(0));
	assert_false(probe_is_tensor(29));
	assert_int_equal(probe_find("hipMalloc"), 64);
	assert_string_equal(probe_api_vendor(64), "amd");
	assert_string_equal(probe_api_vendor(0), "nvidia");
	/* ROCm's tensors: the last row, by the library's name, AMD's */
	assert_int_equal(probe_tensor_row("libc10_hip.so"), 102);
	assert_int_equal(probe_tensor_row("/opt/venv/torch/lib/libc10_cuda.so"), 28);
	assert_int_equal(probe_tensor_row("/proc/7/map_files/7f00-7f80"), 28);
	assert_true(probe_is_tensor(102));
	assert_string_equal(probe_api_vendor(102), "amd");
	assert_string_equal(probe_api_vendor(28), "nvidia");
	assert_string_equal(probe_api_name(102), "pytorch:malloc");
	assert_string_equal(probe_api_name(103), "unknown");
	assert_string_equal(probe_api_name(0xffff), "unknown");
}

static void test_cookie_round_trips_every_row(void **state)
{
	(void)state;
	for (unsigned int api = 0; api < probe_count; api++) {
		const struct probe_def *p = &probe_table[api];
		__u64 c = probe_cookie(api);

		assert_int_equal(GM_COOKIE_API(c), api);
		assert_int_equal(GM_COOKIE_SPACE(c), p->space);
		assert_int_equal(GM_COOKIE_KIND(c), p->kind);
		assert_int_equal(GM_COOKIE_LAYER(c), p->layer);
		assert_int_equal(GM_COOKIE_SHAPE(c), p->shape);
	}
}

static void test_cookie_fields_do_not_overlap_at_their_maximum(void **state)
{
	__u64 c = GM_COOKIE(0xffff, 0xff, 0xff, 0xff);

	(void)state;
	assert_int_equal(c, 0xffffffffffULL);
	assert_int_equal(GM_COOKIE_API(c), 0xffff);
	assert_int_equal(GM_COOKIE_KIND(c), 0xff);
	assert_int_equal(GM_COOKIE_LAYER(c), 0xff);
	assert_int_equal(GM_COOKIE_SHAPE(c), 0xff);
	c = GM_COOKIE(27, GM_KIND_VMM, GM_LAYER_DRIVER, GM_SHAPE_VMM_RELEASE);
	assert_int_equal(c, 0x040104001bULL);
	assert_int_equal(GM_COOKIE(0, 0, 0, 0), 0);
	c = GM_COOKIE_IN(0xffff, 0xff, 0xff, 0xff, 0xff);
	assert_int_equal(c, 0xffffffffffffULL);
	assert_int_equal(GM_COOKIE_SPACE(c), 0xff);
	assert_int_equal(GM_COOKIE_SHAPE(c), 0xff);
}

static void test_kind_and_layer_names(void **state)
{
	(void)state;
	assert_string_equal(kind_name(GM_KIND_DEVICE), "device");
	assert_string_equal(kind_name(GM_KIND_MANAGED), "managed");
	assert_string_equal(kind_name(GM_KIND_HOST), "host");
	assert_string_equal(kind_name(GM_KIND_ASYNC), "async");
	assert_string_equal(kind_name(GM_KIND_VMM), "vmm");
	assert_string_equal(kind_name(GM_KIND_VMM_MAPPED), "vmm_mapped");
	assert_string_equal(kind_name(GM_KIND_VMM_RESERVED), "vmm_reserved");
	assert_string_equal(kind_name(GM_KIND_IPC_IMPORTED), "ipc_imported");
	for (unsigned int k = 0; k < GM_KIND_COUNT; k++)	/* memory of the GPU, or not */
		assert_int_equal(gm_kind_is_gpu(k), k == GM_KIND_DEVICE || k == GM_KIND_MANAGED ||
						     k == GM_KIND_ASYNC || k == GM_KIND_VMM);
	assert_string_equal(kind_name(GM_KIND_COUNT), "unknown");
	assert_string_equal(kind_name(0xffffffffu), "unknown");
	assert_string_equal(probe_layer_name(GM_LAYER_RUNTIME), "runtime");
	assert_string_equal(probe_layer_name(GM_LAYER_DRIVER), "driver");
	assert_string_equal(probe_layer_name(GM_LAYER_TENSOR), "pytorch");
	assert_string_equal(probe_layer_name(GM_LAYER_HIP), "hip");
	/* HIP's own names: what AMD's runtime returns with no device, and out of memory */
	assert_string_equal(gpu_error_name(GM_LAYER_HIP, 101), "hipErrorInvalidDevice");
	assert_string_equal(gpu_error_name(GM_LAYER_HIP, 100), "hipErrorNoDevice");
	assert_string_equal(gpu_error_name(GM_LAYER_HIP, 2), "hipErrorOutOfMemory");
	assert_string_equal(gpu_error_name(GM_LAYER_HIP, 12345), "hipErrorUnknown");
	assert_true(is_tensor_library_path("/opt/venv/torch/lib/libc10_cuda.so"));
	assert_true(is_tensor_library_path("/opt/rocm/torch/lib/libc10_hip.so"));
	assert_false(is_tensor_library_path("/opt/venv/torch/lib/libc10.so"));
	assert_false(is_gpu_library_path("/opt/rocm/torch/lib/libc10_hip.so"));
	assert_false(is_gpu_library_path("/opt/venv/torch/lib/libc10_cuda.so"));
}

static void test_out_of_memory_is_code_2_in_both_apis(void **state)
{
	(void)state;
	assert_string_equal(gpu_error_name(GM_LAYER_RUNTIME, 2), "cudaErrorMemoryAllocation");
	assert_string_equal(gpu_error_name(GM_LAYER_DRIVER, 2), "CUDA_ERROR_OUT_OF_MEMORY");
	assert_string_equal(gpu_error_name(GM_LAYER_RUNTIME, 0), "cudaSuccess");
	assert_string_equal(gpu_error_name(GM_LAYER_DRIVER, 0), "CUDA_SUCCESS");
	assert_string_equal(gpu_error_name(GM_LAYER_RUNTIME, 1), "cudaErrorInvalidValue");
	assert_string_equal(gpu_error_name(GM_LAYER_DRIVER, 1), "CUDA_ERROR_INVALID_VALUE");
}

static void test_insufficient_driver_is_runtime_only(void **state)
{
	(void)state;
	assert_string_equal(gpu_error_name(GM_LAYER_RUNTIME, 35), "cudaErrorInsufficientDriver");
	/* The driver API has no code 35. */
	assert_string_equal(gpu_error_name(GM_LAYER_DRIVER, 35), "CUDA_ERROR_UNKNOWN");
}

static void test_unknown_codes_name_the_unknown_error(void **state)
{
	static const int codes[] = { -1, 5, 37, 1000, 123456 };

	(void)state;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		assert_string_equal(gpu_error_name(GM_LAYER_RUNTIME, codes[i]),
				    "cudaErrorUnknown");
		assert_string_equal(gpu_error_name(GM_LAYER_DRIVER, codes[i]),
				    "CUDA_ERROR_UNKNOWN");
	}
	assert_string_equal(gpu_error_name(GM_LAYER_RUNTIME, 999), "cudaErrorUnknown");
	assert_string_equal(gpu_error_name(GM_LAYER_DRIVER, 999), "CUDA_ERROR_UNKNOWN");
}

/* Where scripts/nvidia.sh (make nvidia) unpacks NVIDIA's driver and CUDA 11.8's runtime;
 * the unit tests run from the repository's root. */
#define NVIDIA_LIB_DIR "build/nvidia/usr/lib/x86_64-linux-gnu"

typedef int (*driver_name_fn)(int code, const char **name);
typedef const char *(*runtime_name_fn)(int code);

/* Every code gpumem names, named as NVIDIA's own libraries name it: the real driver's
 * cuGetErrorName and CUDA 11.8's cudaGetErrorName (which needs no driver). */
static void test_error_names_are_those_of_nvidias_libraries(void **state)
{
	void *driver = dlopen(NVIDIA_LIB_DIR "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	void *runtime = dlopen(NVIDIA_LIB_DIR "/libcudart.so.11.0", RTLD_NOW | RTLD_LOCAL);
	driver_name_fn driver_name;
	runtime_name_fn runtime_name;
	unsigned int named = 0;

	(void)state;
	if (!driver || !runtime) {
		print_message("skipped: needs NVIDIA's libraries in " NVIDIA_LIB_DIR
			      " (make nvidia)\n");
		skip();
	}
	driver_name = (driver_name_fn)dlsym(driver, "cuGetErrorName");
	runtime_name = (runtime_name_fn)dlsym(runtime, "cudaGetErrorName");
	assert_non_null(driver_name);
	assert_non_null(runtime_name);
	for (int code = 0; code < 1000; code++) {
		const char *ours = gpu_error_name(GM_LAYER_DRIVER, code), *theirs = NULL;

		if (strcmp(ours, "CUDA_ERROR_UNKNOWN") == 0)
			continue;
		assert_int_equal(driver_name(code, &theirs), 0);
		assert_string_equal(ours, theirs);
		named++;
	}
	for (int code = 0; code < 1000; code++) {
		const char *ours = gpu_error_name(GM_LAYER_RUNTIME, code);

		if (strcmp(ours, "cudaErrorUnknown") == 0)
			continue;
		assert_string_equal(ours, runtime_name(code));
		named++;
	}
	assert_string_equal(runtime_name(999), "cudaErrorUnknown");
	assert_true(named >= 40);	/* 20 driver codes, 22 runtime codes, 999 aside */
	/* Left open: NVIDIA's libraries keep what they allocated in their own globals, which
	 * LeakSanitizer would call leaks once the libraries were unmapped. */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_holds_exactly_the_101_design_symbols_and_the_tensor_rows),
		cmocka_unit_test(test_table_has_no_duplicate_symbols),
		cmocka_unit_test(test_each_row_has_design_layer_shape_and_kind),
		cmocka_unit_test(test_table_splits_25_runtime_38_driver_and_38_hip_rows),
		cmocka_unit_test(test_probe_find_returns_the_row_of_each_symbol),
		cmocka_unit_test(test_cookie_round_trips_every_row),
		cmocka_unit_test(test_cookie_fields_do_not_overlap_at_their_maximum),
		cmocka_unit_test(test_kind_and_layer_names),
		cmocka_unit_test(test_out_of_memory_is_code_2_in_both_apis),
		cmocka_unit_test(test_insufficient_driver_is_runtime_only),
		cmocka_unit_test(test_unknown_codes_name_the_unknown_error),
		cmocka_unit_test(test_error_names_are_those_of_nvidias_libraries),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
