/* SPDX-License-Identifier: GPL-2.0 */
/* The calling thread's record (task storage): made at its first call, it names the thread's
 * process and keeps the call in flight and the thread's clock. */
#ifndef GPUMEM_THREAD_BPF_H
#define GPUMEM_THREAD_BPF_H

#include "base.bpf.h"

/* What bpf_get_current_pid_tgid() returns, from the task a program has at hand anyway: a
 * helper call less (the task's own fields, read directly). */
static __always_inline __u64 task_id(const struct task_struct *task)
{
	return (__u64)(__u32)task->tgid << 32 | (__u32)task->pid;
}

/* The whole state of the thread whose record rec is (its first member). */
static __always_inline struct thread_state *thread_of(struct gm_inflight *rec)
{
	return (struct thread_state *)rec;
}

/* The generation of the current task's process (task), read from the task itself: three
 * loads, where a thread's record is a task storage lookup. */
static __always_inline __u32 task_gen(struct task_struct *task)
{
	struct task_struct *leader = task->group_leader;

	return gm_proc_gen(leader->start_boottime, leader->self_exec_id);
}

/* The calling thread's process (start time, generation), read at the thread's first call and
 * kept in its record: one read per thread, not per call (an exec clears it: on_exec). */
static __always_inline void identify_process(struct gm_inflight *rec)
{
	struct task_struct *task;

	if (rec->gen)
		return;
	task = bpf_get_current_task_btf();
	rec->start_ns = task->group_leader->start_boottime;
	rec->gen = task_gen(task);
}

/* The calling thread's record, made at its first call; NULL for a process not traced. task: the
 * current one. */
static __always_inline struct gm_inflight *thread_record(struct task_struct *task, __u32 tgid)
{
	struct gm_inflight *rec;

	if (!wanted(tgid))
		return NULL;
	rec = bpf_task_storage_get(&inflight, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!rec)
		count(GM_CNT_INFLIGHT_FULL);
	else
		rec->hits++;
	return rec;
}

/* The thread's probe runs so far, added to its process's (gm_proc_stats.probe_hits). */
static __always_inline void flush_hits(struct gm_inflight *rec, struct gm_proc_stats *ps)
{
	__u32 hits = rec->hits;

	if (!hits)
		return;
	rec->hits = 0;
	__sync_fetch_and_add(&ps->probe_hits, hits);
}

/* When a call began, for its allocation's age: the clock read at the thread's first call of
 * each scheduler tick (1-4 ms), not at every call. A clock read costs 50-60 ns a call on this
 * project's VM, jiffies a few; the coarse clock is refused to uprobe programs. */
static __always_inline __u64 call_clock(struct gm_inflight *rec)
{
	struct thread_state *ts = thread_of(rec);
	__u64 j = bpf_jiffies64();

	if (j != ts->clock_jiffies || !ts->clock_ns) {
		ts->clock_jiffies = j;
		ts->clock_ns = bpf_ktime_get_ns();
	}
	return ts->clock_ns;
}

#endif /* GPUMEM_THREAD_BPF_H */
