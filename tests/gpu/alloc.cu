// (a) cudaMalloc of known sizes from named functions: some freed, some kept until exit; one
// cudaMallocPitch (kept) and one pinned host buffer (kept; counted apart from GPU memory).
// Built twice by run.sh: runtime linked statically (nvcc's default) and -cudart shared.
#include <cuda_runtime_api.h>

#include "expect.h"

#define MiB (1ll << 20)

extern "C" __attribute__((noinline)) void keep_weights(void **out, int n)
{
	for (int i = 0; i < n; i++) {
		long long size = 8 * MiB + i * 4096; // distinct sizes: 8 MiB, 8 MiB + 4 KiB, ...
		cudaError_t rc = cudaMalloc(&out[i], size);
		if (rc == cudaSuccess)
			gx_alloc(__func__, GX_DEVICE, size);
		else
			gx_error("cudaMalloc(keep_weights)", rc, cudaGetErrorName(rc));
	}
}

extern "C" __attribute__((noinline)) void keep_odd_size(void **out)
{
	long long size = 1000003; // not a multiple of any granularity: gpumem reports the request
	cudaError_t rc = cudaMalloc(out, size);
	if (rc == cudaSuccess)
		gx_alloc(__func__, GX_DEVICE, size);
	else
		gx_error("cudaMalloc(keep_odd_size)", rc, cudaGetErrorName(rc));
}

extern "C" __attribute__((noinline)) void scratch_then_free(int n)
{
	void *p[16] = {};
	long long size = 16 * MiB;

	for (int i = 0; i < n && i < 16; i++) {
		cudaError_t rc = cudaMalloc(&p[i], size);
		if (rc == cudaSuccess)
			gx_alloc(__func__, GX_DEVICE, size);
		else
			gx_error("cudaMalloc(scratch_then_free)", rc, cudaGetErrorName(rc));
	}
	for (int i = 0; i < n && i < 16; i++) {
		if (!p[i])
			continue;
		cudaError_t rc = cudaFree(p[i]);
		if (rc == cudaSuccess)
			gx_free(__func__, GX_DEVICE, size);
		else
			gx_error("cudaFree(scratch_then_free)", rc, cudaGetErrorName(rc));
	}
}

extern "C" __attribute__((noinline)) void keep_pitched(void **out)
{
	size_t pitch = 0, width = 1000, height = 300;
	cudaError_t rc = cudaMallocPitch(out, &pitch, width, height);
	if (rc == cudaSuccess) {
		// gpumem accounts pitch * height, what the call really reserved.
		gx_alloc(__func__, GX_DEVICE, (long long)(pitch * height));
		gx_extra("\"pitch\":%zu,\"pitch_width\":%zu,\"pitch_height\":%zu", pitch, width,
			 height);
	} else {
		gx_error("cudaMallocPitch", rc, cudaGetErrorName(rc));
	}
}

extern "C" __attribute__((noinline)) void keep_pinned(void **out)
{
	long long size = 2 * MiB;
	cudaError_t rc = cudaMallocHost(out, size);
	if (rc == cudaSuccess)
		gx_alloc(__func__, GX_HOST, size);
	else
		gx_error("cudaMallocHost", rc, cudaGetErrorName(rc));
}

extern "C" __attribute__((noinline)) void free_one_weight(void *p, long long size)
{
	cudaError_t rc = cudaFree(p);
	if (rc == cudaSuccess)
		gx_free("keep_weights", GX_DEVICE, size); // the site that made it loses the bytes
	else
		gx_error("cudaFree(free_one_weight)", rc, cudaGetErrorName(rc));
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "alloc";
	void *weights[4] = {}, *odd = nullptr, *pitched = nullptr, *pinned = nullptr;

	if (gx_start() == 0) {
		// cudaFree(NULL): a common way to force context creation; frees nothing, and
		// gpumem must neither count it nor call it an unknown free.
		GX_RT(cudaFree(nullptr));
		keep_weights(weights, 4);
		scratch_then_free(4);
		keep_odd_size(&odd);
		keep_pitched(&pitched);
		keep_pinned(&pinned);
		if (weights[3])
			free_one_weight(weights[3], 8 * MiB + 3 * 4096);
		GX_RT(cudaDeviceSynchronize());
		gx_meminfo("mem_at_exit");
	}
	gx_print(name);
	return 0; // exit holding the kept buffers: the driver frees them, gpumem reports them
}
