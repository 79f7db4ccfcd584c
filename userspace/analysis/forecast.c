// SPDX-License-Identifier: GPL-2.0
/* A forecast of the out-of-memory: where a process's GPU memory grows with a good fit and NVML
 * says what its device has free, when that device runs out at this rate (analysis.h). */
#include <math.h>
#include <string.h>
#include "analysis/analysis.h"
#include "host/gpu_map.h"

/* The net growth of p's GPU memory on each host device: the windowed fits of its sites there
 * (reserved memory: not the tensors inside it), each counted where the fit is good; growing[g]
 * whether one of them grows. */
static void device_growth(const struct snapshot *snap, const struct proc_verdict *pv,
			  double growth[GM_MAX_GPUS], bool growing[GM_MAX_GPUS])
{
	for (size_t i = 0; i < pv->nsites; i++) {
		const struct site_verdict *sv = &pv->sites[i];
		int g;

		if (sv->tensor || sv->lifetime || !gm_kind_is_gpu(sv->ss->kind) ||
		    sv->fit.r2 < LEAKS_MIN_R2)
			continue;
		g = snap_site_host_gpu(snap, pv->p, sv->ss);
		if (g < 0 && snap->ndevices == 1)
			g = (int)snap->devices[0].index;	/* the host's one device */
		if (g < 0 || g >= GM_MAX_GPUS)
			continue;
		growth[g] += sv->fit.slope;
		growing[g] |= sv->verdict == LEAK_GROWING;
	}
}

void oom_forecast_of(const struct snapshot *snap, const struct proc_verdict *pv,
		     struct snap_forecast *out)
{
	double growth[GM_MAX_GPUS] = { 0 };
	bool growing[GM_MAX_GPUS] = { false };

	*out = (struct snap_forecast){ .valid = false, .gpu = -1 };
	/* NVML's free memory: an AMD program's device is none of NVML's */
	if (!pv->p->alive || !snap->devices_valid ||
	    strcmp(snap_proc_gpu_vendor(pv->p), "nvidia"))
		return;
	device_growth(snap, pv, growth, growing);
	for (int g = 0; g < GM_MAX_GPUS; g++) {
		const struct nvml_device *d;
		double seconds;

		if (!growing[g] || growth[g] <= 0)
			continue;
		d = gpu_device_by_index(snap->devices, snap->ndevices, g);
		if (!d || !d->total)
			continue;	/* its free memory is not known */
		seconds = (double)d->free / growth[g];
		if (out->valid && seconds >= out->seconds)
			continue;
		*out = (struct snap_forecast){
			.valid = true, .gpu = g, .device_free = d->free,
			.growth_per_s = growth[g], .seconds = seconds,
			.growth_per_step = NAN, .steps = NAN,
		};
		if (pv->step_rate > 0) {
			out->growth_per_step = growth[g] / pv->step_rate;
			out->steps = seconds * pv->step_rate;
		}
	}
}
