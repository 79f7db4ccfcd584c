// SPDX-License-Identifier: GPL-2.0
/* What gpumem cannot do without: BTF and the capabilities, checked before anything loads. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/util.h"
#include "cmd/system.h"

/* The effective capability set, from /proc/self/status (no libcap needed). */
static uint64_t effective_caps(void)
{
	char line[256];
	uint64_t caps = 0;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %" SCNx64, &caps) == 1)
			break;
	fclose(f);
	return caps;
}

#define CAP_BIT(n) (1ull << (n))
enum { CAP_KILL_NR = 5, CAP_SYS_PTRACE_NR = 19, CAP_SYS_ADMIN_NR = 21, CAP_PERFMON_NR = 38,
       CAP_BPF_NR = 39 };

/* The initial PID namespace's inode number (the kernel's PROC_PID_INIT_INO, fixed). */
#define INIT_PID_NS_INO 0xEFFFFFFCu

/* Whether gpumem runs in the host's PID namespace: the BPF side gives host PIDs, which
 * gpumem looks up in /proc, signals (a held process is resumed by its PID) and shows. */
static bool in_host_pid_ns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) != 0 || st.st_ino == INIT_PID_NS_INO;
}

/* What gpumem cannot do without, checked before anything loads: a clear line beats a
 * verifier error, and without CAP_SYS_PTRACE it would silently see no process at all. */
int check_system(struct options *o)
{
	uint64_t caps = effective_caps();
	bool admin = caps & CAP_BIT(CAP_SYS_ADMIN_NR);
	char missing[128] = "";

	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		p_err("this kernel has no BTF (/sys/kernel/btf/vmlinux): gpumem needs a kernel "
		      "built with CONFIG_DEBUG_INFO_BTF=y");
		return -ENOTSUP;
	}
	if (!admin && !(caps & CAP_BIT(CAP_BPF_NR)))
		strcat(missing, " CAP_BPF");
	if (!admin && !(caps & CAP_BIT(CAP_PERFMON_NR)))
		strcat(missing, " CAP_PERFMON");
	if (!(caps & CAP_BIT(CAP_SYS_PTRACE_NR)))
		strcat(missing, " CAP_SYS_PTRACE");
	if (missing[0]) {
		p_err("must run as root, or with CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE "
		      "(missing:%s): try sudo", missing);
		return -EPERM;
	}
	if (!in_host_pid_ns()) {
		/* Elsewhere it would read, resume and name other processes than it saw, and
		 * leave the ones it held stopped. */
		p_err("runs only in the host's PID namespace (the kernel gives it host PIDs): in "
		      "a container, give it the host's (Kubernetes hostPID: true, docker "
		      "--pid=host)");
		return -ENOTSUP;
	}
	if (!(caps & CAP_BIT(CAP_KILL_NR)) && (o->tracer.hold_new_libs || o->tracer.hold_new_procs)) {
		/* It could stop another user's process and not be allowed to resume it. */
		p_err("warning: no CAP_KILL: processes that map a new CUDA library are not held "
		      "(their first calls may be missed); grant CAP_KILL to hold them");
		o->tracer.hold_new_libs = o->tracer.hold_new_procs = o->tracer.hold_ttyless = false;
	}
	return 0;
}
