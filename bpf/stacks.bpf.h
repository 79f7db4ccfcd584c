/* SPDX-License-Identifier: GPL-2.0 */
/* Both stacks of a call, user and Python, walked by the probe's program itself and handed on
 * in one word. */
#ifndef GPUMEM_STACKS_BPF_H
#define GPUMEM_STACKS_BPF_H

#include "thread.bpf.h"
#include "ustack.bpf.h"
#include "pystack.bpf.h"

/* The calling thread's user and Python stack ids, walked by the probe's program itself (their
 * frames fit the 512-byte stack only beside its own, not under alloc_return's or
 * tensor_alloc's) and handed on in one argument: a BPF function takes five. at: where the probe
 * is (enum gm_stack_at); at a return the registers are the caller's, and the user walk reads
 * what the call wrote at rec->out_ptr. */
static __always_inline __u64 call_stacks(struct pt_regs *ctx, struct gm_inflight *rec,
					 __u32 tgid, int at)
{
	__s32 stack_id = user_stack(ctx, rec, at);
	__s32 py_stack_id = python_stack(tgid, rec->gen, &rec->py_tstate,
					 &thread_of(rec)->py_none_gen_plus1);

	return (__u32)stack_id | (__u64)(__u32)py_stack_id << 32;
}

static __always_inline __s32 user_stack_of(__u64 stacks)
{
	return (__s32)(__u32)stacks;
}

static __always_inline __s32 python_stack_of(__u64 stacks)
{
	return (__s32)(stacks >> 32);
}

#endif /* GPUMEM_STACKS_BPF_H */
