/* Mock libcuda.so.1 for tests without a GPU: fake device addresses, real host memory, a table of
 * live blocks, and failures injected from the environment (see the rules below). */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mock_cuda.h"

/*
 * Rules the tests rely on:
 * - Device, pitch, async and pool memory gets fake addresses (never host memory) from a bump
 *   pointer that starts at GM_DEVICE_BASE, each block rounded up to GM_DEVICE_ALIGN bytes.
 *   A freed block is reused LIFO by the next allocation of the same rounded size, so "free
 *   then allocate the same size" returns the same address.
 * - Pinned host and managed memory is real (aligned_alloc), usable by the CPU.
 * - cuMemCreate hands out handles counting up from GM_FIRST_HANDLE.
 * - GPU-side usage (device, pitch, async, pool, managed, VMM), in requested bytes (pitch x
 *   height for pitch), may not exceed GPUMEM_MOCK_DEVICE_BYTES (default 80 GiB).
 *   GPUMEM_MOCK_USAGE_FILE=PATH: the usage is written there (20 digits) at every change, for
 *   the mock NVML to count as used (GPUMEM_MOCK_NVML_USAGE_FILE), as a real device's NVML does.
 * - GPUMEM_MOCK_FAIL_AFTER=N: allocation calls after the first N fail (every call counts,
 *   failed ones included). GPUMEM_MOCK_FAIL_SIZE=N: allocations of N bytes or more fail.
 * - Injected failures return CUDA_ERROR_OUT_OF_MEMORY (2); freeing an unknown address or
 *   handle returns CUDA_ERROR_INVALID_VALUE (1); freeing 0 or NULL returns 0 and does nothing.
 * - GPUMEM_MOCK_DEVICES devices (default 1, at most 8; "gpumem mock GPU", compute capability
 *   8.0, GPUMEM_MOCK_DEVICE_BYTES of memory, shared by all), each with one primary context;
 *   each thread has its own stack of current contexts.
 * - Device memory gets a host-side copy at the first memcpy or memset into its block, so data
 *   copied in comes back out; a copy that runs past a live block returns CUDA_ERROR_INVALID_VALUE.
 * - Arrays (cuArrayCreate_v2, cuArray3DCreate_v2, cuMipmappedArrayCreate) get handles counting
 *   up from GM_FIRST_ARRAY and count their requested bytes on the GPU side: element bytes
 *   (format x channels) x width x height x depth, summed over mip levels (each dimension
 *   halved per level, at least 1; a layered array's depth is its layers and stays).
 * - cuMemHostRegister_v2 registers the caller's range (host side, never GPU); registering a
 *   start twice is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED (712), unregistering what is not
 *   registered CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713).
 * - cuMemAddressReserve hands out address ranges from GM_VA_BASE (no memory); cuMemMap maps a
 *   live handle's memory at a reserved address (no memory either: the handle holds it);
 *   cuMemUnmap and cuMemAddressFree take them back (unknown ones: CUDA_ERROR_INVALID_VALUE).
 * - IPC: cuIpcGetMemHandle writes the device address and its size into the handle; opening
 *   one (in any process) gives an address from GM_IPC_BASE, no memory of the opener's own;
 *   cuIpcCloseMemHandle closes it. A handle not made by cuIpcGetMemHandle is
 *   CUDA_ERROR_INVALID_VALUE.
 * - Every allocation call (arrays, registrations, reservations, mappings and IPC opens too)
 *   counts for GPUMEM_MOCK_FAIL_AFTER and GPUMEM_MOCK_FAIL_SIZE.
 * - Contexts: each block belongs to the calling thread's current context (the primary one when
 *   none is current). cuCtxCreate_v2/_v4 make a context and push it; cuCtxDestroy_v2 frees what
 *   it holds and pops it where it is current (destroying the primary context, or one never made,
 *   is CUDA_ERROR_INVALID_CONTEXT); cuDevicePrimaryCtxReset_v2 frees what the primary context
 *   holds. Async allocations belong to their pool, not to a context: a teardown keeps them.
 */
#define GM_DEVICE_BASE 0x7e0000000000ULL
#define GM_DEVICE_ALIGN 512ULL
#define GM_PITCH_ALIGN 512ULL
#define GM_HOST_ALIGN 4096ULL
#define GM_FIRST_HANDLE 0x1000ULL
#define GM_FIRST_ARRAY 0x5a0000000000ULL
#define GM_VA_BASE 0x7f0000000000ULL
#define GM_IPC_BASE 0x7d0000000000ULL
#define GM_VA_ALIGN (2ULL << 20)
#define GM_IPC_MAGIC "gpumem-mock-ipc"
#define GM_MAX_MIP_LEVELS 32
#define GM_DEFAULT_CAPACITY (80ULL << 30)
#define GM_DRIVER_VERSION 13000
#define GM_DEVICE_NAME "gpumem mock GPU"
#define GM_CC_MAJOR 8
#define GM_CC_MINOR 0
#define GM_CTX_STACK_DEPTH 16

#define GM_INITIAL_BUCKETS 4096
#define GM_SIZE_CLASS_BUCKETS 1024

enum block_kind {
	BLOCK_DEVICE,	/* fake address, recycled through the size classes */
	BLOCK_MANAGED,	/* host memory counted on the GPU side */
	BLOCK_HOST,	/* pinned host memory */
	BLOCK_HANDLE,	/* cuMemCreate handle */
	BLOCK_ARRAY,	/* CUarray or CUmipmappedArray handle */
	BLOCK_REGISTERED,	/* the caller's host range, page-locked */
	BLOCK_RESERVED,	/* reserved address range: no memory */
	BLOCK_MAPPED,	/* a handle mapped at a reserved address: the handle's memory */
	BLOCK_IMPORTED,	/* another process's memory, opened through IPC */
};

/* The one device, its primary context and the contexts cuCtxCreate makes (never freed, so a
 * destroyed context's pointer is never handed out again); each thread's stack of current
 * contexts. */
struct CUctx_st {
	CUdevice device;
	bool primary;
	bool live;
};

#define GM_MAX_DEVICES 8
static struct CUctx_st primary_ctxs[GM_MAX_DEVICES] = {
	{ 0, true, true }, { 1, true, true }, { 2, true, true }, { 3, true, true },
	{ 4, true, true }, { 5, true, true }, { 6, true, true }, { 7, true, true },
};
static __thread CUcontext ctx_stack[GM_CTX_STACK_DEPTH];
static __thread unsigned int ctx_depth;

#define GM_MAX_CONTEXTS 64
static CUcontext made_contexts[GM_MAX_CONTEXTS];	/* under mock_lock */
static unsigned int nmade_contexts;

static CUcontext current_ctx(void)
{
	return ctx_depth ? ctx_stack[ctx_depth - 1] : &primary_ctxs[0];
}

struct block {
	uint64_t key;		/* address or handle */
	CUcontext ctx;		/* whose teardown frees it */
	bool async;		/* from a pool: no teardown frees it */
	size_t bytes;		/* as accounted: requested size, pitch x height for pitch */
	size_t rounded;		/* address space taken, for BLOCK_DEVICE */
	enum block_kind kind;
	unsigned char *backing;	/* host copy of a BLOCK_DEVICE's contents, made at first use */
	struct block *next;
};

/* Live blocks of one namespace: device addresses, host addresses, or handles. */
struct block_table {
	struct block **buckets;
	size_t nbuckets;
	size_t count;
};

/* Freed fake addresses of one rounded size, reused last-in first-out. */
struct size_class {
	size_t rounded;
	uint64_t *addrs;
	size_t count, cap;
	struct size_class *next;
};

struct mock_config {
	uint64_t devices;	/* GPUMEM_MOCK_DEVICES, 1 to GM_MAX_DEVICES */
	uint64_t capacity;
	bool fail_after_set;
	uint64_t fail_after;
	bool fail_size_set;
	uint64_t fail_size;
};

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static struct mock_config config;

static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block_table device_table, host_table, handle_table, array_table, registered_table,
	reserved_table, mapped_table, import_table;
static struct size_class *size_classes[GM_SIZE_CLASS_BUCKETS];
static uint64_t next_device_addr = GM_DEVICE_BASE;
static uint64_t next_handle = GM_FIRST_HANDLE;
static uint64_t next_array = GM_FIRST_ARRAY;
static uint64_t next_va = GM_VA_BASE;
static uint64_t next_import = GM_IPC_BASE;
static uint64_t alloc_calls;
static uint64_t gpu_bytes_in_use;

/* GPUMEM_MOCK_USAGE_FILE: the usage as the device would report it; called with mock_lock. */
static void publish_usage(void)
{
	static int fd = -2;
	char text[24];

	if (fd == -2) {
		const char *path = getenv("GPUMEM_MOCK_USAGE_FILE");

		fd = path && *path ? open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
	}
	if (fd < 0)
		return;
	snprintf(text, sizeof(text), "%020llu", (unsigned long long)gpu_bytes_in_use);
	if (pwrite(fd, text, 20, 0) != 20)
		return;	/* the mock NVML reads what it can */
}

static bool env_u64(const char *name, uint64_t *out)
{
	const char *text = getenv(name);
	char *end;
	unsigned long long value;

	if (!text || !*text)
		return false;
	value = strtoull(text, &end, 0);
	if (*end)
		return false;
	*out = value;
	return true;
}

static void read_config(void)
{
	if (!env_u64("GPUMEM_MOCK_DEVICE_BYTES", &config.capacity))
		config.capacity = GM_DEFAULT_CAPACITY;
	if (!env_u64("GPUMEM_MOCK_DEVICES", &config.devices) || !config.devices ||
	    config.devices > GM_MAX_DEVICES)
		config.devices = 1;
	config.fail_after_set = env_u64("GPUMEM_MOCK_FAIL_AFTER", &config.fail_after);
	config.fail_size_set = env_u64("GPUMEM_MOCK_FAIL_SIZE", &config.fail_size);
}

static uint64_t round_up(uint64_t value, uint64_t align)
{
	return (value + align - 1) / align * align;
}

static size_t hash_u64(uint64_t key, size_t nbuckets)
{
	return (size_t)(((key >> 9) ^ key) * 0x9e3779b97f4a7c15ULL >> 20) & (nbuckets - 1);
}

static int table_grow(struct block_table *table)
{
	size_t nbuckets = table->nbuckets ? table->nbuckets * 2 : GM_INITIAL_BUCKETS;
	struct block **buckets = calloc(nbuckets, sizeof(*buckets));

	if (!buckets)
		return -1;
	for (size_t i = 0; i < table->nbuckets; i++) {
		struct block *b = table->buckets[i], *next;

		for (; b; b = next) {
			size_t h = hash_u64(b->key, nbuckets);

			next = b->next;
			b->next = buckets[h];
			buckets[h] = b;
		}
	}
	free(table->buckets);
	table->buckets = buckets;
	table->nbuckets = nbuckets;
	return 0;
}

static int table_insert(struct block_table *table, struct block *b)
{
	size_t h;

	if (table->count >= table->nbuckets && table_grow(table))
		return -1;
	h = hash_u64(b->key, table->nbuckets);
	b->next = table->buckets[h];
	table->buckets[h] = b;
	table->count++;
	return 0;
}

/* Unlinks and returns the block with this key, or NULL. */
static struct block *table_remove(struct block_table *table, uint64_t key)
{
	struct block **link;

	if (!table->nbuckets)
		return NULL;
	for (link = &table->buckets[hash_u64(key, table->nbuckets)]; *link; link = &(*link)->next) {
		struct block *b = *link;

		if (b->key == key) {
			*link = b->next;
			table->count--;
			return b;
		}
	}
	return NULL;
}

static struct size_class *size_class_get(size_t rounded, bool create)
{
	size_t h = hash_u64(rounded, GM_SIZE_CLASS_BUCKETS);
	struct size_class *sc;

	for (sc = size_classes[h]; sc; sc = sc->next)
		if (sc->rounded == rounded)
			return sc;
	if (!create)
		return NULL;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return NULL;
	sc->rounded = rounded;
	sc->next = size_classes[h];
	size_classes[h] = sc;
	return sc;
}

static uint64_t device_range_take(size_t rounded)
{
	struct size_class *sc = size_class_get(rounded, false);
	uint64_t addr;

	if (sc && sc->count)
		return sc->addrs[--sc->count];
	addr = next_device_addr;
	next_device_addr += rounded;
	return addr;
}

static int device_range_give_back(uint64_t addr, size_t rounded)
{
	struct size_class *sc = size_class_get(rounded, true);

	if (!sc)
		return -1;
	if (sc->count == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 16;
		uint64_t *addrs = realloc(sc->addrs, cap * sizeof(*addrs));

		if (!addrs)
			return -1;
		sc->addrs = addrs;
		sc->cap = cap;
	}
	sc->addrs[sc->count++] = addr;
	return 0;
}

static bool kind_on_gpu(enum block_kind kind)
{
	return kind == BLOCK_DEVICE || kind == BLOCK_MANAGED || kind == BLOCK_HANDLE ||
	       kind == BLOCK_ARRAY;
}

/* Kinds whose key the caller chooses (a range of its own, an address it reserved). */
static bool key_given(enum block_kind kind)
{
	return kind == BLOCK_REGISTERED || kind == BLOCK_MAPPED;
}

static struct block_table *table_for(enum block_kind kind)
{
	switch (kind) {
	case BLOCK_HOST:
		return &host_table;
	case BLOCK_HANDLE:
		return &handle_table;
	case BLOCK_ARRAY:
		return &array_table;
	case BLOCK_REGISTERED:
		return &registered_table;
	case BLOCK_RESERVED:
		return &reserved_table;
	case BLOCK_MAPPED:
		return &mapped_table;
	case BLOCK_IMPORTED:
		return &import_table;
	default:
		return &device_table;
	}
}

/* The live block with this key, or NULL; under mock_lock. */
static struct block *table_find(const struct block_table *table, uint64_t key)
{
	struct block *b;

	if (!table->nbuckets)
		return NULL;
	for (b = table->buckets[hash_u64(key, table->nbuckets)]; b; b = b->next)
		if (b->key == key)
			return b;
	return NULL;
}

/* Decides, under mock_lock, whether an allocation call fails by injection. */
static bool injected_failure(size_t bytes, enum block_kind kind)
{
	alloc_calls++;
	if (config.fail_after_set && alloc_calls > config.fail_after)
		return true;
	if (config.fail_size_set && bytes >= config.fail_size)
		return true;
	if (kind_on_gpu(kind) && (bytes > config.capacity ||
				  gpu_bytes_in_use > config.capacity - bytes))
		return true;
	return false;
}

/* The one allocation path: returns the new block's address or handle in *key (for the kinds
 * whose key the caller gives, *key is that key). */
static CUresult mock_alloc(enum block_kind kind, size_t bytes, uint64_t *key)
{
	struct block *b;
	void *host = NULL;

	pthread_once(&config_once, read_config);
	if (!key || !bytes)
		return CUDA_ERROR_INVALID_VALUE;
	b = calloc(1, sizeof(*b));
	if (!b)
		return CUDA_ERROR_OUT_OF_MEMORY;
	b->kind = kind;
	b->bytes = bytes;
	b->ctx = current_ctx();

	pthread_mutex_lock(&mock_lock);
	if (injected_failure(bytes, kind))
		goto out_free_block;
	if (key_given(kind) && table_find(table_for(kind), *key)) {
		pthread_mutex_unlock(&mock_lock);
		free(b);
		return kind == BLOCK_REGISTERED ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
						: CUDA_ERROR_INVALID_VALUE;
	}
	switch (kind) {
	case BLOCK_DEVICE:
		b->rounded = round_up(bytes, GM_DEVICE_ALIGN);
		b->key = device_range_take(b->rounded);
		break;
	case BLOCK_HANDLE:
		b->key = next_handle++;
		break;
	case BLOCK_ARRAY:
		b->key = next_array;
		next_array += GM_DEVICE_ALIGN;
		break;
	case BLOCK_RESERVED:
		b->key = next_va;
		next_va += round_up(bytes, GM_VA_ALIGN);
		break;
	case BLOCK_IMPORTED:
		b->key = next_import;
		next_import += round_up(bytes, GM_VA_ALIGN);
		break;
	case BLOCK_REGISTERED:
	case BLOCK_MAPPED:
		b->key = *key;
		break;
	case BLOCK_MANAGED:
	case BLOCK_HOST:
		host = aligned_alloc(GM_HOST_ALIGN, round_up(bytes, GM_HOST_ALIGN));
		if (!host)
			goto out_free_block;
		b->key = (uintptr_t)host;
		break;
	}
	if (table_insert(table_for(kind), b))
		goto out_free_host;
	if (kind_on_gpu(kind)) {
		gpu_bytes_in_use += bytes;
		publish_usage();
	}
	pthread_mutex_unlock(&mock_lock);
	*key = b->key;
	return CUDA_SUCCESS;

out_free_host:
	if (kind == BLOCK_DEVICE)
		device_range_give_back(b->key, b->rounded);
	free(host);
out_free_block:
	pthread_mutex_unlock(&mock_lock);
	free(b);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The one free path; table says which namespace the key lives in. */
static CUresult mock_free(struct block_table *table, uint64_t key)
{
	struct block *b;

	if (!key)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&mock_lock);
	b = table_remove(table, key);
	if (!b) {
		pthread_mutex_unlock(&mock_lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (kind_on_gpu(b->kind)) {
		gpu_bytes_in_use -= b->bytes;
		publish_usage();
	}
	/* If the free list cannot grow, the range is leaked: never handed out twice. */
	if (b->kind == BLOCK_DEVICE)
		(void)device_range_give_back(b->key, b->rounded);
	pthread_mutex_unlock(&mock_lock);
	if (b->kind == BLOCK_MANAGED || b->kind == BLOCK_HOST)
		free((void *)(uintptr_t)b->key);
	free(b->backing);
	free(b);
	return CUDA_SUCCESS;
}

/* The live device block that holds [addr, addr + len), or NULL; under mock_lock. */
static struct block *device_block_holding(uint64_t addr, size_t len)
{
	struct block *b;

	if (!device_table.nbuckets)
		return NULL;
	for (b = device_table.buckets[hash_u64(addr, device_table.nbuckets)]; b; b = b->next)
		if (b->key == addr && len <= b->bytes)
			return b;
	/* An address inside a block (a slice of an array): look through them all. */
	for (size_t i = 0; i < device_table.nbuckets; i++)
		for (b = device_table.buckets[i]; b; b = b->next)
			if (b->kind == BLOCK_DEVICE && addr >= b->key && addr - b->key < b->bytes &&
			    len <= b->bytes - (addr - b->key))
				return b;
	return NULL;
}

/* The host copy of device memory at [addr, addr + len), made on first use; under mock_lock. */
static unsigned char *device_bytes(uint64_t addr, size_t len)
{
	struct block *b = device_block_holding(addr, len);

	if (!b || b->kind != BLOCK_DEVICE)
		return NULL;
	if (!b->backing)
		b->backing = calloc(1, b->rounded);
	return b->backing ? b->backing + (addr - b->key) : NULL;
}

enum copy_direction { COPY_TO_DEVICE, COPY_TO_HOST, COPY_ON_DEVICE };

static CUresult mock_copy(enum copy_direction direction, uint64_t dst, uint64_t src, size_t len)
{
	unsigned char *to, *from;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	if (!len)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&mock_lock);
	to = direction == COPY_TO_HOST ? (unsigned char *)(uintptr_t)dst : device_bytes(dst, len);
	from = direction == COPY_TO_DEVICE ? (unsigned char *)(uintptr_t)src : device_bytes(src, len);
	if (to && from) {
		memmove(to, from, len);
		rc = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&mock_lock);
	return rc;
}

static CUresult mock_memset(uint64_t dst, unsigned char value, size_t len)
{
	unsigned char *to;

	if (!len)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&mock_lock);
	to = device_bytes(dst, len);
	if (to)
		memset(to, value, len);
	pthread_mutex_unlock(&mock_lock);
	return to ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}


static bool valid_device(CUdevice dev)
{
	pthread_once(&config_once, read_config);
	return dev >= 0 && (uint64_t)dev < config.devices;
}

static int device_attribute(CUdevice_attribute attrib)
{
	switch ((int)attrib) {
	case 1:		/* MAX_THREADS_PER_BLOCK */
	case 2:		/* MAX_BLOCK_DIM_X */
	case 3:		/* MAX_BLOCK_DIM_Y */
		return 1024;
	case 4:		/* MAX_BLOCK_DIM_Z */
		return 64;
	case 5:		/* MAX_GRID_DIM_X */
		return 0x7fffffff;
	case 6:		/* MAX_GRID_DIM_Y */
	case 7:		/* MAX_GRID_DIM_Z */
		return 65535;
	case 8:		/* MAX_SHARED_MEMORY_PER_BLOCK */
		return 48 << 10;
	case 9:		/* TOTAL_CONSTANT_MEMORY */
		return 64 << 10;
	case 10:	/* WARP_SIZE */
		return 32;
	case 12:	/* MAX_REGISTERS_PER_BLOCK */
		return 65536;
	case 13:	/* CLOCK_RATE, kHz */
		return 1410000;
	case 16:	/* MULTIPROCESSOR_COUNT */
		return 108;
	case 19:	/* CAN_MAP_HOST_MEMORY */
	case 41:	/* UNIFIED_ADDRESSING */
	case 83:	/* MANAGED_MEMORY */
	case 89:	/* CONCURRENT_MANAGED_ACCESS */
		return 1;
	case 40:	/* ASYNC_ENGINE_COUNT */
		return 2;
	case 75:	/* COMPUTE_CAPABILITY_MAJOR */
		return GM_CC_MAJOR;
	case 76:	/* COMPUTE_CAPABILITY_MINOR */
		return GM_CC_MINOR;
	default:
		return 0;
	}
}

/*
 * Internal implementations. The exported functions below call only these, never each other, so
 * one API call fires exactly one driver uprobe; cuMockGetPrivateTable() hands them out directly.
 * `variant` keeps the bodies of the legacy and _ptsz exports distinct, so that the compiler
 * cannot fold one export into the other.
 */
enum stream_variant { STREAM_LEGACY, STREAM_PER_THREAD };

static __attribute__((noinline)) CUresult impl_init(unsigned int flags)
{
	(void)flags;
	pthread_once(&config_once, read_config);
	return CUDA_SUCCESS;
}

static __attribute__((noinline)) CUresult impl_mem_alloc(CUdeviceptr *dptr, size_t bytes)
{
	uint64_t key;
	CUresult rc;

	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	rc = mock_alloc(BLOCK_DEVICE, bytes, &key);
	if (rc == CUDA_SUCCESS)
		*dptr = key;
	return rc;
}

static __attribute__((noinline)) CUresult impl_mem_alloc_pitch(CUdeviceptr *dptr, size_t *pitch,
							       size_t width, size_t height,
							       unsigned int elem_size)
{
	size_t row = round_up(width, GM_PITCH_ALIGN);
	uint64_t key;
	CUresult rc;

	if (!dptr || !pitch || !width || !height)
		return CUDA_ERROR_INVALID_VALUE;
	if (elem_size != 4 && elem_size != 8 && elem_size != 16)
		return CUDA_ERROR_INVALID_VALUE;
	rc = mock_alloc(BLOCK_DEVICE, row * height, &key);
	if (rc == CUDA_SUCCESS) {
		*dptr = key;
		*pitch = row;
	}
	return rc;
}

static __attribute__((noinline)) CUresult impl_mem_alloc_managed(CUdeviceptr *dptr, size_t bytes,
								 unsigned int flags)
{
	uint64_t key;
	CUresult rc;

	(void)flags;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	rc = mock_alloc(BLOCK_MANAGED, bytes, &key);
	if (rc == CUDA_SUCCESS)
		*dptr = key;
	return rc;
}

static __attribute__((noinline)) CUresult impl_mem_alloc_host(void **pp, size_t bytes,
							      unsigned int flags)
{
	uint64_t key;
	CUresult rc;

	(void)flags;
	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	rc = mock_alloc(BLOCK_HOST, bytes, &key);
	if (rc == CUDA_SUCCESS)
		*pp = (void *)(uintptr_t)key;
	return rc;
}

static __attribute__((noinline)) CUresult impl_mem_alloc_async(CUdeviceptr *dptr, size_t bytes,
							       CUmemoryPool pool, CUstream stream,
							       enum stream_variant variant)
{
	CUresult rc;

	(void)pool;
	(void)stream;
	(void)variant;
	rc = impl_mem_alloc(dptr, bytes);
	if (rc == CUDA_SUCCESS) {
		pthread_mutex_lock(&mock_lock);
		table_find(&device_table, *dptr)->async = true;
		pthread_mutex_unlock(&mock_lock);
	}
	return rc;
}

static __attribute__((noinline)) CUresult impl_mem_create(CUmemGenericAllocationHandle *handle,
							  size_t bytes,
							  const CUmemAllocationProp *prop,
							  unsigned long long flags)
{
	uint64_t key;
	CUresult rc;

	if (!handle || !prop || flags)
		return CUDA_ERROR_INVALID_VALUE;
	rc = mock_alloc(BLOCK_HANDLE, bytes, &key);
	if (rc == CUDA_SUCCESS)
		*handle = key;
	return rc;
}

static __attribute__((noinline)) CUresult impl_mem_free(CUdeviceptr dptr)
{
	return mock_free(&device_table, dptr);
}

static __attribute__((noinline)) CUresult impl_mem_free_host(void *p)
{
	return mock_free(&host_table, (uintptr_t)p);
}

static __attribute__((noinline)) CUresult impl_mem_free_async(CUdeviceptr dptr, CUstream stream,
							      enum stream_variant variant)
{
	(void)stream;
	(void)variant;
	return mock_free(&device_table, dptr);
}

static __attribute__((noinline)) CUresult impl_mem_release(CUmemGenericAllocationHandle handle)
{
	return mock_free(&handle_table, handle);
}

/* Bytes of an array element: the format's size times the channels (1, 2 or 4); 0: not one the
 * mock knows. */
static size_t element_bytes(CUarray_format format, unsigned int channels)
{
	size_t bytes;

	switch ((int)format) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		bytes = 1;
		break;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		bytes = 2;
		break;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		bytes = 4;
		break;
	case CU_AD_FORMAT_NV12:
		bytes = 1;	/* accepted, as the driver does: a format gpumem does not size */
		break;
	default:
		return 0;
	}
	if (channels != 1 && channels != 2 && channels != 4)
		return 0;
	return bytes * channels;
}

/* Requested bytes of an array, over its mip levels; 0 for a descriptor the driver refuses. */
static uint64_t array_bytes(size_t elem, size_t width, size_t height, size_t depth,
			    unsigned int levels, bool layered)
{
	uint64_t total = 0;

	if (!elem || !width || !levels || levels > GM_MAX_MIP_LEVELS || width > (1u << 20) ||
	    height > (1u << 20) || depth > (1u << 20))
		return 0;
	height = height ? height : 1;
	depth = depth ? depth : 1;
	for (unsigned int l = 0; l < levels; l++) {
		uint64_t w = width >> l, h = height >> l, d = layered ? depth : depth >> l;

		total += (uint64_t)elem * (w ? w : 1) * (h ? h : 1) * (d ? d : 1);
	}
	return total;
}

static CUresult array_alloc(uint64_t bytes, uint64_t *key)
{
	return bytes ? mock_alloc(BLOCK_ARRAY, bytes, key) : CUDA_ERROR_INVALID_VALUE;
}

static __attribute__((noinline)) CUresult impl_array_create(CUarray *out,
							    const CUDA_ARRAY_DESCRIPTOR *d)
{
	uint64_t key;
	CUresult rc;

	if (!out || !d)
		return CUDA_ERROR_INVALID_VALUE;
	rc = array_alloc(array_bytes(element_bytes(d->Format, d->NumChannels), d->Width,
				     d->Height, 0, 1, false), &key);
	if (rc == CUDA_SUCCESS)
		*out = (CUarray)(uintptr_t)key;
	return rc;
}

static __attribute__((noinline)) CUresult impl_array3d_create(CUarray *out,
							      const CUDA_ARRAY3D_DESCRIPTOR *d,
							      unsigned int levels, bool mipmapped)
{
	uint64_t key;
	CUresult rc;

	if (!out || !d)
		return CUDA_ERROR_INVALID_VALUE;
	rc = array_alloc(array_bytes(element_bytes(d->Format, d->NumChannels), d->Width,
				     d->Height, d->Depth, mipmapped ? levels : 1,
				     d->Flags & CUDA_ARRAY3D_LAYERED), &key);
	if (rc == CUDA_SUCCESS)
		*out = (CUarray)(uintptr_t)key;
	return rc;
}

static __attribute__((noinline)) CUresult impl_mipmapped_create(CUmipmappedArray *out,
								const CUDA_ARRAY3D_DESCRIPTOR *d,
								unsigned int levels)
{
	CUarray array = NULL;
	CUresult rc;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	rc = impl_array3d_create(&array, d, levels, true);
	if (rc == CUDA_SUCCESS)
		*out = (CUmipmappedArray)array;
	return rc;
}

static __attribute__((noinline)) CUresult impl_array_destroy(uint64_t handle, bool mipmapped)
{
	(void)mipmapped;
	return handle ? mock_free(&array_table, handle) : CUDA_ERROR_INVALID_VALUE;
}

static __attribute__((noinline)) CUresult impl_host_register(void *p, size_t bytes,
							     unsigned int flags)
{
	uint64_t key = (uintptr_t)p;

	(void)flags;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	return mock_alloc(BLOCK_REGISTERED, bytes, &key);
}

static __attribute__((noinline)) CUresult impl_host_unregister(void *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	return mock_free(&registered_table, (uintptr_t)p) == CUDA_SUCCESS
		       ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

static __attribute__((noinline)) CUresult impl_address_reserve(CUdeviceptr *ptr, size_t bytes)
{
	uint64_t key;
	CUresult rc;

	if (!ptr)
		return CUDA_ERROR_INVALID_VALUE;
	rc = mock_alloc(BLOCK_RESERVED, bytes, &key);
	if (rc == CUDA_SUCCESS)
		*ptr = key;
	return rc;
}

/* A reservation is freed whole, with the size it was made with. */
static __attribute__((noinline)) CUresult impl_address_free(CUdeviceptr ptr, size_t bytes)
{
	struct block *b;

	pthread_mutex_lock(&mock_lock);
	b = table_find(&reserved_table, ptr);
	pthread_mutex_unlock(&mock_lock);
	if (!ptr || !b || b->bytes != bytes)
		return CUDA_ERROR_INVALID_VALUE;
	return mock_free(&reserved_table, ptr);
}

/* Whether [addr, addr + bytes) lies in one reservation; under mock_lock. */
static bool reserved_range(uint64_t addr, size_t bytes)
{
	for (size_t i = 0; i < reserved_table.nbuckets; i++)
		for (struct block *b = reserved_table.buckets[i]; b; b = b->next)
			if (addr >= b->key && bytes <= b->bytes && addr - b->key <= b->bytes - bytes)
				return true;
	return false;
}

static __attribute__((noinline)) CUresult impl_mem_map(CUdeviceptr ptr, size_t bytes,
						       size_t offset,
						       CUmemGenericAllocationHandle handle)
{
	struct block *h;
	uint64_t key = ptr;
	bool ok;

	pthread_mutex_lock(&mock_lock);
	h = table_find(&handle_table, handle);
	ok = h && bytes && offset <= h->bytes && bytes <= h->bytes - offset &&
	     reserved_range(ptr, bytes);
	pthread_mutex_unlock(&mock_lock);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	return mock_alloc(BLOCK_MAPPED, bytes, &key);
}

static __attribute__((noinline)) CUresult impl_mem_unmap(CUdeviceptr ptr, size_t bytes)
{
	(void)bytes;
	return ptr ? mock_free(&mapped_table, ptr) : CUDA_ERROR_INVALID_VALUE;
}

/* What the mock writes into an IPC handle: the exporter's address and size. */
struct ipc_payload {
	char magic[16];
	uint64_t dptr;
	uint64_t bytes;
};

static __attribute__((noinline)) CUresult impl_ipc_get(CUipcMemHandle *handle, CUdeviceptr dptr)
{
	struct ipc_payload pl = { .magic = GM_IPC_MAGIC, .dptr = dptr };
	struct block *b;

	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mock_lock);
	b = table_find(&device_table, dptr);
	if (b)
		pl.bytes = b->bytes;
	pthread_mutex_unlock(&mock_lock);
	if (!b)
		return CUDA_ERROR_INVALID_VALUE;
	memset(handle, 0, sizeof(*handle));
	memcpy(handle, &pl, sizeof(pl));
	return CUDA_SUCCESS;
}

static __attribute__((noinline)) CUresult impl_ipc_open(CUdeviceptr *pdptr,
							const CUipcMemHandle *handle)
{
	struct ipc_payload pl;
	uint64_t key;
	CUresult rc;

	if (!pdptr)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&pl, handle, sizeof(pl));
	if (memcmp(pl.magic, GM_IPC_MAGIC, sizeof(GM_IPC_MAGIC)) || !pl.bytes)
		return CUDA_ERROR_INVALID_VALUE;
	rc = mock_alloc(BLOCK_IMPORTED, pl.bytes, &key);
	if (rc == CUDA_SUCCESS)
		*pdptr = key;
	return rc;
}

static __attribute__((noinline)) CUresult impl_ipc_close(CUdeviceptr dptr)
{
	return dptr ? mock_free(&import_table, dptr) : CUDA_ERROR_INVALID_VALUE;
}

/* Frees every block of ctx but async ones, in every table: what the driver does when a
 * context goes. */
static void release_context(CUcontext ctx)
{
	struct block_table *tables[] = { &device_table, &host_table, &handle_table, &array_table,
					 &registered_table, &reserved_table, &mapped_table,
					 &import_table };

	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		for (;;) {
			uint64_t key = 0;
			bool found = false;

			pthread_mutex_lock(&mock_lock);
			for (size_t i = 0; !found && i < tables[t]->nbuckets; i++)
				for (struct block *b = tables[t]->buckets[i]; b && !found; b = b->next)
					if (b->ctx == ctx && !b->async) {
						key = b->key;
						found = true;
					}
			pthread_mutex_unlock(&mock_lock);
			if (!found)
				break;
			mock_free(tables[t], key);
		}
	}
}

/* Whether ctx is the primary context or one cuCtxCreate made and nobody destroyed: a pointer
 * the caller passes is never dereferenced before this says so. */
static bool ctx_live(CUcontext ctx)
{
	bool live = ctx >= primary_ctxs && ctx < primary_ctxs + GM_MAX_DEVICES;

	pthread_mutex_lock(&mock_lock);
	for (unsigned int i = 0; !live && i < nmade_contexts; i++)
		live = made_contexts[i] == ctx && ctx->live;
	pthread_mutex_unlock(&mock_lock);
	return live;
}

static __attribute__((noinline)) CUresult impl_ctx_create(CUcontext *pctx, CUdevice dev)
{
	CUcontext ctx;

	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (ctx_depth == GM_CTX_STACK_DEPTH)
		return CUDA_ERROR_INVALID_VALUE;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx->device = dev;
	ctx->live = true;
	pthread_mutex_lock(&mock_lock);
	if (nmade_contexts == GM_MAX_CONTEXTS) {
		pthread_mutex_unlock(&mock_lock);
		free(ctx);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	made_contexts[nmade_contexts++] = ctx;
	pthread_mutex_unlock(&mock_lock);
	ctx_stack[ctx_depth++] = ctx;
	*pctx = ctx;
	return CUDA_SUCCESS;
}

static __attribute__((noinline)) CUresult impl_primary_retain(CUcontext *pctx, CUdevice dev)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*pctx = &primary_ctxs[dev];
	return CUDA_SUCCESS;
}

/* Replaces the top of the stack; NULL empties that slot, as the driver does. */
static __attribute__((noinline)) CUresult impl_ctx_set_current(CUcontext ctx)
{
	if (ctx && !ctx_live(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!ctx) {
		if (ctx_depth)
			ctx_depth--;
		return CUDA_SUCCESS;
	}
	if (!ctx_depth)
		ctx_depth = 1;
	ctx_stack[ctx_depth - 1] = ctx;
	return CUDA_SUCCESS;
}

static __attribute__((noinline)) CUresult impl_primary_reset(CUdevice dev)
{
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	release_context(&primary_ctxs[dev]);
	return CUDA_SUCCESS;
}

/* Private entry points: the same behaviour, at addresses no exported symbol names. */
static CUresult priv_mem_alloc_host(void **pp, size_t bytes)
{
	return impl_mem_alloc_host(pp, bytes, 0);
}

static CUresult priv_mem_alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
	return impl_mem_alloc_async(dptr, bytes, NULL, stream, STREAM_LEGACY);
}

static CUresult priv_mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
	return impl_mem_alloc_async(dptr, bytes, NULL, stream, STREAM_PER_THREAD);
}

static CUresult priv_mem_alloc_from_pool(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
					 CUstream stream)
{
	return impl_mem_alloc_async(dptr, bytes, pool, stream, STREAM_LEGACY);
}

static CUresult priv_mem_alloc_from_pool_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
					      CUstream stream)
{
	return impl_mem_alloc_async(dptr, bytes, pool, stream, STREAM_PER_THREAD);
}

static CUresult priv_mem_free_async(CUdeviceptr dptr, CUstream stream)
{
	return impl_mem_free_async(dptr, stream, STREAM_LEGACY);
}

static CUresult priv_mem_free_async_ptsz(CUdeviceptr dptr, CUstream stream)
{
	return impl_mem_free_async(dptr, stream, STREAM_PER_THREAD);
}

static CUresult priv_array3d_create(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	return impl_array3d_create(out, d, 1, false);
}

static CUresult priv_array_destroy(CUarray a)
{
	return impl_array_destroy((uintptr_t)a, false);
}

static CUresult priv_mipmapped_destroy(CUmipmappedArray a)
{
	return impl_array_destroy((uintptr_t)a, true);
}

static CUresult priv_ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
	(void)flags;
	return impl_ipc_open(pdptr, &handle);
}

static const struct gm_mock_driver_api private_table = {
	.init = impl_init,
	.mem_alloc = impl_mem_alloc,
	.mem_alloc_pitch = impl_mem_alloc_pitch,
	.mem_alloc_managed = impl_mem_alloc_managed,
	.mem_alloc_host = priv_mem_alloc_host,
	.mem_host_alloc = impl_mem_alloc_host,
	.mem_alloc_async = priv_mem_alloc_async,
	.mem_alloc_async_ptsz = priv_mem_alloc_async_ptsz,
	.mem_alloc_from_pool_async = priv_mem_alloc_from_pool,
	.mem_alloc_from_pool_async_ptsz = priv_mem_alloc_from_pool_ptsz,
	.mem_free = impl_mem_free,
	.mem_free_host = impl_mem_free_host,
	.mem_free_async = priv_mem_free_async,
	.mem_free_async_ptsz = priv_mem_free_async_ptsz,
	.array_create = impl_array_create,
	.array3d_create = priv_array3d_create,
	.mipmapped_array_create = impl_mipmapped_create,
	.array_destroy = priv_array_destroy,
	.mipmapped_array_destroy = priv_mipmapped_destroy,
	.mem_host_register = impl_host_register,
	.mem_host_unregister = impl_host_unregister,
	.ipc_get_mem_handle = impl_ipc_get,
	.ipc_open_mem_handle = priv_ipc_open,
	.ipc_close_mem_handle = impl_ipc_close,
	.primary_ctx_retain = impl_primary_retain,
	.ctx_set_current = impl_ctx_set_current,
	.primary_ctx_reset = impl_primary_reset,
};

/* Exported API. Each begins with push %rbp like NVIDIA's (checked by check_prologues.sh). */
#define GM_EXPORT __attribute__((noinline, visibility("default")))

GM_EXPORT CUresult cuInit(unsigned int Flags)
{
	gm_keep_frame();
	return impl_init(Flags);
}

GM_EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
	gm_keep_frame();
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = GM_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

static const char *error_text(CUresult error, bool name)
{
	switch ((int)error) {
	case 0:
		return name ? "CUDA_SUCCESS" : "no error";
	case 1:
		return name ? "CUDA_ERROR_INVALID_VALUE" : "invalid argument";
	case 2:
		return name ? "CUDA_ERROR_OUT_OF_MEMORY" : "out of memory";
	case 3:
		return name ? "CUDA_ERROR_NOT_INITIALIZED" : "initialization error";
	case 101:
		return name ? "CUDA_ERROR_INVALID_DEVICE" : "invalid device ordinal";
	case 201:
		return name ? "CUDA_ERROR_INVALID_CONTEXT" : "invalid device context";
	case 712:
		return name ? "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"
			    : "part or all of the requested memory range is already mapped";
	case 713:
		return name ? "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"
			    : "pointer does not correspond to a registered memory region";
	case 801:
		return name ? "CUDA_ERROR_NOT_SUPPORTED" : "operation not supported";
	default:
		return NULL;
	}
}

GM_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	gm_keep_frame();
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = error_text(error, true);
	return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

GM_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	gm_keep_frame();
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = error_text(error, false);
	return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

GM_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	gm_keep_frame();
	if (!free || !total)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_once(&config_once, read_config);
	pthread_mutex_lock(&mock_lock);
	*total = config.capacity;
	*free = gpu_bytes_in_use < config.capacity ? config.capacity - gpu_bytes_in_use : 0;
	pthread_mutex_unlock(&mock_lock);
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	gm_keep_frame();
	gm_say_return_probe("cuMemAlloc_v2", __builtin_return_address(0));
	return impl_mem_alloc(dptr, bytesize);
}

GM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
				      size_t Height, unsigned int ElementSizeBytes)
{
	gm_keep_frame();
	return impl_mem_alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
}

GM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	gm_keep_frame();
	return impl_mem_alloc_managed(dptr, bytesize, flags);
}

GM_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	gm_keep_frame();
	return impl_mem_alloc_host(pp, bytesize, 0);
}

GM_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	gm_keep_frame();
	return impl_mem_alloc_host(pp, bytesize, Flags);
}

GM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	gm_keep_frame();
	return impl_mem_alloc_async(dptr, bytesize, NULL, hStream, STREAM_LEGACY);
}

GM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	gm_keep_frame();
	return impl_mem_alloc_async(dptr, bytesize, NULL, hStream, STREAM_PER_THREAD);
}

GM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
					   CUstream hStream)
{
	gm_keep_frame();
	return impl_mem_alloc_async(dptr, bytesize, pool, hStream, STREAM_LEGACY);
}

GM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
						CUmemoryPool pool, CUstream hStream)
{
	gm_keep_frame();
	return impl_mem_alloc_async(dptr, bytesize, pool, hStream, STREAM_PER_THREAD);
}

GM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	gm_keep_frame();
	return impl_mem_free(dptr);
}

GM_EXPORT CUresult cuMemFreeHost(void *p)
{
	gm_keep_frame();
	return impl_mem_free_host(p);
}

GM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	gm_keep_frame();
	return impl_mem_free_async(dptr, hStream, STREAM_LEGACY);
}

GM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	gm_keep_frame();
	return impl_mem_free_async(dptr, hStream, STREAM_PER_THREAD);
}

GM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			       const CUmemAllocationProp *prop, unsigned long long flags)
{
	gm_keep_frame();
	return impl_mem_create(handle, size, prop, flags);
}

GM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	gm_keep_frame();
	return impl_mem_release(handle);
}

GM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				       CUdeviceptr addr, unsigned long long flags)
{
	gm_keep_frame();
	(void)alignment;
	(void)addr;
	(void)flags;
	return impl_address_reserve(ptr, size);
}

GM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	gm_keep_frame();
	return impl_address_free(ptr, size);
}

GM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			    CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	gm_keep_frame();
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	return impl_mem_map(ptr, size, offset, handle);
}

GM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	gm_keep_frame();
	return impl_mem_unmap(ptr, size);
}

GM_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	gm_keep_frame();
	return impl_host_register(p, bytesize, Flags);
}

GM_EXPORT CUresult cuMemHostUnregister(void *p)
{
	gm_keep_frame();
	return impl_host_unregister(p);
}

GM_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
	gm_keep_frame();
	return impl_array_create(pHandle, pAllocateArray);
}

GM_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle,
				      const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
	gm_keep_frame();
	return impl_array3d_create(pHandle, pAllocateArray, 1, false);
}

GM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
					  const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
					  unsigned int numMipmapLevels)
{
	gm_keep_frame();
	return impl_mipmapped_create(pHandle, pMipmappedArrayDesc, numMipmapLevels);
}

GM_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
	gm_keep_frame();
	return impl_array_destroy((uintptr_t)hArray, false);
}

GM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
	gm_keep_frame();
	return impl_array_destroy((uintptr_t)hMipmappedArray, true);
}

/* Device, context, copies and IPC: what a ctypes binding such as numba's asks for at start. */
GM_EXPORT CUresult cuDeviceGetCount(int *count)
{
	gm_keep_frame();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_once(&config_once, read_config);
	*count = (int)config.devices;
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	gm_keep_frame();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	gm_keep_frame();
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*pi = device_attribute(attrib);
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	gm_keep_frame();
	if (!major || !minor)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*major = GM_CC_MAJOR;
	*minor = GM_CC_MINOR;
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	gm_keep_frame();
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	strncpy(name, GM_DEVICE_NAME, (size_t)len - 1);
	name[len - 1] = '\0';
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	gm_keep_frame();
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	memcpy(uuid->bytes, "gpumem-mock-gpu0", sizeof(uuid->bytes));
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	gm_keep_frame();
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_once(&config_once, read_config);
	*bytes = config.capacity;
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	gm_keep_frame();
	return impl_primary_retain(pctx, dev);
}

GM_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	gm_keep_frame();
	(void)flags;
	return impl_ctx_create(pctx, dev);
}

/* CUDA 11.4's, with execution-affinity parameters (none here): what cuGetProcAddress hands
 * out for "cuCtxCreate" from 11.4 on. */
GM_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
				  int numParams, unsigned int flags, CUdevice dev)
{
	gm_keep_frame();
	(void)flags;
	if (paramsArray || numParams)
		return CUDA_ERROR_NOT_SUPPORTED;
	return impl_ctx_create(pctx, dev);
}

GM_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
				  unsigned int flags, CUdevice dev)
{
	gm_keep_frame();
	(void)flags;
	if (ctxCreateParams)
		return CUDA_ERROR_NOT_SUPPORTED;
	return impl_ctx_create(pctx, dev);
}

/* Frees what ctx holds; popped from this thread's stack where it is the top. */
GM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	gm_keep_frame();
	if (!ctx || !ctx_live(ctx) || ctx->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&mock_lock);
	ctx->live = false;
	pthread_mutex_unlock(&mock_lock);
	release_context(ctx);
	if (ctx_depth && ctx_stack[ctx_depth - 1] == ctx)
		ctx_depth--;
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	gm_keep_frame();
	return valid_device(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

GM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	gm_keep_frame();
	return impl_primary_reset(dev);
}

GM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	gm_keep_frame();
	if (!ctx || !ctx_live(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (ctx_depth == GM_CTX_STACK_DEPTH)
		return CUDA_ERROR_INVALID_VALUE;
	ctx_stack[ctx_depth++] = ctx;
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	gm_keep_frame();
	if (!ctx_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx_depth--;
	if (pctx)
		*pctx = ctx_stack[ctx_depth];
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	gm_keep_frame();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	gm_keep_frame();
	return impl_ctx_set_current(ctx);
}

GM_EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
	gm_keep_frame();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	*device = ctx_stack[ctx_depth - 1]->device;
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuCtxSynchronize(void)
{
	gm_keep_frame();
	return ctx_depth ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

GM_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
	gm_keep_frame();
	(void)hStream;
	return CUDA_SUCCESS;
}

GM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	gm_keep_frame();
	return mock_copy(COPY_TO_DEVICE, dstDevice, (uintptr_t)srcHost, ByteCount);
}

GM_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	gm_keep_frame();
	return mock_copy(COPY_TO_HOST, (uintptr_t)dstHost, srcDevice, ByteCount);
}

GM_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	gm_keep_frame();
	return mock_copy(COPY_ON_DEVICE, dstDevice, srcDevice, ByteCount);
}

/* Streams are synchronous here: an async copy is done when it returns. */
GM_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
					size_t ByteCount, CUstream hStream)
{
	gm_keep_frame();
	(void)hStream;
	return mock_copy(COPY_TO_DEVICE, dstDevice, (uintptr_t)srcHost, ByteCount);
}

GM_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
					CUstream hStream)
{
	gm_keep_frame();
	(void)hStream;
	return mock_copy(COPY_TO_HOST, (uintptr_t)dstHost, srcDevice, ByteCount);
}

GM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	gm_keep_frame();
	return mock_memset(dstDevice, uc, N);
}

GM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	struct block *b;

	gm_keep_frame();
	pthread_mutex_lock(&mock_lock);
	b = device_block_holding(dptr, 1);
	if (b) {
		if (pbase)
			*pbase = b->key;
		if (psize)
			*psize = b->bytes;
	}
	pthread_mutex_unlock(&mock_lock);
	return b ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

GM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	gm_keep_frame();
	return impl_ipc_get(pHandle, dptr);
}

GM_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
					 unsigned int Flags)
{
	gm_keep_frame();
	(void)Flags;
	return impl_ipc_open(pdptr, &handle);
}

GM_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	gm_keep_frame();
	return impl_ipc_close(dptr);
}

GM_EXPORT const struct gm_mock_driver_api *cuMockGetPrivateTable(void)
{
	gm_keep_frame();
	return &private_table;
}
