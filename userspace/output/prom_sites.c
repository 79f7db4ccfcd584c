// SPDX-License-Identifier: GPL-2.0
/* The call-site metric families: each process's top sites by bytes held, a site named by a
 * short symbolic stack; sites whose labels would be the same are one series. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output/json.h"
#include "output/prom.h"
#include "output/prom_families.h"
#include "output/site_text.h"
#include "probes/table.h"

/* ---- the site label ---- */

/* name's length without a C++ parameter list: "ns::f(int) const" is "ns::f". */
static size_t name_len(const char *s)
{
	size_t len = strlen(s), end = len;
	int depth = 0;

	if (len > 6 && !strcmp(s + len - 6, " const"))
		end = len - 6;
	if (!end || s[end - 1] != ')')
		return len;
	for (size_t i = end; i-- > 0;) {
		if (s[i] == ')')
			depth++;
		else if (s[i] == '(' && --depth == 0)
			return i ? i : len;
	}
	return len;
}

/* The longest prefix of s (len bytes) of at most max bytes that splits no UTF-8 character
 * (a byte that is not valid UTF-8 counts alone: the writer replaces it). */
static size_t utf8_prefix(const char *s, size_t len, size_t max)
{
	size_t i = 0, n;

	while (i < len) {
		n = utf8_seq_len((const unsigned char *)s + i, len - i);
		if (!n)
			n = 1;
		if (i + n > max)
			break;
		i += n;
	}
	return i;
}

static void append(char *buf, size_t len, size_t *used, const char *s, size_t n)
{
	n = utf8_prefix(s, n, len - 1 - *used);
	memcpy(buf + *used, s, n);
	*used += n;
	buf[*used] = '\0';
}

/* A stack none of whose frames is named: its first frame's module and offset, or address. */
static void unnamed_text(const struct snap_frame *f, char *buf, size_t len)
{
	const char *base = f->module ? strrchr(f->module, '/') : NULL;
	char off[24];
	size_t used = 0;

	if (!f->module) {
		snprintf(buf, len, "0x%" PRIx64, f->addr);
		return;
	}
	base = base ? base + 1 : f->module;
	buf[0] = '\0';
	append(buf, len, &used, base, utf8_prefix(base, strlen(base), PROM_SITE_FRAME_LEN));
	snprintf(off, sizeof(off), "+0x%" PRIx64, f->offset);
	append(buf, len, &used, off, strlen(off));
}

void prom_site_text(const struct snap_stack *st, char *buf, size_t len)
{
	unsigned int named = 0;
	size_t used = 0;

	if (!len)
		return;
	buf[0] = '\0';
	if (!st || !st->nframes) {
		snprintf(buf, len, "[no stack]");
		return;
	}
	uint32_t idx[SITE_TEXT_MAX_FRAMES];
	unsigned int shown = site_frames(st, idx, SITE_TEXT_MAX_FRAMES);

	/* From the user's code on, as the text views name a site (site_text.h). */
	for (unsigned int i = 0; i < shown && named < PROM_SITE_FRAMES; i++) {
		const char *sym = st->frames[idx[i]].symbol;

		if (!sym || !sym[0])
			continue;
		if (named++)
			append(buf, len, &used, "<-", 2);
		append(buf, len, &used, sym, utf8_prefix(sym, name_len(sym), PROM_SITE_FRAME_LEN));
	}
	if (!named)
		unnamed_text(&st->frames[0], buf, len);
}

/* ---- the families ---- */

struct site_row {
	char site[PROM_SITE_LEN];
	uint32_t api, kind;
	uint32_t gpu;		/* snap_site's: the device + 1, 0 not known */
	uint64_t bytes;
};

static int row_key_cmp(const void *a, const void *b)
{
	const struct site_row *x = a, *y = b;
	int c = strcmp(x->site, y->site);

	if (c)
		return c;
	if (x->api != y->api)
		return x->api < y->api ? -1 : 1;
	if (x->gpu != y->gpu)
		return x->gpu < y->gpu ? -1 : 1;
	return x->kind < y->kind ? -1 : x->kind > y->kind;
}

/* Most bytes first; equal ones in label order, so that the same state writes the same text. */
static int row_rank_cmp(const void *a, const void *b)
{
	const struct site_row *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return row_key_cmp(a, b);
}

/* p's sites of the family's kinds (host, or GPU-side; or its tensors' sites) as rows, one
 * per label set, ranked. */
static size_t proc_rows(const struct snap_proc *p, bool host, bool tensor, struct site_row *rows)
{
	const struct snap_site *sites = tensor ? p->tensor_sites : p->sites;
	size_t nsites = tensor ? p->ntensor_sites : p->nsites, n = 0, m = 0;

	for (size_t i = 0; i < nsites; i++) {
		const struct snap_site *ss = &sites[i];

		if (ss->kind >= GM_KIND_MEMORY_COUNT || (ss->kind == GM_KIND_HOST) != host)
			continue;	/* mappings, reservations, imports are no memory */
		prom_site_text(ss->stack, rows[n].site, sizeof(rows[n].site));
		/* Every unknown value has one label text ("unknown"): one key for all of them. */
		rows[n].api = ss->api < probe_count ? ss->api : UINT32_MAX;
		rows[n].kind = ss->kind < GM_KIND_COUNT ? ss->kind : GM_KIND_COUNT;
		rows[n].gpu = host || ss->gpu > GM_MAX_GPUS ? 0 : ss->gpu;
		rows[n].bytes = ss->st.current_bytes;
		n++;
	}
	qsort(rows, n, sizeof(*rows), row_key_cmp);
	for (size_t i = 0; i < n; i++) {
		if (m && !row_key_cmp(&rows[m - 1], &rows[i]))
			rows[m - 1].bytes += rows[i].bytes;
		else
			memmove(&rows[m++], &rows[i], sizeof(*rows));
	}
	qsort(rows, m, sizeof(*rows), row_rank_cmp);
	return m;
}

static const struct site_family {
	bool host, tensor;
	const char *name, *help;
} site_families[] = {
	{ false, false, "gpumem_site_memory_bytes",
	  "GPU memory held now by a call site of the process (its top sites by bytes), by site "
	  "(the innermost named frames, innermost first), api, kind and device (gpu)." },
	{ true, false, "gpumem_site_host_pinned_memory_bytes",
	  "Page-locked host memory held now by a call site of the process (its top sites by "
	  "bytes), by site and api." },
	{ false, true, "gpumem_site_tensor_memory_bytes",
	  "PyTorch tensor memory (allocated, inside the memory the process reserved) held now by "
	  "a call site of the process (its top sites by bytes), by site, api and device (gpu)." },
};

static void write_site_family(FILE *out, const struct snapshot *s, const struct site_family *f,
			      unsigned int per_proc, struct site_row *rows)
{
	struct proc_labels pl;
	size_t base, n;
	char gpu[16];

	prom_family(out, f->name, "gauge", f->help);
	for (size_t i = 0; per_proc && i < s->nprocs; i++) {
		if (!prom_proc_shown(s, i))
			continue;
		n = proc_rows(&s->procs[i], f->host, f->tensor, rows);
		prom_proc_labels(&s->procs[i], &pl);
		base = pl.ls.n;
		for (size_t r = 0; r < n && r < per_proc; r++) {
			pl.ls.n = base;
			prom_label_add(&pl.ls, "site", rows[r].site);
			prom_label_add(&pl.ls, "api", probe_api_name(rows[r].api));
			prom_label_add(&pl.ls, "vendor", probe_api_vendor(rows[r].api));
			if (!f->host && !f->tensor)
				prom_label_add(&pl.ls, "kind", kind_name(rows[r].kind));
			if (!f->host)
				prom_label_add(&pl.ls, "gpu", prom_gpu_label(gm_gpu_slot(rows[r].gpu),
									     gpu, sizeof(gpu)));
			prom_sample(out, f->name, &pl.ls, rows[r].bytes);
		}
	}
}

int prom_write_sites(FILE *out, const struct snapshot *s, unsigned int per_proc)
{
	struct site_row *rows;
	size_t most = 1;

	for (size_t i = 0; i < s->nprocs; i++)
		if (prom_proc_shown(s, i)) {
			if (s->procs[i].nsites > most)
				most = s->procs[i].nsites;
			if (s->procs[i].ntensor_sites > most)
				most = s->procs[i].ntensor_sites;
		}
	rows = per_proc ? malloc(most * sizeof(*rows)) : NULL;
	if (per_proc && !rows)
		return -ENOMEM;
	for (size_t f = 0; f < sizeof(site_families) / sizeof(site_families[0]); f++)
		write_site_family(out, s, &site_families[f], per_proc, rows);
	free(rows);
	return 0;
}
