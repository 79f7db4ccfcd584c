// SPDX-License-Identifier: GPL-2.0
/* Empty entry and return programs: what the uprobes themselves cost, without gpumem's work. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("uprobe")
int bare_entry(struct pt_regs *ctx)
{
	return 0;
}

SEC("uretprobe")
int bare_return(struct pt_regs *ctx)
{
	return 0;
}
