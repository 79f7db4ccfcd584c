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

/* pytorch:malloc(ptr, device, size, stream) and pytorch:free(ptr, device, stream): the
 * arguments read (the stream is not), and the probe's cookie. */
#define GM_USDT_ARGS 3

struct usdt_call {
	__u64 cookie;
	long arg[GM_USDT_ARGS];
};

/* The register at offset off of pt_regs, read from the context directly (libbpf's
 * bpf_usdt_arg calls a helper for it); an offset not named here, with the helper. */
static __always_inline long usdt_reg(struct pt_regs *ctx, short off, unsigned long *val)
{
#if defined(__TARGET_ARCH_x86)
	switch (off) {
	case offsetof(struct pt_regs, ax): *val = ctx->ax; return 0;
	case offsetof(struct pt_regs, bx): *val = ctx->bx; return 0;
	case offsetof(struct pt_regs, cx): *val = ctx->cx; return 0;
	case offsetof(struct pt_regs, dx): *val = ctx->dx; return 0;
	case offsetof(struct pt_regs, si): *val = ctx->si; return 0;
	case offsetof(struct pt_regs, di): *val = ctx->di; return 0;
	case offsetof(struct pt_regs, bp): *val = ctx->bp; return 0;
	case offsetof(struct pt_regs, sp): *val = ctx->sp; return 0;
	case offsetof(struct pt_regs, r8): *val = ctx->r8; return 0;
	case offsetof(struct pt_regs, r9): *val = ctx->r9; return 0;
	case offsetof(struct pt_regs, r10): *val = ctx->r10; return 0;
	case offsetof(struct pt_regs, r11): *val = ctx->r11; return 0;
	case offsetof(struct pt_regs, r12): *val = ctx->r12; return 0;
	case offsetof(struct pt_regs, r13): *val = ctx->r13; return 0;
	case offsetof(struct pt_regs, r14): *val = ctx->r14; return 0;
	case offsetof(struct pt_regs, r15): *val = ctx->r15; return 0;
	}
#endif
	return bpf_probe_read_kernel(val, sizeof(*val), (void *)ctx + off);
}

/* The first n arguments of the USDT probe that fired and its cookie, as bpf_usdt_arg and
 * bpf_usdt_cookie give them (libbpf's argument specs), at one lookup of the probe's spec, not
 * one for each: a third of what a tensor event's program cost beside its stack. Non-zero when
 * one cannot be read. */
static __always_inline int usdt_call_of(struct pt_regs *ctx, __u32 n, struct usdt_call *c)
{
	int spec_id = __bpf_usdt_spec_id(ctx);
	struct __bpf_usdt_spec *spec;

	if (spec_id < 0)
		return -ESRCH;
	spec = bpf_map_lookup_elem(&__bpf_usdt_specs, &spec_id);
	if (!spec)
		return -ESRCH;
	c->cookie = spec->usdt_cookie;
	for (__u32 i = 0; i < GM_USDT_ARGS && i < n; i++) {
		struct __bpf_usdt_arg_spec *a = &spec->args[i];
		unsigned long val;

		if (i >= spec->arg_cnt)
			return -ENOENT;
		switch (a->arg_type) {
		case BPF_USDT_ARG_CONST:
			val = a->val_off;
			break;
		case BPF_USDT_ARG_REG:
			if (usdt_reg(ctx, a->reg_off, &val))
				return -EFAULT;
			break;
		case BPF_USDT_ARG_REG_DEREF:
			if (usdt_reg(ctx, a->reg_off, &val) ||
			    bpf_probe_read_user(&val, sizeof(val), (void *)val + a->val_off))
				return -EFAULT;
			break;
		default:
			return -EINVAL;
		}
		/* 1-, 2- and 4-byte arguments: cleared above their size, or sign-extended. */
		val <<= a->arg_bitshift;
		if (a->arg_signed)
			val = ((long)val) >> a->arg_bitshift;
		else
			val >>= a->arg_bitshift;
		c->arg[i] = (long)val;
	}
	return 0;
}

/* A tensor handed out by the caching allocator: a site of its own (the api of the cookie's
 * "pytorch:malloc" row) and a live entry in the tensor space, keyed by its address. The
 * process's reserved bytes stay as they are (the segment holding it was counted at its
 * cudaMalloc); its tensor bytes and their peak are running totals of their own. */
static __noinline void tensor_alloc(struct pt_regs *ctx, struct gm_inflight *rec,
				    const struct usdt_call *c, __u64 stacks, __u64 id)
{
	__s32 stack_id = user_stack_of(stacks), py_stack_id = python_stack_of(stacks);
	__u64 cookie = c->cookie, ptr = c->arg[0], size = c->arg[2];
	__u32 tid = (__u32)id, tgid = id >> 32;
	__u64 now = call_clock(rec), tensors = 0, reserved = 0;	/* as a call's: per tick */
	struct gm_alloc_key akey = { .tgid = tgid, .gen = rec->gen, .space = GM_SPACE_TENSOR,
				     .addr = ptr };
	struct gm_site_key skey = { .tgid = tgid, .gen = rec->gen };
	struct gm_alloc_info info = {};
	struct gm_proc_stats *ps;
	struct gm_site_stats *ss;
	bool new_site = false;
	long device = c->arg[1];

	/* c10's DeviceIndex, an int8: a value out of range is a device not known. */
	if (device < 0 || device > 127)
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
		emit_stack_copy(ctx, rec, tgid, tid, skey.stack_id);
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

/* The thread's record (task: the current one), for its process's generation and its Python
 * thread state only: a USDT probe is no call, and the call in flight (none, here) is left
 * alone. */
static __always_inline struct gm_inflight *tensor_thread(struct task_struct *task, __u32 tgid)
{
	struct gm_inflight *rec = thread_record(task, tgid);

	if (rec)
		identify_process(rec);
	return rec;
}

/* A probe's run on a thread whose record it did not look up (its hits), counted to its
 * process at once. */
static __always_inline void proc_hit(__u32 tgid, __u32 gen)
{
	struct gm_proc_stats *ps = proc_of(tgid, gen);

	if (ps)
		__sync_fetch_and_add(&ps->probe_hits, 1);
}

#endif /* GPUMEM_TENSORS_BPF_H */
