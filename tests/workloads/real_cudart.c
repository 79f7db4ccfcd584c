/* Calls NVIDIA's own libcudart.so.13 once, so tests can trace a real runtime: with no driver
 * installed cudaMalloc returns 35 (cudaErrorInsufficientDriver). */
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#define REAL_ALLOC_BYTES (1u << 20)

/* Keeps the call site in a function of its own, under its own name, with its own frame. */
#if defined(__GNUC__) && !defined(__clang__)
#define GM_CALL_SITE __attribute__((noipa))
#else
#define GM_CALL_SITE __attribute__((noinline))
#endif

GM_CALL_SITE static int real_runtime_alloc(void **p)
{
	int rc = cudaMalloc(p, REAL_ALLOC_BYTES);

	printf("call cudaMalloc %u 0x%llx %d\n", REAL_ALLOC_BYTES,
	       (unsigned long long)(uintptr_t)*p, rc);
	fflush(stdout);
	return rc;
}

int main(void)
{
	void *p = NULL;

	real_runtime_alloc(&p);
	printf("done\n");
	return 0;
}
