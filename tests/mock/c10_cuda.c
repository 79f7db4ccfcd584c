// SPDX-License-Identifier: GPL-2.0
/* A stand-in for PyTorch's libc10_cuda.so: a caching allocator that carves tensors out of
 * 2 MiB segments it takes from the runtime's cudaMalloc, with PyTorch's USDT probes
 * pytorch:malloc(ptr, device, size, stream) and pytorch:free(ptr), each behind its semaphore
 * as TORCH_SDT_WITH_SEMAPHORE places them (after the allocation; before the free). Built with
 * -DC10_HIP it is the ROCm build's libc10_hip.so, as hipify makes it: the same probes, its
 * segments from hipMalloc. */
#define _SDT_HAS_SEMAPHORES 1
#include <stddef.h>
#include <stdint.h>
#include <sys/sdt.h>

/* What the kernel increments while a uprobe with this reference counter is attached. */
unsigned short pytorch_malloc_semaphore __attribute__((section(".probes"), used));
unsigned short pytorch_free_semaphore __attribute__((section(".probes"), used));

#ifdef C10_HIP
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#endif
int cudaMalloc(void **ptr, size_t size);
int cudaFree(void *ptr);

#define SEGMENT_BYTES (2u << 20)
#define ROUND_BYTES 512u
#define MAX_SEGMENTS 64

struct segment {
	uintptr_t base;
	size_t size, used;
	unsigned int live;	/* tensors in it */
};

static struct segment segments[MAX_SEGMENTS];
static unsigned int nsegments;

/* The live tensors' sizes, for c10_mock_stats (torch.cuda.memory_allocated). */
#define MAX_TENSORS 4096
static struct {
	uintptr_t ptr;
	size_t bytes;
} tensors[MAX_TENSORS];
static size_t allocated_bytes;

static void tensor_born(void *ptr, size_t bytes)
{
	for (unsigned int i = 0; i < MAX_TENSORS; i++)
		if (!tensors[i].ptr) {
			tensors[i].ptr = (uintptr_t)ptr;
			tensors[i].bytes = bytes;
			allocated_bytes += bytes;
			return;
		}
}

static void tensor_died(uintptr_t ptr)
{
	for (unsigned int i = 0; i < MAX_TENSORS; i++)
		if (tensors[i].ptr == ptr) {
			allocated_bytes -= tensors[i].bytes;
			tensors[i].ptr = 0;
			return;
		}
}
static unsigned long fired_mallocs, fired_frees;

static struct segment *segment_with_room(size_t bytes)
{
	void *base = NULL;

	for (unsigned int i = 0; i < nsegments; i++)
		if (segments[i].base && segments[i].size - segments[i].used >= bytes)
			return &segments[i];
	if (nsegments == MAX_SEGMENTS)
		return NULL;
	size_t size = bytes <= SEGMENT_BYTES ? SEGMENT_BYTES
					     : (bytes + SEGMENT_BYTES - 1) / SEGMENT_BYTES *
						       SEGMENT_BYTES;
	if (cudaMalloc(&base, size) != 0)
		return NULL;
	segments[nsegments] = (struct segment){ .base = (uintptr_t)base, .size = size };
	return &segments[nsegments++];
}

__attribute__((noinline)) void *c10_mock_alloc(size_t size)
{
	size_t bytes = (size + ROUND_BYTES - 1) / ROUND_BYTES * ROUND_BYTES;
	struct segment *seg = segment_with_room(bytes);
	void *ptr;
	int device = 0;
	long stream = 0;

	if (!seg)
		return NULL;
	ptr = (void *)(seg->base + seg->used);
	seg->used += bytes;
	seg->live++;
	tensor_born(ptr, bytes);
	if (pytorch_malloc_semaphore) {
		fired_mallocs++;
		STAP_PROBE4(pytorch, malloc, ptr, device, size, stream);
	}
	return ptr;
}

__attribute__((noinline)) void c10_mock_free(void *ptr)
{
	uintptr_t p = (uintptr_t)ptr;

	if (pytorch_free_semaphore) {
		fired_frees++;
		STAP_PROBE1(pytorch, free, ptr);
	}
	tensor_died(p);
	for (unsigned int i = 0; i < nsegments; i++) {
		struct segment *seg = &segments[i];

		if (seg->base && p >= seg->base && p < seg->base + seg->size) {
			if (--seg->live == 0)
				seg->used = 0;	/* cached: whole again, not given back */
			return;
		}
	}
}

/* torch.cuda.empty_cache(): segments without tensors go back to the runtime. */
void c10_mock_empty_cache(void)
{
	for (unsigned int i = 0; i < nsegments; i++) {
		if (segments[i].base && !segments[i].live) {
			cudaFree((void *)segments[i].base);
			segments[i].base = 0;
		}
	}
}

/* torch.cuda.memory_reserved() and memory_allocated(): the segments, the tensors' blocks. */
void c10_mock_stats(size_t *reserved, size_t *allocated)
{
	*reserved = 0;
	for (unsigned int i = 0; i < nsegments; i++)
		if (segments[i].base)
			*reserved += segments[i].size;
	*allocated = allocated_bytes;
}

/* How many probes fired: a probe whose semaphore is clear is never reached. */
unsigned long c10_mock_fired(int frees)
{
	return frees ? fired_frees : fired_mallocs;
}
