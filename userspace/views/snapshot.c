// SPDX-License-Identifier: GPL-2.0
/* `gpumem snapshot`: the state of every process seen, once, as a table or as the JSON
 * contract of DESIGN.md. With -c, the numbers are those at the instant CMD's process ended. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common.h"
#include "util.h"
#include "discover.h"
#include "probes.h"
#include "state.h"

static int by_pid(const void *a, const void *b)
{
	const struct proc_rec *x = *(struct proc_rec *const *)a, *y = *(struct proc_rec *const *)b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->alive - y->alive;	/* an ended process before the pid's new owner */
}

static int by_bytes(const void *a, const void *b)
{
	const struct site_snap *x = a, *y = b;

	if (x->st.current_bytes != y->st.current_bytes)
		return x->st.current_bytes > y->st.current_bytes ? -1 : 1;
	if (x->st.alloc_bytes_total != y->st.alloc_bytes_total)
		return x->st.alloc_bytes_total > y->st.alloc_bytes_total ? -1 : 1;
	return x->key.stack_id - y->key.stack_id;
}

static struct proc_rec **sorted_procs(struct state *st)
{
	struct proc_rec **v = xcalloc(st->nprocs, sizeof(*v));

	if (st->nprocs)
		memcpy(v, st->procs, st->nprocs * sizeof(*v));
	if (st->nprocs > 1)
		qsort(v, st->nprocs, sizeof(*v), by_pid);
	for (size_t i = 0; i < st->nprocs; i++)
		if (v[i]->nsites > 1)
			qsort(v[i]->sites, v[i]->nsites, sizeof(struct site_snap), by_bytes);
	return v;
}

static uint64_t site_age(const struct proc_rec *p, const struct site_snap *ss)
{
	return ss->oldest_ns && p->end_ns > ss->oldest_ns ? p->end_ns - ss->oldest_ns : 0;
}

static void site_json(struct session *s, struct json_writer *w, const struct proc_rec *p,
		      const struct site_snap *ss)
{
	uint64_t ips[GM_MAX_STACK_DEPTH];
	uint32_t n = state_stack(s->state, p->pid, ss->key.stack_id, ips);

	jw_object_begin(w);
	jw_kv_string(w, "api", probe_api_name(ss->key.api));
	jw_kv_string(w, "kind", kind_name(ss->key.kind));
	jw_kv_u64(w, "current_bytes", ss->st.current_bytes);
	jw_kv_u64(w, "current_allocs", ss->st.current_allocs);
	jw_kv_u64(w, "alloc_count", ss->st.alloc_count);
	jw_kv_u64(w, "free_count", ss->st.free_count);
	jw_kv_u64(w, "alloc_bytes_total", ss->st.alloc_bytes_total);
	jw_kv_u64(w, "failed_count", ss->st.failed_count);
	jw_kv_u64(w, "oldest_age_ns", site_age(p, ss));
	jw_kv_i64(w, "stack_id", ss->key.stack_id);
	jw_key(w, "frames");
	frames_json(s, w, p->pid, ips, n);
	jw_object_end(w);
}

/* "container" and "pod" as DESIGN.md names them, with the runtime and QoS class beside. */
static void container_json(struct json_writer *w, const struct container_info *ci)
{
	jw_kv_string(w, "container", ci->has_id ? ci->id : NULL);
	jw_kv_string(w, "pod", ci->has_pod ? ci->pod_uid : NULL);
	jw_kv_string(w, "container_runtime", ci->runtime[0] ? ci->runtime : NULL);
	jw_kv_string(w, "pod_qos", ci->has_pod && ci->qos[0] ? ci->qos : NULL);
}

static void process_json(struct session *s, struct json_writer *w, const struct proc_rec *p)
{
	const struct gm_proc_stats *st = &p->st;

	jw_object_begin(w);
	jw_kv_i64(w, "pid", p->pid);
	jw_kv_string(w, "comm", p->comm);
	jw_kv_string(w, "cmdline", p->cmdline ? p->cmdline : "");
	jw_kv_string(w, "cgroup", p->cgroup ? p->cgroup : "");
	container_json(w, &p->container);
	if (p->ns_pid)
		jw_kv_i64(w, "ns_pid", p->ns_pid);
	else
		jw_kv_null(w, "ns_pid");
	jw_kv_bool(w, "alive", p->alive);
	if (!p->alive)
		jw_kv_i64(w, "exit_code", p->exit_code);
	jw_kv_u64(w, "current_bytes", st->current_bytes);
	jw_kv_u64(w, "current_allocs", st->current_allocs);
	jw_kv_u64(w, "peak_bytes", st->peak_bytes);
	jw_kv_u64(w, "alloc_count", st->alloc_count);
	jw_kv_u64(w, "free_count", st->free_count);
	jw_kv_u64(w, "alloc_bytes_total", st->alloc_bytes_total);
	jw_kv_u64(w, "failed_count", st->failed_count);
	jw_key(w, "by_kind");
	jw_object_begin(w);
	for (unsigned int k = 0; k < GM_KIND_COUNT; k++)
		jw_kv_u64(w, kind_name(k), st->by_kind[k]);
	jw_object_end(w);
	jw_key(w, "sites");
	jw_array_begin(w);
	for (size_t i = 0; i < p->nsites; i++)
		site_json(s, w, p, &p->sites[i]);
	jw_array_end(w);
	jw_object_end(w);
}

static void failure_json(struct session *s, struct json_writer *w, const struct failure_rec *f)
{
	jw_object_begin(w);
	jw_kv_u64(w, "time_ns", wall_ns(s, f->ev.time_ns));
	jw_kv_i64(w, "pid", f->ev.pid);
	jw_kv_i64(w, "tid", f->ev.tid);
	jw_kv_string(w, "comm", f->ev.comm);
	jw_kv_string(w, "api", probe_api_name(f->ev.api));
	jw_kv_string(w, "layer", probe_layer_name(f->ev.layer));
	jw_kv_string(w, "kind", kind_name(f->ev.kind));
	jw_kv_u64(w, "size", f->ev.size);
	jw_kv_i64(w, "error", f->ev.error);
	jw_kv_string(w, "error_name", cuda_error_name(f->ev.layer, f->ev.error));
	jw_kv_u64(w, "process_bytes_at_failure", f->ev.process_bytes);
	jw_key(w, "frames");
	frames_json(s, w, (int)f->ev.pid, f->ips, f->nips);
	jw_object_end(w);
}

static void snapshot_json(struct session *s, struct proc_rec **procs, size_t n)
{
	struct json_writer *w = jw_new(s->out);
	struct discovery_stats ds;
	uint64_t c[GM_CNT_COUNT];

	jw_object_begin(w);
	jw_kv_u64(w, "version", 1);
	jw_kv_u64(w, "time_ns", realtime_ns());
	jw_key(w, "processes");
	jw_array_begin(w);
	for (size_t i = 0; i < n; i++)
		process_json(s, w, procs[i]);
	jw_array_end(w);
	jw_key(w, "failures");
	jw_array_begin(w);
	for (size_t i = 0; i < s->state->nfailures; i++)
		failure_json(s, w, &s->state->failures[i]);
	jw_array_end(w);
	jw_key(w, "lost");
	lost_json(s, w);
	session_counters(s, c);
	discovery_get_stats(s->disc, &ds);
	jw_key(w, "tracer");
	jw_object_begin(w);
	jw_kv_u64(w, "files_attached", ds.files);
	jw_kv_u64(w, "probes_attached", ds.probes);
	jw_kv_u64(w, "late_attaches", ds.late_attaches);
	jw_kv_u64(w, "late_attach_ns_max", ds.late_attach_ns_max);
	jw_kv_u64(w, "nested_calls", c[GM_CNT_NESTED_CALLS]);
	jw_kv_u64(w, "stale_inflight", c[GM_CNT_STALE_INFLIGHT]);
	jw_kv_u64(w, "failed_frees", c[GM_CNT_FAILED_FREES]);
	jw_kv_u64(w, "replaced_allocs", c[GM_CNT_REPLACED_ALLOCS]);
	jw_kv_u64(w, "map_procs", s->state->map_procs);
	jw_kv_u64(w, "map_sites", s->state->map_sites);
	jw_kv_u64(w, "map_allocs", s->state->map_allocs);
	jw_object_end(w);
	jw_object_end(w);
	jw_free(w);
	fputc('\n', s->out);
}

static void snapshot_text(struct session *s, struct proc_rec **procs, size_t n)
{
	char cur[32], peak[32], host[32], comm[GM_COMM_LEN + 1], size[32];

	fprintf(s->out, "%7s %-16s %12s %12s %12s %8s %8s %6s %s\n", "PID", "COMM", "CURRENT", "PEAK",
	       "HOST", "ALLOCS", "FREES", "FAILED", "STATE");
	for (size_t i = 0; i < n; i++) {
		const struct proc_rec *p = procs[i];

		format_bytes(cur, sizeof(cur), p->st.current_bytes);
		format_bytes(peak, sizeof(peak), p->st.peak_bytes);
		format_bytes(host, sizeof(host), p->st.by_kind[GM_KIND_HOST]);
		text_sanitize(comm, sizeof(comm), p->comm);
		fprintf(s->out, "%7d %-16s %12s %12s %12s %8llu %8llu %6llu %s\n",
		       p->pid, comm, cur, peak, host, p->st.alloc_count, p->st.free_count,
		       p->st.failed_count, p->alive ? "alive" : "ended");
		for (size_t j = 0; j < p->nsites; j++) {
			const struct site_snap *ss = &p->sites[j];
			uint64_t ips[GM_MAX_STACK_DEPTH];
			uint32_t nips = state_stack(s->state, p->pid, ss->key.stack_id, ips);

			if (!ss->st.current_bytes && !ss->st.failed_count && nips && j >= 10)
				continue;
			format_bytes(cur, sizeof(cur), ss->st.current_bytes);
			fprintf(s->out, "        %10s in %llu (%llu allocs, %llu frees, %llu failed) %s %s at ",
			       cur, ss->st.current_allocs, ss->st.alloc_count, ss->st.free_count,
			       ss->st.failed_count, probe_api_name(ss->key.api),
			       kind_name(ss->key.kind));
			frames_text(s, s->out, p->pid, ips, nips, " <- ", 6);
			fputc('\n', s->out);
		}
	}
	for (size_t i = 0; i < s->state->nfailures; i++) {
		const struct failure_rec *f = &s->state->failures[i];

		format_bytes(size, sizeof(size), f->ev.size);
		format_bytes(cur, sizeof(cur), f->ev.process_bytes);
		fprintf(s->out, "failed: pid %u %s(%s) = %d %s, holding %s, at ", f->ev.pid,
		       probe_api_name(f->ev.api), size, f->ev.error,
		       cuda_error_name(f->ev.layer, f->ev.error), cur);
		frames_text(s, s->out, (int)f->ev.pid, f->ips, f->nips, " <- ", 6);
		fputc('\n', s->out);
	}
	lost_text(s, s->out);
}

static int snapshot_finish(struct session *s)
{
	struct proc_rec **procs;
	int err = state_refresh(s->state);

	if (err)
		p_err("cannot read the BPF maps: %s", strerror(-err));
	procs = sorted_procs(s->state);
	if (s->opt->json)
		snapshot_json(s, procs, s->state->nprocs);
	else
		snapshot_text(s, procs, s->state->nprocs);
	free(procs);
	fflush(s->out);
	return err ? 1 : 0;
}

const struct view_ops snapshot_view = {
	.name = "snapshot",
	.stream_calls = false,
	.finish = snapshot_finish,
};
