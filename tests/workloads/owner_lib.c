// SPDX-License-Identifier: GPL-2.0
/* A library that holds GPU memory of its own, built once per name a real one has (libnccl.so.2,
 * libcublasLt.so.13, libcudnn.so.9, libnvinfer.so.10: tests/tests.mk), for the owners test. */
#include <stddef.h>
#include <stdint.h>

#include "mock_cuda.h"

/* Keeps n allocations of size, and makes one more that it frees: returns the first error. */
__attribute__((visibility("default"), noinline)) int owner_hold(unsigned int n, size_t size)
{
	void *p = NULL;
	int rc;

	for (unsigned int i = 0; i < n; i++) {
		rc = cudaMalloc(&p, size);
		if (rc)
			return rc;
	}
	rc = cudaMalloc(&p, size);
	return rc ? rc : (int)cudaFree(p);
}
