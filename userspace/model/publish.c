// SPDX-License-Identifier: GPL-2.0
/* Publishing the model: one immutable snapshot per tick, read from the maps in one pass, with
 * every string copied and every stack named, so it outlives the records it came from. */
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "host/nvml.h"
#include "host/procs.h"
#include "host/oci.h"
#include "model/owners.h"
#include "model/python.h"
#include "model/state.h"
#include "probes/table.h"
#include "symbols/symbolize.h"

/* A group of records (state_group_sites) as one site: its first record's ages, the sums. */
static void copy_site(struct state *s, struct proc_rec *p, const struct site_rec *r,
		      struct snap_site *ss)
{
	ss->api = r->key.api;
	ss->kind = r->key.kind;
	ss->stack_id = r->site_stack_id;
	ss->py_stack_id = r->site_py_stack_id;
	ss->gpu = r->key.gpu;
	ss->st = r->group_st;
	ss->oldest_ns = r->oldest_ns;
	ss->median_ns = r->median_ns;
	if (p->ages_known && r->oldest_ns)
		ss->valid |= SS_OLDEST;
	if (p->medians_known && r->median_ns)
		ss->valid |= SS_MEDIAN;
	ss->stack = state_named_stack(s, p, r->site_stack_id, r->site_py_stack_id);
}

/* Tensor sites apart: every output that sums sites sums reserved memory only. */
static void copy_sites(struct state *s, struct proc_rec *p, struct snap_proc *out)
{
	out->sites = xcalloc(p->nsites ? p->nsites : 1, sizeof(*out->sites));
	out->tensor_sites = xcalloc(p->nsites ? p->nsites : 1, sizeof(*out->tensor_sites));
	for (size_t i = 0; i < p->nsites; i++) {
		const struct site_rec *r = &p->sites[i];

		if (r->group != i)
			continue;	/* counted in its group's first record */
		if (probe_is_tensor(r->key.api))
			copy_site(s, p, r, &out->tensor_sites[out->ntensor_sites++]);
		else
			copy_site(s, p, r, &out->sites[out->nsites++]);
	}
	if (out->nsites > 1)
		qsort(out->sites, out->nsites, sizeof(*out->sites), snap_site_cmp);
	if (out->ntensor_sites > 1)
		qsort(out->tensor_sites, out->ntensor_sites, sizeof(*out->tensor_sites), snap_site_cmp);
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static void copy_proc(struct state *s, struct proc_rec *p, struct snap_proc *out)
{
	out->serial = p->serial;
	out->pid = p->pid;
	out->alive = p->alive;
	out->end_ns = p->end_ns;
	memcpy(out->comm, p->comm, sizeof(out->comm));
	out->cmdline = dup_or_null(p->cmdline);
	out->cgroup = dup_or_null(p->cgroup);
	out->user = dup_or_null(p->user);
	out->container = p->container;
	out->ns_pid = p->ns_pid;
	out->visible = p->visible;
	out->valid = (p->comm[0] ? SP_COMM : 0) | (p->cmdline ? SP_CMDLINE : 0) |
		     (p->cgroup ? SP_CGROUP : 0) | (p->ns_pid ? SP_NS_PID : 0) |
		     (p->user ? SP_USER : 0);
	out->execed = p->execed;
	if (!p->alive && p->exit_known && !p->execed) {
		out->exit_code = p->exit_code;
		out->valid |= SP_EXIT_CODE;
	}
	if (!p->alive && p->exit_cpu_ns) {
		out->cpu_ns = p->exit_cpu_ns;
		out->valid |= SP_CPU;
	}
	if (p->have_stats) {
		out->st = p->st;
		out->tensor = p->tensor;
		out->imported_allocs = p->imported_allocs;
		out->valid |= SP_STATS | SP_HITS;
		copy_sites(s, p, out);
		snap_proc_libraries(out);
		owner_peaks_apply(&p->lib_peaks, out);
	}
}

/* A failure's stack named again while its process is kept (its exit map may have come). */
static void rename_failure(struct state *s, struct failure_rec *f)
{
	struct proc_rec *p = state_find_gen(s, (int)f->ev.pid, f->ev.gen);
	struct snap_stack *st;

	if (!p || p->serial != f->serial)
		return;
	st = state_named_stack(s, p, f->ev.stack_id, f->ev.py_stack_id);
	snap_stack_put(f->stack);
	f->stack = st;
}

static void copy_failure(struct snap_failure *out, const struct failure_rec *f)
{
	*out = (struct snap_failure){
		.ev = f->ev, .stack = snap_stack_get(f->stack), .container = f->container,
		.has_container = f->has_container,
	};
}

static void copy_failures(struct state *s, struct snapshot *snap)
{
	size_t keep = s->opt.keep_failures, n = 0;

	snap->failures = xcalloc(s->nfailures + s->nrecent + 1, sizeof(*snap->failures));
	for (size_t i = 0; i < s->nfailures; i++) {
		rename_failure(s, &s->failures[i]);
		oci_fill(s->oci, &s->failures[i].container, snap->time_ns);
		copy_failure(&snap->failures[n++], &s->failures[i]);
	}
	for (size_t i = 0; i < s->nrecent; i++) {
		struct failure_rec *f = &s->recent[(s->recent_head + i) % keep];

		rename_failure(s, f);
		oci_fill(s->oci, &f->container, snap->time_ns);
		copy_failure(&snap->failures[n++], f);
	}
	snap->nfailures = n;
}

/* AMD's GPUs and, where KFD lists any, what each live process holds on them by its count. */
static void read_amd_devices(struct snapshot *snap)
{
	snap->namd_devices = amdgpu_devices(snap->amd_devices, AMDGPU_MAX_DEVICES, &snap->amd);
	for (size_t i = 0; snap->namd_devices && i < snap->nprocs; i++) {
		struct snap_proc *p = &snap->procs[i];

		if (!p->alive)
			continue;
		for (unsigned int d = 0; d < snap->namd_devices; d++) {
			uint64_t bytes;

			if (amdgpu_process_vram(p->pid, &snap->amd_devices[d], &bytes)) {
				p->kfd_vram += bytes;
				p->valid |= SP_KFD_VRAM;
			}
		}
	}
}

/* The loss counters that naming and container lookups move (the OCI cache's, the
 * symbolizer's and Python's names, the maps a frame missed, the files it could not open), as
 * they stand. */
static void naming_losses(struct state *s, struct snapshot *snap)
{
	struct symbolizer_stats sym;

	snap->lost[SNAP_LOST_OCI_REJECTED] = oci_rejected(s->oci);
	snap->lost[SNAP_LOST_MODULE_MAPS_MISSED] = s->lost[SNAP_LOST_MODULE_MAPS_MISSED];
	symbolizer_get_stats(s->sym, &sym);
	snap->lost[SNAP_LOST_NAMES_DROPPED] = sym.names_dropped + python_names_dropped(s->py);
	snap->lost[SNAP_LOST_PY_STACKS_UNNAMED] = python_stacks_unnamed(s->py);
	snap->lost[SNAP_LOST_MODULES_UNREAD] = sym.open_failures;
}

struct snapshot *state_publish(struct state *s, unsigned int wants)
{
	struct snapshot *snap = xcalloc(1, sizeof(*snap));

	snap->refs = 1;
	snap->wants = wants;
	snap->time_ns = now_ns();
	snap->mono_to_real_ns = realtime_ns() - snap->time_ns;
	state_counters(s, snap->counters);
	memcpy(snap->lost, s->lost, sizeof(snap->lost));
	naming_losses(s, snap);
	if (wants & SNAP_LOSSES_ONLY)
		return snap;	/* a stream's loss line: no walk, no processes */
	state_refresh(s, wants);
	snap->time_ns = now_ns();	/* the time of the numbers just read */
	snap->mono_to_real_ns = realtime_ns() - snap->time_ns;
	state_retain(s, snap->time_ns);
	snap->map_procs = s->map_procs;
	snap->map_sites = s->map_sites;
	snap->map_allocs = s->map_allocs;
	snap->map_allocs_valid = s->map_allocs_valid;
	snap->procs = xcalloc(s->nprocs ? s->nprocs : 1, sizeof(*snap->procs));
	snap->nprocs = s->nprocs;
	for (size_t i = 0; i < s->nprocs; i++) {
		oci_fill(s->oci, &s->procs[i]->container, snap->time_ns);	/* found late? */
		copy_proc(s, s->procs[i], &snap->procs[i]);
	}
	if (snap->nprocs > 1)
		qsort(snap->procs, snap->nprocs, sizeof(*snap->procs), snap_proc_cmp);
	if (wants & SNAP_FAILURES)
		copy_failures(s, snap);
	for (size_t i = 0; (wants & SNAP_COST) && i < snap->nprocs; i++) {
		struct snap_proc *p = &snap->procs[i];

		if (p->alive && (p->valid & SP_STATS) && p->st.start_ns &&
		    !proc_cpu_time(p->pid, p->st.start_ns, &p->cpu_ns))
			p->valid |= SP_CPU;
	}
	naming_losses(s, snap);	/* with this one's lookups and the names it gave its frames */
	if (wants & SNAP_DEVICES) {
		snap->ndevices = nvml_devices(snap->devices, NVML_MAX_DEVICES);
		snap->devices_valid = snap->ndevices > 0;
		nvml_get_status(&snap->nvml);
		read_amd_devices(snap);
	}
	return snap;
}

void state_describe_event(struct state *s, const struct gm_call_event *e, struct snap_event *out)
{
	struct proc_rec *p;

	memset(out, 0, sizeof(*out));
	out->ev = e;
	out->wall_ns = e->time_ns + s->mono_to_real_ns;	/* no clock read per event */
	if (e->type == GM_REC_PROCESS_EXIT) {
		p = state_find_gen(s, (int)e->pid, e->gen);
		if (p) {
			state_follow_event_cgroup(s, p, e->cgroup_id);
			oci_fill(s->oci, &p->container, e->time_ns);
		}
		out->container = p ? &p->container : NULL;
		return;
	}
	p = state_proc(s, (int)e->pid, e->gen, e->start_ns);
	state_follow_event_cgroup(s, p, e->cgroup_id);
	oci_fill(s->oci, &p->container, e->time_ns);	/* the event's clock: no clock read */
	out->container = &p->container;
	out->stack = state_named_stack(s, p, e->stack_id, e->py_stack_id);
	out->stack_id = e->stack_id;
	out->py_stack_id = e->py_stack_id;
	state_site_ids(s, p, &out->stack_id, &out->py_stack_id);
}

void snap_event_release(struct snap_event *e)
{
	snap_stack_put(e->stack);
	e->stack = NULL;
}
