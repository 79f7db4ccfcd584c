/* SPDX-License-Identifier: GPL-2.0 */
/* A process's life as gpumem sees it: the holds that pause it, its first call (its entry made
 * and announced), exec, the module map of its exit, and the CUDA libraries it maps. */
#ifndef GPUMEM_LIFECYCLE_BPF_H
#define GPUMEM_LIFECYCLE_BPF_H

#include "tables.bpf.h"

extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
				 __u64 addr) __weak __ksym;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __weak __ksym;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __weak __ksym;
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __weak __ksym;

/* addr as a kernel T, read by plain loads (which fault to 0), no helper call or stack copy. */
#define kernel_cast(T, addr) ((T *)bpf_rdonly_cast((void *)(addr), bpf_core_type_id_kernel(T)))

#define VM_EXEC_FLAG 0x4

/* A process the agent may pause: no controlling terminal (an interactive shell would report
 * the stop and take the terminal back), and no gpumem (two agents could hold each other). */
static __always_inline bool holdable_untargeted(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	static const char self[] = "gpumem";
	char comm[sizeof(self)];

	if (!hold_ttyless || BPF_CORE_READ(task, signal, tty))
		return false;
	bpf_get_current_comm(comm, sizeof(comm));
	for (int i = 0; i < (int)sizeof(self); i++)
		if (comm[i] != self[i])
			return true;
	return false;
}

/* Never a process a debugger traces (it would stop at the pause and at the resume), nor a
 * job of an interactive shell (a child of its session's leader, on the terminal): the shell
 * would see its job stop, take the terminal back and run the user's next command, and the
 * job resumed in the background stops again at its next read of the terminal. */
static __always_inline bool holdable_task(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	/* Loads through the task's BTF pointer: no copies on the stack, which is full where a
	 * call's return holds. */
	if (task->ptrace)
		return false;
	return !task->signal->tty || !task->real_parent->signal->leader;
}

/* Only this instance's own targets are paused: -p / -c processes and their children, or those
 * in the cgroups --cgroup/--container/--pod selected; with none (serve), a process with no
 * terminal; and only while its consumer is alive (a fresh heartbeat). Never a debugged process
 * or a shell's job (holdable_task). The hold is recorded before the signal. */
static __always_inline bool hold(__u32 tgid)
{
	struct gm_hold h = { .holder = self_tgid };
	__u64 now = bpf_ktime_get_ns();

	if (!holds_enabled || now - heartbeat_ns > GM_HEARTBEAT_FRESH_NS)
		return false;
	if (filter_pids ? !bpf_map_lookup_elem(&targets, &tgid)
	    : filter_cgroups ? !in_selected_cgroup() : !holdable_untargeted())
		return false;
	if (!holdable_task())
		return false;
	h.time_ns = now;
	if (bpf_map_update_elem(&holds, &tgid, &h, BPF_ANY))
		return false;
	bpf_send_signal(19 /* SIGSTOP */);
	count(GM_CNT_HOLDS);
	return true;
}

/* How long a walk of a process's module map tries again for the mmap_lock that another task
 * holds for writing (a tracer placing a uprobe in every process that maps the file, a reader
 * of /proc before a waiting writer): a holder is done within microseconds, and a process
 * starts and ends once. */
#define GM_MAP_WALK_SPIN_NS 200000
#define GM_MAP_WALK_TRIES (1u << 16)
#define EBUSY_ERR 16

/* How many dentries and mounts a file's path walk goes through at most. */
#define GM_PATH_WALK_STEPS 64

/* One step of a file's path walk (path_scratch): its dentry's name, or, at the root of its
 * mount, across to the dentry that mount is on; 1 (done) at the root of the mount namespace's
 * tree (whole), past the buffer, or where the kernel's memory could not be read. An overlay's
 * file is mapped as its layer's file, on a mount of the kernel's own: no path is whole. */
static long path_step(__u64 i, void *data)
{
	static const __u32 zero;
	struct path_scratch *w = bpf_map_lookup_elem(&path_scratch, &zero);
	struct dentry *d;
	struct mount *m;
	__u64 up;
	long n;

	if (!w)
		return 1;
	d = kernel_cast(struct dentry, w->dentry);
	m = kernel_cast(struct mount, w->mnt);
	if (w->dentry == (__u64)m->mnt.mnt_root) {
		up = (__u64)m->mnt_parent;
		if (!up)
			return 1;	/* not read */
		if (up == w->mnt) {
			/* A mount that is its own parent: a namespace's root, whole; or a
			 * mount of the kernel's own (an overlay's layer, shmem), in no
			 * namespace, whose path no process sees (MNT_NS_INTERNAL is an error
			 * pointer): the name alone. */
			up = (__u64)m->mnt_ns;
			w->whole = up && up < (__u64)-4095;
			return 1;
		}
		w->dentry = (__u64)m->mnt_mountpoint;
		w->mnt = up;
		return 0;
	}
	up = (__u64)d->d_parent;
	if (up == w->dentry || !up || w->off >= GM_VMA_PATH_LEN)
		return 1;	/* a dentry out of its mount's tree, or too long a path */
	n = bpf_probe_read_kernel_str(&w->path[w->off & (GM_VMA_PATH_LEN - 1)],
				      GM_VMA_PATH_LEN, d->d_name.name);
	if (n <= 0)
		return 1;
	w->off += n;
	w->dentry = up;
	return 0;
}

/* e's path: its file's dentries walked up to the root of its mount namespace, as the kernel's
 * prepend_path does but without its locks (a rename meanwhile gives a path at which userspace's
 * open finds another file, and refuses it). With the scratch busy (the walk preempted by
 * another program's), or where the walk stops short, the file's name alone. */
static __always_inline void vma_file_path(struct gm_vma_event *e, struct file *file)
{
	static const __u32 zero;
	struct path_scratch *w = bpf_map_lookup_elem(&path_scratch, &zero);
	__u32 len;
	long n;

	e->path_len = 0;
	e->path_whole = 0;
	if (w && !__sync_fetch_and_add(&w->busy, 1)) {
		w->off = 0;
		w->whole = 0;
		w->dentry = (__u64)file->f_path.dentry;
		w->mnt = (__u64)file->f_path.mnt - bpf_core_field_offset(struct mount, mnt);
		bpf_loop(GM_PATH_WALK_STEPS, path_step, NULL, 0);
		/* Only the walk's bytes: past them, the scratch holds an earlier walk's. */
		len = w->off < sizeof(e->path) ? w->off : sizeof(e->path);
		if (len && !bpf_probe_read_kernel(e->path, len, w->path)) {
			e->path_len = len;
			e->path_whole = w->whole && w->off <= sizeof(e->path);
		}
		w->busy = 0;	/* a program that found it busy added to it too */
	}
	if (e->path_len)
		return;
	n = bpf_probe_read_kernel_str(e->path, sizeof(e->path), file->f_path.dentry->d_name.name);
	e->path_len = n > 0 ? n : 0;
}

struct map_walk {
	__u64 deadline_ns;
	__u32 tgid, gen, at_start;
	bool walked;
};

/* One try at the walk of the current task's executable file mappings; 1 (done) once it
 * walked, or the lock is not merely busy, or the time is up. */
static long try_module_map(__u64 i, void *data)
{
	struct map_walk *w = data;
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;
	long err;

	/* No counter: the iterator bounds the loop, and a counter the verifier must track
	 * precisely made it explore every count (1.7 s to load). */
	err = bpf_iter_task_vma_new(&it, bpf_get_current_task_btf(), 0);
	while ((vma = bpf_iter_task_vma_next(&it))) {
		struct gm_vma_event *e;
		struct file *file = vma->vm_file;

		if (!file || !(vma->vm_flags & VM_EXEC_FLAG))
			continue;
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e) {
			count(GM_CNT_RINGBUF_DROPPED);
			break;
		}
		e->type = GM_REC_EXIT_VMA;
		e->pid = w->tgid;
		e->gen = w->gen;
		e->at_start = w->at_start;
		e->start = vma->vm_start;
		e->end = vma->vm_end;
		e->pgoff = vma->vm_pgoff;
		e->ino = file->f_inode->i_ino;
		e->dev = file->f_inode->i_sb->s_dev;
		vma_file_path(e, file);
		bpf_ringbuf_submit(e, 0);
	}
	bpf_iter_task_vma_destroy(&it);
	w->walked = !err;
	return err != -EBUSY_ERR || bpf_ktime_get_ns() > w->deadline_ns;
}

/* The executable file mappings of the current process: at its end, which still has its memory
 * map here, or at its first call (at_start), in case an exec ends this image before userspace
 * reads its maps. The iterator only tries the mmap_lock: while another task holds it, the walk
 * is tried again, for GM_MAP_WALK_SPIN_NS at most. */
static __always_inline void emit_module_map(__u32 tgid, __u32 gen, __u32 at_start)
{
	struct map_walk w = {
		.deadline_ns = bpf_ktime_get_ns() + GM_MAP_WALK_SPIN_NS,
		.tgid = tgid, .gen = gen, .at_start = at_start,
	};

	bpf_loop(GM_MAP_WALK_TRIES, try_module_map, &w, 0);
	if (!w.walked)
		count(GM_CNT_MODULE_MAPS_BUSY);	/* no walk: its mmap_lock stayed taken (or the
						 * iterator found no memory) */
}

/* A walk of a process's thread list (signal->thread_head, through each task's thread_node). */
struct group_cpu {
	struct list_head *head, *pos;
	__u64 ns;
	bool whole;	/* the list's end was reached */
};

/* Adds the next thread's CPU time; 1 at the list's end. */
static long add_thread_cpu(__u64 i, void *data)
{
	struct group_cpu *g = data;
	struct list_head *pos = g->pos, *next = BPF_CORE_READ(pos, next);
	struct task_struct *t;

	if (!next || next == g->head) {
		g->whole = next == g->head;
		return 1;
	}
	t = (void *)next - bpf_core_field_offset(struct task_struct, thread_node);
	g->ns += BPF_CORE_READ(t, se.sum_exec_runtime);
	g->pos = next;
	return 0;
}

/* The most threads a process can have: one pid each (PID_MAX_LIMIT on 64-bit). */
#define GM_MAX_THREADS (1u << 22)

/* A process's CPU time (ns, as the scheduler counts it) at its last thread's end, added up as
 * the kernel's thread_group_cputime() does: the threads released so far (gathered in signal)
 * and each thread still in the group's list, this one, a leader that ended first (a zombie
 * until the group is reaped) and a thread that ended before this one but is not released yet
 * (still closing its files: it woke its joiner earlier, so the last thread can end first).
 * Added up again when a thread was released meanwhile (the stats lock's count moved), three
 * times at most. Each sum reads signal's before the list, so a thread released during the
 * walk is missed, never counted twice: where no try is clean, the largest sum, a floor. (x86's
 * loads are ordered; the sums are not read under the lock's barriers elsewhere.) */
static __always_inline __u64 process_cpu_ns(struct task_struct *p)
{
	struct signal_struct *sig = BPF_CORE_READ(p, signal);
	struct group_cpu g = {};
	unsigned int seq;
	__u64 best = 0;

	for (int tries = 0; tries < 3; tries++) {
		seq = BPF_CORE_READ(sig, stats_lock.seqcount.seqcount.sequence);
		if (seq & 1)
			continue;	/* a thread is being released now */
		g.head = g.pos = &sig->thread_head;
		g.ns = BPF_CORE_READ(sig, sum_sched_runtime);
		g.whole = false;
		bpf_loop(GM_MAX_THREADS, add_thread_cpu, &g, 0);
		if (g.ns > best)
			best = g.ns;
		if (g.whole && BPF_CORE_READ(sig, stats_lock.seqcount.seqcount.sequence) == seq)
			return g.ns;
	}
	return best;
}

/* A new process: userspace is told (and, with -c, it is held until userspace answers). */
static __noinline void proc_announce(__u32 tgid, const struct gm_inflight *rec, __u64 now,
				     __u64 cgroup_id)
{
	struct gm_call_event *e;

	emit_module_map(tgid, rec->gen, 1);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = GM_REC_PROCESS_NEW;
	e->py_stack_id = -1;
	e->pid = tgid;
	e->gen = rec->gen;
	e->start_ns = rec->start_ns;
	e->time_ns = now;
	e->cgroup_id = cgroup_id;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	/* Only with an event on its way, which says so: userspace's SIGCONT answers it (and
	 * never a process nothing paused, which someone else may have stopped). */
	e->held = hold_new_procs && hold(tgid);
	bpf_ringbuf_submit(e, 0);
}

/* The numbers of the calling thread's process, its entry made at its first call. */
static __always_inline struct gm_proc_stats *proc_stats(__u32 tgid,
							 const struct gm_inflight *rec, __u64 now)
{
	struct gm_proc_stats *ps = proc_find(tgid, rec->gen);
	struct gm_proc_slot *sl;
	__u32 made = 0, idx;
	int at;

	if (ps)
		return ps;
	at = -2;
	for (int i = 0; i < GM_ALLOC_TRIES && at == -2; i++)
		at = proc_make(tgid, rec->gen, rec->start_ns, now, &made);
	idx = (__u32)at;
	sl = at >= 0 ? bpf_map_lookup_elem(&procs, &idx) : NULL;
	if (!sl) {
		count(GM_CNT_PROC_MAP_FULL);
		return NULL;
	}
	if (made)
		proc_announce(tgid, rec, now, sl->stats.cgroup_id);
	return &sl->stats;
}

/* The process's entry, made at its first call (and, with -c, its hold: proc_announce). A
 * function of its own: inlined into probe_enter it outgrew the verifier's view of the stack. */
static __noinline void first_call(__u32 tgid, struct gm_inflight *rec, __u64 now)
{
	proc_stats(tgid, rec, now);
}

/* A record of a file (on_exec: the one a process runs), by its identity and its name. */
static __always_inline void emit_file(__u32 type, __u32 tgid, __u64 ino, __u32 dev,
				      const char *path)
{
	struct gm_file_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	e->type = type;
	e->pid = tgid;
	e->time_ns = bpf_ktime_get_ns();
	e->ino = ino;
	e->dev = dev;
	e->fd = 0;
	e->held = 0;
	e->traced = wanted(tgid);
	if (path)
		bpf_probe_read_kernel_str(e->path, sizeof(e->path), path);
	else
		e->path[0] = 0;
	bpf_ringbuf_submit(e, 0);
}

__noinline int forget_contexts(__u32 tgid, __u32 gen);	/* contexts.bpf.h */

/* An exec replaced p's image: the image that made the process's calls ended, and its memory
 * with it (the driver frees what the old address space held). Its end is sent like an exit's,
 * under its own generation; the exec'ing thread (the only one left) starts afresh, so that its
 * next call names the new image. */
static __always_inline void end_image(struct task_struct *p, __u32 tgid)
{
	struct gm_proc_key key = { .tgid = tgid };
	struct thread_state *ts = bpf_task_storage_get(&inflight, p, 0, 0);
	__u64 start_ns = BPF_CORE_READ(p, start_boottime);
	struct gm_call_event *e;

	if (ts) {
		__builtin_memset(&ts->rec, 0, sizeof(ts->rec));
		ts->py_none_gen_plus1 = 0;
	}
	/* p leads its group now; its exec count went up by one at this exec */
	key.gen = gm_proc_gen(start_ns, BPF_CORE_READ(p, self_exec_id) - 1);
	if (!bpf_map_lookup_elem(&procs_made, &key))
		return;
	forget_contexts(tgid, key.gen);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = GM_REC_PROCESS_EXEC;
	e->py_stack_id = -1;
	e->pid = tgid;
	e->gen = key.gen;
	e->start_ns = start_ns;
	e->tid = BPF_CORE_READ(p, pid);
	e->time_ns = bpf_ktime_get_ns();
	e->cgroup_id = bpf_get_current_cgroup_id();
	bpf_ringbuf_submit(e, 0);
}


/* An inode's ctime as stat gives it, in ns: a write to the file sets it anew. Three layouts:
 * Linux 6.11+ (i_ctime_sec and i_ctime_nsec, whose top bit 6.13 uses as a flag), 6.6-6.10
 * (__i_ctime) and before (i_ctime). */
struct inode___ctime_6_6 {
	struct timespec64 __i_ctime;
} __attribute__((preserve_access_index));
struct inode___ctime_old {
	struct timespec64 i_ctime;
} __attribute__((preserve_access_index));

static __always_inline __u64 inode_ctime_ns(struct inode *inode)
{
	struct inode___ctime_6_6 *mid = (void *)inode;
	struct inode___ctime_old *old = (void *)inode;
	__s64 sec;
	__u64 nsec;

	if (bpf_core_field_exists(inode->i_ctime_sec)) {
		sec = BPF_CORE_READ(inode, i_ctime_sec);
		nsec = BPF_CORE_READ(inode, i_ctime_nsec) & ~(1u << 31);
	} else if (bpf_core_field_exists(mid->__i_ctime)) {
		sec = BPF_CORE_READ(mid, __i_ctime.tv_sec);
		nsec = BPF_CORE_READ(mid, __i_ctime.tv_nsec);
	} else {
		sec = BPF_CORE_READ(old, i_ctime.tv_sec);
		nsec = BPF_CORE_READ(old, i_ctime.tv_nsec);
	}
	return gm_ctime_ns(sec, (__s64)nsec);
}

/* "libcuda.so*" or "libcudart.so*", AMD's "libamdhip64.so*", or PyTorch's "libc10_cuda.so*"
 * and "libc10_hip.so*" (its tensors' USDT probes): the name of the file itself, symlinks
 * resolved. Archives such as libcudart_static.a, which linkers map, do not match. */
static __always_inline bool gpu_library_name(struct file *file)
{
	const unsigned char *name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	static const char c10[] = "libc10_cuda.so", c10_hip[] = "libc10_hip.so";
	static const char hip[] = "libamdhip64.so";
	char head[16];

	if (bpf_probe_read_kernel(head, sizeof(head), name))
		return false;
	if (head[0] != 'l' || head[1] != 'i' || head[2] != 'b')
		return false;
	if (head[3] == 'a') {
		for (int i = 3; i < (int)sizeof(hip) - 1; i++)
			if (head[i] != hip[i])
				return false;
		return true;
	}
	if (head[3] != 'c')
		return false;
	if (head[4] == '1') {
		if (head[7] == 'h') {
			for (int i = 4; i < (int)sizeof(c10_hip) - 1; i++)
				if (head[i] != c10_hip[i])
					return false;
			return true;
		}
		for (int i = 4; i < (int)sizeof(c10) - 1; i++)
			if (head[i] != c10[i])
				return false;
		return true;
	}
	if (head[4] != 'u' || head[5] != 'd' || head[6] != 'a')
		return false;
	if (head[7] == '.')
		return head[8] == 's' && head[9] == 'o';
	return head[7] == 'r' && head[8] == 't' && head[9] == '.' && head[10] == 's' &&
	       head[11] == 'o';
}

#endif /* GPUMEM_LIFECYCLE_BPF_H */
