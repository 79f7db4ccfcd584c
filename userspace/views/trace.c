// SPDX-License-Identifier: GPL-2.0
/* `gpumem trace`: one line per allocation, free, failure, unknown free and process end, as
 * text or as the JSON-lines contract of DESIGN.md. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common.h"
#include "probes.h"
#include "state.h"

static const char *event_name(__u32 type)
{
	switch (type) {
	case GM_REC_ALLOC:
		return "alloc";
	case GM_REC_FREE:
		return "free";
	case GM_REC_ALLOC_FAILED:
		return "alloc_failed";
	case GM_REC_UNKNOWN_FREE:
		return "unknown_free";
	case GM_REC_PROCESS_EXIT:
		return "process_exit";
	}
	return "unknown";
}

/* The container of the process behind e; NULL when its start was not seen. */
static const struct container_info *trace_container(struct session *s,
						    const struct gm_call_event *e)
{
	const struct proc_rec *p = state_find(s->state, (int)e->pid);

	return p ? &p->container : NULL;
}

static void trace_json(struct session *s, const struct gm_call_event *e)
{
	struct json_writer *w = jw_new(s->out);
	uint64_t ips[GM_MAX_STACK_DEPTH];
	uint32_t n = state_stack(s->state, (int)e->pid, e->stack_id, ips);
	char comm[GM_COMM_LEN + 1];

	snprintf(comm, sizeof(comm), "%.*s", GM_COMM_LEN, e->comm);
	jw_object_begin(w);
	jw_kv_u64(w, "time_ns", wall_ns(s, e->time_ns));
	jw_kv_string(w, "event", event_name(e->type));
	jw_kv_i64(w, "pid", e->pid);
	jw_kv_i64(w, "tid", e->tid);
	jw_kv_string(w, "comm", comm);
	container_kv_json(w, trace_container(s, e));
	if (e->type == GM_REC_PROCESS_EXIT) {
		jw_kv_i64(w, "exit_code", e->error);
	} else {
		jw_kv_string(w, "api", probe_api_name(e->api));
		jw_kv_string(w, "layer", probe_layer_name(e->layer));
		jw_kv_string(w, "kind", e->type == GM_REC_UNKNOWN_FREE ? NULL : kind_name(e->kind));
		jw_kv_hex(w, "addr", e->addr);
		jw_kv_u64(w, "size", e->size);
		jw_kv_i64(w, "error", e->error);
		if (e->type == GM_REC_ALLOC_FAILED)
			jw_kv_string(w, "error_name", cuda_error_name(e->layer, e->error));
		jw_kv_u64(w, "process_bytes", e->process_bytes);
		jw_key(w, "frames");
		frames_json(s, w, (int)e->pid, ips, n);
	}
	jw_object_end(w);
	jw_free(w);
	fputc('\n', s->out);
}

static void trace_text(struct session *s, const struct gm_call_event *e)
{
	uint64_t ips[GM_MAX_STACK_DEPTH];
	uint32_t n = state_stack(s->state, (int)e->pid, e->stack_id, ips);
	uint64_t wall = wall_ns(s, e->time_ns);
	time_t secs = (time_t)(wall / 1000000000ull);
	const struct container_info *ci = trace_container(s, e);
	char comm[GM_COMM_LEN + 1], when[32], size[32];
	struct tm tm;

	localtime_r(&secs, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	snprintf(comm, sizeof(comm), "%.*s", GM_COMM_LEN, e->comm);
	text_sanitize(comm, sizeof(comm), comm);
	fprintf(s->out, "%s.%06" PRIu64 " %-12s %7u %7u %-16s", when, (wall / 1000) % 1000000,
	       event_name(e->type), e->pid, e->tid, comm);
	if (ci && ci->has_id)
		fprintf(s->out, " [%.*s]", CONTAINER_SHORT_LEN, ci->id);
	if (e->type == GM_REC_PROCESS_EXIT) {
		fprintf(s->out, " exit code %d\n", e->error);
		return;
	}
	format_bytes(size, sizeof(size), e->size);
	fprintf(s->out, " %-22s %-7s %10s 0x%-14llx", probe_api_name(e->api),
	       e->type == GM_REC_UNKNOWN_FREE ? "-" : kind_name(e->kind), size, e->addr);
	if (e->type == GM_REC_ALLOC_FAILED)
		fprintf(s->out, " = %d %s", e->error, cuda_error_name(e->layer, e->error));
	fputs(" at ", s->out);
	frames_text(s, s->out, (int)e->pid, ips, n, " <- ", 4);
	fputc('\n', s->out);
}

static void trace_call(struct session *s, const struct gm_call_event *e)
{
	if (s->opt->json)
		trace_json(s, e);
	else
		trace_text(s, e);
	fflush(s->out);
}

static int trace_finish(struct session *s)
{
	lost_text(s, stderr);
	return 0;
}

const struct view_ops trace_view = {
	.name = "trace",
	.stream_calls = true,
	.on_call = trace_call,
	.on_exit = trace_call,
	.finish = trace_finish,
};
