// SPDX-License-Identifier: GPL-2.0
/* What every view prints the same way: frames, loss counters, sizes and times. */
#include <inttypes.h>
#include <string.h>
#include "common.h"
#include "state.h"
#include "symbolize.h"

uint64_t wall_ns(struct session *s, uint64_t mono_ns)
{
	return mono_ns + s->mono_to_real_ns;
}

static void resolve(struct session *s, int pid, uint64_t ip, struct frame *f)
{
	struct proc_rec *p = state_find(s->state, pid);

	memset(f, 0, sizeof(*f));
	f->addr = ip;
	f->offset = ip;
	if (!p || !p->have_mm)
		return;
	/* A library loaded after the map was captured: look again while the process lives. */
	if (!module_map_find(&p->mm, ip) && p->alive) {
		struct module_map fresh = { 0 };

		if (module_map_read(pid, &fresh) == 0) {
			module_map_free(&p->mm);
			p->mm = fresh;
		}
	}
	symbolize_addr(s->state->sym, pid, &p->mm, ip, true, f);
}

void frames_json(struct session *s, struct json_writer *w, int pid, const uint64_t *ips,
		 uint32_t n)
{
	jw_array_begin(w);
	for (uint32_t i = 0; i < n; i++) {
		struct frame f;

		resolve(s, pid, ips[i], &f);
		jw_object_begin(w);
		jw_kv_hex(w, "addr", f.addr);
		jw_kv_string(w, "module", f.module);
		jw_kv_string(w, "symbol", f.symbol);
		jw_kv_u64(w, "offset", f.offset);
		if (f.symbol)
			jw_kv_u64(w, "symbol_offset", f.symbol_offset);
		jw_kv_null(w, "file");
		jw_kv_null(w, "line");
		jw_object_end(w);
	}
	jw_array_end(w);
}

void frames_text(struct session *s, FILE *out, int pid, const uint64_t *ips, uint32_t n,
		 const char *sep, unsigned int max)
{
	char name[512];

	if (!n) {
		fputs("[no stack]", out);
		return;
	}
	for (uint32_t i = 0; i < n && i < max; i++) {
		struct frame f;
		const char *base;

		resolve(s, pid, ips[i], &f);
		if (i)
			fputs(sep, out);
		if (f.symbol) {
			text_sanitize(name, sizeof(name), f.symbol);
			fprintf(out, "%s+0x%" PRIx64, name, f.symbol_offset);
		} else if (f.module) {
			base = strrchr(f.module, '/');
			text_sanitize(name, sizeof(name), base ? base + 1 : f.module);
			fprintf(out, "%s+0x%" PRIx64, name, f.offset);
		} else {
			fprintf(out, "0x%" PRIx64, f.addr);
		}
	}
	if (n > max)
		fprintf(out, "%s...", sep);
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
	{ GM_CNT_INFLIGHT_FULL, "inflight_full", "too many threads inside CUDA calls" },
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
