// Shared by the tests/gpu programs: each keeps its own account of what it allocated, freed and
// still holds, by kind, in the terms gpumem reports (GPU-side kinds count toward current and
// peak; pinned host memory is kept apart), and prints it as one JSON line on stdout that
// tests/gpu/compare.py reads:
//   {"gpumem_expect":NAME, "pid":N, "current_bytes":N, ..., "sites":{"func":bytes_kept}, ...}
// Sites are named by the function that made the call; every such function is extern "C" and
// noinline so its symbol is plain and appears as the first frame of the call's stack.
#pragma once

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

enum gx_kind { GX_DEVICE, GX_MANAGED, GX_HOST, GX_ASYNC, GX_VMM, GX_NKINDS };
static const char *const gx_kind_names[GX_NKINDS] = { "device", "managed", "host", "async", "vmm" };

struct gx_site {
	const char *func;
	long long kept;
};

static struct {
	long long current, peak, by_kind[GX_NKINDS];
	long long current_allocs, alloc_count, free_count, failed_count, alloc_bytes_total;
	gx_site sites[32];
	int nsites;
	int errors; // unexpected CUDA errors: the expectation is then void
	std::string extra;
} gx;

static inline gx_site *gx_site_of(const char *func)
{
	for (int i = 0; i < gx.nsites; i++)
		if (!strcmp(gx.sites[i].func, func))
			return &gx.sites[i];
	if (gx.nsites == 32)
		return nullptr;
	gx.sites[gx.nsites] = { func, 0 };
	return &gx.sites[gx.nsites++];
}

static inline bool gx_gpu_kind(int kind)
{
	return kind != GX_HOST;
}

static inline void gx_alloc(const char *func, int kind, long long size)
{
	gx_site *s = gx_site_of(func);

	gx.alloc_count++;
	gx.alloc_bytes_total += size;
	gx.by_kind[kind] += size;
	if (s)
		s->kept += size;
	if (gx_gpu_kind(kind)) {
		gx.current += size;
		gx.current_allocs++;
		if (gx.current > gx.peak)
			gx.peak = gx.current;
	}
}

static inline void gx_free(const char *func, int kind, long long size)
{
	gx_site *s = gx_site_of(func);

	gx.free_count++;
	gx.by_kind[kind] -= size;
	if (s)
		s->kept -= size;
	if (gx_gpu_kind(kind)) {
		gx.current -= size;
		gx.current_allocs--;
	}
}

static inline void gx_failed(void)
{
	gx.failed_count++;
}

// Extra "key":value pairs for the JSON line (value already JSON).
static inline void gx_extra(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	gx.extra += ",";
	gx.extra += buf;
}

static inline void gx_error(const char *what, int rc, const char *name)
{
	gx.errors++;
	fprintf(stderr, "%s failed: %d %s\n", what, rc, name ? name : "");
	printf("{\"error\":\"%s\",\"rc\":%d,\"name\":\"%s\"}\n", what, rc, name ? name : "");
	fflush(stdout);
}

static inline void gx_print(const char *name)
{
	printf("{\"gpumem_expect\":\"%s\",\"pid\":%d,\"current_bytes\":%lld,\"current_allocs\":%lld,"
	       "\"peak_bytes\":%lld,\"alloc_count\":%lld,\"free_count\":%lld,"
	       "\"alloc_bytes_total\":%lld,\"failed_count\":%lld,\"by_kind\":{",
	       name, (int)getpid(), gx.current, gx.current_allocs, gx.peak, gx.alloc_count,
	       gx.free_count, gx.alloc_bytes_total, gx.failed_count);
	for (int k = 0; k < GX_NKINDS; k++)
		printf("%s\"%s\":%lld", k ? "," : "", gx_kind_names[k], gx.by_kind[k]);
	printf("},\"sites\":{");
	for (int i = 0; i < gx.nsites; i++)
		printf("%s\"%s\":%lld", i ? "," : "", gx.sites[i].func, gx.sites[i].kept);
	printf("},\"errors\":%d%s}\n", gx.errors, gx.extra.c_str());
	fflush(stdout);
}

#ifdef __CUDA_RUNTIME_API_H__
#define GX_RT(call)                                                                 \
	do {                                                                        \
		cudaError_t gx_rc_ = (call);                                        \
		if (gx_rc_ != cudaSuccess)                                          \
			gx_error(#call, (int)gx_rc_, cudaGetErrorName(gx_rc_));     \
	} while (0)

// cudaMemGetInfo as a JSON pair, "key":{"free":N,"total":N}.
static inline void gx_meminfo(const char *key)
{
	size_t free_b = 0, total_b = 0;
	cudaError_t rc = cudaMemGetInfo(&free_b, &total_b);

	if (rc != cudaSuccess) {
		gx_error("cudaMemGetInfo", (int)rc, cudaGetErrorName(rc));
		return;
	}
	gx_extra("\"%s\":{\"free\":%zu,\"total\":%zu}", key, free_b, total_b);
}

// Device, versions and memory before any allocation; also creates the primary context, so
// whatever the runtime allocates for itself at start is not mixed with the test's calls.
static inline int gx_start(void)
{
	int drv = 0, rt = 0, dev = -1;
	cudaDeviceProp prop;

	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	gx_extra("\"driver_version\":%d,\"runtime_version\":%d", drv, rt);
	cudaError_t rc = cudaSetDevice(0);
	if (rc != cudaSuccess) {
		gx_error("cudaSetDevice(0)", (int)rc, cudaGetErrorName(rc));
		return -1;
	}
	cudaGetDevice(&dev);
	if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
		gx_extra("\"device\":%d,\"device_name\":\"%s\"", dev, prop.name);
	gx_meminfo("mem_before");
	return 0;
}
#endif
