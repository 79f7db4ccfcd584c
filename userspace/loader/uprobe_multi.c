// SPDX-License-Identifier: GPL-2.0
/* uprobe_multi links through the bpf syscall, laid out as the kernel's union bpf_attr. */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "loader/uprobe_multi.h"

#define UPROBE_MULTI_RETURN 1	/* BPF_F_UPROBE_MULTI_RETURN */

struct uprobe_multi_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__u64 path;
	__u64 offsets;
	__u64 ref_ctr_offsets;
	__u64 cookies;
	__u32 cnt;
	__u32 multi_flags;
	__u32 pid;
	__u32 pad;
};

int uprobe_multi_link(struct bpf_program *prog, const char *path, const __u64 *offsets,
		      const __u64 *cookies, unsigned int cnt, bool ret)
{
	return uprobe_multi_link_fd(bpf_program__fd(prog), bpf_program__expected_attach_type(prog),
				    path, offsets, cookies, cnt, ret);
}

static int link_create(struct uprobe_multi_attr *attr)
{
	int fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, attr, sizeof(*attr));

	return fd < 0 ? -errno : fd;
}

int uprobe_multi_link_pid(struct bpf_program *prog, const char *path, __u64 offset, int pid)
{
	__u64 cookie = 0;
	struct uprobe_multi_attr attr = {
		.prog_fd = (__u32)bpf_program__fd(prog),
		.attach_type = bpf_program__expected_attach_type(prog),
		.path = (__u64)(unsigned long)path,
		.offsets = (__u64)(unsigned long)&offset,
		.cookies = (__u64)(unsigned long)&cookie,
		.cnt = 1,
		.pid = (__u32)pid,
	};

	return link_create(&attr);
}

int uprobe_multi_link_fd(int prog_fd, unsigned int attach_type, const char *path,
			 const __u64 *offsets, const __u64 *cookies, unsigned int cnt, bool ret)
{
	struct uprobe_multi_attr attr = {
		.prog_fd = (__u32)prog_fd,
		.attach_type = attach_type,
		.path = (__u64)(unsigned long)path,
		.offsets = (__u64)(unsigned long)offsets,
		.cookies = (__u64)(unsigned long)cookies,
		.cnt = cnt,
		.multi_flags = ret ? UPROBE_MULTI_RETURN : 0,
	};

	return link_create(&attr);
}
