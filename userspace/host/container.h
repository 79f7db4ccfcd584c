/* SPDX-License-Identifier: GPL-2.0 */
/* Which container and pod a process runs in, read from its cgroup v2 path; its pid inside its
 * own pid namespace; and the cgroup id that bpf_get_current_cgroup_id() returns for a path. */
#ifndef GPUMEM_CONTAINER_H
#define GPUMEM_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONTAINER_ID_LEN 64	/* docker, containerd, cri-o and podman ids: 64 hex digits */
#define CONTAINER_NAME_LEN 253	/* a Kubernetes object name: a DNS subdomain */
#define CONTAINER_LABEL_LEN 63	/* a namespace or container name: a DNS label */

/*
 * What a cgroup path says. An empty string is "not known" (NULL in JSON):
 *   runtime  "docker", "containerd", "cri-o", "podman"; "systemd" for a systemd unit that is
 *            no container; "" when there is no container, or when the path holds a container
 *            id but does not name its runtime (kubelet's cgroupfs driver: .../pod<uid>/<id>);
 *   id       the 64 lowercase hex digits of the innermost container (has_id);
 *   pod_uid  the Kubernetes pod UID with '-' separators, as `kubectl get pod -o
 *            jsonpath={.metadata.uid}` prints it (has_pod);
 *   qos      "guaranteed", "burstable" or "besteffort" when has_pod.
 */
struct container_info {
	char runtime[16];
	char id[CONTAINER_ID_LEN + 1];
	char pod_uid[37];
	char qos[16];
	bool has_id, has_pod;
	/* Names from the runtime's OCI bundle (oci.c); "" when not known. */
	char pod_name[CONTAINER_NAME_LEN + 1];
	char pod_namespace[CONTAINER_LABEL_LEN + 1];
	char container_name[CONTAINER_LABEL_LEN + 1];
};

/*
 * Parses the path of a "0::" line of /proc/PID/cgroup (proc_read_cgroup() gives it, on
 * hybrid hosts too). Unknown layouts are not an error: out is then all empty. Paths seen from
 * another cgroup namespace ("/../../kubepods.slice/...") are parsed as well. When containers
 * nest (docker in a pod, kind), the id and runtime are the innermost container's and the pod
 * is the outermost pod. Returns 0, or -EINVAL when an argument is NULL.
 */
int container_parse_cgroup(const char *cgroup_path, struct container_info *out);

/*
 * Whether ci's container id starts with prefix, as `--container ID` takes it: 1 to 64 hex
 * digits, any case; a "runtime://" scheme in front (how Kubernetes prints containerID) is
 * ignored. False for an empty or non-hex prefix and for a process in no container.
 */
bool container_id_matches(const struct container_info *ci, const char *prefix);

/*
 * The pid as the process sees itself, inside its own pid namespace: the last field of the
 * "NSpid:" line of /proc/PID/status. -ENOENT when the line is missing (kernels before 4.1),
 * -EINVAL when it is malformed.
 */
int proc_ns_pid(int pid, int *ns_pid);
int proc_parse_ns_pid(const char *status_text, int *ns_pid);

/*
 * The cgroup v2 mount, from /proc/self/mountinfo: its mount point and its root as this
 * cgroup namespace sees it ("/" normally; "/../.." for the host's hierarchy bind-mounted
 * into a container that has a cgroup namespace of its own). With several cgroup2 mounts the
 * one that sees the most of the hierarchy wins. -ENOENT when there is none (v1-only host),
 * -ENAMETOOLONG when a field does not fit.
 */
int cgroup_v2_mount(char *buf, size_t len);
int cgroup_v2_mount_parse(const char *mountinfo, char *mnt, size_t mntlen, char *root,
			  size_t rootlen);

/*
 * The directory of cgroup_path (as /proc/PID/cgroup prints it, relative to the reader's
 * cgroup namespace) under a cgroup2 mount whose root is mnt_root. -EXDEV when that mount does
 * not see the cgroup, -ENAMETOOLONG when the result does not fit.
 */
int cgroup_fs_path(const char *mnt, const char *mnt_root, const char *cgroup_path, char *buf,
		   size_t len);

/*
 * The id of the cgroup whose directory is cgroup_fs_path (under the v2 mount): the inode
 * number of that directory, which is what bpf_get_current_cgroup_id() returns for tasks in it.
 * -EINVAL when the path is not a directory of a cgroup v2 file system.
 */
int cgroup_id_of_path(const char *cgroup_fs_path, uint64_t *id);

/*
 * The one walker of the cgroup tree: calls fn for root and every directory below it (depth
 * first, at most CGROUP_WALK_MAX_DEPTH levels) until fn returns non-zero, which is returned.
 */
#define CGROUP_WALK_MAX_DEPTH 32
struct stat;
typedef int (*cgroup_visit_fn)(void *ctx, const char *path, const struct stat *st);
int cgroup_walk(const char *root, cgroup_visit_fn fn, void *ctx);

#endif
