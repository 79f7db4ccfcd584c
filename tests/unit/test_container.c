// SPDX-License-Identifier: GPL-2.0
/* Container, pod and QoS from every cgroup path layout that docker, containerd, CRI-O, podman,
 * kubelet (systemd and cgroupfs drivers) and systemd write; --container prefix matching; the
 * NSpid line; the cgroup v2 mount from mountinfo; and a cgroup id checked against a real
 * cgroup directory created for the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/container.h"

#define ID_A "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899"
#define ID_B "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define POD_UID "6a1f0c2e-8d4b-4f7a-9e3c-2b5d7f9a1c3e"
#define POD_UID_SYSTEMD "6a1f0c2e_8d4b_4f7a_9e3c_2b5d7f9a1c3e"

/* Parses path and asserts every field; NULL for a field that must be empty. */
static void expect_parse(const char *path, const char *runtime, const char *id,
			 const char *pod_uid, const char *qos)
{
	struct container_info ci;

	memset(&ci, 0x5a, sizeof(ci));	/* every field must be written, not left over */
	assert_int_equal(container_parse_cgroup(path, &ci), 0);
	assert_string_equal(ci.runtime, runtime ? runtime : "");
	assert_int_equal(ci.has_id, id != NULL);
	assert_string_equal(ci.id, id ? id : "");
	assert_int_equal(ci.has_pod, pod_uid != NULL);
	assert_string_equal(ci.pod_uid, pod_uid ? pod_uid : "");
	assert_string_equal(ci.qos, qos ? qos : "");
}

static void test_docker_systemd_scope(void **state)
{
	(void)state;
	expect_parse("/system.slice/docker-" ID_A ".scope", "docker", ID_A, NULL, NULL);
}

static void test_docker_cgroupfs_driver(void **state)
{
	(void)state;
	expect_parse("/docker/" ID_A, "docker", ID_A, NULL, NULL);
}

static void test_kubepods_burstable_containerd_systemd(void **state)
{
	(void)state;
	expect_parse("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
		     POD_UID_SYSTEMD ".slice/cri-containerd-" ID_A ".scope",
		     "containerd", ID_A, POD_UID, "burstable");
}

static void test_kubepods_besteffort_cgroupfs_runtime_unnamed(void **state)
{
	(void)state;
	/* the cgroupfs driver names the container by its bare id: the runtime is not said */
	expect_parse("/kubepods/besteffort/pod" POD_UID "/" ID_A, NULL, ID_A, POD_UID,
		     "besteffort");
}

static void test_kubepods_burstable_cgroupfs(void **state)
{
	(void)state;
	expect_parse("/kubepods/burstable/pod" POD_UID "/" ID_B, NULL, ID_B, POD_UID,
		     "burstable");
}

static void test_kubepods_guaranteed_systemd_has_no_qos_level(void **state)
{
	(void)state;
	expect_parse("/kubepods.slice/kubepods-pod" POD_UID_SYSTEMD ".slice/cri-containerd-"
		     ID_A ".scope", "containerd", ID_A, POD_UID, "guaranteed");
}

static void test_kubepods_guaranteed_cgroupfs(void **state)
{
	(void)state;
	expect_parse("/kubepods/pod" POD_UID "/" ID_A, NULL, ID_A, POD_UID, "guaranteed");
}

static void test_kubepods_crio_systemd(void **state)
{
	(void)state;
	expect_parse("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
		     POD_UID_SYSTEMD ".slice/crio-" ID_B ".scope", "cri-o", ID_B, POD_UID,
		     "besteffort");
}

static void test_crio_scope(void **state)
{
	(void)state;
	expect_parse("/system.slice/crio-" ID_B ".scope", "cri-o", ID_B, NULL, NULL);
}

static void test_podman_libpod_scope(void **state)
{
	(void)state;
	expect_parse("/machine.slice/libpod-" ID_A ".scope", "podman", ID_A, NULL, NULL);
}

static void test_podman_cgroupfs(void **state)
{
	(void)state;
	expect_parse("/libpod_parent/libpod-" ID_B, "podman", ID_B, NULL, NULL);
}

static void test_systemd_app_scope_is_no_container(void **state)
{
	(void)state;
	expect_parse("/user.slice/user-1000.slice/user@1000.service/app.slice/app-foo.scope",
		     "systemd", NULL, NULL, NULL);
	expect_parse("/system.slice/sshd.service", "systemd", NULL, NULL, NULL);
}

static void test_root_and_slices_are_nothing(void **state)
{
	(void)state;
	expect_parse("/", NULL, NULL, NULL, NULL);
	expect_parse("", NULL, NULL, NULL, NULL);
	expect_parse("/system.slice", NULL, NULL, NULL, NULL);
	/* a QoS slice with no pod below it says nothing about a pod */
	expect_parse("/kubepods.slice/kubepods-burstable.slice", NULL, NULL, NULL, NULL);
}

static void test_docker_inside_pod_innermost_container_outermost_pod(void **state)
{
	(void)state;
	expect_parse("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
		     POD_UID_SYSTEMD ".slice/cri-containerd-" ID_A ".scope/docker/" ID_B,
		     "docker", ID_B, POD_UID, "burstable");
}

static void test_kind_node_pod_inside_docker(void **state)
{
	(void)state;
	/* a kind node is a docker container; its kubelet uses the cgroupfs driver */
	expect_parse("/system.slice/docker-" ID_A ".scope/kubepods/burstable/pod" POD_UID "/"
		     ID_B, NULL, ID_B, POD_UID, "burstable");
}

static void test_path_from_other_cgroup_namespace(void **state)
{
	(void)state;
	/* what a pod with a cgroup namespace of its own reads in another pod's /proc/PID/cgroup */
	expect_parse("/../../kubepods-besteffort-pod" POD_UID_SYSTEMD ".slice/cri-containerd-"
		     ID_B ".scope", "containerd", ID_B, POD_UID, "besteffort");
}

static void test_whole_proc_line_and_uppercase_id(void **state)
{
	char upper[] = "/system.slice/docker-" ID_B ".scope";
	char *p;

	(void)state;
	expect_parse("0::/system.slice/docker-" ID_A ".scope\n", "docker", ID_A, NULL, NULL);
	for (p = upper + strlen("/system.slice/docker-"); *p != '.'; p++)
		*p = (char)(*p >= 'a' && *p <= 'f' ? *p - 'a' + 'A' : *p);
	expect_parse(upper, "docker", ID_B, NULL, NULL);
}

static void test_static_pod_hash_uid(void **state)
{
	(void)state;
	expect_parse("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
		     "3a1c1d0f5e1b8f4a3bb6c7e2d0a1b2c3.slice/cri-containerd-" ID_A ".scope",
		     "containerd", ID_A, "3a1c1d0f5e1b8f4a3bb6c7e2d0a1b2c3", "burstable");
}

static void test_near_misses_are_not_containers(void **state)
{
	(void)state;
	/* 63 hex digits, a non-hex digit, a conmon scope, a trailing suffix that is not .scope */
	expect_parse("/system.slice/docker-" "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa0011223344556677889"
		     ".scope", "systemd", NULL, NULL, NULL);
	expect_parse("/system.slice/docker-" "gf4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899"
		     ".scope", "systemd", NULL, NULL, NULL);
	expect_parse("/machine.slice/libpod-conmon-" ID_A ".scope", "systemd", NULL, NULL, NULL);
	expect_parse("/system.slice/docker-" ID_A ".mount", NULL, NULL, NULL, NULL);
	/* a bad pod uid is no pod */
	expect_parse("/kubepods/burstable/pod6a1f0c2e-8d4b-4f7a-9e3c/" ID_A, NULL, ID_A, NULL,
		     NULL);
}

static void test_parse_rejects_null(void **state)
{
	struct container_info ci;

	(void)state;
	assert_int_equal(container_parse_cgroup(NULL, &ci), -EINVAL);
	assert_int_equal(container_parse_cgroup("/", NULL), -EINVAL);
}

static void test_container_id_prefix_matching(void **state)
{
	struct container_info ci, none;

	(void)state;
	assert_int_equal(container_parse_cgroup("/system.slice/docker-" ID_A ".scope", &ci), 0);
	assert_true(container_id_matches(&ci, "3"));
	assert_true(container_id_matches(&ci, "3f4e5d6c7b8a"));
	assert_true(container_id_matches(&ci, "3F4E5D6C7B8A"));
	assert_true(container_id_matches(&ci, ID_A));
	assert_true(container_id_matches(&ci, "containerd://3f4e5d"));
	assert_false(container_id_matches(&ci, ""));
	assert_false(container_id_matches(&ci, "4"));
	assert_false(container_id_matches(&ci, "3f4e5g"));
	assert_false(container_id_matches(&ci, "3f4e-5d"));
	assert_false(container_id_matches(&ci, ID_A "0"));
	assert_false(container_id_matches(&ci, NULL));
	assert_int_equal(container_parse_cgroup("/user.slice", &none), 0);
	assert_false(container_id_matches(&none, "3"));
}

static void test_ns_pid_nested_namespaces_last_field(void **state)
{
	int ns_pid = 0;

	(void)state;
	assert_int_equal(proc_parse_ns_pid("Name:\tpython3\nTgid:\t1234\nNSpid:\t1234\t56\t1\n"
					   "NSpgid:\t1234\t56\t1\n", &ns_pid), 0);
	assert_int_equal(ns_pid, 1);
	assert_int_equal(proc_parse_ns_pid("NSpid:\t1234\t56\n", &ns_pid), 0);
	assert_int_equal(ns_pid, 56);
	assert_int_equal(proc_parse_ns_pid("Name:\tx\nNSpid:\t4321", &ns_pid), 0);
	assert_int_equal(ns_pid, 4321);
	/* "NSpgid:" must not be taken for "NSpid:" */
	assert_int_equal(proc_parse_ns_pid("NSpgid:\t7\n", &ns_pid), -ENOENT);
	assert_int_equal(proc_parse_ns_pid("Name:\tx\n", &ns_pid), -ENOENT);
	assert_int_equal(proc_parse_ns_pid("NSpid:\t\n", &ns_pid), -EINVAL);
	assert_int_equal(proc_parse_ns_pid("NSpid:\t12x\n", &ns_pid), -EINVAL);
	assert_int_equal(proc_parse_ns_pid("NSpid:\t-3\n", &ns_pid), -EINVAL);
	assert_int_equal(proc_parse_ns_pid(NULL, &ns_pid), -EINVAL);
}

static void test_ns_pid_of_this_process(void **state)
{
	int ns_pid = 0;

	(void)state;
	/* this test runs in one pid namespace: the innermost pid is getpid() */
	assert_int_equal(proc_ns_pid(getpid(), &ns_pid), 0);
	assert_int_equal(ns_pid, getpid());
	assert_int_equal(proc_ns_pid(0, &ns_pid), -EINVAL);
}

static const char mountinfo_hybrid[] =
	"24 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	"30 24 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
	"31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw\n"
	"32 30 0:28 / /sys/fs/cgroup/memory rw,nosuid shared:11 - cgroup cgroup rw,memory\n";

/* A pod with a cgroup namespace of its own: its own cgroup2 mount, and the host's bind-mounted
 * (with a space in the mount point, escaped as \040). */
static const char mountinfo_pod[] =
	"500 400 0:60 / / rw - overlay overlay rw\n"
	"510 500 0:27 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n"
	"520 500 0:27 /../../.. /host/sys/fs/my\\040cgroup ro,nosuid master:10 - cgroup2 cgroup2 rw\n";

static void test_cgroup_v2_mount_from_mountinfo(void **state)
{
	char mnt[256], root[256];

	(void)state;
	assert_int_equal(cgroup_v2_mount_parse(mountinfo_hybrid, mnt, sizeof(mnt), root,
					       sizeof(root)), 0);
	assert_string_equal(mnt, "/sys/fs/cgroup/unified");
	assert_string_equal(root, "/");
	assert_int_equal(cgroup_v2_mount_parse(mountinfo_pod, mnt, sizeof(mnt), root,
					       sizeof(root)), 0);
	assert_string_equal(mnt, "/host/sys/fs/my cgroup");
	assert_string_equal(root, "/../../..");
	assert_int_equal(cgroup_v2_mount_parse("24 1 8:1 / / rw - ext4 /dev/sda1 rw\n", mnt,
					       sizeof(mnt), NULL, 0), -ENOENT);
	assert_int_equal(cgroup_v2_mount_parse(mountinfo_hybrid, mnt, 8, NULL, 0),
			 -ENAMETOOLONG);
}

static void test_cgroup_fs_path_joins_relative_to_mount_root(void **state)
{
	char buf[256];

	(void)state;
	assert_int_equal(cgroup_fs_path("/sys/fs/cgroup", "/", "/system.slice/x.scope", buf,
					sizeof(buf)), 0);
	assert_string_equal(buf, "/sys/fs/cgroup/system.slice/x.scope");
	assert_int_equal(cgroup_fs_path("/sys/fs/cgroup", "/", "/", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/sys/fs/cgroup");
	assert_int_equal(cgroup_fs_path("/host/cg", "/../..", "/../../kubepods.slice/a", buf,
					sizeof(buf)), 0);
	assert_string_equal(buf, "/host/cg/kubepods.slice/a");
	assert_int_equal(cgroup_fs_path("/sys/fs/cgroup", "/", "/../../kubepods.slice", buf,
					sizeof(buf)), -EXDEV);
	assert_int_equal(cgroup_fs_path("/m", "/a/b", "/a/bc", buf, sizeof(buf)), -EXDEV);
	assert_int_equal(cgroup_fs_path("/m", "/a/b", "/a/b/c", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/m/c");
	assert_int_equal(cgroup_fs_path("/sys/fs/cgroup", "/", "/abc", buf, 8), -ENAMETOOLONG);
	/* A ".." further in climbs out too (found by the fuzzing pass, by reading). */
	assert_int_equal(cgroup_fs_path("/m", "/a/b", "/a/b/c/../../..", buf, sizeof(buf)),
			 -EXDEV);
	assert_int_equal(cgroup_fs_path("/m", "/", "/a/..b", buf, sizeof(buf)), 0);
}

/* The kernel's own id for a cgroup directory: the 8 bytes of its kernfs file handle. */
static int kernfs_handle_id(const char *path, uint64_t *id)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[64];
	} h;
	int mount_id;

	h.fh.handle_bytes = sizeof(h.bytes);
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0))
		return -errno;
	if (h.fh.handle_bytes != sizeof(*id))
		return -EINVAL;
	memcpy(id, h.fh.f_handle, sizeof(*id));
	return 0;
}

static void test_cgroup_id_of_created_cgroup(void **state)
{
	char mnt[512], dir[600];
	struct stat st;
	uint64_t id = 0, handle_id = 0;
	int err;

	(void)state;
	if (geteuid() != 0) {
		print_message("skipped: creating a cgroup needs root\n");
		skip();
	}
	err = cgroup_v2_mount(mnt, sizeof(mnt));
	if (err == -ENOENT) {
		print_message("skipped: no cgroup v2 mount in /proc/self/mountinfo\n");
		skip();
	}
	assert_int_equal(err, 0);
	snprintf(dir, sizeof(dir), "%s/gpumem-unit-%d", mnt, (int)getpid());
	if (mkdir(dir, 0755)) {
		print_message("skipped: cannot create %s: %s\n", dir, strerror(errno));
		skip();
	}
	err = cgroup_id_of_path(dir, &id);
	assert_int_equal(stat(dir, &st), 0);
	if (kernfs_handle_id(dir, &handle_id))
		handle_id = st.st_ino;	/* no file handles: the inode is all there is */
	rmdir(dir);
	assert_int_equal(err, 0);
	assert_true(id > 1);
	assert_int_equal(id, st.st_ino);
	assert_int_equal(id, handle_id);
	/* the root cgroup has id 1 */
	assert_int_equal(cgroup_id_of_path(mnt, &id), 0);
	assert_int_equal(id, 1);
}

static void test_cgroup_id_rejects_non_cgroup_paths(void **state)
{
	uint64_t id;

	(void)state;
	assert_int_equal(cgroup_id_of_path("/", &id), -EINVAL);
	assert_int_equal(cgroup_id_of_path("/nonexistent-gpumem", &id), -ENOENT);
	assert_int_equal(cgroup_id_of_path(NULL, &id), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_docker_systemd_scope),
		cmocka_unit_test(test_docker_cgroupfs_driver),
		cmocka_unit_test(test_kubepods_burstable_containerd_systemd),
		cmocka_unit_test(test_kubepods_besteffort_cgroupfs_runtime_unnamed),
		cmocka_unit_test(test_kubepods_burstable_cgroupfs),
		cmocka_unit_test(test_kubepods_guaranteed_systemd_has_no_qos_level),
		cmocka_unit_test(test_kubepods_guaranteed_cgroupfs),
		cmocka_unit_test(test_kubepods_crio_systemd),
		cmocka_unit_test(test_crio_scope),
		cmocka_unit_test(test_podman_libpod_scope),
		cmocka_unit_test(test_podman_cgroupfs),
		cmocka_unit_test(test_systemd_app_scope_is_no_container),
		cmocka_unit_test(test_root_and_slices_are_nothing),
		cmocka_unit_test(test_docker_inside_pod_innermost_container_outermost_pod),
		cmocka_unit_test(test_kind_node_pod_inside_docker),
		cmocka_unit_test(test_path_from_other_cgroup_namespace),
		cmocka_unit_test(test_whole_proc_line_and_uppercase_id),
		cmocka_unit_test(test_static_pod_hash_uid),
		cmocka_unit_test(test_near_misses_are_not_containers),
		cmocka_unit_test(test_parse_rejects_null),
		cmocka_unit_test(test_container_id_prefix_matching),
		cmocka_unit_test(test_ns_pid_nested_namespaces_last_field),
		cmocka_unit_test(test_ns_pid_of_this_process),
		cmocka_unit_test(test_cgroup_v2_mount_from_mountinfo),
		cmocka_unit_test(test_cgroup_fs_path_joins_relative_to_mount_root),
		cmocka_unit_test(test_cgroup_id_of_created_cgroup),
		cmocka_unit_test(test_cgroup_id_rejects_non_cgroup_paths),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
