/* SPDX-License-Identifier: GPL-2.0 */
/* What every part of the BPF side uses: the loss counters, the settings userspace changes
 * while the programs run, the kinds and shapes cookies name, and which processes are traced. */
#ifndef GPUMEM_BASE_BPF_H
#define GPUMEM_BASE_BPF_H

#include "maps.bpf.h"

/* One more of counter which. */
static __always_inline void count(enum gm_counter which)
{
	__u32 key = which;
	__u64 *v = bpf_map_lookup_elem(&counters, &key);

	if (v)
		*v += 1;
}

/* Per-allocation events for trace, record, export: one array lookup, inlined by the verifier. */
static __always_inline bool stream_calls(void)
{
	__u32 key = 0;
	struct gm_settings *s = bpf_map_lookup_elem(&settings, &key);

	return s && s->stream_calls;
}

/* A kind a process's GPU bytes count: device, managed, async or VMM memory. */
static __always_inline bool is_gpu_kind(__u32 kind)
{
	return gm_kind_is_gpu(kind);
}

/* A probe of a call that frees (accounted at its entry, with no return probe). */
static __always_inline bool is_free_shape(__u64 cookie)
{
	__u32 shape = GM_COOKIE_SHAPE(cookie);

	return shape == GM_SHAPE_FREE || shape == GM_SHAPE_VMM_RELEASE;
}

/* The current task is in one of cgroup_filter's cgroups, or below one. */
static __always_inline bool in_selected_cgroup(void)
{
	for (__u32 i = 0; i < GM_MAX_CGROUP_FILTERS && i < filter_cgroups; i++)
		if (bpf_current_task_under_cgroup(&cgroup_filter, i) == 1)
			return true;
	return false;
}

/* The filters run first, so untraced processes and containers cost only the trap. */
static __always_inline bool wanted(__u32 tgid)
{
	if (filter_pids && !bpf_map_lookup_elem(&targets, &tgid))
		return false;
	return !filter_cgroups || in_selected_cgroup();
}

#endif /* GPUMEM_BASE_BPF_H */
