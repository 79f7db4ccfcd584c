/* SPDX-License-Identifier: GPL-2.0 */
/* The return of a probed call: an allocation made live and accounted, a context followed, or a
 * context's teardown. */
#ifndef GPUMEM_RETURNS_BPF_H
#define GPUMEM_RETURNS_BPF_H

#include "thread.bpf.h"
#include "tables.bpf.h"
#include "lifecycle.bpf.h"
#include "account.bpf.h"
#include "ustack.bpf.h"
#include "stacks.bpf.h"
#include "arrays.bpf.h"
#include "contexts.bpf.h"

/* What a call that succeeded handed out: its address, read where the call wrote it, and in
 * *size the size a pitched call chose (the pitch it wrote times the rows). An array whose
 * descriptor could not be sized is counted. */
static __always_inline __u64 alloc_out(struct gm_inflight *rec, __u32 shape, __u64 *size)
{
	if (shape == GM_SHAPE_MALLOC3D || shape == GM_SHAPE_ALLOC_PITCH) {
		__u64 pitch = 0;

		pitch = out_word(rec, 1, rec->out_pitch);
		*size = pitch;
		if (!mul_bounded(size, rec->height))
			*size = 0;
	}
	if (is_array_shape(shape) && !rec->height)
		count(GM_CNT_UNSIZED_ARRAYS);
	if (shape == GM_SHAPE_REGISTER)
		return rec->out_ptr;	/* the caller's own range */
	return out_word(rec, 0, rec->out_ptr);
}

/* stacks: call_stacks() at the return; id: as bpf_get_current_pid_tgid() returns it. */
static __noinline void alloc_return(struct pt_regs *ctx, struct gm_inflight *rec, __u64 id,
				    __s32 rc, __u64 stacks)
{
	__s32 stack_id = user_stack_of(stacks), py_stack_id = python_stack_of(stacks);
	__u32 tid = (__u32)id, tgid = id >> 32;
	__u32 kind = GM_COOKIE_KIND(rec->cookie);
	__u32 shape = GM_COOKIE_SHAPE(rec->cookie);
	__u64 now = rec->time_ns;	/* the call's start: one clock read per call */
	struct gm_alloc_key akey = { .tgid = tgid, .gen = rec->gen };
	struct gm_alloc_info info = {};
	struct gm_site_key skey = { .tgid = tgid, .gen = rec->gen };
	struct gm_proc_stats *ps;
	struct gm_site_stats *ss;
	__u64 addr = 0, size = rec->size, total = 0;
	bool new_site = false;

	/* The context and device it is charged to (a failure: the device it asked of). */
	info.ctx = current_ctx(rec, tgid, &info.device);
	if (shape == GM_SHAPE_VMM_CREATE && rec->out_pitch)
		info.device = (__s32)rec->out_pitch - 1;	/* its properties' device */
	skey.stack_id = stack_id;
	skey.py_stack_id = py_stack_id;
	skey.api = GM_COOKIE_API(rec->cookie);
	skey.kind = kind;
	skey.gpu = gm_site_gpu(kind, GM_COOKIE_LAYER(rec->cookie), info.device);
	ps = proc_stats(tgid, rec, now);
	if (ps)
		flush_hits(rec, ps);
	ss = site_stats(&skey, &new_site, &info.site);
	if (new_site && ps)
		ps->cgroup_id = bpf_get_current_cgroup_id();	/* followed if it moved */
	if (new_site && stack_mode == GM_STACKS_DWARF && stack_id >= 0)
		emit_stack_copy(ctx, rec, tgid, tid, stack_id);

	if (shape == GM_SHAPE_IMPORT)
		size = 0;	/* another process's memory: its size is not in the handle */
	if (rc != 0) {
		if (shape == GM_SHAPE_ALLOC_PITCH || shape == GM_SHAPE_MALLOC3D)
			size = rec->size * rec->height;	/* requested, unpadded */
		__u64 tensors = 0;

		count(GM_CNT_FAILED_ALLOCS);
		if (ps) {
			__sync_fetch_and_add(&ps->failed_count, 1);
			total = ps->current_bytes;
			tensors = ps->tensor_bytes;	/* what PyTorch's tensors held of it */
		}
		if (ss)
			__sync_fetch_and_add(&ss->failed_count, 1);
		emit_record(GM_REC_ALLOC_FAILED, rec->cookie, rec, tgid, tid, stack_id, py_stack_id,
			    kind, 0, size, rc, total, tensors, info.device);
		return;
	}

	addr = alloc_out(rec, shape, &size);
	akey.space = GM_COOKIE_SPACE(rec->cookie);
	akey.addr = addr;
	info.size = size;
	info.time_ns = now;
	info.api = skey.api;
	info.kind = kind;
	info.layer = GM_COOKIE_LAYER(rec->cookie);
	if (!insert_live(&akey, &info))
		return;
	if (ss)
		site_add(ss, size);
	/* The process keeps only what needs a running total (current GPU bytes, peak); its
	 * counts and per-kind bytes are the sums of its sites, added up in userspace. */
	if (ps) {
		if (is_gpu_kind(kind)) {
			total = __sync_fetch_and_add(&ps->current_bytes, size) + size;
			add_gpu_bytes(ps, info.device, size);
			raise_peak(ps, total);
		} else {
			total = ps->current_bytes;
		}
	}
	if (stream_calls())
		emit_call(GM_REC_ALLOC, rec, tgid, tid, stack_id, py_stack_id, kind, addr, size, 0,
			  total, info.device);
}

/* One return program for every shape but the frees (which have none). A return whose stack
 * pointer is not above the recorded entry's belongs to a nested call that was not recorded.
 * The record is the thread's own and no other program runs on this thread meanwhile: it is
 * read in place. The Python walk is called from here, not from alloc_return, so that the two
 * frames never stack up past 512 bytes. may_be_ctx: false where the probe is known to be of
 * the alloc shape (its cookie unread). */
static __always_inline void call_returned(struct pt_regs *ctx, long ret, bool may_be_ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = task_id(task);
	__u32 shape = may_be_ctx ? GM_COOKIE_SHAPE(bpf_get_attach_cookie(ctx)) : GM_SHAPE_ALLOC;
	struct gm_inflight *rec;

	rec = bpf_task_storage_get(&inflight, task, 0, 0);
	if (!rec)
		return;
	rec->hits++;
	if (is_ctx_shape(shape)) {	/* followed at entry and return, nested or not */
		ctx_return(rec, id >> 32, shape, (__s32)ret);
		return;
	}
	if (!rec->sp || rec->entry_only || PT_REGS_SP(ctx) <= rec->sp)
		return;
	rec->sp = 0;
	shape = GM_COOKIE_SHAPE(rec->cookie);
	if (is_teardown_shape(shape)) {
		if ((__s32)ret == 0)
			teardown_return(rec, id >> 32, shape);
		return;
	}
	alloc_return(ctx, rec, id, (__s32)ret,
		     call_stacks(ctx, rec, id >> 32, GM_STACK_AT_RETURN));
}

#endif /* GPUMEM_RETURNS_BPF_H */
