/* SPDX-License-Identifier: GPL-2.0 */
/* The probe table (which symbol gets which BPF program), the names of its APIs, layers, kinds
 * and error codes, and which files are CUDA's. */
#ifndef GPUMEM_PROBES_TABLE_H
#define GPUMEM_PROBES_TABLE_H

#include <stdbool.h>
#include <stdint.h>
#include "gpumem.h"

struct probe_def {
	const char *symbol;
	enum gm_layer layer;
	enum gm_shape shape;
	enum gm_kind kind;	/* of what an allocation holds; unused for frees */
	enum gm_space space;	/* where its allocations are keyed (a free: where it looks) */
};

/* The api id carried in cookies and events is the row's index. */
#define PROBE_ROWS 103
/* The last row: PyTorch's ROCm build's tensors, the same USDT probe in libc10_hip.so as the
 * "pytorch:malloc" row's in libc10_cuda.so; AMD's. */
#define PROBE_ROCM_TENSOR_ROW 102
extern const struct probe_def probe_table[];
extern const unsigned int probe_count;

/* The one rule for "is this a GPU runtime's code", by the file's own name: a module named
 * libcuda* or AMD's libamdhip64* and libhsa-runtime64* (its frames are the runtime's, hidden
 * unless --all-frames); of those, the shared objects gpumem attaches to are libcuda.so*,
 * libcudart.so* and libamdhip64.so* (bpf/lifecycle.bpf.h applies the same rule to opened
 * files; archives such as libcudart_static.a never match). */
bool is_gpu_module(const char *path);
bool is_gpu_library_path(const char *path);
/* PyTorch's libc10_cuda.so* and its ROCm build's libc10_hip.so*: its caching allocator's USDT
 * probes give tensors. */
bool is_tensor_library_path(const char *path);
/* The rows of PyTorch's tensors (USDT pytorch:malloc, one for CUDA, one for ROCm): their sites
 * hold tensors, allocated bytes inside the segments the process's other sites reserved. */
bool probe_is_tensor(unsigned int api);
/* The tensor row of a c10 library by its name (DT_SONAME, else the file's): ROCm's for
 * libc10_hip*, else CUDA's. */
int probe_tensor_row(const char *library_name);
const char *probe_api_name(unsigned int api);
const char *probe_layer_name(unsigned int layer);
/* Whose GPU a layer's calls are for: "amd" (HIP), else "nvidia"; and an API's (ROCm's tensor
 * row is AMD's; "unknown" past the table). */
const char *probe_vendor(unsigned int layer);
const char *probe_api_vendor(unsigned int api);
const char *kind_name(unsigned int kind);
/* The attach cookie of row api: api, kind, layer, shape and space. */
uint64_t probe_cookie(unsigned int api);
/* Index of symbol in the table, or -1. */
int probe_find(const char *symbol);
/* A name for a return code as the layer's library names it ("cudaErrorMemoryAllocation",
 * "CUDA_ERROR_OUT_OF_MEMORY", "hipErrorOutOfMemory"). */
const char *gpu_error_name(unsigned int layer, int error);

#endif
