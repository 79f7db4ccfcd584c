// SPDX-License-Identifier: GPL-2.0
/* `gpumem trace`: one line per allocation, free, failure, unknown free and process end, as
 * text or as the JSON-lines contract of docs/json.md. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "output/report.h"
#include "output/site_text.h"
#include "output/units.h"
#include "probes/table.h"
#include "views/common.h"

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

/* The stream's writer, one for all its lines (s->state), made at the first. */
static struct json_writer *writer_of(struct sink *s)
{
	if (!s->state)
		s->state = jw_new(s->out);
	return s->state;
}

static void trace_end(struct sink *s)
{
	jw_free(s->state);
	s->state = NULL;
}

static void trace_json(struct sink *s, const struct snap_event *se)
{
	const struct gm_call_event *e = se->ev;
	struct json_writer *w = writer_of(s);
	char comm[GM_COMM_LEN + 1];

	if (!w) {
		s->failed = true;
		return;
	}

	jw_object_begin(w);
	if (e->type == GM_REC_PROCESS_EXIT) {
		snprintf(comm, sizeof(comm), "%.*s", GM_COMM_LEN, e->comm);
		jw_kv_u64(w, "time_ns", se->wall_ns);
		jw_kv_string(w, "event", event_name(e->type));
		jw_kv_i64(w, "pid", e->pid);
		jw_kv_i64(w, "tid", e->tid);
		jw_kv_string(w, "comm", comm);
		json_container(w, se->container);
		jw_kv_i64(w, "exit_code", e->error);
	} else {
		jw_key(w, "event");
		jw_string_spelled(w, event_name(e->type));
		json_call_fields(w, e, se->wall_ns);
		json_container(w, se->container);
		jw_kv_hex(w, "addr", e->addr);
		jw_kv_u64(w, "process_bytes", e->process_bytes);
		if (event_is_tensor(e))	/* a tensor's: allocated, inside process_bytes */
			jw_kv_u64(w, "process_tensor_bytes", e->tensor_bytes);
		jw_key(w, "frames");
		json_frames(w, se->stack);
	}
	jw_object_end(w);
	jw_newline(w);
}

/* The text line's columns, as printf's %-Ns, %Ns and %Nu would write them (a line an event
 * at up to hundreds of thousands a second: printf was over half of the stream's CPU). */
static char *put_left(char *p, const char *str, size_t width)
{
	size_t n = strlen(str);

	memcpy(p, str, n);
	for (p += n; n < width; n++)
		*p++ = ' ';
	return p;
}

static char *put_right(char *p, const char *str, size_t width)
{
	size_t n = strlen(str);

	for (; n < width; width--)
		*p++ = ' ';
	memcpy(p, str, n);
	return p + n;
}

static char *put_right_u(char *p, unsigned long long v, size_t width)
{
	char digits[24], *d = digits + sizeof(digits);

	*--d = '\0';
	do
		*--d = (char)('0' + v % 10);
	while (v /= 10);
	return put_right(p, d, width);
}

static char *put_hex_left(char *p, unsigned long long v, size_t width)
{
	char digits[24], *d = digits + sizeof(digits);

	*--d = '\0';
	do
		*--d = "0123456789abcdef"[v & 15];
	while (v >>= 4);
	return put_left(p, d, width);
}

static void trace_text(struct sink *s, const struct snap_event *se)
{
	const struct gm_call_event *e = se->ev;
	const struct container_info *ci = se->container;
	char comm[GM_COMM_LEN + 1], when[32], size[32], line[384];	/* line: < 250 used */
	const char *kind;
	char *p = line;

	text_clock(when, sizeof(when), se->wall_ns, true);
	snprintf(comm, sizeof(comm), "%.*s", GM_COMM_LEN, e->comm);
	text_sanitize(comm, sizeof(comm), comm);
	p = put_left(p, when, 0);
	*p++ = ' ';
	p = put_left(p, event_name(e->type), 12);
	*p++ = ' ';
	p = put_right_u(p, e->pid, 7);
	*p++ = ' ';
	p = put_right_u(p, e->tid, 7);
	*p++ = ' ';
	p = put_left(p, comm, 16);
	if (ci && ci->has_id)
		p += sprintf(p, " [%.*s]", CONTAINER_SHORT_LEN, ci->id);
	if (e->type == GM_REC_PROCESS_EXIT) {
		fwrite(line, 1, (size_t)(p - line), s->out);
		fprintf(s->out, " exit code %d\n", e->error);
		return;
	}
	fmt_size(size, sizeof(size), e->size, s->opt->exact_bytes);
	kind = event_kind_name(e);
	*p++ = ' ';
	p = put_left(p, event_api_name(e), 22);
	*p++ = ' ';
	p = put_left(p, kind ? kind : "-", 7);
	*p++ = ' ';
	p = put_right(p, size, 10);
	memcpy(p, " 0x", 3);
	p = put_hex_left(p + 3, e->addr, 14);
	fwrite(line, 1, (size_t)(p - line), s->out);
	if (e->type == GM_REC_ALLOC_FAILED)
		fprintf(s->out, " = %d %s", e->error, gpu_error_name(e->layer, e->error));
	fputs(" at ", s->out);
	text_site_cached(s->out, se->stack, SITE_TEXT_FRAMES, s->opt->all_frames);
	fputc('\n', s->out);
}

static void trace_event(struct sink *s, const struct snap_event *se)
{
	if (s->opt->json)
		trace_json(s, se);
	else
		trace_text(s, se);	/* the session flushes after each batch of records */
}

static struct loss_lines losses;

static void print_losses(struct sink *s, const struct snapshot *snap, bool final)
{
	loss_lines_print(&losses, s, s->opt->json ? writer_of(s) : NULL, snap, final);
}

/* Every second: a line whenever a loss counter moved (the stream says what it is missing). */
static void trace_report(struct sink *s, const struct snapshot *snap)
{
	if (loss_lines_due(&losses, snap))
		print_losses(s, snap, false);
}

static int trace_finish(struct sink *s, const struct snapshot *snap)
{
	if (s->opt->json || loss_lines_moved(&losses, snap))
		print_losses(s, snap, true);
	loss_lines_end(&losses);
	if (s->failed) {	/* no memory for the writer: said as the report's write error */
		errno = ENOMEM;
		return -1;
	}
	return fflush(s->out) || ferror(s->out) ? -1 : 0;
}

const struct sink_ops trace_view = {
	.name = "trace",
	.stream_calls = true,
	.report_wants = SNAP_LOSSES_ONLY,	/* its reports are loss lines */
	.report_interval = loss_lines_interval,
	.on_report = trace_report,
	.on_event = trace_event,
	.finish = trace_finish,
	.end = trace_end,
};
