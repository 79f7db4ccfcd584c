// SPDX-License-Identifier: GPL-2.0
/* `gpumem oom`: every failed allocation as it happens, with what the process held then, the
 * call sites that held it, the call site that failed and, where NVML is present, what was
 * free on the device. Failures reach userspace as ring-buffer records whatever the view. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common.h"
#include "nvml.h"
#include "probes.h"
#include "state.h"
#include "units.h"
#include "util.h"

#define OOM_TOP_SITES 5
#define OOM_REFRESH_NS 50000000ull	/* a burst of failures shares one read of the maps */

static struct {
	uint64_t last_refresh;
	uint64_t failures;
} oom;

struct oom_ctx {
	const struct gm_call_event *e;
	const struct proc_rec *p;	/* NULL: not in the maps (ended already) */
	const struct container_info *container;	/* NULL: its start was not seen */
	const struct site_snap *top[OOM_TOP_SITES];
	size_t ntop;
	struct nvml_device dev[NVML_MAX_DEVICES];
	unsigned int ndev;
};

static void top_sites(struct oom_ctx *c)
{
	c->ntop = 0;
	if (!c->p)
		return;
	for (size_t i = 0; i < c->p->nsites; i++) {
		const struct site_snap *ss = &c->p->sites[i];
		size_t j;

		if (!ss->st.current_bytes)
			continue;
		if (c->ntop == OOM_TOP_SITES &&
		    ss->st.current_bytes <= c->top[c->ntop - 1]->st.current_bytes)
			continue;
		if (c->ntop < OOM_TOP_SITES)
			c->ntop++;
		for (j = c->ntop - 1; j > 0 && c->top[j - 1]->st.current_bytes < ss->st.current_bytes; j--)
			c->top[j] = c->top[j - 1];
		c->top[j] = ss;
	}
}

static void device_text(struct session *s, const struct oom_ctx *c)
{
	char free_b[32], total[32];

	if (!c->ndev) {
		fputs("device free - of -", s->out);
		return;
	}
	for (unsigned int i = 0; i < c->ndev; i++) {
		fmt_size(free_b, sizeof(free_b), c->dev[i].free, s->opt->exact_bytes);
		fmt_size(total, sizeof(total), c->dev[i].total, s->opt->exact_bytes);
		fprintf(s->out, "%sGPU %u free %s of %s", i ? ", " : "", c->dev[i].index, free_b, total);
	}
}

static void failure_text(struct session *s, const struct oom_ctx *c)
{
	const struct gm_call_event *e = c->e;
	bool exact = s->opt->exact_bytes;
	uint64_t wall = wall_ns(s, e->time_ns), ips[GM_MAX_STACK_DEPTH];
	time_t secs = (time_t)(wall / 1000000000ull);
	char when[32], comm[GM_COMM_LEN + 1], size[32], held[32], peak[32];
	uint32_t n = state_stack(s->state, (int)e->pid, e->stack_id, ips);
	struct tm tm;

	localtime_r(&secs, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	snprintf(comm, sizeof(comm), "%.*s", GM_COMM_LEN, e->comm);
	text_sanitize(comm, sizeof(comm), comm);
	fmt_size(size, sizeof(size), e->size, exact);
	fmt_size(held, sizeof(held), e->process_bytes, exact);
	if (c->p)
		fmt_size(peak, sizeof(peak), c->p->st.peak_bytes, exact);
	else
		snprintf(peak, sizeof(peak), "-");
	fprintf(s->out, "%s.%06" PRIu64 " pid %u tid %u %s", when, (wall / 1000) % 1000000,
		e->pid, e->tid, comm);
	if (c->container && c->container->has_id)
		fprintf(s->out, " [%.*s]", CONTAINER_SHORT_LEN, c->container->id);
	fprintf(s->out, ": %s(%s) = %d %s\n", probe_api_name(e->api), size, e->error,
		cuda_error_name(e->layer, e->error));
	fprintf(s->out, "  held %s (peak %s); ", held, peak);
	device_text(s, c);
	fputs("\n  failed at ", s->out);
	frames_text(s, s->out, (int)e->pid, ips, n, " <- ", 6);
	fputc('\n', s->out);
	for (size_t i = 0; i < c->ntop; i++) {
		const struct site_snap *ss = c->top[i];

		n = state_stack(s->state, (int)ss->key.tgid, ss->key.stack_id, ips);
		fmt_size(held, sizeof(held), ss->st.current_bytes, exact);
		fprintf(s->out, "  %s %10s in %llu %s %s at ", i ? "       " : "held by", held,
			ss->st.current_allocs, probe_api_name(ss->key.api), kind_name(ss->key.kind));
		frames_text(s, s->out, (int)e->pid, ips, n, " <- ", 4);
		fputc('\n', s->out);
	}
}

static void failure_json(struct session *s, const struct oom_ctx *c)
{
	const struct gm_call_event *e = c->e;
	struct json_writer *w = jw_new(s->out);
	uint64_t ips[GM_MAX_STACK_DEPTH];
	uint32_t n = state_stack(s->state, (int)e->pid, e->stack_id, ips);
	char comm[GM_COMM_LEN + 1];

	snprintf(comm, sizeof(comm), "%.*s", GM_COMM_LEN, e->comm);
	jw_object_begin(w);
	jw_kv_u64(w, "time_ns", wall_ns(s, e->time_ns));
	jw_kv_i64(w, "pid", e->pid);
	jw_kv_i64(w, "tid", e->tid);
	jw_kv_string(w, "comm", comm);
	container_kv_json(w, c->container);
	jw_kv_string(w, "api", probe_api_name(e->api));
	jw_kv_string(w, "layer", probe_layer_name(e->layer));
	jw_kv_string(w, "kind", kind_name(e->kind));
	jw_kv_u64(w, "size", e->size);
	jw_kv_i64(w, "error", e->error);
	jw_kv_string(w, "error_name", cuda_error_name(e->layer, e->error));
	jw_kv_u64(w, "process_bytes", e->process_bytes);
	if (c->p) {
		jw_kv_u64(w, "process_peak_bytes", c->p->st.peak_bytes);
		jw_kv_u64(w, "process_allocs", c->p->st.current_allocs);
		jw_kv_u64(w, "process_failed_count", c->p->st.failed_count);
	} else {
		jw_kv_null(w, "process_peak_bytes");
		jw_kv_null(w, "process_allocs");
		jw_kv_null(w, "process_failed_count");
	}
	jw_key(w, "devices");
	jw_array_begin(w);
	for (unsigned int i = 0; i < c->ndev; i++) {
		jw_object_begin(w);
		jw_kv_u64(w, "index", c->dev[i].index);
		jw_kv_string(w, "name", c->dev[i].name);
		jw_kv_u64(w, "free_bytes", c->dev[i].free);
		jw_kv_u64(w, "total_bytes", c->dev[i].total);
		jw_object_end(w);
	}
	jw_array_end(w);
	jw_key(w, "frames");
	frames_json(s, w, (int)e->pid, ips, n);
	jw_key(w, "top_sites");
	jw_array_begin(w);
	for (size_t i = 0; i < c->ntop; i++) {
		const struct site_snap *ss = c->top[i];

		n = state_stack(s->state, (int)ss->key.tgid, ss->key.stack_id, ips);
		jw_object_begin(w);
		jw_kv_string(w, "api", probe_api_name(ss->key.api));
		jw_kv_string(w, "kind", kind_name(ss->key.kind));
		jw_kv_u64(w, "current_bytes", ss->st.current_bytes);
		jw_kv_u64(w, "current_allocs", ss->st.current_allocs);
		jw_kv_u64(w, "alloc_count", ss->st.alloc_count);
		jw_kv_u64(w, "failed_count", ss->st.failed_count);
		jw_key(w, "frames");
		frames_json(s, w, (int)e->pid, ips, n);
		jw_object_end(w);
	}
	jw_array_end(w);
	jw_object_end(w);
	jw_newline(w);
	jw_free(w);
}

static void oom_call(struct session *s, const struct gm_call_event *e)
{
	struct oom_ctx c = { .e = e };
	uint64_t now = now_ns();

	if (e->type != GM_REC_ALLOC_FAILED)
		return;
	oom.failures++;
	/* The process's sites at this instant (it may free or exit in a moment). */
	if (now - oom.last_refresh >= OOM_REFRESH_NS) {
		if (state_refresh_counts(s->state))
			p_err("cannot read the BPF maps");
		oom.last_refresh = now;
	}
	c.p = state_find(s->state, (int)e->pid);
	if (c.p)
		c.container = &c.p->container;
	if (c.p && !c.p->have_stats)
		c.p = NULL;
	top_sites(&c);
	c.ndev = nvml_devices(c.dev, NVML_MAX_DEVICES);
	if (s->opt->json)
		failure_json(s, &c);
	else
		failure_text(s, &c);
	fflush(s->out);
}

static int oom_finish(struct session *s)
{
	if (!s->opt->json) {
		fprintf(s->out, "%" PRIu64 " failed allocation%s\n", oom.failures,
			oom.failures == 1 ? "" : "s");
		lost_text(s, s->out);
	}
	fflush(s->out);
	nvml_close();
	return 0;
}

const struct view_ops oom_view = {
	.name = "oom",
	.on_call = oom_call,
	.finish = oom_finish,
};
