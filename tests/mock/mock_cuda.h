/* What the mock driver, the mock runtime and the workloads share: NVIDIA's prototypes (from
 * the Toolkit when GM_HAVE_CUDA_HEADERS, else cuda_mock_types.h) and the private driver table. */
#ifndef GM_MOCK_CUDA_H
#define GM_MOCK_CUDA_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef GM_HAVE_CUDA_HEADERS
#include <cuda.h>
#include <cuda_runtime_api.h>
#else
#include "cuda_mock_types.h"
#endif

/* The ABI every driver still exports that the Toolkit declares only for its own build (cuda.h
 * maps cuCtxCreate to _v4). */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
			unsigned int flags, CUdevice dev);

/* The per-thread-default-stream entry points have the same types as the legacy ones; the
 * headers declare them only under CUDA_API_PER_THREAD_DEFAULT_STREAM, which renames the rest. */
__typeof__(cuMemAllocAsync) cuMemAllocAsync_ptsz;
__typeof__(cuMemAllocFromPoolAsync) cuMemAllocFromPoolAsync_ptsz;
__typeof__(cuMemFreeAsync) cuMemFreeAsync_ptsz;
__typeof__(cudaMallocAsync) cudaMallocAsync_ptsz;
__typeof__(cudaMallocFromPoolAsync) cudaMallocFromPoolAsync_ptsz;
__typeof__(cudaFreeAsync) cudaFreeAsync_ptsz;

/* The driver entry points the runtime uses. The mock runtime fills it with dlsym() of the
 * exported symbols, or (GPUMEM_MOCK_RUNTIME_PRIVATE=1) takes the driver's own copy from
 * cuMockGetPrivateTable(), whose pointers go to internal functions that no uprobe on an
 * exported symbol sees, the way cuGetProcAddress hands out entry points. */
struct gm_mock_driver_api {
	__typeof__(cuInit) *init;
	__typeof__(cuMemAlloc_v2) *mem_alloc;
	__typeof__(cuMemAllocPitch_v2) *mem_alloc_pitch;
	__typeof__(cuMemAllocManaged) *mem_alloc_managed;
	__typeof__(cuMemAllocHost_v2) *mem_alloc_host;
	__typeof__(cuMemHostAlloc) *mem_host_alloc;
	__typeof__(cuMemAllocAsync) *mem_alloc_async;
	__typeof__(cuMemAllocAsync_ptsz) *mem_alloc_async_ptsz;
	__typeof__(cuMemAllocFromPoolAsync) *mem_alloc_from_pool_async;
	__typeof__(cuMemAllocFromPoolAsync_ptsz) *mem_alloc_from_pool_async_ptsz;
	__typeof__(cuMemFree_v2) *mem_free;
	__typeof__(cuMemFreeHost) *mem_free_host;
	__typeof__(cuMemFreeAsync) *mem_free_async;
	__typeof__(cuMemFreeAsync_ptsz) *mem_free_async_ptsz;
	__typeof__(cuArrayCreate_v2) *array_create;
	__typeof__(cuArray3DCreate_v2) *array3d_create;
	__typeof__(cuMipmappedArrayCreate) *mipmapped_array_create;
	__typeof__(cuArrayDestroy) *array_destroy;
	__typeof__(cuMipmappedArrayDestroy) *mipmapped_array_destroy;
	__typeof__(cuMemHostRegister_v2) *mem_host_register;
	__typeof__(cuMemHostUnregister) *mem_host_unregister;
	__typeof__(cuIpcGetMemHandle) *ipc_get_mem_handle;
	__typeof__(cuIpcOpenMemHandle_v2) *ipc_open_mem_handle;
	__typeof__(cuIpcCloseMemHandle) *ipc_close_mem_handle;
	__typeof__(cuDevicePrimaryCtxRetain) *primary_ctx_retain;
	__typeof__(cuCtxSetCurrent) *ctx_set_current;
	__typeof__(cuDevicePrimaryCtxReset_v2) *primary_ctx_reset;
};

const struct gm_mock_driver_api *cuMockGetPrivateTable(void);

/*
 * Called first in every exported function so that it begins `push %rbp; mov %rsp,%rbp` like
 * NVIDIA's: gcc otherwise drops the frame of leaf and tail-calling functions even under
 * -fno-omit-frame-pointer.
 */
static inline __attribute__((always_inline)) void gm_keep_frame(void)
{
	__asm__ volatile("" : : "r"(__builtin_frame_address(0)));
}

/*
 * GPUMEM_MOCK_SAY_RETURN_PROBES=1: an API says on stderr whether a return probe is armed for
 * this call ("return probe cuMemAlloc_v2 yes"): the kernel arms one by replacing the return
 * address with its trampoline, in the process's [uprobes] mapping. ret: the API's own
 * __builtin_return_address(0).
 */
static inline void gm_say_return_probe(const char *api, const void *ret)
{
	static int say = -1;	/* not read yet: once, not on every call of a benchmark */
	char line[512];
	bool armed = false;
	FILE *maps;

	if (say < 0) {
		const char *v = getenv("GPUMEM_MOCK_SAY_RETURN_PROBES");

		say = v && !strcmp(v, "1");
	}
	if (!say)
		return;
	maps = fopen("/proc/self/maps", "re");
	while (maps && fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi;

		if (strstr(line, "[uprobes]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2 &&
		    (unsigned long)ret >= lo && (unsigned long)ret < hi)
			armed = true;
	}
	if (maps)
		fclose(maps);
	fprintf(stderr, "return probe %s %s\n", api, armed ? "yes" : "no");
}

#endif
