// (c) cudaMallocManaged (global and host-attached), some freed, some kept; plus a pinned host
// buffer from cudaHostAlloc that is freed with cudaFreeHost.
#include <cuda_runtime_api.h>

#include "expect.h"

#define MiB (1ll << 20)

extern "C" __attribute__((noinline)) void managed_buffers(void **keep)
{
	void *p[3] = {};
	long long size = 6 * MiB;

	for (int i = 0; i < 3; i++) {
		cudaError_t rc = cudaMallocManaged(&p[i], size, cudaMemAttachGlobal);
		if (rc == cudaSuccess) {
			gx_alloc(__func__, GX_MANAGED, size);
			memset(p[i], i + 1, 4096); // touch from the host
		} else {
			gx_error("cudaMallocManaged", rc, cudaGetErrorName(rc));
		}
	}
	if (p[0]) {
		cudaError_t rc = cudaFree(p[0]);
		if (rc == cudaSuccess)
			gx_free(__func__, GX_MANAGED, size);
		else
			gx_error("cudaFree(managed)", rc, cudaGetErrorName(rc));
	}
	keep[0] = p[1];
	keep[1] = p[2];
}

extern "C" __attribute__((noinline)) void managed_host_attached(void **keep)
{
	long long size = 1 * MiB;
	cudaError_t rc = cudaMallocManaged(keep, size, cudaMemAttachHost);
	if (rc == cudaSuccess)
		gx_alloc(__func__, GX_MANAGED, size);
	else
		gx_error("cudaMallocManaged(attach host)", rc, cudaGetErrorName(rc));
}

extern "C" __attribute__((noinline)) void pinned_round_trip(void)
{
	void *p = nullptr;
	long long size = 3 * MiB;
	cudaError_t rc = cudaHostAlloc(&p, size, cudaHostAllocDefault);
	if (rc != cudaSuccess) {
		gx_error("cudaHostAlloc", rc, cudaGetErrorName(rc));
		return;
	}
	gx_alloc(__func__, GX_HOST, size);
	rc = cudaFreeHost(p);
	if (rc == cudaSuccess)
		gx_free(__func__, GX_HOST, size);
	else
		gx_error("cudaFreeHost", rc, cudaGetErrorName(rc));
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "managed";
	void *keep[3] = {};

	if (gx_start() == 0) {
		managed_buffers(keep);
		managed_host_attached(&keep[2]);
		pinned_round_trip();
		GX_RT(cudaDeviceSynchronize());
		gx_meminfo("mem_at_exit");
	}
	gx_print(name);
	return 0;
}
