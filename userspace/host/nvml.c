// SPDX-License-Identifier: GPL-2.0
/* Device memory from NVML. The library is opened with dlopen so that gpumem runs (and
 * prints "-") on machines without it, as nvtop does. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "base/util.h"
#include "host/nvml.h"

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_count_fn)(unsigned int *count);
typedef int (*nvml_handle_fn)(unsigned int index, void **device);
typedef int (*nvml_name_fn)(void *device, char *name, unsigned int len);
typedef const char *(*nvml_error_string_fn)(int code);
typedef int (*nvml_uuid_fn)(void *device, char *uuid, unsigned int len);
typedef int (*nvml_minor_fn)(void *device, unsigned int *minor);

/* nvmlPciInfo_t, as nvmlDeviceGetPciInfo_v3 fills it */
struct nvml_pci_info {
	char bus_id_legacy[16];
	unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[NVML_BUS_ID_LEN];
};
typedef int (*nvml_pci_fn)(void *device, struct nvml_pci_info *pci);

/* nvmlMemory_t */
struct nvml_memory {
	unsigned long long total, free, used;
};
typedef int (*nvml_memory_fn)(void *device, struct nvml_memory *mem);

static struct {
	bool tried, ok;
	void *lib;
	nvml_count_fn count;
	nvml_handle_fn handle;
	nvml_name_fn name;
	nvml_memory_fn memory;
	nvml_uuid_fn uuid;
	nvml_minor_fn minor;
	nvml_pci_fn pci;
	nvml_init_fn shutdown;
	nvml_error_string_fn error_string;
	struct nvml_status status;
} nvml;

/* The status of a call that failed: its code and NVML's own words for it. */
static void set_failed(const char *call, int code)
{
	const char *text = nvml.error_string ? nvml.error_string(code) : NULL;

	nvml.status.error_valid = true;
	nvml.status.error = code;
	snprintf(nvml.status.reason, sizeof(nvml.status.reason), "%s returned %d (%s)", call, code,
		 text ? text : "no error string");
}

bool nvml_available(void)
{
	nvml_init_fn init;

	if (nvml.tried)
		return nvml.ok;
	nvml.tried = true;
	nvml.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!nvml.lib) {
		const char *why = dlerror();

		snprintf(nvml.status.reason, sizeof(nvml.status.reason), "not loaded: %s",
			 why ? why : "libnvidia-ml.so.1 not found");
		p_debug("NVML %s: device memory shown as -", nvml.status.reason);
		return false;
	}
	nvml.status.loaded = true;
	nvml.error_string = (nvml_error_string_fn)dlsym(nvml.lib, "nvmlErrorString");
	init = (nvml_init_fn)dlsym(nvml.lib, "nvmlInit_v2");
	nvml.count = (nvml_count_fn)dlsym(nvml.lib, "nvmlDeviceGetCount_v2");
	nvml.handle = (nvml_handle_fn)dlsym(nvml.lib, "nvmlDeviceGetHandleByIndex_v2");
	nvml.name = (nvml_name_fn)dlsym(nvml.lib, "nvmlDeviceGetName");
	nvml.memory = (nvml_memory_fn)dlsym(nvml.lib, "nvmlDeviceGetMemoryInfo");
	nvml.shutdown = (nvml_init_fn)dlsym(nvml.lib, "nvmlShutdown");
	/* Optional: a device without them is still counted, its identity unknown. */
	nvml.uuid = (nvml_uuid_fn)dlsym(nvml.lib, "nvmlDeviceGetUUID");
	nvml.minor = (nvml_minor_fn)dlsym(nvml.lib, "nvmlDeviceGetMinorNumber");
	nvml.pci = (nvml_pci_fn)dlsym(nvml.lib, "nvmlDeviceGetPciInfo_v3");
	if (!init || !nvml.count || !nvml.handle || !nvml.memory) {
		snprintf(nvml.status.reason, sizeof(nvml.status.reason),
			 "libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetCount_v2, "
			 "nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetMemoryInfo");
	} else {
		int rc = init();

		if (rc == 0) {
			nvml.ok = true;
			return true;
		}
		set_failed("nvmlInit_v2", rc);
	}
	p_debug("NVML %s: device memory shown as -", nvml.status.reason);
	nvml.error_string = NULL;	/* in the library closed below */
	dlclose(nvml.lib);
	nvml.lib = NULL;
	return false;
}

/* NVML's strings are NUL-terminated within len on success; a buffer it left without one, or
 * empty, is unknown. */
static void keep_string(char *buf, size_t len, int rc)
{
	if (rc != 0 || !memchr(buf, 0, len) || !buf[0])
		buf[0] = 0;
}

/* The identity of one device: each part that NVML does not give stays unknown. */
static void read_identity(void *dev, struct nvml_device *d)
{
	struct nvml_pci_info pci;
	unsigned int minor;

	d->minor = -1;
	if (nvml.uuid)
		keep_string(d->uuid, sizeof(d->uuid), nvml.uuid(dev, d->uuid, sizeof(d->uuid)));
	if (nvml.minor && nvml.minor(dev, &minor) == 0 && minor <= INT32_MAX)
		d->minor = (int)minor;
	memset(&pci, 0, sizeof(pci));
	if (nvml.pci) {
		int rc = nvml.pci(dev, &pci);

		keep_string(pci.bus_id, sizeof(pci.bus_id), rc);
		memcpy(d->pci_bus_id, pci.bus_id, sizeof(d->pci_bus_id));
	}
}

unsigned int nvml_devices(struct nvml_device *out, unsigned int max)
{
	unsigned int count = 0, n = 0;
	int rc;

	if (!nvml_available())
		return 0;
	rc = nvml.count(&count);
	if (rc != 0) {
		set_failed("nvmlDeviceGetCount_v2", rc);
		return 0;
	}
	for (unsigned int i = 0; i < count && n < max; i++) {
		struct nvml_memory mem;
		void *dev;

		if (nvml.handle(i, &dev) != 0 || nvml.memory(dev, &mem) != 0)
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		out[n].index = i;
		if (!nvml.name || nvml.name(dev, out[n].name, sizeof(out[n].name)) != 0)
			snprintf(out[n].name, sizeof(out[n].name), "GPU %u", i);
		out[n].name[sizeof(out[n].name) - 1] = 0;
		read_identity(dev, &out[n]);
		out[n].total = mem.total;
		out[n].free = mem.free;
		out[n].used = mem.used;
		n++;
	}
	nvml.status.error_valid = false;
	if (n)
		nvml.status.reason[0] = 0;
	else
		snprintf(nvml.status.reason, sizeof(nvml.status.reason),
			 count ? "NVML could not read any device's memory" : "NVML reports no device");
	return n;
}

void nvml_get_status(struct nvml_status *out)
{
	*out = nvml.status;
}

void nvml_close(void)
{
	if (nvml.ok && nvml.shutdown)
		nvml.shutdown();
	if (nvml.lib)
		dlclose(nvml.lib);
	memset(&nvml, 0, sizeof(nvml));
}
