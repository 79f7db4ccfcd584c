// (d) Driver API only (links libcuda, no runtime call): cuMemAlloc (one kept, one freed) and
// virtual memory management: cuMemCreate of granularity multiples, cuMemAddressReserve,
// cuMemMap, cuMemSetAccess; one handle kept mapped until exit, one unmapped and released.
// gpumem accounts cuMemCreate/cuMemRelease (kind "vmm": physical memory), not the mappings.
#include <cuda.h>

#include "expect.h"

#define MiB (1ll << 20)

static void drv_check(const char *what, CUresult rc)
{
	if (rc != CUDA_SUCCESS) {
		const char *n = nullptr;
		cuGetErrorName(rc, &n);
		gx_error(what, (int)rc, n);
	}
}

static void drv_meminfo(const char *key)
{
	size_t free_b = 0, total_b = 0;
	CUresult rc = cuMemGetInfo(&free_b, &total_b);
	if (rc != CUDA_SUCCESS) {
		drv_check("cuMemGetInfo", rc);
		return;
	}
	gx_extra("\"%s\":{\"free\":%zu,\"total\":%zu}", key, free_b, total_b);
}

extern "C" __attribute__((noinline)) void drv_alloc_keep(CUdeviceptr *out)
{
	long long size = 5 * MiB;
	CUresult rc = cuMemAlloc(out, size);
	if (rc == CUDA_SUCCESS)
		gx_alloc(__func__, GX_DEVICE, size);
	else
		drv_check("cuMemAlloc(keep)", rc);
}

extern "C" __attribute__((noinline)) void drv_alloc_free(void)
{
	CUdeviceptr p = 0;
	long long size = 1 * MiB;
	CUresult rc = cuMemAlloc(&p, size);
	if (rc != CUDA_SUCCESS) {
		drv_check("cuMemAlloc(temp)", rc);
		return;
	}
	gx_alloc(__func__, GX_DEVICE, size);
	rc = cuMemFree(p);
	if (rc == CUDA_SUCCESS)
		gx_free(__func__, GX_DEVICE, size);
	else
		drv_check("cuMemFree", rc);
}

// Physical memory of `size`, mapped at a reserved range and made accessible.
extern "C" __attribute__((noinline)) int vmm_create(const char *site, CUdevice dev, size_t size,
						    CUmemGenericAllocationHandle *h,
						    CUdeviceptr *va)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc access;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	CUresult rc = cuMemCreate(h, size, &prop, 0);
	if (rc != CUDA_SUCCESS) {
		drv_check("cuMemCreate", rc);
		return -1;
	}
	gx_alloc(site, GX_VMM, (long long)size);
	drv_check("cuMemAddressReserve", cuMemAddressReserve(va, size, 0, 0, 0));
	drv_check("cuMemMap", cuMemMap(*va, size, 0, *h, 0));
	memset(&access, 0, sizeof(access));
	access.location = prop.location;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	drv_check("cuMemSetAccess", cuMemSetAccess(*va, size, &access, 1));
	drv_check("cuMemsetD8", cuMemsetD8(*va, 0x5a, size));
	return 0;
}

extern "C" __attribute__((noinline)) void vmm_keep(CUdevice dev, size_t size,
						  CUmemGenericAllocationHandle *h, CUdeviceptr *va)
{
	vmm_create(__func__, dev, size, h, va);
}

extern "C" __attribute__((noinline)) void vmm_temp(CUdevice dev, size_t size)
{
	CUmemGenericAllocationHandle h;
	CUdeviceptr va = 0;

	if (vmm_create(__func__, dev, size, &h, &va))
		return;
	drv_check("cuCtxSynchronize", cuCtxSynchronize());
	drv_check("cuMemUnmap", cuMemUnmap(va, size));
	CUresult rc = cuMemRelease(h);
	if (rc == CUDA_SUCCESS)
		gx_free(__func__, GX_VMM, (long long)size);
	else
		drv_check("cuMemRelease", rc);
	drv_check("cuMemAddressFree", cuMemAddressFree(va, size));
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "vmm";
	CUdevice dev;
	CUcontext ctx;
	int drv = 0;

	CUresult rc = cuInit(0);
	if (rc != CUDA_SUCCESS) {
		drv_check("cuInit", rc);
		gx_print(name);
		return 0;
	}
	cuDriverGetVersion(&drv);
	gx_extra("\"driver_version\":%d", drv);
	drv_check("cuDeviceGet", cuDeviceGet(&dev, 0));
	char devname[128] = "";
	cuDeviceGetName(devname, sizeof(devname), dev);
	gx_extra("\"device\":0,\"device_name\":\"%s\"", devname);
	rc = cuDevicePrimaryCtxRetain(&ctx, dev);
	if (rc != CUDA_SUCCESS) {
		drv_check("cuDevicePrimaryCtxRetain", rc);
		gx_print(name);
		return 0;
	}
	drv_check("cuCtxSetCurrent", cuCtxSetCurrent(ctx));
	drv_meminfo("mem_before");

	CUmemAllocationProp prop;
	size_t gran = 0;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	rc = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	drv_check("cuMemGetAllocationGranularity", rc);
	gx_extra("\"granularity\":%zu", gran);

	CUdeviceptr kept = 0, kept_va = 0;
	CUmemGenericAllocationHandle kept_h;
	drv_alloc_keep(&kept);
	drv_alloc_free();
	if (gran) {
		vmm_keep(dev, 2 * gran, &kept_h, &kept_va);
		vmm_temp(dev, 4 * gran);
	}
	drv_check("cuCtxSynchronize", cuCtxSynchronize());
	drv_meminfo("mem_at_exit");
	gx_print(name);
	return 0; // exits holding kept and kept_h
}
