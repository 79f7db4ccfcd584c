/* SPDX-License-Identifier: GPL-2.0 */
/* The entry of a probed call: the outermost call in flight on a thread recorded, calls inside
 * it told apart, and a free accounted whole. */
#ifndef GPUMEM_ENTRY_BPF_H
#define GPUMEM_ENTRY_BPF_H

#include "thread.bpf.h"
#include "tables.bpf.h"
#include "lifecycle.bpf.h"
#include "account.bpf.h"
#include "ustack.bpf.h"

/* The key of the allocation the call in flight on the thread frees (its address, its space). */
static __always_inline void alloc_key_of(struct gm_alloc_key *key, __u32 tgid,
					 const struct gm_inflight *rec)
{
	key->tgid = tgid;
	key->gen = rec->gen;
	key->pad = 0;
	key->space = GM_COOKIE_SPACE(rec->cookie);
	key->addr = rec->addr;
}

/* Inside the call a thread has in flight: below its stack pointer (equal: the same call seen
 * by a second probe on the same code, one file reached under two inodes and probed both ways;
 * taking it again would count it twice). A free's record outlives its call (no return probe):
 * a free of the same address and space at or below it is inside it (the driver's cuMemFree_v2
 * inside cudaFree, or the second probe of its trap) exactly when the address is no longer
 * live, the free having taken it (or the free was refused, below); a free of an address live
 * again was handed it since (by another thread's allocation), and is a free of its own, from
 * the same frame too. A program's double free from one frame (one API), with no CUDA call
 * between, counts as nested, not unknown. */
static __always_inline bool inside_call(const struct gm_inflight *rec, __u32 tgid, __u64 sp,
					__u64 cookie, __u64 addr)
{
	struct gm_alloc_key key;
	__u32 seen = 0;

	if (!rec->sp || sp > rec->sp)
		return false;
	if (!rec->entry_only)
		return true;
	if (!is_free_shape(cookie) || addr != rec->addr ||
	    GM_COOKIE_SPACE(cookie) != GM_COOKIE_SPACE(rec->cookie))
		return false;
	/* From the free's own frame, only its own API: a second probe of one trap. */
	if (sp == rec->sp && GM_COOKIE_API(cookie) != GM_COOKIE_API(rec->cookie))
		return false;
	alloc_key_of(&key, tgid, rec);
	if (alloc_find(&key, &seen) < 0)
		return true;
	/* A refused free leaves it live: the driver's call inside it has its kind; the free of
	 * the right kind that follows (cudaFreeHost after cudaFree) is a free of its own. */
	return rec->refused && GM_COOKIE_KIND(cookie) == GM_COOKIE_KIND(rec->cookie);
}

/* A free, whole at its entry: the allocation leaves the live map before the driver can hand
 * its address to another thread, and only the deleter accounts it, so two racing frees of one
 * address count once. A free of a live allocation is taken as done: cudaFree of a valid
 * pointer fails only with the context lost, and the process's memory with it. No return
 * probe: 0.4 µs a pair (its trap) and a program run saved. */
static __always_inline void free_enter(struct pt_regs *ctx, struct gm_inflight *rec, __u64 id)
{
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct gm_alloc_key key;
	struct gm_alloc_slot *found = NULL;
	/* Whole on every path: left undefined where no entry was found, clang 14 read its
	 * fields from registers the verifier refuses as never written (R4 !read_ok). */
	struct gm_alloc_info info = {};
	__s32 stack_id = -1;
	bool stream, mine = false;
	__u32 seen = 0, idx;
	__u64 total;
	int at;

	if (!rec->addr)		/* cudaFree(NULL) frees nothing */
		return;
	alloc_key_of(&key, tgid, rec);
	at = alloc_find(&key, &seen);
	idx = (__u32)at;
	if (at >= 0)
		found = bpf_map_lookup_elem(&allocs, &idx);
	if (found && key.space == GM_SPACE_ADDR &&
	    (found->info.kind == GM_KIND_HOST) != (GM_COOKIE_KIND(rec->cookie) == GM_KIND_HOST) &&
	    *(volatile __u32 *)&found->state == seen) {	/* still that entry's kind */
		/* cudaFree of pinned host memory, cudaFreeHost of device memory: refused by the
		 * driver, and the allocation stays. */
		count(GM_CNT_FAILED_FREES);
		rec->refused = 1;
		return;
	}
	if (found)
		mine = alloc_take(idx, seen, &info);
	stream = stream_calls();
	if (stream)
		stack_id = user_stack(ctx, rec, GM_STACK_AT_ENTRY);
	if (!mine) {
		count(GM_CNT_UNKNOWN_FREES);
		if (stream)
			emit_call(GM_REC_UNKNOWN_FREE, rec, tgid, tid, stack_id, -1, 0, rec->addr,
				  0, 0, 0, GM_DEVICE_UNKNOWN);
		return;
	}
	total = account_free_by(rec, tgid, rec->gen, &info, NULL);
	if (stream)
		emit_call(GM_REC_FREE, rec, tgid, tid, stack_id, -1, info.kind, rec->addr,
			  info.size, 0, total, info.device);
}

/* Entry of a probed call (may_free: enter_free's, whose shapes include the frees). The
 * outermost call in flight on a thread owns the accounting: a call inside the recorded one is
 * skipped; a record whose return never fired (sp not above ours) is stale and replaced. 0 when
 * the call's return has work (a session's entry returns it: anything else spares the return
 * its trap). */
static __always_inline int probe_enter(struct pt_regs *ctx, __u64 out_ptr, __u64 out_pitch,
				       __u64 size, __u64 height, __u64 addr, bool may_free)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = task_id(task), sp = PT_REGS_SP(ctx), cookie, now;
	struct gm_inflight *rec = thread_record(task, id >> 32);

	if (!rec)
		return 1;
	/* Inside an allocation's call (the driver's under the runtime's): no cookie needed. */
	if (rec->sp && !rec->entry_only && sp <= rec->sp) {
		count(GM_CNT_NESTED_CALLS);
		return 1;
	}
	cookie = bpf_get_attach_cookie(ctx);
	/* Past the test above only a free's record can hold a call inside it. */
	if (may_free && inside_call(rec, id >> 32, sp, cookie, addr)) {
		count(GM_CNT_NESTED_CALLS);
		return 1;
	}
	/* Not before: a nested call needs no clock; nor does a free, but to hold a new process. */
	now = may_free && is_free_shape(cookie) && !hold_new_procs ? 0 : call_clock(rec);
	if (rec->sp && !rec->entry_only)
		count(GM_CNT_STALE_INFLIGHT);
	rec->sp = sp;
	rec->cookie = cookie;
	rec->entry_only = may_free && is_free_shape(cookie);
	rec->refused = 0;
	rec->time_ns = now;	/* an allocation's age (0 for a free) */
	rec->out_ptr = out_ptr;
	rec->out_pitch = out_pitch;
	rec->size = size;
	rec->height = height;
	rec->addr = addr;
	identify_process(rec);
	/* -c: a new process is held at its first call's entry, not at its return, so that
	 * userspace has read its maps (a shared libpython, mapped after exec) before the first
	 * allocation's Python stack is walked. */
	if (hold_new_procs)
		first_call(id >> 32, rec, now);
	if (may_free && rec->entry_only) {
		free_enter(ctx, rec, id);
		return 1;
	}
	return 0;
}

/* Entry of a call of a shape that is never a free (every program's but enter_free's): the
 * free's path is not in its code, nor its stack in the program's frame. */
static __always_inline int call_enter(struct pt_regs *ctx, __u64 out_ptr, __u64 out_pitch,
				      __u64 size, __u64 height)
{
	return probe_enter(ctx, out_ptr, out_pitch, size, height, 0, false);
}

#endif /* GPUMEM_ENTRY_BPF_H */
