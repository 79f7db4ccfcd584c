// SPDX-License-Identifier: GPL-2.0
/* The kernel half of gpumem: uprobes on CUDA allocation APIs keep, in maps, what every
 * process and call site holds; process lifecycle and library discovery tracepoints. This file
 * holds the programs; their code is in the headers, one per part, each needing only those
 * included above it (every map is in maps.bpf.h). One object, one skeleton. */

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>

#include "gpumem.h"
#include "maps.bpf.h"
#include "base.bpf.h"
#include "thread.bpf.h"
#include "tables.bpf.h"
#include "lifecycle.bpf.h"
#include "account.bpf.h"
#include "ustack.bpf.h"
#include "pystack.bpf.h"
#include "stacks.bpf.h"
#include "entry.bpf.h"
#include "arrays.bpf.h"
#include "contexts.bpf.h"
#include "returns.bpf.h"
#include "tensors.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* A kfunc of kernels since 6.13, for session_alloc only. */
extern bool bpf_session_is_return(void) __weak __ksym;

/* ---- Allocations and frees, at their entry (entry.bpf.h) ---- */

SEC("uprobe")
int BPF_KPROBE(enter_alloc, void *out_ptr, __u64 size)
{
	call_enter(ctx, (__u64)out_ptr, 0, size, 1);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(enter_alloc_pitch, void *out_ptr, void *out_pitch, __u64 width, __u64 height)
{
	call_enter(ctx, (__u64)out_ptr, (__u64)out_pitch, width, height);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(enter_free, __u64 addr)
{
	probe_enter(ctx, 0, 0, 0, 0, addr, true);
	return 0;
}

/* ---- Arrays, sized at their entry (arrays.bpf.h) ---- */

SEC("uprobe")
int BPF_KPROBE(enter_array, void *out, void *desc, __u64 a2, __u64 a3, __u64 a4)
{
	array_enter(ctx, out, desc, a2, a3, a4);
	return 0;
}

/* ---- Contexts (contexts.bpf.h) ---- */

SEC("uprobe")
int BPF_KPROBE(enter_ctx, __u64 a0, __u64 a1, __u64 a2, __u64 a3, __u64 a4)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct gm_inflight *rec = thread_record(task, task_id(task) >> 32);

	if (!rec)
		return 0;
	identify_process(rec);
	ctx_enter(rec, GM_COOKIE_SHAPE(bpf_get_attach_cookie(ctx)), a0, a1, a2, a3, a4);
	return 0;
}

/* ---- Returns (returns.bpf.h) ---- */

SEC("uretprobe")
int BPF_KRETPROBE(call_return, long ret)
{
	call_returned(ctx, ret, true);
	return 0;
}

/* Kernels since 6.13: the alloc shape's entry and return in one session program (loaded
 * instead of enter_alloc, whose calls then have no call_return), its entry saying whether the
 * return has work: a nested driver call (cuMemAlloc_v2 inside cudaMalloc) or a process not
 * traced returns without the return probe's trap. */
SEC("uprobe")
int BPF_KPROBE(session_alloc, void *out_ptr, __u64 size)
{
	if (bpf_session_is_return()) {
		call_returned(ctx, PT_REGS_RC(ctx), false);
		return 0;
	}
	return call_enter(ctx, (__u64)out_ptr, 0, size, 1);
}

/* ---- PyTorch tensors (tensors.bpf.h) ---- */

/* pytorch:malloc(ptr, device, size, stream): the stream is not read. */
SEC("usdt")
int tensor_malloc(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = task_id(task);
	struct gm_inflight *rec;
	struct usdt_call c;

	rec = tensor_thread(task, id >> 32);
	if (!rec || usdt_call_of(ctx, 3, &c) || !c.arg[0] || c.arg[2] <= 0)
		return 0;
	tensor_alloc(ctx, rec, &c, call_stacks(ctx, rec, id >> 32, GM_STACK_IN_BODY), id);
	return 0;
}

/* Fired before the allocator takes the tensor back: its entry is deleted here, so only one of
 * two racing frees counts it. The thread's record only when the free is streamed (the record's
 * process and the stack's scratch): else its lookup would cost more than the rest of the
 * free, and the probe's run goes to the process at once. */
SEC("usdt")
int tensor_free(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = task_id(task), cookie, ptr;
	__u32 tgid = id >> 32, type = GM_REC_FREE;
	struct gm_alloc_key key = { .tgid = tgid, .space = GM_SPACE_TENSOR };
	struct gm_alloc_info info = {};
	__u32 seen = 0;
	bool found;
	int at;
	__u64 reserved = 0, tensors = 0;
	struct gm_inflight *rec = NULL;
	struct usdt_call c;

	if (stream_calls()) {
		rec = tensor_thread(task, tgid);
		if (!rec)
			return 0;
		key.gen = rec->gen;
	} else {
		if (!wanted(tgid))
			return 0;
		key.gen = task_gen(task);
		proc_hit(tgid, key.gen);
	}
	if (usdt_call_of(ctx, 1, &c) || !c.arg[0])
		return 0;
	cookie = c.cookie;
	ptr = c.arg[0];
	key.addr = ptr;
	at = alloc_find(&key, &seen);
	found = at >= 0;
	if (!found) {
		count(GM_CNT_UNKNOWN_TENSOR_FREES);
		type = GM_REC_UNKNOWN_FREE;
	} else {
		if (!alloc_take((__u32)at, seen, &info))
			return 0;
		reserved = account_free_by(rec, tgid, key.gen, &info, &tensors);
	}
	if (rec)
		emit_record(type, cookie, rec, tgid, (__u32)id,
			    user_stack(ctx, rec, GM_STACK_IN_BODY), -1, GM_COOKIE_KIND(cookie), ptr,
			    info.size, 0, reserved, tensors, found ? info.device : GM_DEVICE_UNKNOWN);
	return 0;
}

/* ---- Process lifecycle and library discovery (lifecycle.bpf.h) ---- */

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct file *file = BPF_CORE_READ(bprm, file);

	/* Not filtered: what one process runs, a traced one may run next. The file's identity
	 * goes with its name: the name alone is trusted for nothing. */
	emit_file(GM_REC_EXEC, tgid, BPF_CORE_READ(file, f_inode, i_ino),
		  BPF_CORE_READ(file, f_inode, i_sb, s_dev), BPF_CORE_READ(bprm, filename));
	end_image(p, tgid);
	return 0;
}

/* Children of a followed process are followed too (-c CMD). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (!filter_pids || ptgid == ctgid || !bpf_map_lookup_elem(&targets, &ptgid))
		return 0;
	if (bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY))
		count(GM_CNT_TARGETS_FULL);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);
	struct gm_proc_key key = { .tgid = tgid };
	struct gm_call_event *e;
	__u64 start_ns, cpu_ns;

	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;	/* not the last thread of its process */
	start_ns = BPF_CORE_READ(p, group_leader, start_boottime);
	key.gen = gm_proc_gen(start_ns, BPF_CORE_READ(p, group_leader, self_exec_id));
	/* A followed process leaves the targets at its end: they hold the processes of -c/-p
	 * alive, not every one that ever forked (and a pid used again is another process). */
	if (filter_pids && bpf_map_lookup_elem(&targets, &tgid))
		bpf_map_delete_elem(&targets, &tgid);
	else if (!bpf_map_lookup_elem(&procs_made, &key))
		return 0;
	forget_contexts(tgid, key.gen);
	emit_module_map(tgid, key.gen, 0);	/* p is the current task */
	cpu_ns = process_cpu_ns(p);	/* before the record: its walk holds no reservation */
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = GM_REC_PROCESS_EXIT;
	e->py_stack_id = -1;
	e->pid = tgid;
	e->gen = key.gen;
	e->start_ns = start_ns;
	e->tid = tid;
	e->time_ns = bpf_ktime_get_ns();
	e->error = BPF_CORE_READ(p, exit_code);	/* a wait status: userspace decodes it */
	e->size = cpu_ns;	/* every thread's, in ns (not ticks) */
	e->cgroup_id = bpf_get_current_cgroup_id();	/* p is the current task */
	BPF_CORE_READ_STR_INTO(&e->comm, p, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

#define NR_MMAP 9
#define MAP_ANONYMOUS_FLAG 0x20
#define PROT_WRITE_FLAG 0x2
#define PROT_EXEC_FLAG 0x4

/* A file named like a CUDA library is being mapped by mmap() (the dynamic loader's first
 * mapping of a library, at start-up or dlopen). If userspace has not examined it yet, the
 * process is held (SIGSTOP, taking effect as mmap returns, before the loader relocates it, let
 * alone runs it) until the probes are on. This tracepoint fires only for mmaps that need a
 * placement, so unlike a syscall tracepoint it costs nothing to other system calls. A private
 * writable copy that cannot run (libelf reading the file: a symbolizer, another gpumem) is no
 * loader's mapping and is let be, as discovery's scans of the maps let it be. */
SEC("tp_btf/vm_unmapped_area")
int BPF_PROG(on_unmapped_area, unsigned long addr, struct vm_unmapped_area_info *info)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct gm_file_key key = {};
	struct gm_file_event *e;
	struct file **fds, *file;
	struct inode *inode;
	__u64 *examined;
	long nr, fd;
	__u32 tgid;

	nr = BPF_CORE_READ(regs, orig_ax);
	if (nr != NR_MMAP || (BPF_CORE_READ(regs, r10) & MAP_ANONYMOUS_FLAG))
		return 0;
	if ((BPF_CORE_READ(regs, dx) & (PROT_WRITE_FLAG | PROT_EXEC_FLAG)) == PROT_WRITE_FLAG)
		return 0;
	fd = (long)BPF_CORE_READ(regs, r8);
	if (fd < 0)
		return 0;
	fds = BPF_CORE_READ(task, files, fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd & 0xffffff]) || !file)
		return 0;
	if (!gpu_library_name(file))
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	/* Every process's new library is attached before that process goes on, traced or not:
	 * it may be moved into a traced cgroup, or its children traced (a few ms, once per
	 * library file on the host). */
	if (tgid == self_tgid)
		return 0;
	inode = BPF_CORE_READ(file, f_inode);
	key.ino = BPF_CORE_READ(inode, i_ino);
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	/* Examined as it is: a file written in place since (cp over it keeps the inode) is
	 * examined anew, and the process held until the probes placed by its old code's
	 * offsets are gone (the loader maps the code after this first mapping). */
	examined = bpf_map_lookup_elem(&known_files, &key);
	if (examined && *examined == inode_ctime_ns(inode))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return 0;
	}
	e->type = GM_REC_LIB_OPEN;
	e->pid = tgid;
	e->fd = (__u32)fd;
	e->time_ns = bpf_ktime_get_ns();
	e->ino = key.ino;
	e->dev = key.dev;
	e->traced = wanted(tgid);
	bpf_probe_read_kernel_str(e->path, sizeof(e->path),
				  BPF_CORE_READ(file, f_path.dentry, d_name.name));
	e->held = hold_new_libs && hold(tgid);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
