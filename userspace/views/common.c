// SPDX-License-Identifier: GPL-2.0
/* What every view prints the same way: frames, loss counters, sizes and times. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"
#include "state.h"
#include "symbolize.h"

uint64_t wall_ns(struct session *s, uint64_t mono_ns)
{
	return mono_ns + s->mono_to_real_ns;
}

static void resolve(struct session *s, int pid, uint64_t ip, struct frame *f, unsigned int max,
		    unsigned int *n)
{
	struct proc_rec *p = state_find(s->state, pid);
	int got;

	memset(f, 0, sizeof(*f));
	f->addr = ip;
	f->offset = ip;
	*n = 1;
	if (!p || !p->have_mm)
		return;
	/* A library loaded after the map was captured: look again while the process lives. */
	if (!module_map_find(&p->mm, ip))
		state_reread_maps(s->state, p);
	got = symbolize_frames(s->state->sym, pid, &p->mm, ip, true, f, max);
	if (got > 0)
		*n = (unsigned int)got;
}

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Code of the CUDA libraries, or of a runtime linked statically into the program. */
static bool is_cuda_frame(const struct frame *f)
{
	const char *base, *sym = f->symbol;

	if (f->module) {
		base = strrchr(f->module, '/');
		if (has_prefix(base ? base + 1 : f->module, "libcuda"))
			return true;
	}
	if (!sym)
		return false;
	if (has_prefix(sym, "__cudart") || has_prefix(sym, "_ZN6cudart"))
		return true;
	/* the APIs themselves: cudaMalloc, cuMemAlloc_v2 */
	return (has_prefix(sym, "cuda") && sym[4] >= 'A' && sym[4] <= 'Z') ||
	       (has_prefix(sym, "cu") && sym[2] >= 'A' && sym[2] <= 'Z');
}

/*
 * The frames of a stack as the user reads them, innermost first: each address expanded into
 * its inlined calls, and (unless --all-frames) the CUDA libraries' own frames left out when
 * any other frame remains. Returns the count; *out is malloc'd (NULL when the count is 0).
 */
static size_t stack_frames(struct session *s, int pid, const uint64_t *ips, uint32_t n,
			   struct frame **out)
{
	struct frame *f = calloc((size_t)n * SYM_MAX_INLINE + 1, sizeof(*f));
	size_t count = 0, kept = 0;
	unsigned int got;

	*out = f;
	if (!f)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		resolve(s, pid, ips[i], &f[count], SYM_MAX_INLINE, &got);
		count += got;
	}
	if (s->opt->all_frames)
		return count;
	for (size_t i = 0; i < count; i++)
		if (!is_cuda_frame(&f[i]))
			f[kept++] = f[i];
	return kept ? kept : count;
}

static const char *display_name(struct session *s, const char *symbol)
{
	if (!symbol || s->opt->no_demangle)
		return symbol;
	return symbolizer_demangle(s->state->sym, symbol);
}

void frames_json(struct session *s, struct json_writer *w, int pid, const uint64_t *ips,
		 uint32_t n)
{
	struct frame *frames;
	size_t count = stack_frames(s, pid, ips, n, &frames);

	jw_array_begin(w);
	for (size_t i = 0; i < count; i++) {
		const struct frame *f = &frames[i];

		jw_object_begin(w);
		jw_kv_hex(w, "addr", f->addr);
		jw_kv_string(w, "module", f->module);
		jw_kv_string(w, "symbol", display_name(s, f->symbol));
		jw_kv_u64(w, "offset", f->offset);
		if (f->symbol && !f->inlined)
			jw_kv_u64(w, "symbol_offset", f->symbol_offset);
		jw_kv_string(w, "file", f->file);
		if (f->line)
			jw_kv_u64(w, "line", f->line);
		else
			jw_kv_null(w, "line");
		if (f->inlined)
			jw_kv_bool(w, "inlined", true);
		jw_object_end(w);
	}
	jw_array_end(w);
	free(frames);
}

/* `func (file.c:42)`, `func+0x1a`, `module+0x1a` or the bare address. */
static void frame_text(struct session *s, FILE *out, const struct frame *f)
{
	char name[512], file[256];
	const char *base;

	if (f->symbol) {
		text_sanitize(name, sizeof(name), display_name(s, f->symbol));
		if (f->file) {
			base = strrchr(f->file, '/');
			text_sanitize(file, sizeof(file), base ? base + 1 : f->file);
			if (f->line)
				fprintf(out, "%s (%s:%u)", name, file, f->line);
			else
				fprintf(out, "%s (%s)", name, file);
		} else if (f->inlined) {
			fputs(name, out);
		} else {
			fprintf(out, "%s+0x%" PRIx64, name, f->symbol_offset);
		}
		if (f->inlined)
			fputs(" [inlined]", out);
	} else if (f->module) {
		base = strrchr(f->module, '/');
		text_sanitize(name, sizeof(name), base ? base + 1 : f->module);
		fprintf(out, "%s+0x%" PRIx64, name, f->offset);
	} else {
		fprintf(out, "0x%" PRIx64, f->addr);
	}
}

void frames_text(struct session *s, FILE *out, int pid, const uint64_t *ips, uint32_t n,
		 const char *sep, unsigned int max)
{
	struct frame *frames;
	size_t count;

	if (!n) {
		fputs("[no stack]", out);
		return;
	}
	count = stack_frames(s, pid, ips, n, &frames);
	for (size_t i = 0; i < count && i < max; i++) {
		if (i)
			fputs(sep, out);
		frame_text(s, out, &frames[i]);
	}
	if (count > max)
		fprintf(out, "%s...", sep);
	free(frames);
}

static const struct {
	enum gm_counter which;
	const char *name;
	const char *fix;
} lost_names[] = {
	{ GM_CNT_ALLOC_MAP_FULL, "alloc_map_full", "raise --max-allocs" },
	{ GM_CNT_STACK_ERRORS, "stack_errors", "raise --max-stacks" },
	{ GM_CNT_RINGBUF_DROPPED, "ringbuf_dropped", "raise --ringbuf-mb" },
	{ GM_CNT_UNKNOWN_FREES, "unknown_frees", "allocated before gpumem attached" },
	{ GM_CNT_SITE_MAP_FULL, "site_map_full", "raise --max-sites" },
	{ GM_CNT_PROC_MAP_FULL, "proc_map_full", "raise --max-procs" },
	{ GM_CNT_INFLIGHT_FULL, "inflight_full", "the kernel had no memory for a thread record" },
	{ GM_CNT_REPLACED_ALLOCS, "replaced_allocs", "freed by an API gpumem does not probe" },
};

void lost_text(struct session *s, FILE *out)
{
	uint64_t c[GM_CNT_COUNT];
	bool any = false;

	session_counters(s, c);
	for (size_t i = 0; i < sizeof(lost_names) / sizeof(lost_names[0]); i++) {
		if (!c[lost_names[i].which])
			continue;
		fprintf(out, "%s %s=%" PRIu64 " (%s)", any ? "," : "lost:", lost_names[i].name,
			c[lost_names[i].which], lost_names[i].fix);
		any = true;
	}
	if (s->bad_records) {
		fprintf(out, "%s bad_records=%" PRIu64, any ? "," : "lost:", s->bad_records);
		any = true;
	}
	if (any)
		fputc('\n', out);
}

void lost_json(struct session *s, struct json_writer *w)
{
	uint64_t c[GM_CNT_COUNT];

	session_counters(s, c);
	jw_object_begin(w);
	for (size_t i = 0; i < sizeof(lost_names) / sizeof(lost_names[0]); i++)
		jw_kv_u64(w, lost_names[i].name, c[lost_names[i].which]);
	jw_kv_u64(w, "bad_records", s->bad_records);
	jw_object_end(w);
}

void format_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	unsigned int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
}

void container_kv_json(struct json_writer *w, const struct container_info *ci)
{
	jw_kv_string(w, "container", ci && ci->has_id ? ci->id : NULL);
	jw_kv_string(w, "pod", ci && ci->has_pod ? ci->pod_uid : NULL);
}

const char *container_short(const struct container_info *ci, char *buf, size_t len)
{
	if (ci && ci->has_id)
		snprintf(buf, len, "%.*s", CONTAINER_SHORT_LEN, ci->id);
	else if (ci && ci->has_pod)
		snprintf(buf, len, "pod:%.8s", ci->pod_uid);
	else
		snprintf(buf, len, "-");
	return buf;
}
