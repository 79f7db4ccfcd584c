// SPDX-License-Identifier: GPL-2.0
/* `gpumem snapshot`: the last snapshot, once, as a table or as the JSON contract of docs/json.md.
 * With -c, the numbers are those at the instant CMD's process ended. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/analysis.h"
#include "base/util.h"
#include "output/report.h"
#include "output/site_text.h"
#include "output/units.h"
#include "probes/table.h"
#include "views/common.h"

#define SNAPSHOT_TEXT_SITES 10	/* sites listed per process, besides those that hold or failed */
#define SNAPSHOT_NAME_EVERY_S 1.0	/* new sites' stacks named while their processes live */

static void site_json(struct json_writer *w, const struct snap_proc *p, const struct snap_site *ss)
{
	jw_object_begin(w);
	json_site_fields(w, p, ss);
	jw_object_end(w);
}

/* GPU memory per device, the devices that hold any: "gpu" the ordinal as the process numbers
 * it (null: a device not known), "host_gpu" the host's index of that device among its vendor's
 * (NVML's, KFD's GPU order) and "name", "uuid" the host's for it (each null when not known). */
static void by_gpu_json(struct json_writer *w, const struct snapshot *snap,
			const struct snap_proc *p)
{
	const struct gm_proc_stats *st = &p->st;
	const char *vendor = snap_proc_gpu_vendor(p);

	jw_key(w, "by_gpu");
	jw_array_begin(w);
	for (unsigned int g = 0; g <= GM_MAX_GPUS; g++) {
		struct snap_gpu d;
		bool known;

		if (!st->gpu_bytes[g])
			continue;
		known = g < GM_MAX_GPUS && snap_gpu_of_slot(snap, snap_gpu_host(snap, p, g), &d);
		jw_object_begin(w);
		if (g < GM_MAX_GPUS)
			jw_kv_u64(w, "gpu", g);
		else
			jw_kv_null(w, "gpu");
		if (known)
			jw_kv_i64(w, "host_gpu", d.index);
		else
			jw_kv_null(w, "host_gpu");
		json_kv_known(w, "name", known ? d.name : NULL, known && d.name[0]);
		json_kv_known(w, "uuid", known ? d.uuid : NULL, known && d.uuid[0]);
		jw_kv_string(w, "vendor", vendor);
		jw_kv_u64(w, "bytes", st->gpu_bytes[g]);
		jw_object_end(w);
	}
	jw_array_end(w);
}

/* gpumem's own cost in it: probe hits (the kernel's count), their time (hits x a hit's
 * measured cost), and that time's share of the process's CPU time; null where not known. */
static void cost_json(struct json_writer *w, const struct snapshot *snap,
		      const struct snap_proc *p)
{
	struct proc_cost c;

	proc_cost_of(snap, p, &c);
	json_kv_u64_known(w, "probe_hits", c.hits, c.hits_known);
	json_kv_double_known(w, "probe_seconds", c.seconds, c.seconds_known);
	json_kv_double_known(w, "probe_cpu_share", c.share, c.share_known);
}

static void process_json(struct json_writer *w, const struct snapshot *snap,
			 const struct snap_proc *p)
{
	const struct gm_proc_stats *st = &p->st;

	jw_object_begin(w);
	jw_kv_i64(w, "pid", p->pid);
	json_kv_known(w, "comm", p->comm, p->valid & SP_COMM);
	json_kv_known(w, "cmdline", p->cmdline, p->valid & SP_CMDLINE);
	json_kv_known(w, "cgroup", p->cgroup, p->valid & SP_CGROUP);
	json_container_full(w, &p->container);
	if (p->valid & SP_NS_PID)
		jw_kv_i64(w, "ns_pid", p->ns_pid);
	else
		jw_kv_null(w, "ns_pid");
	jw_kv_bool(w, "alive", p->alive);
	jw_kv_bool(w, "execed", p->execed);
	if (p->valid & SP_EXIT_CODE)
		jw_kv_i64(w, "exit_code", p->exit_code);
	jw_kv_u64(w, "current_bytes", st->current_bytes);
	jw_kv_u64(w, "current_allocs", st->current_allocs);
	jw_kv_u64(w, "peak_bytes", st->peak_bytes);
	jw_kv_u64(w, "alloc_count", st->alloc_count);
	jw_kv_u64(w, "free_count", st->free_count);
	jw_kv_u64(w, "alloc_bytes_total", st->alloc_bytes_total);
	jw_kv_u64(w, "failed_count", st->failed_count);
	cost_json(w, snap, p);
	/* KFD's own count of its VRAM on AMD GPUs (null: not an AMD program, or no KFD) */
	json_kv_u64_known(w, "kfd_vram_bytes", p->kfd_vram, p->valid & SP_KFD_VRAM);
	jw_key(w, "by_kind");
	jw_object_begin(w);
	for (unsigned int k = 0; k < GM_KIND_MEMORY_COUNT; k++)
		jw_kv_u64(w, kind_name(k), st->by_kind[k]);
	jw_object_end(w);
	/* What is no memory of the process's own, never in by_kind nor current_bytes. */
	jw_kv_u64(w, "vmm_mapped_bytes", st->by_kind[GM_KIND_VMM_MAPPED]);
	jw_kv_u64(w, "vmm_reserved_bytes", st->by_kind[GM_KIND_VMM_RESERVED]);
	jw_kv_u64(w, "ipc_imported_allocs", p->imported_allocs);
	by_gpu_json(w, snap, p);
	jw_key(w, "sites");
	jw_array_begin(w);
	for (size_t i = 0; i < p->nsites; i++)
		site_json(w, p, &p->sites[i]);
	jw_array_end(w);
	json_libraries(w, p);
	/* PyTorch's tensors: allocated inside the bytes above (reserved), never added to them. */
	jw_kv_u64(w, "tensor_bytes", p->tensor.current_bytes);
	jw_kv_u64(w, "tensor_allocs", p->tensor.current_allocs);
	jw_kv_u64(w, "tensor_peak_bytes", p->st.tensor_peak_bytes);
	jw_kv_u64(w, "tensor_alloc_count", p->tensor.alloc_count);
	jw_kv_u64(w, "tensor_free_count", p->tensor.free_count);
	jw_kv_u64(w, "tensor_bytes_total", p->tensor.alloc_bytes_total);
	jw_key(w, "tensor_sites");
	jw_array_begin(w);
	for (size_t i = 0; i < p->ntensor_sites; i++)
		site_json(w, p, &p->tensor_sites[i]);
	jw_array_end(w);
	jw_object_end(w);
}

/* Each attached file (device, inode) with the probe-table symbols attached in it. */
static void files_json(struct json_writer *w, const struct snapshot *snap)
{
	char dev[32];

	jw_key(w, "files");
	jw_array_begin(w);
	for (size_t i = 0; i < snap->nfiles; i++) {
		const struct discovery_file *f = &snap->files[i];

		jw_object_begin(w);
		snprintf(dev, sizeof(dev), "%u:%u", f->major, f->minor);
		jw_kv_string(w, "dev", dev);
		jw_kv_u64(w, "ino", f->ino);
		jw_key(w, "probes");
		jw_array_begin(w);
		for (unsigned int j = 0; j < f->napis; j++)
			jw_string(w, probe_api_name(f->apis[j]));
		jw_array_end(w);
		jw_object_end(w);
	}
	jw_array_end(w);
}

static void tracer_json(struct json_writer *w, const struct snapshot *snap)
{
	jw_key(w, "tracer");
	jw_object_begin(w);
	jw_kv_u64(w, "files_attached", snap->disc.files);
	jw_kv_u64(w, "probes_attached", snap->disc.probes);
	jw_kv_u64(w, "files_released", snap->disc.released);
	jw_kv_u64(w, "late_attaches", snap->disc.late_attaches);
	jw_kv_u64(w, "late_attach_ns_max", snap->disc.late_attach_ns_max);
	jw_kv_u64(w, "nested_calls", snap->counters[GM_CNT_NESTED_CALLS]);
	jw_kv_u64(w, "stale_inflight", snap->counters[GM_CNT_STALE_INFLIGHT]);
	jw_kv_u64(w, "failed_frees", snap->counters[GM_CNT_FAILED_FREES]);
	jw_kv_u64(w, "replaced_allocs", snap->counters[GM_CNT_REPLACED_ALLOCS]);
	jw_kv_u64(w, "holds", snap->counters[GM_CNT_HOLDS]);
	jw_kv_u64(w, "ctx_released_allocs", snap->counters[GM_CNT_CTX_RELEASED]);
	jw_kv_u64(w, "module_maps_busy", snap->counters[GM_CNT_MODULE_MAPS_BUSY]);
	jw_kv_u64(w, "failed_allocs", snap->counters[GM_CNT_FAILED_ALLOCS]);
	json_kv_double_known(w, "probe_hit_ns", snap->trap_ns, snap->trap_known);
	json_kv_double_known(w, "bpf_run_ns", snap->bpf_run_ns, snap->bpf_run_known);
	jw_kv_u64(w, "map_procs", snap->map_procs);
	jw_kv_u64(w, "map_sites", snap->map_sites);
	if (snap->map_allocs_valid)
		jw_kv_u64(w, "map_allocs", snap->map_allocs);
	else
		jw_kv_null(w, "map_allocs");
	files_json(w, snap);
	jw_object_end(w);
}

static void snapshot_json(struct sink *s, const struct snapshot *snap)
{
	struct json_writer *w = jw_new(s->out);

	jw_object_begin(w);
	jw_kv_u64(w, "version", 1);
	jw_kv_u64(w, "time_ns", snapshot_wall_ns(snap, snap->time_ns));
	jw_key(w, "processes");
	jw_array_begin(w);
	for (size_t i = 0; i < snap->nprocs; i++)
		process_json(w, snap, &snap->procs[i]);
	jw_array_end(w);
	jw_key(w, "failures");
	jw_array_begin(w);
	for (size_t i = 0; i < snap->nfailures; i++)
		json_failure(w, snap, &snap->failures[i]);
	jw_array_end(w);
	jw_key(w, "lost");
	json_lost(w, snap);
	tracer_json(w, snap);
	json_devices(w, snap);
	jw_object_end(w);
	jw_free(w);
	fputc('\n', s->out);
}

/* " on GPU 1", " on GPU ?" (GPU memory on a device not known), "" (host memory). */
static const char *site_gpu_text(const struct snap_site *ss, char *buf, size_t len)
{
	if (ss->gpu)
		snprintf(buf, len, " on GPU %u", ss->gpu - 1);
	else if (gm_kind_is_gpu(ss->kind))
		snprintf(buf, len, " on GPU ?");
	else
		buf[0] = 0;
	return buf;
}

static void by_gpu_text(struct sink *s, const struct snap_proc *p)
{
	const char *sep = "";
	char bytes[32];

	if (!snap_proc_many_gpus(p))
		return;
	fprintf(s->out, "        by GPU:");
	for (unsigned int g = 0; g <= GM_MAX_GPUS; g++) {
		if (!p->st.gpu_bytes[g])
			continue;
		fmt_size(bytes, sizeof(bytes), p->st.gpu_bytes[g], s->opt->exact_bytes);
		if (g < GM_MAX_GPUS)
			fprintf(s->out, "%s %u %s", sep, g, bytes);
		else
			fprintf(s->out, "%s ? %s", sep, bytes);
		sep = ",";
	}
	fputc('\n', s->out);
}

/* What gpumem took from it: "gpumem: 2040 probe hits, ~1.4 ms (0.3% of its CPU)". */
static void cost_text(struct sink *s, const struct snapshot *snap, const struct snap_proc *p)
{
	struct proc_cost c;

	proc_cost_of(snap, p, &c);
	if (!c.hits_known || !c.hits)
		return;
	fprintf(s->out, "        gpumem: %" PRIu64 " probe hits", c.hits);
	if (c.seconds_known && c.seconds < 1e-3)
		fprintf(s->out, ", ~%.0f us", c.seconds * 1e6);
	else if (c.seconds_known && c.seconds < 1)
		fprintf(s->out, ", ~%.1f ms", c.seconds * 1e3);
	else if (c.seconds_known)
		fprintf(s->out, ", ~%.2f s", c.seconds);
	if (c.share_known)
		fprintf(s->out, " (%.2g%% of its CPU)", c.share * 100);
	fputc('\n', s->out);
}

/* What KFD counts for an AMD program, traced or not, beside what gpumem holds for it (managed
 * memory counted where it lies now): "KFD counts 11 MiB of VRAM (3.0 MiB more than gpumem)". */
static void kfd_text(struct sink *s, const struct snap_proc *p)
{
	uint64_t seen = p->st.current_bytes;
	char vram[32], diff[32];

	if (!(p->valid & SP_KFD_VRAM))
		return;
	fmt_size(vram, sizeof(vram), p->kfd_vram, s->opt->exact_bytes);
	fmt_size(diff, sizeof(diff), p->kfd_vram > seen ? p->kfd_vram - seen : seen - p->kfd_vram,
		 s->opt->exact_bytes);
	fprintf(s->out, "        KFD counts %s of VRAM (%s %s than gpumem)\n", vram,
		diff, p->kfd_vram >= seen ? "more" : "less");
}

static void sites_text(struct sink *s, const struct snap_proc *p)
{
	bool exact = s->opt->exact_bytes, gpus = snap_proc_many_gpus(p);
	unsigned int *depth = site_depths(p->sites, p->nsites);
	char cur[32], gpu[24];

	for (size_t j = 0; j < p->nsites; j++) {
		const struct snap_site *ss = &p->sites[j];

		if (!ss->st.current_bytes && !ss->st.failed_count && ss->stack &&
		    ss->stack->nframes && j >= SNAPSHOT_TEXT_SITES)
			continue;
		fmt_size(cur, sizeof(cur), ss->st.current_bytes, exact);
		fprintf(s->out, "        %10s in %llu (%llu allocs, %llu frees, %llu failed) %s %s%s at ",
			cur, ss->st.current_allocs, ss->st.alloc_count, ss->st.free_count,
			ss->st.failed_count, probe_api_name(ss->api), site_kind_name(ss),
			gpus ? site_gpu_text(ss, gpu, sizeof(gpu)) : "");
		text_site(s->out, ss->stack, depth[j], s->opt->all_frames);
		fputc('\n', s->out);
	}
	free(depth);
}

/* PyTorch's tensors: what they hold of what the process reserved, and where they were made. */
static void tensors_text(struct sink *s, const struct snap_proc *p)
{
	bool exact = s->opt->exact_bytes;
	char cur[32], peak[32], reserved[32];
	unsigned int *depth;

	if (!p->tensor.alloc_count)
		return;
	depth = site_depths(p->tensor_sites, p->ntensor_sites);
	fmt_size(cur, sizeof(cur), p->tensor.current_bytes, exact);
	fmt_size(peak, sizeof(peak), p->st.tensor_peak_bytes, exact);
	fmt_size(reserved, sizeof(reserved), p->st.current_bytes, exact);
	fprintf(s->out, "        tensors: %s allocated (peak %s) in %llu (%llu allocs, %llu frees) "
		"of %s reserved\n", cur, peak, p->tensor.current_allocs, p->tensor.alloc_count,
		p->tensor.free_count, reserved);
	for (size_t j = 0; j < p->ntensor_sites; j++) {
		const struct snap_site *ss = &p->tensor_sites[j];

		if (!ss->st.current_bytes && j >= SNAPSHOT_TEXT_SITES)
			continue;
		fmt_size(cur, sizeof(cur), ss->st.current_bytes, exact);
		fprintf(s->out, "        %10s in %llu tensors (%llu allocs, %llu frees) at ", cur,
			ss->st.current_allocs, ss->st.alloc_count, ss->st.free_count);
		text_site(s->out, ss->stack, depth[j], s->opt->all_frames);
		fputc('\n', s->out);
	}
	free(depth);
}

/* The names its container's OCI bundle gave, on a line of their own when it gave any. */
static void names_text(struct sink *s, const struct container_info *ci)
{
	char ns[CONTAINER_LABEL_LEN + 1], pod[CONTAINER_NAME_LEN + 1], name[CONTAINER_LABEL_LEN + 1];

	if (!ci->pod_name[0] && !ci->pod_namespace[0] && !ci->container_name[0])
		return;
	fprintf(s->out, "        pod %s/%s, container %s\n",
		text_known(ns, sizeof(ns), ci->pod_namespace, true),
		text_known(pod, sizeof(pod), ci->pod_name, true),
		text_known(name, sizeof(name), ci->container_name, true));
}

static void failures_text(struct sink *s, const struct snapshot *snap)
{
	bool exact = s->opt->exact_bytes;
	char size[32], cur[32];

	for (size_t i = 0; i < snap->nfailures; i++) {
		const struct snap_failure *f = &snap->failures[i];

		fmt_size(size, sizeof(size), f->ev.size, exact);
		fmt_size(cur, sizeof(cur), f->ev.process_bytes, exact);
		fprintf(s->out, "failed: pid %u %s(%s) = %d %s", f->ev.pid,
			probe_api_name(f->ev.api), size, f->ev.error,
			gpu_error_name(f->ev.layer, f->ev.error));
		if (gm_site_gpu(f->ev.kind, f->ev.layer, (int32_t)f->ev.gpu - 1))
			fprintf(s->out, " on GPU %u", f->ev.gpu - 1);	/* GPU memory's */
		fprintf(s->out, ", holding %s, at ", cur);
		text_site(s->out, f->stack, SITE_TEXT_FRAMES, s->opt->all_frames);
		fputc('\n', s->out);
	}
}

/* VMM mappings, reserved address space, IPC imports: shown apart from the memory, when any. */
static void beside_text(struct sink *s, const struct snap_proc *p)
{
	bool exact = s->opt->exact_bytes;
	char mapped[32], reserved[32];

	if (!p->st.by_kind[GM_KIND_VMM_MAPPED] && !p->st.by_kind[GM_KIND_VMM_RESERVED] &&
	    !p->imported_allocs)
		return;
	fmt_size(mapped, sizeof(mapped), p->st.by_kind[GM_KIND_VMM_MAPPED], exact);
	fmt_size(reserved, sizeof(reserved), p->st.by_kind[GM_KIND_VMM_RESERVED], exact);
	fprintf(s->out, "        not memory of its own: %s vmm mapped, %s address space reserved, "
		"%llu IPC imports\n", mapped, reserved, (unsigned long long)p->imported_allocs);
}

static void snapshot_text(struct sink *s, const struct snapshot *snap)
{
	bool exact = s->opt->exact_bytes;
	char cur[32], peak[32], host[32], comm[GM_COMM_LEN + 1];

	fprintf(s->out, "%7s %-16s %12s %12s %12s %8s %8s %6s %s\n", "PID", "COMM", "CURRENT",
		"PEAK", "HOST", "ALLOCS", "FREES", "FAILED", "STATE");
	for (size_t i = 0; i < snap->nprocs; i++) {
		const struct snap_proc *p = &snap->procs[i];

		fmt_size(cur, sizeof(cur), p->st.current_bytes, exact);
		fmt_size(peak, sizeof(peak), p->st.peak_bytes, exact);
		fmt_size(host, sizeof(host), p->st.by_kind[GM_KIND_HOST], exact);
		text_known(comm, sizeof(comm), p->comm, p->valid & SP_COMM);
		fprintf(s->out, "%7d %-16s %12s %12s %12s %8llu %8llu %6llu %s\n", p->pid, comm, cur,
			peak, host, p->st.alloc_count, p->st.free_count, p->st.failed_count,
			p->alive ? "alive" : p->execed ? "exec'd" : "ended");
		names_text(s, &p->container);
		by_gpu_text(s, p);
		beside_text(s, p);
		text_libraries_line(s->out, "        ", p, exact);
		cost_text(s, snap, p);
		kfd_text(s, p);
		sites_text(s, p);
		tensors_text(s, p);
	}
	failures_text(s, snap);
	text_devices(s->out, snap, exact);
	fputc('\n', s->out);
	text_lost(s->out, snap);
}

static int snapshot_finish(struct sink *s, const struct snapshot *snap)
{
	if (s->opt->json)
		snapshot_json(s, snap);
	else
		snapshot_text(s, snap);
	return fflush(s->out) || ferror(s->out) ? -1 : 0;
}

/* A read of the maps a second while it runs: the stacks of new sites are named while their
 * processes live, so a library loaded late (cuBLAS, cuDNN, at their first use) is read from its
 * file, not only known by name from the process's map at its exit. */
static double sample_interval(const struct options *o)
{
	(void)o;
	return SNAPSHOT_NAME_EVERY_S;
}

const struct sink_ops snapshot_view = {
	.reads_agent = true,
	.name = "snapshot",
	.report_wants = SNAP_AGES | SNAP_FAILURES | SNAP_DEVICES | SNAP_COST,
	.exit_wants = SNAP_AGES,	/* an ended process is shown with its sites' ages at its end */
	.sample_interval = sample_interval,
	.finish = snapshot_finish,
};
