// SPDX-License-Identifier: GPL-2.0
/*
 * A mock NVML (libnvidia-ml.so.1) for the tests: the calls gpumem's model/nvml.c makes, with
 * devices described by the environment of the process that loads it (gpumem):
 *
 *   GPUMEM_MOCK_NVML="NAME,UUID,TOTAL,USED,MINOR,PCI_BUS_ID;NAME,..."
 *
 * one device per ';'-separated entry, by index in that order. An empty field is a call that
 * fails with NVML_ERROR_NOT_SUPPORTED (3) for that device (UUID, minor, PCI bus id) or, for
 * TOTAL, a device whose nvmlDeviceGetMemoryInfo fails. Unset: nvmlInit_v2 returns 9
 * (NVML_ERROR_DRIVER_NOT_LOADED), as NVIDIA's library does on a host without the driver;
 * GPUMEM_MOCK_NVML_INIT=N makes it return N instead. GPUMEM_MOCK_NVML_USAGE_FILE=PATH adds
 * what the mock driver wrote there (its programs' usage) to every device's USED.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOCK_MAX_DEVICES 16
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_INSUFFICIENT_SIZE 7

struct mock_device {
	char name[96], uuid[96], bus_id[32];
	unsigned long long total, used;
	unsigned int minor;
	int has_memory, has_minor;
};

/* nvmlMemory_t and nvmlPciInfo_t (as _v3 fills it) */
struct nvml_memory {
	unsigned long long total, free, used;
};
struct nvml_pci_info {
	char bus_id_legacy[16];
	unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

static struct mock_device devices[MOCK_MAX_DEVICES];
static unsigned int ndevices;
static int initialized;

/* Copies the next ','-terminated field of *s into buf; returns its length. */
static size_t next_field(const char **s, char *buf, size_t len)
{
	size_t n = strcspn(*s, ",");
	size_t copy = n < len - 1 ? n : len - 1;

	memcpy(buf, *s, copy);
	buf[copy] = 0;
	*s += n;
	if (**s == ',')
		(*s)++;
	return n;
}

static void parse_device(const char *entry, struct mock_device *d)
{
	char field[96];

	memset(d, 0, sizeof(*d));
	next_field(&entry, d->name, sizeof(d->name));
	next_field(&entry, d->uuid, sizeof(d->uuid));
	if (next_field(&entry, field, sizeof(field))) {
		d->has_memory = 1;
		d->total = strtoull(field, NULL, 10);
	}
	if (next_field(&entry, field, sizeof(field)))
		d->used = strtoull(field, NULL, 10);
	if (next_field(&entry, field, sizeof(field))) {
		d->has_minor = 1;
		d->minor = (unsigned int)strtoul(field, NULL, 10);
	}
	next_field(&entry, d->bus_id, sizeof(d->bus_id));
}

int nvmlInit_v2(void)
{
	const char *spec = getenv("GPUMEM_MOCK_NVML"), *rc = getenv("GPUMEM_MOCK_NVML_INIT");
	char *copy, *save = NULL;

	if (rc)
		return atoi(rc);
	if (!spec)
		return NVML_ERROR_DRIVER_NOT_LOADED;
	ndevices = 0;
	copy = strdup(spec);
	if (!copy)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (char *e = strtok_r(copy, ";", &save); e && ndevices < MOCK_MAX_DEVICES;
	     e = strtok_r(NULL, ";", &save))
		parse_device(e, &devices[ndevices++]);
	free(copy);
	initialized = 1;
	return NVML_SUCCESS;
}

int nvmlShutdown(void)
{
	initialized = 0;
	return NVML_SUCCESS;
}

const char *nvmlErrorString(int result)
{
	switch (result) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	default:
		return "Unknown Error";
	}
}

int nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	*count = ndevices;
	return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct mock_device **device)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (index >= ndevices)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &devices[index];
	return NVML_SUCCESS;
}

static int copy_out(const char *s, char *buf, unsigned int len)
{
	if (!s[0])
		return NVML_ERROR_NOT_SUPPORTED;
	if (strlen(s) + 1 > len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, strlen(s) + 1);
	return NVML_SUCCESS;
}

int nvmlDeviceGetName(struct mock_device *d, char *name, unsigned int len)
{
	return copy_out(d->name, name, len);
}

int nvmlDeviceGetUUID(struct mock_device *d, char *uuid, unsigned int len)
{
	return copy_out(d->uuid, uuid, len);
}

/* GPUMEM_MOCK_NVML_USAGE_FILE: what the mock driver's programs use now (its
 * GPUMEM_MOCK_USAGE_FILE), used on every device beside USED; 0 when it cannot be read. */
static unsigned long long usage_now(void)
{
	const char *path = getenv("GPUMEM_MOCK_NVML_USAGE_FILE");
	char text[32] = "";
	FILE *f = path ? fopen(path, "r") : NULL;

	if (!f)
		return 0;
	if (!fgets(text, sizeof(text), f))
		text[0] = 0;
	fclose(f);
	return strtoull(text, NULL, 10);
}

int nvmlDeviceGetMemoryInfo(struct mock_device *d, struct nvml_memory *mem)
{
	unsigned long long used;

	if (!d->has_memory)
		return NVML_ERROR_NOT_SUPPORTED;
	used = d->used + usage_now();
	mem->total = d->total;
	mem->used = used < d->total ? used : d->total;
	mem->free = d->total - mem->used;
	return NVML_SUCCESS;
}

int nvmlDeviceGetMinorNumber(struct mock_device *d, unsigned int *minor)
{
	if (!d->has_minor)
		return NVML_ERROR_NOT_SUPPORTED;
	*minor = d->minor;
	return NVML_SUCCESS;
}

int nvmlDeviceGetPciInfo_v3(struct mock_device *d, struct nvml_pci_info *pci)
{
	if (!d->bus_id[0])
		return NVML_ERROR_NOT_SUPPORTED;
	memset(pci, 0, sizeof(*pci));
	snprintf(pci->bus_id, sizeof(pci->bus_id), "%s", d->bus_id);
	snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%.12s", d->bus_id);
	return NVML_SUCCESS;
}
