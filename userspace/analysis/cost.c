// SPDX-License-Identifier: GPL-2.0
/* gpumem's own cost in a process (analysis.h): its probe hits, counted by the kernel, times what
 * a hit costs (the trap measured once, and the programs' mean run where the kernel keeps it). */
#include "analysis/analysis.h"

void proc_cost_of(const struct snapshot *s, const struct snap_proc *p, struct proc_cost *out)
{
	double per_hit;

	*out = (struct proc_cost){ .hits_known = p->valid & SP_HITS };
	if (!out->hits_known)
		return;
	out->hits = p->st.probe_hits;
	if (!s->trap_known)
		return;
	per_hit = s->trap_ns + (s->bpf_run_known ? s->bpf_run_ns : 0);
	out->seconds = (double)out->hits * per_hit / 1e9;
	out->seconds_known = true;
	if ((p->valid & SP_CPU) && p->cpu_ns) {
		out->share = out->seconds / ((double)p->cpu_ns / 1e9);
		out->share_known = true;
	}
}
