// (e) cudaMalloc 1 GiB chunks until one fails with cudaErrorMemoryAllocation (an H200 holds
// ~140), print the failure and what was free at that instant, then free everything. gpumem
// must report one failed cudaMalloc of 1 GiB with process_bytes_at_failure = what was held.
// Capped at GX_OOM_MAX chunks (argv[2] overrides) so a larger device cannot run it away.
#include <cstdlib>

#include <cuda_runtime_api.h>

#include "expect.h"

#define GiB (1ll << 30)
#define GX_OOM_MAX 1024

static void *chunks[GX_OOM_MAX];

extern "C" __attribute__((noinline)) cudaError_t oom_grab(void **p, long long size)
{
	return cudaMalloc(p, size);
}

extern "C" __attribute__((noinline)) void oom_release(int n)
{
	for (int i = 0; i < n; i++) {
		cudaError_t rc = cudaFree(chunks[i]);
		if (rc == cudaSuccess)
			gx_free("oom_grab", GX_DEVICE, GiB);
		else
			gx_error("cudaFree(oom_release)", rc, cudaGetErrorName(rc));
	}
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "oom";
	int max = argc > 2 ? atoi(argv[2]) : GX_OOM_MAX;
	int n = 0;

	if (max <= 0 || max > GX_OOM_MAX)
		max = GX_OOM_MAX;
	if (gx_start() == 0) {
		cudaError_t rc = cudaSuccess;
		for (n = 0; n < max; n++) {
			rc = oom_grab(&chunks[n], GiB);
			if (rc != cudaSuccess)
				break;
			gx_alloc("oom_grab", GX_DEVICE, GiB);
		}
		if (rc == cudaErrorMemoryAllocation) {
			gx_failed();
			cudaGetLastError(); // not sticky, but clear it anyway
			printf("{\"oom\":{\"after_chunks\":%d,\"held_bytes\":%lld,\"failed_size\":%lld,"
			       "\"error\":%d,\"error_name\":\"%s\"}}\n",
			       n, (long long)n * GiB, GiB, (int)rc, cudaGetErrorName(rc));
			gx_extra("\"oom_failed_size\":%lld,\"oom_error\":%d,\"oom_held_bytes\":%lld", GiB,
				 (int)rc, (long long)n * GiB);
			gx_meminfo("mem_at_failure");
		} else if (rc != cudaSuccess) {
			gx_error("cudaMalloc(oom_grab)", rc, cudaGetErrorName(rc));
		} else {
			printf("{\"oom\":null,\"note\":\"no failure within %d GiB\"}\n", max);
		}
		fflush(stdout);
		oom_release(n);
		gx_meminfo("mem_at_exit");
	}
	gx_print(name);
	return 0;
}
