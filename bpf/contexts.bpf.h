/* SPDX-License-Identifier: GPL-2.0 */
/* Contexts: which one each thread has current and the device of each, what a context's
 * teardown releases, and an ended process's contexts forgotten. */
#ifndef GPUMEM_CONTEXTS_BPF_H
#define GPUMEM_CONTEXTS_BPF_H

#include "tables.bpf.h"
#include "account.bpf.h"

/* A call that sets, pushes, pops, creates or retains a context, or sets the device: followed
 * at its entry (ctx_enter) and its return (ctx_return), nested or not. */
static __always_inline bool is_ctx_shape(__u32 shape)
{
	return (shape >= GM_SHAPE_CTX_SET && shape <= GM_SHAPE_CTX_RETAIN) ||
	       shape == GM_SHAPE_CTX_CREATE_V3;
}

/* A call that tears a context down, and with it what the context held (teardown_return). */
static __always_inline bool is_teardown_shape(__u32 shape)
{
	return shape >= GM_SHAPE_CTX_DESTROY && shape <= GM_SHAPE_DEVICE_RESET;
}

/* ctx made current on the thread, above the one it had; past GM_CTX_DEPTH only the depth is
 * kept. */
static __always_inline void ctx_push(struct gm_inflight *rec, __u64 ctx)
{
	__u32 d = rec->ctx_depth;

	if (d < GM_CTX_DEPTH)
		rec->ctx_stack[d & (GM_CTX_DEPTH - 1)] = ctx;
	if (d < 0xffff)
		rec->ctx_depth = d + 1;
}

/* Followed at the entry of each call, nested ones too (the runtime sets contexts inside its
 * own calls), assuming it succeeds (cudaSetDevice, cuCtxCreate and the retain are taken at a
 * successful return): what a failing set, push or pop leaves is the driver's error to report,
 * and the next call on the thread sets it right. */
static __always_inline void ctx_enter(struct gm_inflight *rec, __u32 shape, __u64 a0, __u64 a1,
				      __u64 a2, __u64 a3, __u64 a4)
{
	__u32 d = rec->ctx_depth;

	switch (shape) {
	case GM_SHAPE_CTX_SET:
		if (!a0) {
			if (d)
				rec->ctx_depth = d - 1;
		} else if (!d) {
			ctx_push(rec, a0);
		} else if (d <= GM_CTX_DEPTH) {
			rec->ctx_stack[(d - 1) & (GM_CTX_DEPTH - 1)] = a0;
		}
		break;
	case GM_SHAPE_CTX_PUSH:
		ctx_push(rec, a0);
		break;
	case GM_SHAPE_CTX_POP:
		if (d)
			rec->ctx_depth = d - 1;
		break;
	case GM_SHAPE_SET_DEVICE:	/* at its return: a device that does not exist fails */
		rec->set_device = (__s32)a0;
		rec->set_device_pending = 1;
		break;
	case GM_SHAPE_CTX_CREATE:
	case GM_SHAPE_CTX_CREATE_V3:
	case GM_SHAPE_CTX_CREATE_V4:
	case GM_SHAPE_CTX_RETAIN:
		rec->ctx_out = a0;
		rec->ctx_out_shape = shape;
		rec->ctx_out_device = (__s32)(shape == GM_SHAPE_CTX_CREATE	 ? a2
					      : shape == GM_SHAPE_CTX_CREATE_V3 ? a4
					      : shape == GM_SHAPE_CTX_CREATE_V4 ? a3
										: a1);
		break;
	}
}

/* cuCtxCreate made a context current on the thread; both it and cuDevicePrimaryCtxRetain say
 * whose device it is. */
static __always_inline void ctx_return(struct gm_inflight *rec, __u32 tgid, __u32 shape,
				       __s32 rc)
{
	struct gm_ctx_key key = { .tgid = tgid, .gen = rec->gen };
	struct gm_ctx_info info = { .device = rec->ctx_out_device };
	__u64 out = rec->ctx_out;

	if (shape == GM_SHAPE_SET_DEVICE) {
		__u64 primary = GM_CTX_PRIMARY | (__u32)rec->set_device;
		__u32 d = rec->ctx_depth;

		if (!rec->set_device_pending)
			return;
		rec->set_device_pending = 0;
		if (rc != 0)
			return;
		rec->rt_device = rec->set_device;
		if (!d)
			ctx_push(rec, primary);
		else if (d <= GM_CTX_DEPTH)
			rec->ctx_stack[(d - 1) & (GM_CTX_DEPTH - 1)] = primary;
		return;
	}

	if (!out || rec->ctx_out_shape != shape)
		return;
	rec->ctx_out = 0;
	if (rc != 0 || bpf_probe_read_user(&key.ctx, sizeof(key.ctx), (void *)out) || !key.ctx)
		return;
	info.primary = shape == GM_SHAPE_CTX_RETAIN;
	if (bpf_map_update_elem(&ctx_infos, &key, &info, BPF_ANY))
		count(GM_CNT_CTX_MAP_FULL);
	if (shape != GM_SHAPE_CTX_RETAIN)
		ctx_push(rec, key.ctx);
}

/* The context an allocation is charged to, and its device: the thread's current one, a
 * primary context as GM_CTX_PRIMARY | device; none seen: the runtime's device's primary. */
static __always_inline __u64 current_ctx(struct gm_inflight *rec, __u32 tgid, __s32 *device)
{
	struct gm_ctx_key key = { .tgid = tgid, .gen = rec->gen };
	struct gm_ctx_info *info;
	__u32 d = rec->ctx_depth;

	*device = rec->rt_device;
	if (!d)
		return GM_CTX_PRIMARY | (__u32)rec->rt_device;
	if (d > GM_CTX_DEPTH) {
		*device = GM_DEVICE_UNKNOWN;
		return 0;
	}
	key.ctx = rec->ctx_stack[(d - 1) & (GM_CTX_DEPTH - 1)];
	if (key.ctx & GM_CTX_PRIMARY) {
		*device = (__s32)(__u32)key.ctx;
		return key.ctx;
	}
	info = bpf_map_lookup_elem(&ctx_infos, &key);
	if (!info) {
		*device = GM_DEVICE_UNKNOWN;
		return key.ctx;
	}
	*device = info->device;
	return info->primary ? GM_CTX_PRIMARY | (__u32)info->device : key.ctx;
}

/* What a context's teardown releases: that process's allocations of that context, but
 * async ones (they belong to their pool, which outlives a context: cudaDeviceReset's rule) and
 * tensors (PyTorch's to free). */
struct release_walk {
	__u32 tgid, gen;
	__u64 ctx;
	__u64 released;
};

static long release_one(struct bpf_map *map, __u32 *idx, struct gm_alloc_slot *sl,
			struct release_walk *w)
{
	__u32 st = *(volatile __u32 *)&sl->state;
	struct gm_alloc_info info;

	(void)map;
	if (GM_SLOT_STATE(st) != GM_SLOT_LIVE || sl->tgid != w->tgid || sl->gen != w->gen ||
	    sl->info.ctx != w->ctx || sl->space == GM_SPACE_TENSOR ||
	    sl->info.kind == GM_KIND_ASYNC)
		return 0;
	if (alloc_take(*idx, st, &info)) {
		account_free(w->tgid, w->gen, &info);
		w->released++;
	}
	return 0;
}

/* One walk of the allocation map (these calls are rare), verified on its own: a global
 * function, so the walk's callback is not explored again along every path of call_return.
 * The released allocations are counted in GM_CNT_CTX_RELEASED. */
__noinline int release_context(__u32 tgid, __u32 gen, __u64 ctx)
{
	struct release_walk w = { .tgid = tgid, .gen = gen, .ctx = ctx };
	__u32 k = GM_CNT_CTX_RELEASED;
	__u64 *v;

	if (!ctx)
		return 0;
	bpf_for_each_map_elem(&allocs, release_one, &w, 0);
	/* No branch on the count: a count the verifier must track exactly would keep it from
	 * ever seeing two runs of the callback as the same. */
	v = bpf_map_lookup_elem(&counters, &k);
	if (v)
		*v += w.released;
	return 0;
}

/* cuCtxDestroy, cuDevicePrimaryCtxReset, cudaDeviceReset returned success: the driver freed
 * what the context held. */
static __noinline void teardown_return(struct gm_inflight *rec, __u32 tgid, __u32 shape)
{
	struct release_walk w = { .tgid = tgid, .gen = rec->gen };

	if (shape == GM_SHAPE_CTX_DESTROY) {
		struct gm_ctx_key key = { .tgid = tgid, .gen = rec->gen, .ctx = rec->addr };
		struct gm_ctx_info *info = bpf_map_lookup_elem(&ctx_infos, &key);

		__u32 d = rec->ctx_depth;

		w.ctx = info && info->primary ? GM_CTX_PRIMARY | (__u32)info->device : rec->addr;
		bpf_map_delete_elem(&ctx_infos, &key);
		/* The driver pops a destroyed context that is current on the calling thread. */
		if (d && d <= GM_CTX_DEPTH && rec->ctx_stack[(d - 1) & (GM_CTX_DEPTH - 1)] == rec->addr)
			rec->ctx_depth = d - 1;
	} else if (shape == GM_SHAPE_PRIMARY_RESET) {
		w.ctx = GM_CTX_PRIMARY | (__u32)rec->addr;
	} else {
		w.ctx = GM_CTX_PRIMARY | (__u32)rec->rt_device;
	}
	release_context(tgid, rec->gen, w.ctx);
}

/* One entry of ctx_infos, deleted if it is of the ended process. */
static long forget_one(struct bpf_map *map, struct gm_ctx_key *key, struct gm_ctx_info *val,
		       struct gm_proc_key *ended)
{
	struct gm_ctx_key k;

	(void)map;
	(void)val;
	if (key->tgid != ended->tgid || key->gen != ended->gen)
		return 0;
	k = *key;
	bpf_map_delete_elem(&ctx_infos, &k);
	return 0;
}

/* An ended process's contexts are forgotten with it (a walk of at most GM_MAX_CONTEXTS). */
__noinline int forget_contexts(__u32 tgid, __u32 gen)
{
	struct gm_proc_key ended = { .tgid = tgid, .gen = gen };

	bpf_for_each_map_elem(&ctx_infos, forget_one, &ended, 0);
	return 0;
}

#endif /* GPUMEM_CONTEXTS_BPF_H */
