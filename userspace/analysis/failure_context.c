// SPDX-License-Identifier: GPL-2.0
/* The context of a failed allocation: the process's numbers and the sites that held the most
 * at that instant on the device that failed, from the snapshot taken when the failure
 * arrived. */
#include <string.h>
#include "analysis/analysis.h"

void oom_context_of(const struct snapshot *snap, int pid, uint32_t gpu, struct oom_context *out)
{
	const struct snap_proc *p = snapshot_find(snap, pid);

	memset(out, 0, sizeof(*out));
	if (!p || !(p->valid & SP_STATS))
		return;
	out->p = p;
	for (size_t i = 0; i < p->nsites; i++) {
		const struct snap_site *ss = &p->sites[i];
		size_t j;

		if (!ss->st.current_bytes || (gpu && ss->gpu != gpu))
			continue;
		if (out->ntop == OOM_TOP_SITES &&
		    ss->st.current_bytes <= out->top[out->ntop - 1]->st.current_bytes)
			continue;
		if (out->ntop < OOM_TOP_SITES)
			out->ntop++;
		for (j = out->ntop - 1;
		     j > 0 && out->top[j - 1]->st.current_bytes < ss->st.current_bytes; j--)
			out->top[j] = out->top[j - 1];
		out->top[j] = ss;
	}
}
