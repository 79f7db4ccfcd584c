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
		/* At most the whole: a process that does little but make probed calls costs
		 * gpumem nearly all of its CPU time, and the estimate's parts (the trap measured
		 * once, in gpumem's process; the CPU time a floor at the exit) can put it a few
		 * percent past it, which no process can spend (101.6% seen in CI). */
		out->share = out->seconds / ((double)p->cpu_ns / 1e9);
		if (out->share > 1.0)
			out->share = 1.0;
		out->share_known = true;
	}
}
