// A program as nvcc builds it by default, with libcudart linked statically, so tests can trace
// cudaMalloc inside an executable. No kernels: it must build and run without a GPU.
#include <cstdint>
#include <cstdio>

#include <cuda_runtime_api.h>

#define STATIC_ALLOC_BYTES (2u << 20)

extern "C" __attribute__((noinline)) int static_runtime_alloc(void **p)
{
	int rc = cudaMalloc(p, STATIC_ALLOC_BYTES);

	printf("call cudaMalloc %u 0x%llx %d\n", STATIC_ALLOC_BYTES,
	       (unsigned long long)(uintptr_t)*p, rc);
	fflush(stdout);
	return rc;
}

int main()
{
	void *p = nullptr;

	static_runtime_alloc(&p);
	printf("done\n");
	return 0;
}
