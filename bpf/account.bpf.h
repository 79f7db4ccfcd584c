/* SPDX-License-Identifier: GPL-2.0 */
/* What an allocation and a free change: the totals of its site and its process, and the call
 * record streamed to userspace (trace, record, export). */
#ifndef GPUMEM_ACCOUNT_BPF_H
#define GPUMEM_ACCOUNT_BPF_H

#include "tables.bpf.h"

/* *peak_at raised to now_bytes if below it (a few tries, each lost only to another raise). */
static __always_inline void raise_max(__u64 *peak_at, __u64 now_bytes)
{
	for (int i = 0; i < 4; i++) {
		__u64 peak = *peak_at;

		if (now_bytes <= peak)
			return;
		if (__sync_val_compare_and_swap(peak_at, peak, now_bytes) == peak)
			return;
	}
}

/* A process's GPU bytes on one device (the last slot: a device not known). */
static __always_inline void add_gpu_bytes(struct gm_proc_stats *ps, __s32 device, __u64 delta)
{
	__u32 slot = device >= 0 && device < GM_MAX_GPUS ? (__u32)device : GM_MAX_GPUS;

	if (slot > GM_MAX_GPUS)
		return;
	__sync_fetch_and_add(&ps->gpu_bytes[slot], delta);
}

/* A record's gpu: the device + 1, 0 for a device not known. */
static __always_inline __u32 event_gpu(__s32 device)
{
	return device >= 0 ? (__u32)device + 1 : 0;
}

/* The process's peak of GPU bytes, raised to what it holds now. */
static __always_inline void raise_peak(struct gm_proc_stats *ps, __u64 now_bytes)
{
	raise_max(&ps->peak_bytes, now_bytes);
}

/* Whether a call record wakes the reader: the one that finds an eighth of the ring waiting
 * (within a few records: another CPU's may be counted in between), and each past half of it.
 * Else each record of a reader that keeps up woke it: an irq_work in the traced thread, and a
 * wakeup and a poll for one record. The reader polls every 100 ms anyway (tracer_poll), and
 * nothing waits on a call record (holds come with lifecycle records, which wake it at once). */
static __always_inline __u64 call_wakeup(void)
{
	__u64 waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);

	if ((waiting >= size / 8 && waiting < size / 8 + 4 * sizeof(struct gm_call_event)) ||
	    waiting >= size / 2)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/* A call record of the probe-table row cookie names (tensor events: their USDT cookie). */
static __always_inline void emit_record(__u32 type, __u64 cookie, const struct gm_inflight *rec,
					__u32 tgid, __u32 tid, __s32 stack_id, __s32 py_stack_id,
					__u32 kind, __u64 addr, __u64 size, __s32 error,
					__u64 process_bytes, __u64 tensor_bytes, __s32 device)
{
	struct gm_call_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	e->type = type;
	e->pid = tgid;
	e->tid = tid;
	e->stack_id = stack_id;
	e->time_ns = bpf_ktime_get_ns();
	e->addr = addr;
	e->size = size;
	e->process_bytes = process_bytes;
	e->error = error;
	e->api = GM_COOKIE_API(cookie);
	e->kind = kind;
	e->layer = GM_COOKIE_LAYER(cookie);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->gen = rec->gen;
	e->py_stack_id = py_stack_id;
	e->start_ns = rec->start_ns;
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->tensor_bytes = tensor_bytes;
	e->gpu = event_gpu(device);
	e->held = 0;
	bpf_ringbuf_submit(e, call_wakeup());
}

static __always_inline void emit_call(__u32 type, const struct gm_inflight *rec, __u32 tgid,
				      __u32 tid, __s32 stack_id, __s32 py_stack_id, __u32 kind,
				      __u64 addr, __u64 size, __s32 error, __u64 process_bytes,
				      __s32 device)
{
	emit_record(type, rec->cookie, rec, tgid, tid, stack_id, py_stack_id, kind, addr, size,
		    error, process_bytes, 0, device);
}

/* Subtracts a freed allocation from its site and process; returns the process's bytes. rec:
 * the freeing thread's record, whose probe runs go to the process (NULL: none); *tensors (a
 * tensor's free, tensors not NULL): the process's tensor bytes after it. */
static __always_inline __u64 account_free_by(struct gm_inflight *rec, __u32 tgid, __u32 gen,
					     const struct gm_alloc_info *info, __u64 *tensors)
{
	struct gm_site_stats *ss = site_at(info->site, tgid, gen);
	struct gm_proc_stats *ps;

	if (ss) {
		__sync_fetch_and_add(&ss->current_bytes, -info->size);
		__sync_fetch_and_add(&ss->current_allocs, -1);
		__sync_fetch_and_add(&ss->free_count, 1);
	}
	ps = proc_of(tgid, gen);
	if (!ps)
		return 0;
	if (rec)
		flush_hits(rec, ps);
	/* A tensor's bytes are inside a segment the process holds: never its own. */
	if (info->layer == GM_LAYER_TENSOR) {
		__u64 left = __sync_fetch_and_add(&ps->tensor_bytes, -info->size) - info->size;

		if (tensors)
			*tensors = left;
		return ps->current_bytes;
	}
	if (!is_gpu_kind(info->kind))
		return ps->current_bytes;
	add_gpu_bytes(ps, info->device, -info->size);
	return __sync_fetch_and_add(&ps->current_bytes, -info->size) - info->size;
}

/* Records a live allocation. An entry its key still has is replaced, and its free accounted
 * and counted: the driver handed out an address we still held as live, freed by a call we do
 * not probe. False when the table is full (counted: counting the allocation would make its
 * free look unknown later). */
static __always_inline __u64 account_free(__u32 tgid, __u32 gen,
					  const struct gm_alloc_info *info)
{
	return account_free_by(NULL, tgid, gen, info, NULL);
}

static __always_inline bool insert_live(struct gm_alloc_key *akey,
					const struct gm_alloc_info *info)
{
	struct gm_alloc_info old = {};
	int rc = alloc_insert(akey, info, &old);

	if (rc < 0) {
		count(GM_CNT_ALLOC_MAP_FULL);
		return false;
	}
	if (rc == 1) {
		count(GM_CNT_REPLACED_ALLOCS);
		account_free(akey->tgid, akey->gen, &old);
	}
	return true;
}

static __always_inline void site_add(struct gm_site_stats *ss, __u64 size)
{
	__sync_fetch_and_add(&ss->current_bytes, size);
	__sync_fetch_and_add(&ss->current_allocs, 1);
	__sync_fetch_and_add(&ss->alloc_count, 1);
	__sync_fetch_and_add(&ss->alloc_bytes_total, size);
}

#endif /* GPUMEM_ACCOUNT_BPF_H */
