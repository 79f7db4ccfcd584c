// SPDX-License-Identifier: GPL-2.0
/* A forecast of the out-of-memory: where a process's GPU memory grows with a good fit and NVML
 * or amdgpu says what its device has free, when that device runs out at this rate
 * (analysis.h). */
#include <math.h>
#include <string.h>
#include "analysis/analysis.h"
#include "probes/table.h"

/* The slot of the host's one device of a vendor, or -1 when it has none or several. */
static int only_device(const struct snapshot *snap, bool amd)
{
	if (amd)
		return snap->namd_devices == 1 ? SNAP_AMD_SLOT + (int)snap->amd_devices[0].index : -1;
	return snap->devices_valid && snap->ndevices == 1 ? (int)snap->devices[0].index : -1;
}

/* The net growth of p's GPU memory on each host device (by slot): the windowed fits of its
 * sites there (reserved memory: not the tensors inside it), each counted where the fit is good;
 * growing[g] whether one of them grows. */
static void device_growth(const struct snapshot *snap, const struct proc_verdict *pv,
			  double growth[SNAP_SLOT_UNKNOWN], bool growing[SNAP_SLOT_UNKNOWN])
{
	for (size_t i = 0; i < pv->nsites; i++) {
		const struct site_verdict *sv = &pv->sites[i];
		int g;

		if (sv->tensor || sv->lifetime || !gm_kind_is_gpu(sv->ss->kind) ||
		    sv->fit.r2 < LEAKS_MIN_R2)
			continue;
		g = snap_site_host_gpu(snap, pv->p, sv->ss);
		if (g < 0)
			g = only_device(snap, !strcmp(probe_api_vendor(sv->ss->api), "amd"));
		if (g < 0 || g >= SNAP_SLOT_UNKNOWN)
			continue;
		growth[g] += sv->fit.slope;
		growing[g] |= sv->verdict == LEAK_GROWING;
	}
}

void oom_forecast_of(const struct snapshot *snap, const struct proc_verdict *pv,
		     struct snap_forecast *out)
{
	double growth[SNAP_SLOT_UNKNOWN] = { 0 };
	bool growing[SNAP_SLOT_UNKNOWN] = { false };

	*out = (struct snap_forecast){ .valid = false, .gpu = -1 };
	if (!pv->p->alive)
		return;
	device_growth(snap, pv, growth, growing);
	for (int g = 0; g < SNAP_SLOT_UNKNOWN; g++) {
		struct snap_gpu d;
		double seconds;

		if (!growing[g] || growth[g] <= 0)
			continue;
		if (!snap_gpu_of_slot(snap, g, &d) || !d.memory_known)
			continue;	/* its free memory is not known */
		seconds = (double)d.free / growth[g];
		if (out->valid && seconds >= out->seconds)
			continue;
		*out = (struct snap_forecast){
			.valid = true, .gpu = d.index, .vendor = d.vendor, .device_free = d.free,
			.growth_per_s = growth[g], .seconds = seconds,
			.growth_per_step = NAN, .steps = NAN,
		};
		if (pv->step_rate > 0) {
			out->growth_per_step = growth[g] / pv->step_rate;
			out->steps = seconds * pv->step_rate;
		}
	}
}
