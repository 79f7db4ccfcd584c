/* SPDX-License-Identifier: GPL-2.0 */
/* PyTorch's tensors, told by the USDT probes of its caching allocator (libc10_cuda.so): each
 * a live entry in the tensor space, on a site of its own. */
#ifndef GPUMEM_TENSORS_BPF_H
#define GPUMEM_TENSORS_BPF_H

#include "thread.bpf.h"
#include "tables.bpf.h"
#include "lifecycle.bpf.h"
#include "account.bpf.h"
#include "ustack.bpf.h"
#include "stacks.bpf.h"

/* A tensor handed out by the caching allocator: a site of its own (the api of the cookie's
 * "pytorch:malloc" row) and a live entry in the tensor space, keyed by its address. The
 * process's reserved bytes stay as they are (the segment holding it was counted at its
 * cudaMalloc); its tensor bytes and their peak are running totals of their own. */
static __noinline void tensor_alloc(struct pt_regs *ctx, struct gm_inflight *rec, __u64 ptr,
				    __u64 size, __u64 stacks)
{
	__s32 stack_id = user_stack_of(stacks), py_stack_id = python_stack_of(stacks);
	__u64 id = bpf_get_current_pid_tgid(), cookie = bpf_usdt_cookie(ctx);
	__u32 tid = (__u32)id, tgid = id >> 32;
	__u64 now = bpf_ktime_get_ns(), tensors = 0, reserved = 0;
	struct gm_alloc_key akey = { .tgid = tgid, .gen = rec->gen, .space = GM_SPACE_TENSOR,
				     .addr = ptr };
	struct gm_site_key skey = { .tgid = tgid, .gen = rec->gen };
	struct gm_alloc_info info = {};
	struct gm_proc_stats *ps;
	struct gm_site_stats *ss;
	bool new_site = false;
	long device = GM_DEVICE_UNKNOWN;

	/* c10's DeviceIndex, an int8: a value out of range is a device not known. */
	if (bpf_usdt_arg(ctx, 1, &device) || device < 0 || device > 127)
		device = GM_DEVICE_UNKNOWN;
	skey.stack_id = stack_id;
	skey.py_stack_id = py_stack_id;
	skey.api = GM_COOKIE_API(cookie);
	skey.kind = GM_COOKIE_KIND(cookie);
	skey.gpu = gm_site_gpu(skey.kind, GM_LAYER_TENSOR, device);
	ps = proc_stats(tgid, rec, now);
	if (ps)
		flush_hits(rec, ps);
	ss = site_stats(&skey, &new_site, &info.site);
	if (new_site && stack_mode == GM_STACKS_DWARF && skey.stack_id >= 0)
		emit_stack_copy(ctx, tgid, rec->gen, tid, skey.stack_id);
	info.size = size;
	info.time_ns = now;
	info.api = skey.api;
	info.kind = skey.kind;
	info.layer = GM_LAYER_TENSOR;
	info.device = (__s32)device;	/* its site's; never released with a context */
	info.ctx = 0;
	if (!insert_live(&akey, &info))
		return;
	if (ss)
		site_add(ss, size);
	if (ps) {
		tensors = __sync_fetch_and_add(&ps->tensor_bytes, size) + size;
		raise_max(&ps->tensor_peak_bytes, tensors);
		reserved = ps->current_bytes;
	}
	if (stream_calls())
		emit_record(GM_REC_ALLOC, cookie, rec, tgid, tid, skey.stack_id, py_stack_id,
			    skey.kind, ptr, size, 0, reserved, tensors, (__s32)device);
}

/* The thread's record, for its process's generation and its Python thread state only: a
 * USDT probe is no call, and the call in flight (none, here) is left alone. */
static __always_inline struct gm_inflight *tensor_thread(__u32 tgid)
{
	struct gm_inflight *rec;

	if (!wanted(tgid))
		return NULL;
	rec = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0,
				   BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!rec) {
		count(GM_CNT_INFLIGHT_FULL);
		return NULL;
	}
	rec->hits++;
	identify_process(rec);
	return rec;
}

/* Subtracts a freed tensor from its site and process (account_free); the process's bytes,
 * reserved and tensors, after it. */
static __always_inline void tensor_account_free(struct gm_inflight *rec, __u32 tgid, __u32 gen,
						const struct gm_alloc_info *info, __u64 *reserved,
						__u64 *tensors)
{
	struct gm_proc_stats *ps;

	*reserved = account_free(tgid, gen, info);
	ps = proc_of(tgid, gen);
	*tensors = ps ? ps->tensor_bytes : 0;
	if (ps && rec)
		flush_hits(rec, ps);
}

#endif /* GPUMEM_TENSORS_BPF_H */
