// SPDX-License-Identifier: GPL-2.0
/* Device memory from NVML. The library is opened with dlopen so that gpumem runs (and
 * prints "-") on machines without it, as nvtop does. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "nvml.h"
#include "util.h"

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_count_fn)(unsigned int *count);
typedef int (*nvml_handle_fn)(unsigned int index, void **device);
typedef int (*nvml_name_fn)(void *device, char *name, unsigned int len);
typedef const char *(*nvml_error_string_fn)(int code);

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
