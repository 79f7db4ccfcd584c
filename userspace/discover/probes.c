// SPDX-License-Identifier: GPL-2.0
/* The probe table (docs/numbers.md, "What is probed"), and attaching its entry/return programs to one file. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "elf_syms.h"
#include "pin.h"
#include "probe_place.h"
#include "probes.h"
#include "uprobe_multi.h"
#include "util.h"

#define RT GM_LAYER_RUNTIME
#define DRV GM_LAYER_DRIVER

const struct probe_def probe_table[] = {
	{ "cudaMalloc", RT, GM_SHAPE_ALLOC, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cudaMallocPitch", RT, GM_SHAPE_ALLOC_PITCH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cudaMallocManaged", RT, GM_SHAPE_ALLOC, GM_KIND_MANAGED, GM_SPACE_ADDR },
	{ "cudaMallocHost", RT, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cudaHostAlloc", RT, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cudaMallocAsync", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaMallocAsync_ptsz", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaMallocFromPoolAsync", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaMallocFromPoolAsync_ptsz", RT, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaFree", RT, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cudaFreeHost", RT, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cudaFreeAsync", RT, GM_SHAPE_FREE, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cudaFreeAsync_ptsz", RT, GM_SHAPE_FREE, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAlloc_v2", DRV, GM_SHAPE_ALLOC, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuMemAllocPitch_v2", DRV, GM_SHAPE_ALLOC_PITCH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuMemAllocManaged", DRV, GM_SHAPE_ALLOC, GM_KIND_MANAGED, GM_SPACE_ADDR },
	{ "cuMemAllocHost_v2", DRV, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cuMemHostAlloc", DRV, GM_SHAPE_ALLOC, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cuMemAllocAsync", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAllocAsync_ptsz", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAllocFromPoolAsync", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemAllocFromPoolAsync_ptsz", DRV, GM_SHAPE_ALLOC, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemFree_v2", DRV, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuMemFreeHost", DRV, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_ADDR },
	{ "cuMemFreeAsync", DRV, GM_SHAPE_FREE, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemFreeAsync_ptsz", DRV, GM_SHAPE_FREE, GM_KIND_ASYNC, GM_SPACE_ADDR },
	{ "cuMemCreate", DRV, GM_SHAPE_VMM_CREATE, GM_KIND_VMM, GM_SPACE_VMM_HANDLE },
	{ "cuMemRelease", DRV, GM_SHAPE_VMM_RELEASE, GM_KIND_VMM, GM_SPACE_VMM_HANDLE },
	/* Not a symbol: the USDT probes of PyTorch's caching allocator (its tensors' sites). */
	{ "pytorch:malloc", GM_LAYER_TENSOR, GM_SHAPE_TENSOR, GM_KIND_DEVICE, GM_SPACE_ADDR },
	/* Arrays: device memory, keyed by handle in a space of their own. */
	{ "cudaMallocArray", RT, GM_SHAPE_ARRAY_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaMalloc3DArray", RT, GM_SHAPE_ARRAY3D_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaMallocMipmappedArray", RT, GM_SHAPE_MIPMAP_RT, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaFreeArray", RT, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaFreeMipmappedArray", RT, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cudaMalloc3D", RT, GM_SHAPE_MALLOC3D, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuArrayCreate_v2", DRV, GM_SHAPE_ARRAY_DRV, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuArray3DCreate_v2", DRV, GM_SHAPE_ARRAY3D_DRV, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuMipmappedArrayCreate", DRV, GM_SHAPE_MIPMAP_DRV, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuArrayDestroy", DRV, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	{ "cuMipmappedArrayDestroy", DRV, GM_SHAPE_FREE, GM_KIND_DEVICE, GM_SPACE_ARRAY },
	/* Host memory the caller allocated, page-locked: host kind, by the range's start. */
	{ "cudaHostRegister", RT, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cudaHostUnregister", RT, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cuMemHostRegister_v2", DRV, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cuMemHostRegister", DRV, GM_SHAPE_REGISTER, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	{ "cuMemHostUnregister", DRV, GM_SHAPE_FREE, GM_KIND_HOST, GM_SPACE_HOST_REGISTERED },
	/* VMM: mappings of memory counted at cuMemCreate, and reserved address space. */
	{ "cuMemMap", DRV, GM_SHAPE_REGISTER, GM_KIND_VMM_MAPPED, GM_SPACE_VMM_MAP },
	{ "cuMemUnmap", DRV, GM_SHAPE_FREE, GM_KIND_VMM_MAPPED, GM_SPACE_VMM_MAP },
	{ "cuMemAddressReserve", DRV, GM_SHAPE_ALLOC, GM_KIND_VMM_RESERVED, GM_SPACE_VMM_RESERVE },
	{ "cuMemAddressFree", DRV, GM_SHAPE_FREE, GM_KIND_VMM_RESERVED, GM_SPACE_VMM_RESERVE },
	/* IPC: another process's memory, opened here. */
	{ "cudaIpcOpenMemHandle", RT, GM_SHAPE_IMPORT, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "cudaIpcCloseMemHandle", RT, GM_SHAPE_FREE, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "cuIpcOpenMemHandle_v2", DRV, GM_SHAPE_IMPORT, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	{ "cuIpcCloseMemHandle", DRV, GM_SHAPE_FREE, GM_KIND_IPC_IMPORTED, GM_SPACE_IPC },
	/* The thread's current context, and the device of each context (no allocation). */
	{ "cudaSetDevice", RT, GM_SHAPE_SET_DEVICE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxSetCurrent", DRV, GM_SHAPE_CTX_SET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxPushCurrent_v2", DRV, GM_SHAPE_CTX_PUSH, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxPopCurrent_v2", DRV, GM_SHAPE_CTX_POP, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxCreate_v2", DRV, GM_SHAPE_CTX_CREATE, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxCreate_v3", DRV, GM_SHAPE_CTX_CREATE_V3, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxCreate_v4", DRV, GM_SHAPE_CTX_CREATE_V4, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuDevicePrimaryCtxRetain", DRV, GM_SHAPE_CTX_RETAIN, GM_KIND_DEVICE, GM_SPACE_ADDR },
	/* Teardown: what the context held is released. */
	{ "cudaDeviceReset", RT, GM_SHAPE_DEVICE_RESET, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuCtxDestroy_v2", DRV, GM_SHAPE_CTX_DESTROY, GM_KIND_DEVICE, GM_SPACE_ADDR },
	{ "cuDevicePrimaryCtxReset_v2", DRV, GM_SHAPE_PRIMARY_RESET, GM_KIND_DEVICE, GM_SPACE_ADDR },
};
const unsigned int probe_count = ARRAY_SIZE(probe_table);

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

bool is_cuda_module(const char *path)
{
	return path && strncmp(base_name(path), "libcuda", 7) == 0;
}

bool is_tensor_library_path(const char *path)
{
	return path && fnmatch("libc10_cuda.so*", base_name(path), 0) == 0;
}

bool probe_is_tensor(unsigned int api)
{
	return api < probe_count && probe_table[api].layer == GM_LAYER_TENSOR;
}

bool is_cuda_library_path(const char *path)
{
	const char *base;

	if (!is_cuda_module(path))
		return false;
	base = base_name(path);
	return fnmatch("libcuda.so*", base, 0) == 0 || fnmatch("libcudart.so*", base, 0) == 0;
}

const char *probe_api_name(unsigned int api)
{
	return api < probe_count ? probe_table[api].symbol : "unknown";
}

const char *probe_layer_name(unsigned int layer)
{
	if (layer == GM_LAYER_TENSOR)
		return "pytorch";
	return layer == GM_LAYER_DRIVER ? "driver" : "runtime";
}

const char *kind_name(unsigned int kind)
{
	static const char *const names[GM_KIND_COUNT] = {
		[GM_KIND_DEVICE] = "device", [GM_KIND_MANAGED] = "managed",
		[GM_KIND_HOST] = "host",     [GM_KIND_ASYNC] = "async",
		[GM_KIND_VMM] = "vmm",       [GM_KIND_VMM_MAPPED] = "vmm_mapped",
		[GM_KIND_VMM_RESERVED] = "vmm_reserved",
		[GM_KIND_IPC_IMPORTED] = "ipc_imported",
	};

	return kind < GM_KIND_COUNT ? names[kind] : "unknown";
}

uint64_t probe_cookie(unsigned int api)
{
	const struct probe_def *p = &probe_table[api];

	return GM_COOKIE_IN(api, p->kind, p->layer, p->shape, p->space);
}

int probe_find(const char *symbol)
{
	for (unsigned int i = 0; i < probe_count; i++)
		if (strcmp(probe_table[i].symbol, symbol) == 0)
			return (int)i;
	return -1;
}

const char *cuda_error_name(unsigned int layer, int error)
{
	static const struct {
		int code;
		const char *runtime, *driver;
	} names[] = {
		{ 0, "cudaSuccess", "CUDA_SUCCESS" },
		{ 1, "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE" },
		{ 2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY" },
		{ 3, "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED" },
		{ 4, "cudaErrorCudartUnloading", "CUDA_ERROR_DEINITIALIZED" },
		{ 34, "cudaErrorStubLibrary", "CUDA_ERROR_STUB_LIBRARY" },
		{ 35, "cudaErrorInsufficientDriver", NULL },
		{ 36, "cudaErrorCallRequiresNewerDriver", NULL },
		{ 46, "cudaErrorDevicesUnavailable", "CUDA_ERROR_DEVICE_UNAVAILABLE" },
		{ 100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE" },
		{ 101, "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE" },
		{ 200, "cudaErrorInvalidKernelImage", "CUDA_ERROR_INVALID_IMAGE" },
		{ 201, "cudaErrorDeviceUninitialized", "CUDA_ERROR_INVALID_CONTEXT" },
		{ 222, "cudaErrorUnsupportedPtxVersion", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" },
		{ 304, "cudaErrorOperatingSystem", "CUDA_ERROR_OPERATING_SYSTEM" },
		{ 400, "cudaErrorInvalidResourceHandle", "CUDA_ERROR_INVALID_HANDLE" },
		{ 700, "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS" },
		{ 712, "cudaErrorHostMemoryAlreadyRegistered",
		  "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED" },
		{ 713, "cudaErrorHostMemoryNotRegistered", "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED" },
		{ 801, "cudaErrorNotSupported", "CUDA_ERROR_NOT_SUPPORTED" },
		{ 802, "cudaErrorSystemNotReady", "CUDA_ERROR_SYSTEM_NOT_READY" },
		{ 803, "cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" },
		{ 804, "cudaErrorCompatNotSupportedOnDevice",
		  "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" },
		{ 999, "cudaErrorUnknown", "CUDA_ERROR_UNKNOWN" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (names[i].code != error)
			continue;
		if (layer == GM_LAYER_DRIVER)
			return names[i].driver ? names[i].driver : "CUDA_ERROR_UNKNOWN";
		return names[i].runtime;
	}
	return layer == GM_LAYER_DRIVER ? "CUDA_ERROR_UNKNOWN" : "cudaErrorUnknown";
}

struct attached_file {
	char *path;
	struct bpf_link **links;	/* perf-event uprobes, one per probe */
	unsigned int nlinks;
	int multi_fds[PIN_FILE_PROGS];	/* uprobe_multi links: one per program */
	struct bpf_link *tensor_links[2];	/* USDT pytorch:malloc, pytorch:free */
	unsigned int ntensor_links;
	unsigned int nmulti;
	unsigned int new_pins;		/* the agent's: programs whose link this attempt pinned */
	unsigned int nprobes;
	unsigned int nmoved;		/* probes placed past a flag-setting entry instruction */
	uint64_t offsets[ARRAY_SIZE(probe_table)];	/* where each probe goes; 0: symbol absent */
	uint64_t sizes[ARRAY_SIZE(probe_table)];	/* the symbol's size, 0 if unknown */
};

static bool offset_taken(const struct attached_file *f, unsigned int api)
{
	for (unsigned int i = 0; i < api; i++)
		if (f->offsets[i] == f->offsets[api])
			return true;
	return false;
}

static int collect_symbol(const char *name, uint64_t vaddr, uint64_t size, uint64_t file_off,
			  void *ctx)
{
	struct attached_file *f = ctx;
	int api = probe_find(name);

	(void)vaddr;
	if (api >= 0 && probe_is_tensor((unsigned int)api))
		return 0;	/* a USDT probe's name, never a function's */
	if (api >= 0 && !f->offsets[api]) {
		f->offsets[api] = file_off;
		f->sizes[api] = size;
	}
	return 0;
}

/* Moves each probe past a flag-setting entry instruction where probe_place.c finds one: the
 * kernel then emulates the instruction it traps on instead of single-stepping one out of line.
 * Anything unreadable or unknown keeps the symbol. */
static void place_probes(struct attached_file *f)
{
	uint64_t symbol[ARRAY_SIZE(probe_table)], placed[ARRAY_SIZE(probe_table)];
	struct probe_place where[ARRAY_SIZE(probe_table)];
	int fd;

	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!probe_place_file_ok(fd)) {
		close(fd);
		return;
	}
	for (unsigned int api = 0; api < probe_count; api++) {
		memset(&where[api], 0, sizeof(where[api]));
		symbol[api] = placed[api] = f->offsets[api];
		if (!f->offsets[api] || probe_is_tensor(api))
			continue;
		probe_place_read(fd, f->offsets[api], f->sizes[api], &where[api]);
		placed[api] += where[api].offset;
	}
	close(fd);
	probe_place_unshare(symbol, placed, where, probe_count);
	for (unsigned int api = 0; api < probe_count; api++) {
		if (!where[api].offset)
			continue;
		f->offsets[api] = placed[api];
		if (!offset_taken(f, api))
			f->nmoved++;
		p_debug("%s: probe at +%u (after %s, on %s) in %s", probe_table[api].symbol,
			where[api].offset, where[api].skipped, where[api].landing, f->path);
	}
}

static struct bpf_program *entry_program(const struct probe_programs *pp, enum gm_shape shape)
{
	switch (shape) {
	case GM_SHAPE_ALLOC:
	case GM_SHAPE_REGISTER:
	case GM_SHAPE_IMPORT:
		return pp->enter_alloc;
	case GM_SHAPE_VMM_CREATE:	/* its properties' device is read at entry */
	case GM_SHAPE_ARRAY_RT:
	case GM_SHAPE_ARRAY3D_RT:
	case GM_SHAPE_MIPMAP_RT:
	case GM_SHAPE_ARRAY_DRV:
	case GM_SHAPE_ARRAY3D_DRV:
	case GM_SHAPE_MIPMAP_DRV:
	case GM_SHAPE_MALLOC3D:
		return pp->enter_array;
	case GM_SHAPE_ALLOC_PITCH:
		return pp->enter_alloc_pitch;
	case GM_SHAPE_FREE:
	case GM_SHAPE_VMM_RELEASE:
	case GM_SHAPE_CTX_DESTROY:
	case GM_SHAPE_PRIMARY_RESET:
	case GM_SHAPE_DEVICE_RESET:
		return pp->enter_free;
	case GM_SHAPE_CTX_SET:
	case GM_SHAPE_CTX_PUSH:
	case GM_SHAPE_CTX_POP:
	case GM_SHAPE_SET_DEVICE:
	case GM_SHAPE_CTX_CREATE:
	case GM_SHAPE_CTX_CREATE_V3:
	case GM_SHAPE_CTX_CREATE_V4:
	case GM_SHAPE_CTX_RETAIN:
		return pp->enter_ctx;
	case GM_SHAPE_TENSOR:
		return NULL;	/* USDT: attach_tensor_probes() */
	case GM_SHAPE_COUNT:
		break;
	}
	return NULL;
}

/* Frees are accounted at their entry (bpf/gpumem.bpf.c, free_enter): no return probe. */
static bool has_return_probe(enum gm_shape shape)
{
	return shape != GM_SHAPE_FREE && shape != GM_SHAPE_VMM_RELEASE;
}

static int attach_one(const struct probe_programs *pp, struct attached_file *f, unsigned int api)
{
	const struct probe_def *p = &probe_table[api];
	LIBBPF_OPTS(bpf_uprobe_opts, opts);
	struct bpf_link *entry, *ret;
	int err;

	opts.bpf_cookie = probe_cookie(api);
	entry = bpf_program__attach_uprobe_opts(entry_program(pp, p->shape), -1, f->path,
						f->offsets[api], &opts);
	if (!entry)
		return -errno;
	f->links[f->nlinks++] = entry;
	if (!has_return_probe(p->shape))
		return 0;
	opts.retprobe = true;
	ret = bpf_program__attach_uprobe_opts(pp->call_return, -1, f->path,
					      f->offsets[api], &opts);
	if (!ret) {
		err = -errno;
		bpf_link__destroy(entry);
		f->nlinks--;
		return err;
	}
	f->links[f->nlinks++] = ret;
	return 0;
}

/* The agent's link for program i of a file: the one an earlier agent pinned, else a new one,
 * pinned (and remembered in new_pins, so that an attempt that fails takes its pins back:
 * a link left pinned alone, an entry probe without its return, would count wrong). */
static int pinned_link(const struct probe_programs *pp, struct attached_file *f, unsigned int i,
		       const __u64 *offsets, const __u64 *cookies, unsigned int cnt, bool ret)
{
	struct bpf_program *progs[] = { pp->enter_alloc, pp->enter_alloc_pitch, pp->enter_free,
					pp->call_return, pp->enter_array, pp->enter_ctx };
	char name[PATH_MAX];
	int fd, err;

	if (pin_file_link_name(name, sizeof(name), pp->pin_dir, pp->pin_kdev, pp->pin_ino, i))
		return -ENAMETOOLONG;
	fd = pp->adopt ? bpf_obj_get(name) : -1;
	if (fd >= 0)
		return fd;
	fd = uprobe_multi_link(progs[i], f->path, offsets, cookies, cnt, ret);
	if (fd < 0)
		return fd;
	err = pin_fd(fd, name);
	if (err) {
		close(fd);
		return err;
	}
	f->new_pins |= 1u << i;
	return fd;
}

static void unpin_new(const struct probe_programs *pp, const struct attached_file *f)
{
	char name[PATH_MAX];

	for (unsigned int i = 0; i < PIN_FILE_PROGS; i++)
		if ((f->new_pins & (1u << i)) &&
		    !pin_file_link_name(name, sizeof(name), pp->pin_dir, pp->pin_kdev, pp->pin_ino, i))
			unlink(name);
}

/* One link for each entry program with the probes of its shapes, one for every return. */
static int attach_multi(const struct probe_programs *pp, struct attached_file *f)
{
	struct bpf_program *progs[] = { pp->enter_alloc, pp->enter_alloc_pitch, pp->enter_free,
					pp->call_return, pp->enter_array, pp->enter_ctx };
	__u64 offsets[ARRAY_SIZE(probe_table)], cookies[ARRAY_SIZE(probe_table)];

	for (unsigned int i = 0; i < ARRAY_SIZE(progs); i++) {
		bool ret = progs[i] == pp->call_return;
		unsigned int cnt = 0;
		int fd;

		for (unsigned int api = 0; api < probe_count; api++) {
			const struct probe_def *p = &probe_table[api];

			if (!f->offsets[api] || offset_taken(f, api))
				continue;
			if (ret ? !has_return_probe(p->shape) : entry_program(pp, p->shape) != progs[i])
				continue;
			if (ret && pp->session && entry_program(pp, p->shape) == pp->enter_alloc)
				continue;	/* its session's return */
			offsets[cnt] = f->offsets[api];
			cookies[cnt++] = probe_cookie(api);
		}
		if (!cnt)
			continue;
		fd = pp->pin_dir ? pinned_link(pp, f, i, offsets, cookies, cnt, ret)
				 : uprobe_multi_link(progs[i], f->path, offsets, cookies, cnt, ret);
		if (fd < 0)
			return fd;
		f->multi_fds[f->nmulti++] = fd;
		f->nprobes += cnt;
	}
	return 0;
}

static int attach_each(const struct probe_programs *pp, struct attached_file *f)
{
	f->links = xcalloc(2 * probe_count, sizeof(*f->links));
	for (unsigned int api = 0; api < probe_count; api++) {
		int err;

		if (!f->offsets[api] || offset_taken(f, api))
			continue;
		err = attach_one(pp, f, api);
		if (err) {
			p_err("cannot attach to %s:%s: %s", f->path, probe_table[api].symbol,
			      strerror(-err));
			return err;
		}
	}
	f->nprobes = f->nlinks;
	return 0;
}

/* PyTorch's caching allocator: libbpf's USDT support attaches both probes (one uprobe per
 * call site, whose reference counter is the probe's semaphore: the kernel sets it in every
 * process that maps the file while the probe is attached). Not pinned: an agent's tensor
 * probes last as long as it runs. */
static int attach_tensor_probes(const struct probe_programs *pp, struct attached_file *f)
{
	static const char *const names[2] = { "malloc", "free" };
	struct bpf_program *progs[2] = { pp->tensor_malloc, pp->tensor_free };
	int api = probe_find("pytorch:malloc");
	const struct probe_def *p = &probe_table[api];
	LIBBPF_OPTS(bpf_usdt_opts, opts);

	if (!pp->tensor_malloc || !pp->tensor_free || !elf_has_usdt(f->path, "pytorch", "malloc"))
		return 0;
	opts.usdt_cookie = GM_COOKIE(api, p->kind, p->layer, p->shape);
	for (unsigned int i = 0; i < 2; i++) {
		struct bpf_link *link = bpf_program__attach_usdt(progs[i], -1, f->path, "pytorch",
								 names[i], &opts);

		if (!link) {
			int err = -errno;

			p_err("cannot attach to %s:pytorch:%s: %s", f->path, names[i],
			      strerror(-err));
			return err;
		}
		f->tensor_links[f->ntensor_links++] = link;
		f->nprobes++;
	}
	return 0;
}

int attach_file(const struct probe_programs *pp, const char *path, struct attached_file **out)
{
	struct attached_file *f = xcalloc(1, sizeof(*f));
	int err;

	*out = NULL;
	f->path = xstrdup(path);
	err = elf_for_each_func(path, collect_symbol, f);
	if (err)
		goto out_free;
	place_probes(f);
	if (pp->pin_dir && !pp->multi) {
		p_err("the agent pins its probes as uprobe_multi links, which this kernel lacks "
		      "(Linux 6.6 or later)");
		err = -EOPNOTSUPP;
		goto out_free;
	}
	err = pp->multi ? attach_multi(pp, f) : attach_each(pp, f);
	if (!err)
		err = attach_tensor_probes(pp, f);
	if (err) {
		if (pp->multi)	/* the caller says what it does about it */
			p_debug("cannot attach to %s: %s", path, strerror(-err));
		goto out_detach;
	}
	if (!f->nprobes)
		goto out_detach;	/* no CUDA allocation API here: not an error */
	p_debug("attached %u probes to %s (%u functions probed past a flag-setting entry "
		"instruction)", f->nprobes, path, f->nmoved);
	*out = f;
	return 0;

out_detach:
	unpin_new(pp, f);
	detach_file(f);
	return err;
out_free:
	free(f->path);
	free(f);
	return err;
}

void detach_file(struct attached_file *f)
{
	if (!f)
		return;
	for (unsigned int i = 0; i < f->nlinks; i++)
		bpf_link__destroy(f->links[i]);
	for (unsigned int i = 0; i < f->nmulti; i++)
		close(f->multi_fds[i]);
	for (unsigned int i = 0; i < f->ntensor_links; i++)
		bpf_link__destroy(f->tensor_links[i]);
	free(f->links);
	free(f->path);
	free(f);
}

unsigned int attached_probe_count(const struct attached_file *f)
{
	return f->nprobes;
}

const char *attached_path(const struct attached_file *f)
{
	return f->path;
}

bool attached_has_api(const struct attached_file *f, unsigned int api)
{
	if (api >= probe_count)
		return false;
	if (probe_is_tensor(api))
		return f->ntensor_links > 0;
	return f->offsets[api] != 0;
}
