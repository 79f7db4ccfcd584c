// Not traced: tells run.sh whether CUDA programs built by this nvcc can run on this driver and
// device at all (a CUDA 13 runtime on an older driver fails with cudaErrorInsufficientDriver).
// Exit 0 when usable, 3 otherwise; prints one JSON line either way.
#include <cuda_runtime_api.h>

#include "expect.h"

int main()
{
	int n = 0, drv = 0, rt = 0;
	size_t free_b = 0, total_b = 0;

	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	cudaError_t rc = cudaGetDeviceCount(&n);
	if (rc == cudaSuccess && n > 0)
		rc = cudaMemGetInfo(&free_b, &total_b);
	printf("{\"probe\":{\"rc\":%d,\"error_name\":\"%s\",\"devices\":%d,\"driver_version\":%d,"
	       "\"runtime_version\":%d,\"free\":%zu,\"total\":%zu}}\n",
	       (int)rc, cudaGetErrorName(rc), n, drv, rt, free_b, total_b);
	return rc == cudaSuccess && n > 0 ? 0 : 3;
}
