// SPDX-License-Identifier: GPL-2.0
/*
 * A mock of AMD's HIP runtime (libamdhip64.so.5) for the tests: the allocation calls gpumem
 * probes, succeeding as on a GPU, with the shapes of HIP 5.2's exports (hip_runtime_api.h).
 * AMD's real runtime (Debian's, scripts/amd.sh) has no device here and fails them all; this one
 * is for the success paths.
 *
 * - Device, managed and async memory get addresses counting up from HIP_DEVICE_BASE (never
 *   dereferenced); host memory is real (aligned_alloc). Pitch allocations round the width up
 *   to 256 bytes. GPU-side usage may not exceed GPUMEM_MOCK_HIP_DEVICE_BYTES (default 64 GiB):
 *   past it, hipErrorOutOfMemory (2).
 * - Freeing what was never handed out is hipErrorInvalidValue (1); freeing NULL succeeds.
 * - hipMemCreate hands out handles from HIP_FIRST_HANDLE; hipMemAddressReserve ranges from
 *   HIP_VA_BASE; hipMemMap maps a live handle at a reserved address.
 * - One device (hipGetDeviceCount 1); hipSetDevice of another is hipErrorInvalidDevice (101).
 * Every export begins with push %rbp (tests/mock/check_prologues.sh), as AMD's do.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int hipError_t;
typedef void *hipStream_t;
typedef uint64_t hipMemGenericAllocationHandle_t;

#define hipSuccess 0
#define hipErrorInvalidValue 1
#define hipErrorOutOfMemory 2
#define hipErrorInvalidDevice 101

#define HIP_DEVICE_BASE 0x7d0000000000ull
#define HIP_VA_BASE 0x7c0000000000ull
#define HIP_FIRST_HANDLE 0x4000ull
#define HIP_MAX_LIVE 4096
#define HIP_DEFAULT_CAPACITY (64ull << 30)

enum live_kind { LIVE_GPU, LIVE_HOST, LIVE_REGISTERED, LIVE_HANDLE, LIVE_RESERVED, LIVE_MAPPED };

struct live {
	uint64_t key, bytes;
	enum live_kind kind;
	int used;
};

/* Called first in every export so that it begins `push %rbp; mov %rsp,%rbp` as AMD's do: gcc
 * otherwise drops the frame of leaf and tail-calling functions. */
static inline __attribute__((always_inline)) void keep_frame(void)
{
	__asm__ volatile("" : : "r"(__builtin_frame_address(0)));
}

#define HIP_EXPORT __attribute__((noinline, visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct live live[HIP_MAX_LIVE];
static uint64_t next_device = HIP_DEVICE_BASE, next_va = HIP_VA_BASE,
		next_handle = HIP_FIRST_HANDLE, gpu_bytes;

static uint64_t capacity(void)
{
	const char *text = getenv("GPUMEM_MOCK_HIP_DEVICE_BYTES");

	return text && *text ? strtoull(text, NULL, 0) : HIP_DEFAULT_CAPACITY;
}

/* Records a live entry; counts GPU bytes for LIVE_GPU and LIVE_HANDLE. */
static hipError_t add(uint64_t key, uint64_t bytes, enum live_kind kind)
{
	bool gpu = kind == LIVE_GPU || kind == LIVE_HANDLE;
	hipError_t rc = hipErrorOutOfMemory;

	pthread_mutex_lock(&lock);
	if (!gpu || gpu_bytes + bytes <= capacity()) {
		for (int i = 0; i < HIP_MAX_LIVE; i++) {
			if (live[i].used)
				continue;
			live[i] = (struct live){ .key = key, .bytes = bytes, .kind = kind, .used = 1 };
			if (gpu)
				gpu_bytes += bytes;
			rc = hipSuccess;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static hipError_t take(uint64_t key, enum live_kind kind)
{
	hipError_t rc = hipErrorInvalidValue;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < HIP_MAX_LIVE; i++) {
		if (!live[i].used || live[i].key != key || live[i].kind != kind)
			continue;
		live[i].used = 0;
		if (kind == LIVE_GPU || kind == LIVE_HANDLE)
			gpu_bytes -= live[i].bytes;
		rc = hipSuccess;
		break;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static hipError_t device_alloc(void **ptr, size_t size)
{
	uint64_t addr;
	hipError_t rc;

	if (!ptr)
		return hipErrorInvalidValue;
	pthread_mutex_lock(&lock);
	addr = next_device;
	next_device += (size + 4095) & ~4095ull;
	pthread_mutex_unlock(&lock);
	rc = add(addr, size, LIVE_GPU);
	if (!rc)
		*ptr = (void *)(uintptr_t)addr;
	return rc;
}

static hipError_t host_alloc(void **ptr, size_t size)
{
	void *p;

	if (!ptr)
		return hipErrorInvalidValue;
	p = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	if (!p)
		return hipErrorOutOfMemory;
	if (add((uint64_t)(uintptr_t)p, size, LIVE_HOST)) {
		free(p);
		return hipErrorOutOfMemory;
	}
	*ptr = p;
	return hipSuccess;
}

static hipError_t host_free(void *p)
{
	hipError_t rc;

	if (!p)
		return hipSuccess;
	rc = take((uint64_t)(uintptr_t)p, LIVE_HOST);
	if (!rc)
		free(p);
	return rc;
}

HIP_EXPORT hipError_t hipMalloc(void **ptr, size_t size)
{
	keep_frame();
	return device_alloc(ptr, size);
}

HIP_EXPORT hipError_t hipExtMallocWithFlags(void **ptr, size_t size, unsigned int flags)
{
	keep_frame();
	(void)flags;
	return device_alloc(ptr, size);
}

HIP_EXPORT hipError_t hipMallocManaged(void **ptr, size_t size, unsigned int flags)
{
	keep_frame();
	(void)flags;
	return device_alloc(ptr, size);
}

HIP_EXPORT hipError_t hipMallocAsync(void **ptr, size_t size, hipStream_t stream)
{
	keep_frame();
	(void)stream;
	return device_alloc(ptr, size);
}

HIP_EXPORT hipError_t hipMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
	keep_frame();
	size_t p = (width + 255) & ~(size_t)255;
	hipError_t rc;

	if (!pitch)
		return hipErrorInvalidValue;
	rc = device_alloc(ptr, p * height);
	if (!rc)
		*pitch = p;
	return rc;
}

HIP_EXPORT hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
	keep_frame();
	(void)flags;
	return host_alloc(ptr, size);
}

HIP_EXPORT hipError_t hipMallocHost(void **ptr, size_t size)
{
	keep_frame();
	return host_alloc(ptr, size);
}

HIP_EXPORT hipError_t hipFree(void *ptr)
{
	keep_frame();
	return ptr ? take((uint64_t)(uintptr_t)ptr, LIVE_GPU) : hipSuccess;
}

HIP_EXPORT hipError_t hipFreeAsync(void *ptr, hipStream_t stream)
{
	keep_frame();
	(void)stream;
	return ptr ? take((uint64_t)(uintptr_t)ptr, LIVE_GPU) : hipSuccess;
}

HIP_EXPORT hipError_t hipHostFree(void *ptr)
{
	keep_frame();
	return host_free(ptr);
}

HIP_EXPORT hipError_t hipFreeHost(void *ptr)
{
	keep_frame();
	return host_free(ptr);
}

HIP_EXPORT hipError_t hipHostRegister(void *ptr, size_t size, unsigned int flags)
{
	keep_frame();
	(void)flags;
	return ptr ? add((uint64_t)(uintptr_t)ptr, size, LIVE_REGISTERED) : hipErrorInvalidValue;
}

HIP_EXPORT hipError_t hipHostUnregister(void *ptr)
{
	keep_frame();
	return take((uint64_t)(uintptr_t)ptr, LIVE_REGISTERED);
}

HIP_EXPORT hipError_t hipMemCreate(hipMemGenericAllocationHandle_t *handle, size_t size, const void *prop,
			unsigned long long flags)
{
	keep_frame();
	uint64_t h;
	hipError_t rc;

	(void)prop;
	(void)flags;
	if (!handle)
		return hipErrorInvalidValue;
	pthread_mutex_lock(&lock);
	h = next_handle++;
	pthread_mutex_unlock(&lock);
	rc = add(h, size, LIVE_HANDLE);
	if (!rc)
		*handle = h;
	return rc;
}

HIP_EXPORT hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle)
{
	keep_frame();
	return take(handle, LIVE_HANDLE);
}

HIP_EXPORT hipError_t hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr,
				unsigned long long flags)
{
	keep_frame();
	uint64_t va;
	hipError_t rc;

	(void)alignment;
	(void)addr;
	(void)flags;
	if (!ptr)
		return hipErrorInvalidValue;
	pthread_mutex_lock(&lock);
	va = next_va;
	next_va += (size + 0x1fffff) & ~0x1fffffull;
	pthread_mutex_unlock(&lock);
	rc = add(va, size, LIVE_RESERVED);
	if (!rc)
		*ptr = (void *)(uintptr_t)va;
	return rc;
}

HIP_EXPORT hipError_t hipMemAddressFree(void *ptr, size_t size)
{
	keep_frame();
	(void)size;
	return take((uint64_t)(uintptr_t)ptr, LIVE_RESERVED);
}

HIP_EXPORT hipError_t hipMemMap(void *ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
		     unsigned long long flags)
{
	keep_frame();
	(void)offset;
	(void)handle;
	(void)flags;
	return add((uint64_t)(uintptr_t)ptr, size, LIVE_MAPPED);
}

HIP_EXPORT hipError_t hipMemUnmap(void *ptr, size_t size)
{
	keep_frame();
	(void)size;
	return take((uint64_t)(uintptr_t)ptr, LIVE_MAPPED);
}

HIP_EXPORT hipError_t hipGetDeviceCount(int *count)
{
	keep_frame();
	if (!count)
		return hipErrorInvalidValue;
	*count = 1;
	return hipSuccess;
}

HIP_EXPORT hipError_t hipSetDevice(int device)
{
	keep_frame();
	return device == 0 ? hipSuccess : hipErrorInvalidDevice;
}

HIP_EXPORT hipError_t hipDeviceReset(void)
{
	keep_frame();
	return hipSuccess;
}
