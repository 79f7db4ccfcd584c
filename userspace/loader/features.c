// SPDX-License-Identifier: GPL-2.0
/* Calibration: the kernel features the tracer chooses its programs by, each asked once. */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include "loader/features.h"
#include "loader/uprobe_multi.h"

/* A uprobe_multi link of a program that does nothing, on "/" (no file): a kernel that knows
 * the attach type refuses the path (EBADF); one that does not, the attach type (EINVAL). */
static bool probe_uprobe_multi(void)
{
	const struct bpf_insn insns[] = {
		{ .code = 0xb7, .dst_reg = 0, .imm = 0 },	/* r0 = 0 */
		{ .code = 0x95 },				/* exit */
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = ATTACH_UPROBE_MULTI);
	__u64 offset = 0;
	int prog, link;
	bool ok;

	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "gm_calib_umulti", "GPL", insns,
			     sizeof(insns) / sizeof(insns[0]), &opts);
	if (prog < 0)
		return false;
	link = uprobe_multi_link_fd(prog, ATTACH_UPROBE_MULTI, "/", &offset, NULL, 1, false);
	ok = link == -EBADF;
	if (link >= 0) {	/* it should not attach to "/", but if it did, it works */
		close(link);
		ok = true;
	}
	close(prog);
	return ok;
}

/* Whether the kernel's enum bpf_attach_type has name, with this build's number for it. */
static bool btf_attach_type(const struct btf *btf, const char *name, unsigned int value)
{
	int id = btf__find_by_name_kind(btf, "bpf_attach_type", BTF_KIND_ENUM);
	const struct btf_type *t;
	const struct btf_enum *e;

	if (id <= 0)
		return false;
	t = btf__type_by_id(btf, id);
	e = btf_enum(t);
	for (unsigned int i = 0; i < btf_vlen(t); i++)
		if (!strcmp(btf__name_by_offset(btf, e[i].name_off), name))
			return (unsigned int)e[i].val == value;
	return false;
}

const struct kernel_features *kernel_features(void)
{
	static struct kernel_features f;
	static bool asked;
	struct btf *btf;

	if (asked)
		return &f;
	asked = true;
	f.uprobe_multi = probe_uprobe_multi();
	btf = btf__load_vmlinux_btf();
	if (btf) {
		f.uprobe_session = f.uprobe_multi &&
				   btf_attach_type(btf, "BPF_TRACE_UPROBE_SESSION",
						   ATTACH_UPROBE_SESSION);
		/* A tp_btf program's tracepoint is the BTF type btf_trace_<name>. */
		f.open_watch = btf__find_by_name(btf, "btf_trace_vm_unmapped_area") > 0;
		btf__free(btf);
	}
	return &f;
}
