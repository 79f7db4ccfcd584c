// SPDX-License-Identifier: GPL-2.0
/* `gpumem oom`: every failed allocation as it happens, with what the process held then, the
 * call sites that held it, the call site that failed and, where NVML is present, what was
 * free on the device. Failures reach userspace as ring-buffer records whatever the view. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/analysis.h"
#include "output/report.h"
#include "output/site_text.h"
#include "output/units.h"
#include "probes/table.h"
#include "views/common.h"

static uint64_t failures_seen;

/* Whether the failing process allocates PyTorch tensors (its failure says what they held). */
static bool has_tensors(const struct snap_event *se, const struct oom_context *c)
{
	return se->ev->tensor_bytes || (c->p && c->p->tensor.alloc_count);
}

static void failure_text(struct sink *s, const struct snap_event *se,
			 const struct snapshot *snap, const struct oom_context *c)
{
	const struct gm_call_event *e = se->ev;
	uint32_t gpu = gm_site_gpu(e->kind, e->layer, (int32_t)e->gpu - 1);	/* host: 0 */
	bool exact = s->opt->exact_bytes;
	char when[32], comm[GM_COMM_LEN + 1], size[32], held[32], peak[32];

	text_clock(when, sizeof(when), se->wall_ns, true);
	snprintf(comm, sizeof(comm), "%.*s", GM_COMM_LEN, e->comm);
	text_sanitize(comm, sizeof(comm), comm);
	fmt_size(size, sizeof(size), e->size, exact);
	fmt_size(held, sizeof(held), e->process_bytes, exact);
	if (c->p)
		fmt_size(peak, sizeof(peak), c->p->st.peak_bytes, exact);
	else
		snprintf(peak, sizeof(peak), "-");
	fprintf(s->out, "%s pid %u tid %u %s", when, e->pid, e->tid, comm);
	if (se->container && se->container->has_id)
		fprintf(s->out, " [%.*s]", CONTAINER_SHORT_LEN, se->container->id);
	fprintf(s->out, ": %s(%s) = %d %s", probe_api_name(e->api), size, e->error,
		gpu_error_name(e->layer, e->error));
	if (gpu)
		fprintf(s->out, " on GPU %u", gpu - 1);
	fprintf(s->out, "\n  held %s (peak %s); ", held, peak);
	if (gpu && c->p && snap_proc_many_gpus(c->p)) {
		fmt_size(held, sizeof(held), c->p->st.gpu_bytes[gpu - 1], exact);
		fprintf(s->out, "on GPU %u %s; ", gpu - 1, held);
	}
	if (has_tensors(se, c)) {
		fmt_size(held, sizeof(held), e->tensor_bytes, exact);
		fprintf(s->out, "tensors %s of it; ", held);
	}
	text_devices(s->out, snap, s->opt->exact_bytes);
	fputs("\n  failed at ", s->out);
	text_site(s->out, se->stack, SITE_TEXT_FRAMES, s->opt->all_frames);
	fputc('\n', s->out);
	for (size_t i = 0; i < c->ntop; i++) {
		const struct snap_site *ss = c->top[i];

		fmt_size(held, sizeof(held), ss->st.current_bytes, exact);
		fprintf(s->out, "  %s %10s in %llu %s %s at ", i ? "       " : "held by", held,
			ss->st.current_allocs, probe_api_name(ss->api), site_kind_name(ss));
		text_site(s->out, ss->stack, SITE_TEXT_FRAMES, s->opt->all_frames);
		fputc('\n', s->out);
	}
	if (c->p && c->p->nlibraries && c->p->libraries[0].st.current_bytes) {
		fputs("  by library: ", s->out);
		text_libraries(s->out, c->p, 6, exact);
		fputc('\n', s->out);
	}
	for (size_t i = 0; c->p && i < c->p->ntensor_sites && i < OOM_TOP_SITES; i++) {
		const struct snap_site *ss = &c->p->tensor_sites[i];

		if (!ss->st.current_bytes)
			break;
		fmt_size(held, sizeof(held), ss->st.current_bytes, exact);
		fprintf(s->out, "  %s %10s in %llu tensors at ", i ? "       " : "tensors", held,
			ss->st.current_allocs);
		text_site(s->out, ss->stack, SITE_TEXT_FRAMES, s->opt->all_frames);
		fputc('\n', s->out);
	}
}

static void process_json(struct json_writer *w, const struct oom_context *c)
{
	if (c->p) {
		jw_kv_u64(w, "process_peak_bytes", c->p->st.peak_bytes);
		jw_kv_u64(w, "process_allocs", c->p->st.current_allocs);
		jw_kv_u64(w, "process_failed_count", c->p->st.failed_count);
	} else {
		jw_kv_null(w, "process_peak_bytes");
		jw_kv_null(w, "process_allocs");
		jw_kv_null(w, "process_failed_count");
	}
}

static void failure_json(struct sink *s, const struct snap_event *se,
			 const struct snapshot *snap, const struct oom_context *c)
{
	struct json_writer *w = jw_new(s->out);

	jw_object_begin(w);
	jw_key(w, "event");
	jw_string_spelled(w, "alloc_failed");
	json_call_fields(w, se->ev, se->wall_ns);
	json_container(w, se->container);
	jw_kv_u64(w, "process_bytes", se->ev->process_bytes);
	process_json(w, c);
	json_devices(w, snap);
	jw_key(w, "frames");
	json_frames(w, se->stack);
	jw_key(w, "top_sites");
	jw_array_begin(w);
	for (size_t i = 0; i < c->ntop; i++) {
		jw_object_begin(w);
		json_site_fields(w, c->p, c->top[i]);
		jw_object_end(w);
	}
	jw_array_end(w);
	if (c->p)
		json_libraries(w, c->p);
	else
		jw_kv_null(w, "libraries");
	/* PyTorch's tensors: what they held of process_bytes at the failure (a caching
	 * allocator that reserved much more than its tensors hold is fragmented), and the
	 * tensor sites holding most when the failure was handled. */
	jw_kv_u64(w, "process_tensor_bytes", se->ev->tensor_bytes);
	jw_key(w, "top_tensor_sites");
	jw_array_begin(w);
	for (size_t i = 0; c->p && i < c->p->ntensor_sites && i < OOM_TOP_SITES; i++) {
		if (!c->p->tensor_sites[i].st.current_bytes)
			break;
		jw_object_begin(w);
		json_site_fields(w, c->p, &c->p->tensor_sites[i]);
		jw_object_end(w);
	}
	jw_array_end(w);
	jw_object_end(w);
	jw_newline(w);
	jw_free(w);
}

static void oom_failure(struct sink *s, const struct snap_event *se,
			const struct snapshot *snap)
{
	struct oom_context c;

	failures_seen++;
	/* The sites of the memory that failed: on its device, or host memory. */
	oom_context_of(snap, (int)se->ev->pid,
		       gm_site_gpu(se->ev->kind, se->ev->layer, (int32_t)se->ev->gpu - 1), &c);
	if (s->opt->json)
		failure_json(s, se, snap, &c);
	else
		failure_text(s, se, snap, &c);
	fflush(s->out);
}

static struct loss_lines losses;

/* A loss line (JSON, in the stream; text, on stderr) whenever a loss counter moved. */
static void print_losses(struct sink *s, const struct snapshot *snap, bool final)
{
	struct json_writer *w = s->opt->json ? jw_new(s->out) : NULL;

	loss_lines_print(&losses, s, w, snap, final);
	jw_free(w);
	fflush(s->out);
}

static void oom_report(struct sink *s, const struct snapshot *snap)
{
	if (loss_lines_due(&losses, snap))
		print_losses(s, snap, false);
}

static int oom_finish(struct sink *s, const struct snapshot *snap)
{
	if (s->opt->json) {
		print_losses(s, snap, true);
	} else {
		fprintf(s->out, "%" PRIu64 " failed allocation%s\n", failures_seen,
			failures_seen == 1 ? "" : "s");
		text_lost(s->out, snap);
	}
	loss_lines_end(&losses);
	if (s->failed) {	/* no memory for the writer: said as the report's write error */
		errno = ENOMEM;
		return -1;
	}
	return fflush(s->out) || ferror(s->out) ? -1 : 0;
}

const struct sink_ops oom_view = {
	.name = "oom",
	.report_wants = SNAP_LOSSES_ONLY,	/* its reports are loss lines */
	.report_interval = loss_lines_interval,
	.on_report = oom_report,
	.on_failure = oom_failure,
	.finish = oom_finish,
};
