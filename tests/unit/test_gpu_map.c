// SPDX-License-Identifier: GPL-2.0
/* CUDA ordinals to host GPUs: the list variables parsed from an environment (bounded, the
 * invalid entry ending a list, a value cut short ignored), mapped with and without NVML's
 * devices, composed with a container's NVIDIA_VISIBLE_DEVICES; and this process's own
 * /proc/self/environ read. */
#include <setjmp.h>
#include <stdarg.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/gpu_map.h"

#define UUID0 "GPU-8f6b0000-aaaa-bbbb-cccc-000000000000"
#define UUID1 "GPU-8f6b1111-aaaa-bbbb-cccc-111111111111"
#define UUID2 "GPU-3c2e2222-aaaa-bbbb-cccc-222222222222"
#define UUID3 "GPU-3c2e3333-aaaa-bbbb-cccc-333333333333"

static struct nvml_device devs[4];

static int setup(void **state)
{
	static const char *uuids[] = { UUID0, UUID1, UUID2, UUID3 };

	(void)state;
	memset(devs, 0, sizeof(devs));
	for (unsigned int i = 0; i < 4; i++) {
		devs[i].index = i;
		snprintf(devs[i].name, sizeof(devs[i].name), "NVIDIA H200");
		snprintf(devs[i].uuid, sizeof(devs[i].uuid), "%s", uuids[i]);
		devs[i].minor = (int)i;
	}
	return 0;
}

/* An environment of "NAME=value" strings, as /proc/PID/environ holds them. */
static void visible_from(struct gpu_visible *v, const char *const *vars, size_t n)
{
	char buf[1024];
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(vars[i]) + 1;

		memcpy(buf + len, vars[i], l);
		len += l;
	}
	gpu_visible_parse_environ(buf, len, v);
}

static struct gpu_visible visible_cuda(const char *cuda, const char *nvidia)
{
	char a[256], b[256];
	const char *vars[3] = { "PATH=/usr/bin" };
	struct gpu_visible v;
	size_t n = 1;

	if (cuda) {
		snprintf(a, sizeof(a), "CUDA_VISIBLE_DEVICES=%s", cuda);
		vars[n++] = a;
	}
	if (nvidia) {
		snprintf(b, sizeof(b), "NVIDIA_VISIBLE_DEVICES=%s", nvidia);
		vars[n++] = b;
	}
	visible_from(&v, vars, n);
	return v;
}

static int host_of(const char *cuda, const char *nvidia, unsigned int ordinal, unsigned int ndevs)
{
	struct gpu_visible v = visible_cuda(cuda, nvidia);

	return gpu_map_host(&v, ordinal, devs, ndevs);
}

static void test_unset_is_identity_bounded_by_nvml(void **state)
{
	(void)state;
	assert_int_equal(host_of(NULL, NULL, 0, 4), 0);
	assert_int_equal(host_of(NULL, NULL, 3, 4), 3);
	assert_int_equal(host_of(NULL, NULL, 4, 4), -1);	/* no fifth device */
	assert_int_equal(host_of(NULL, NULL, 9, 0), 9);		/* no NVML: taken as it is */
}

static void test_environment_not_read_is_unknown(void **state)
{
	struct gpu_visible v;

	(void)state;
	memset(&v, 0, sizeof(v));
	assert_int_equal(gpu_map_host(&v, 0, devs, 4), -1);
	assert_int_equal(gpu_map_host(&v, 0, devs, 0), -1);
}

static void test_indices_reorder_with_and_without_nvml(void **state)
{
	(void)state;
	assert_int_equal(host_of("1,0", NULL, 0, 4), 1);
	assert_int_equal(host_of("1,0", NULL, 1, 4), 0);
	assert_int_equal(host_of("1,0", NULL, 2, 4), -1);
	assert_int_equal(host_of(" 3 , 2", NULL, 1, 0), 2);	/* spaces around entries */
	assert_int_equal(host_of("3,2", NULL, 0, 0), 3);
}

static void test_invalid_entry_ends_the_list(void **state)
{
	(void)state;
	assert_int_equal(host_of("2,x,0", NULL, 0, 4), 2);
	assert_int_equal(host_of("2,x,0", NULL, 1, 4), -1);
	assert_int_equal(host_of("2,x,0", NULL, 2, 4), -1);
	assert_int_equal(host_of("2,7,0", NULL, 1, 4), -1);	/* beyond the host's four */
	assert_int_equal(host_of("2,7,0", NULL, 2, 4), -1);
	assert_int_equal(host_of("2,2,0", NULL, 1, 4), -1);	/* named twice */
	assert_int_equal(host_of("-1", NULL, 0, 4), -1);	/* the usual "no GPU" */
	assert_int_equal(host_of("", NULL, 0, 4), -1);		/* empty: none */
	assert_int_equal(host_of("1,,0", NULL, 1, 4), -1);
	assert_int_equal(host_of("99999999999", NULL, 0, 0), -1);
}

static void test_uuid_and_unique_prefix_need_nvml(void **state)
{
	(void)state;
	assert_int_equal(host_of(UUID2 "," UUID0, NULL, 0, 4), 2);
	assert_int_equal(host_of(UUID2 "," UUID0, NULL, 1, 4), 0);
	assert_int_equal(host_of("GPU-8f6b1", NULL, 0, 4), 1);	/* a prefix of one */
	assert_int_equal(host_of("GPU-8f6b", NULL, 0, 4), -1);	/* of two: ambiguous */
	assert_int_equal(host_of("GPU-ffff", NULL, 0, 4), -1);	/* of none */
	assert_int_equal(host_of(UUID2, NULL, 0, 0), -1);	/* no NVML: not known */
	assert_int_equal(host_of("1," UUID2 ",0", NULL, 2, 0), -1);
	assert_int_equal(host_of("1," UUID2 ",0", NULL, 0, 0), 1);
}

static void test_mig_is_unknown_and_so_is_what_follows(void **state)
{
	(void)state;
	assert_int_equal(host_of("0,MIG-a1b2c3,1", NULL, 0, 4), 0);
	assert_int_equal(host_of("0,MIG-a1b2c3,1", NULL, 1, 4), -1);
	assert_int_equal(host_of("0,MIG-a1b2c3,1", NULL, 2, 4), -1);
}

static void test_container_devices_in_pci_order_composed(void **state)
{
	(void)state;
	/* The runtime gave it host 3 and 1: inside they are 0 (host 1) and 1 (host 3). */
	assert_int_equal(host_of(NULL, "3,1", 0, 4), 1);
	assert_int_equal(host_of(NULL, "3,1", 1, 4), 3);
	assert_int_equal(host_of(NULL, "3,1", 2, 4), -1);
	assert_int_equal(host_of(NULL, UUID3 "," UUID1, 0, 4), 1);
	assert_int_equal(host_of("1", "3,1", 0, 4), 3);
	assert_int_equal(host_of("1,0", UUID3 "," UUID2, 0, 4), 3);
	assert_int_equal(host_of(UUID2, UUID3 "," UUID2, 0, 4), 2);
	assert_int_equal(host_of(UUID1, UUID3 "," UUID2, 0, 4), -1);	/* not in it */
	assert_int_equal(host_of("2", "3,1", 0, 4), -1);		/* it has two */
	assert_int_equal(host_of(NULL, "2,1", 1, 0), 2);		/* indices: no NVML */
	assert_int_equal(host_of(NULL, UUID2, 0, 0), -1);		/* UUIDs: NVML */
	assert_int_equal(host_of(NULL, "MIG-x", 0, 4), -1);
}

static void test_container_all_none_void(void **state)
{
	(void)state;
	assert_int_equal(host_of("1", "all", 0, 4), 1);
	assert_int_equal(host_of(NULL, "none", 0, 4), -1);
	assert_int_equal(host_of(NULL, "void", 0, 4), -1);
	assert_int_equal(host_of(NULL, "", 0, 4), -1);
	assert_int_equal(host_of("0", "none", 0, 0), -1);
}

static void test_environ_parsing_names_order_and_cut_value(void **state)
{
	static const char *const vars[] = { "XCUDA_VISIBLE_DEVICES=3", "CUDA_DEVICE_ORDER=PCI_BUS_ID",
					    "CUDA_VISIBLE_DEVICES=2,1" };
	static const char cut[] = "A=1\0CUDA_VISIBLE_DEVICES=1,0\0CUDA_VISIBLE_DEVICES=3,2";
	struct gpu_visible v;

	(void)state;
	visible_from(&v, vars, 3);
	assert_true(v.known);
	assert_true(v.order_set);
	assert_true(v.pci_order);
	assert_true(v.cuda.set);
	assert_int_equal(v.cuda.n, 2);
	assert_int_equal(v.cuda.e[0].index, 2);
	assert_false(v.nvidia.set);
	/* The last string has no NUL: the bound cut it, its "3,2" may have been "3,25". */
	gpu_visible_parse_environ(cut, sizeof(cut) - 1, &v);
	assert_int_equal(v.cuda.n, 2);
	assert_int_equal(v.cuda.e[0].index, 1);
	visible_from(&v, (const char *const[]){ "CUDA_DEVICE_ORDER=FASTEST_FIRST" }, 1);
	assert_true(v.order_set);
	assert_false(v.pci_order);
	assert_false(v.cuda.set);
	/* A name set twice (execve allows it): the first, as getenv and CUDA take it. */
	visible_from(&v, (const char *const[]){ "CUDA_VISIBLE_DEVICES=1", "CUDA_DEVICE_ORDER=PCI_BUS_ID",
					       "CUDA_VISIBLE_DEVICES=0", "CUDA_DEVICE_ORDER=X" }, 4);
	assert_int_equal(v.cuda.n, 1);
	assert_int_equal(v.cuda.e[0].index, 1);
	assert_true(v.pci_order);
}

static void test_lists_bounded_and_long_names_unknown(void **state)
{
	char list[256] = "", name[128];
	struct gpu_list l;

	(void)state;
	for (int i = 0; i < 40; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%d", i ? "," : "",
			 i);
	gpu_list_parse(list, strlen(list), false, &l);
	assert_int_equal(l.n, GPU_VISIBLE_MAX);
	assert_int_equal(l.e[GPU_VISIBLE_MAX - 1].index, GPU_VISIBLE_MAX - 1);
	memset(name, 'a', sizeof(name));
	memcpy(name, "GPU-", 4);
	gpu_list_parse(name, sizeof(name), false, &l);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.e[0].kind, GPU_ENTRY_OTHER);
}

static void test_reads_own_environ(void **state)
{
	struct gpu_visible v;

	(void)state;
	/* setenv changes this process's copy, not /proc/self/environ: what it started with. */
	assert_int_equal(gpu_visible_read(getpid(), &v), 0);
	assert_true(v.known);
	assert_int_equal(gpu_visible_read(-1, &v), -EINVAL);
	assert_false(v.known);
}

/* ---- AMD: ROCR_VISIBLE_DEVICES first, in its own order; then HIP's list (else CUDA's) ---- */

static struct amd_device amd[3];

static int setup_amd(void **state)
{
	(void)state;
	memset(amd, 0, sizeof(amd));
	for (unsigned int i = 0; i < 3; i++) {
		amd[i].index = i;
		amd[i].gpu_id = 1000 + i;
		snprintf(amd[i].name, sizeof(amd[i].name), "gfx90a");
		snprintf(amd[i].uuid, sizeof(amd[i].uuid), "GPU-%016x", 0xa0 + i);
	}
	return 0;
}

static int amd_of(const char *const *vars, size_t n, unsigned int ordinal, unsigned int ndevs)
{
	struct gpu_visible v;

	visible_from(&v, vars, n);
	return gpu_map_amd(&v, ordinal, amd, ndevs);
}

static void test_amd_unset_is_kfd_order(void **state)
{
	const char *none[] = { "PATH=/usr/bin" };

	(void)state;
	assert_int_equal(amd_of(none, 1, 0, 3), 0);
	assert_int_equal(amd_of(none, 1, 2, 3), 2);
	assert_int_equal(amd_of(none, 1, 3, 3), -1);	/* KFD lists three */
	assert_int_equal(amd_of(none, 1, 5, 0), 5);	/* no KFD: taken as it is */
}

static void test_amd_rocr_reorders_and_hip_composes(void **state)
{
	const char *rocr[] = { "ROCR_VISIBLE_DEVICES=2,0" };
	const char *both[] = { "ROCR_VISIBLE_DEVICES=2,0", "HIP_VISIBLE_DEVICES=1" };
	/* HIP_VISIBLE_DEVICES wins over CUDA_VISIBLE_DEVICES, which HIP reads without it */
	const char *hip_cuda[] = { "CUDA_VISIBLE_DEVICES=0", "HIP_VISIBLE_DEVICES=2" };
	const char *cuda[] = { "CUDA_VISIBLE_DEVICES=1,2" };
	/* NVIDIA's container list is not AMD's */
	const char *nvidia[] = { "NVIDIA_VISIBLE_DEVICES=1" };

	(void)state;
	assert_int_equal(amd_of(rocr, 1, 0, 3), 2);	/* ROCr's order, not the bus's */
	assert_int_equal(amd_of(rocr, 1, 1, 3), 0);
	assert_int_equal(amd_of(rocr, 1, 2, 3), -1);
	assert_int_equal(amd_of(both, 2, 0, 3), 0);
	assert_int_equal(amd_of(both, 2, 1, 3), -1);
	assert_int_equal(amd_of(hip_cuda, 2, 0, 3), 2);
	assert_int_equal(amd_of(cuda, 1, 1, 3), 2);
	assert_int_equal(amd_of(nvidia, 1, 0, 3), 0);
}

static void test_amd_uuid_repeat_and_invalid(void **state)
{
	const char *uuid[] = { "ROCR_VISIBLE_DEVICES=GPU-00000000000000a1" };
	const char *hip_uuid[] = { "HIP_VISIBLE_DEVICES=GPU-00000000000000a2,0" };
	const char *repeat[] = { "ROCR_VISIBLE_DEVICES=1,1,2" };
	const char *invalid[] = { "ROCR_VISIBLE_DEVICES=1,x,2" };

	(void)state;
	assert_int_equal(amd_of(uuid, 1, 0, 3), 1);
	assert_int_equal(amd_of(uuid, 1, 0, 0), -1);	/* a UUID with no KFD: not known */
	assert_int_equal(amd_of(hip_uuid, 1, 0, 3), 2);
	assert_int_equal(amd_of(hip_uuid, 1, 1, 3), 0);
	assert_int_equal(amd_of(repeat, 1, 0, 3), 1);	/* a repeat ends ROCr's list */
	assert_int_equal(amd_of(repeat, 1, 1, 3), -1);
	assert_int_equal(amd_of(invalid, 1, 0, 3), 1);
	assert_int_equal(amd_of(invalid, 1, 1, 3), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_unset_is_identity_bounded_by_nvml, setup),
		cmocka_unit_test_setup(test_environment_not_read_is_unknown, setup),
		cmocka_unit_test_setup(test_indices_reorder_with_and_without_nvml, setup),
		cmocka_unit_test_setup(test_invalid_entry_ends_the_list, setup),
		cmocka_unit_test_setup(test_uuid_and_unique_prefix_need_nvml, setup),
		cmocka_unit_test_setup(test_mig_is_unknown_and_so_is_what_follows, setup),
		cmocka_unit_test_setup(test_container_devices_in_pci_order_composed, setup),
		cmocka_unit_test_setup(test_container_all_none_void, setup),
		cmocka_unit_test_setup(test_environ_parsing_names_order_and_cut_value, setup),
		cmocka_unit_test_setup(test_lists_bounded_and_long_names_unknown, setup),
		cmocka_unit_test_setup(test_reads_own_environ, setup),
		cmocka_unit_test_setup(test_amd_unset_is_kfd_order, setup_amd),
		cmocka_unit_test_setup(test_amd_rocr_reorders_and_hip_composes, setup_amd),
		cmocka_unit_test_setup(test_amd_uuid_repeat_and_invalid, setup_amd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
