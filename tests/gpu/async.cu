// (b) Stream-ordered allocation: cudaMallocAsync from the device's default pool and
// cudaMallocFromPoolAsync from a pool of our own, on one stream; some freed with
// cudaFreeAsync, some kept. gpumem accounts the pointers handed out (kind "async"), not the
// pool's reservation behind them.
#include <cuda_runtime_api.h>

#include "expect.h"

#define MiB (1ll << 20)

extern "C" __attribute__((noinline)) void async_default_pool(cudaStream_t s)
{
	void *p[3] = {};
	long long size = 4 * MiB;

	for (int i = 0; i < 3; i++) {
		cudaError_t rc = cudaMallocAsync(&p[i], size, s);
		if (rc == cudaSuccess)
			gx_alloc(__func__, GX_ASYNC, size);
		else
			gx_error("cudaMallocAsync", rc, cudaGetErrorName(rc));
	}
	for (int i = 0; i < 2; i++) { // keep p[2]
		if (!p[i])
			continue;
		cudaError_t rc = cudaFreeAsync(p[i], s);
		if (rc == cudaSuccess)
			gx_free(__func__, GX_ASYNC, size);
		else
			gx_error("cudaFreeAsync", rc, cudaGetErrorName(rc));
	}
}

extern "C" __attribute__((noinline)) void async_own_pool(cudaStream_t s)
{
	cudaMemPoolProps props;
	cudaMemPool_t pool;
	void *p[2] = {};
	long long size = 32 * MiB;

	memset(&props, 0, sizeof(props));
	props.allocType = cudaMemAllocationTypePinned;
	props.handleTypes = cudaMemHandleTypeNone;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	cudaError_t rc = cudaMemPoolCreate(&pool, &props);
	if (rc != cudaSuccess) {
		gx_error("cudaMemPoolCreate", rc, cudaGetErrorName(rc));
		return;
	}
	unsigned long long threshold = ~0ull; // keep freed memory in the pool
	GX_RT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
	for (int i = 0; i < 2; i++) {
		rc = cudaMallocFromPoolAsync(&p[i], size, pool, s);
		if (rc == cudaSuccess)
			gx_alloc(__func__, GX_ASYNC, size);
		else
			gx_error("cudaMallocFromPoolAsync", rc, cudaGetErrorName(rc));
	}
	if (p[0]) { // keep p[1]
		rc = cudaFreeAsync(p[0], s);
		if (rc == cudaSuccess)
			gx_free(__func__, GX_ASYNC, size);
		else
			gx_error("cudaFreeAsync(pool)", rc, cudaGetErrorName(rc));
	}
	GX_RT(cudaStreamSynchronize(s));
	size_t reserved = 0, used = 0;
	cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
	cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
	gx_extra("\"own_pool\":{\"reserved\":%zu,\"used\":%zu}", reserved, used);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "async";
	cudaStream_t s;

	if (gx_start() == 0 && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess) {
		async_default_pool(s);
		async_own_pool(s);
		GX_RT(cudaStreamSynchronize(s));
		cudaMemPool_t def;
		if (cudaDeviceGetDefaultMemPool(&def, 0) == cudaSuccess) {
			size_t reserved = 0, used = 0;
			cudaMemPoolGetAttribute(def, cudaMemPoolAttrReservedMemCurrent, &reserved);
			cudaMemPoolGetAttribute(def, cudaMemPoolAttrUsedMemCurrent, &used);
			gx_extra("\"default_pool\":{\"reserved\":%zu,\"used\":%zu}", reserved, used);
		}
		gx_meminfo("mem_at_exit");
	}
	gx_print(name);
	return 0;
}
