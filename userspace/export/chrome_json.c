// SPDX-License-Identifier: GPL-2.0
/* The JSON of --format chrome, written at the end: {"traceEvents":[...]} with a process_name
 * metadata event per process, counter events ("C") for the process tracks and the top site
 * tracks, instant events ("i") for failures. Timestamps ("ts") are microseconds from the start
 * of the export, with three decimals (nanoseconds); otherData says when that was. Every string
 * from a process goes through the escaping JSON writer. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "export/chrome.h"
#include "output/json.h"
#include "output/report.h"
#include "output/site_text.h"
#include "probes/table.h"

/* Per process, per site: the track's name, or NULL when the site is not one of the top. */
typedef char **site_names;

static void site_name(char *buf, size_t len, const struct tl_site *site)
{
	char frame[256];
	size_t at = (size_t)snprintf(buf, len, "site ");
	uint32_t n = site->stack ? site->stack->nframes : 0, idx[CHROME_SITE_FRAMES];
	unsigned int shown = n ? site_frames(site->stack, idx, CHROME_SITE_FRAMES) : 0;

	/* Named from the user's code on (site_text.h), as the text views name it. */
	for (unsigned int i = 0; i < shown && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? " <- " : "",
				       export_frame_name(&site->stack->frames[idx[i]], frame,
							 sizeof(frame)));
	if (!n && at < len)
		at += (size_t)snprintf(buf + at, len - at, "[no stack]");
	if (at < len)
		at += (size_t)snprintf(buf + at, len - at, " (%s %s #%d", probe_api_name(site->api),
				       probe_is_tensor(site->api) ? "tensor" : kind_name(site->kind),
				       site->stack_id);
	if (site->gpu && at < len)
		at += (size_t)snprintf(buf + at, len - at, " on GPU %u", site->gpu - 1);
	if (at < len)
		snprintf(buf + at, len - at, ")");
}

/* Whether a process's memory was on a device other than GPU 0: a track per device then. */
static bool many_gpus(const struct tl_proc *p)
{
	return (p->gpus & ~1u) != 0;
}

static int by_peak(const void *a, const void *b, void *sites)
{
	const struct tl_site *s = sites;
	uint64_t pa = s[*(const uint32_t *)a].peak, pb = s[*(const uint32_t *)b].peak;

	return pa < pb ? 1 : pa > pb ? -1 : 0;
}

/* The CHROME_TOP_SITES GPU-side sites of p that held the most at their peak, named. */
static site_names choose_sites(const struct tl_proc *p)
{
	size_t n = p->site_keys.n, kept = 0;
	uint32_t *order = xcalloc(n ? n : 1, sizeof(*order));
	site_names names = xcalloc(n ? n : 1, sizeof(*names));
	char buf[1024];

	for (uint32_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), by_peak, p->sites);
	for (size_t i = 0; i < n && kept < CHROME_TOP_SITES; i++) {
		const struct tl_site *site = &p->sites[order[i]];

		if (!site->peak || !export_kind_is_gpu(site->kind))
			continue;
		site_name(buf, sizeof(buf), site);
		names[order[i]] = xstrdup(buf);
		kept++;
	}
	free(order);
	return names;
}

static void ts(struct json_writer *w, const struct exporter *x, uint64_t wall_ns)
{
	uint64_t rel = wall_ns > x->start_wall_ns ? wall_ns - x->start_wall_ns : 0;
	char buf[48];
	int n = snprintf(buf, sizeof(buf), "%" PRIu64 ".%03" PRIu64, rel / 1000, rel % 1000);

	jw_key(w, "ts");
	jw_raw(w, buf, (size_t)n);
}

static void process_names(struct json_writer *w, const struct timeline *tl)
{
	char name[128];

	for (size_t i = 0; i < tl->nprocs; i++) {
		const struct tl_proc *p = tl->procs[i];

		export_process_name(name, sizeof(name), p->comm, p->pid,
				    p->has_container ? &p->container : NULL);
		jw_object_begin(w);
		jw_kv_string(w, "name", "process_name");
		jw_kv_string(w, "ph", "M");
		jw_kv_i64(w, "pid", p->pid);
		jw_kv_i64(w, "tid", p->pid);
		jw_kv_u64(w, "ts", 0);
		jw_key(w, "args");
		jw_object_begin(w);
		jw_kv_string(w, "name", name);
		jw_object_end(w);
		jw_object_end(w);
	}
}

static void counter(struct json_writer *w, const struct exporter *x, const struct tl_proc *p,
		    const char *name, const struct chrome_rec *r)
{
	jw_object_begin(w);
	jw_kv_string(w, "name", name);
	jw_kv_string(w, "ph", "C");
	ts(w, x, r->wall_ns);
	jw_kv_i64(w, "pid", p->pid);
	jw_kv_i64(w, "tid", p->pid);
	jw_key(w, "args");
	jw_object_begin(w);
	jw_kv_u64(w, "bytes", r->value);
	jw_object_end(w);
	jw_object_end(w);
}

static void failure(struct json_writer *w, const struct exporter *x, const struct tl_proc *p,
		    const struct chrome_rec *r)
{
	char name[128], site[1024];

	snprintf(name, sizeof(name), "%s failed", probe_api_name(r->api));
	site_name(site, sizeof(site), &p->sites[r->site]);
	jw_object_begin(w);
	jw_kv_string(w, "name", name);
	jw_kv_string(w, "ph", "i");
	jw_kv_string(w, "s", "t");
	ts(w, x, r->wall_ns);
	jw_kv_i64(w, "pid", p->pid);
	jw_kv_u64(w, "tid", r->tid);
	jw_key(w, "args");
	jw_object_begin(w);
	jw_kv_string(w, "api", probe_api_name(r->api));
	jw_kv_string(w, "layer", probe_layer_name(r->layer));
	jw_kv_string(w, "vendor", probe_api_vendor(r->api));
	jw_kv_u64(w, "size", r->value);
	jw_kv_i64(w, "error", r->error);
	jw_kv_string(w, "error_name", gpu_error_name(r->layer, r->error));
	jw_kv_string(w, "site", site + strlen("site "));
	jw_object_end(w);
	jw_object_end(w);
}

static void record(struct json_writer *w, const struct exporter *x, const struct timeline *tl,
		   site_names *names, const struct chrome_rec *r)
{
	const struct tl_proc *p = r->proc < tl->nprocs ? tl->procs[r->proc] : NULL;
	char name[32];

	if (!p || (r->type != REC_PROCESS && r->type != REC_GPU && r->site >= p->site_keys.n))
		return;
	if (r->type == REC_PROCESS) {
		counter(w, x, p, "GPU memory", r);
	} else if (r->type == REC_GPU) {
		if (!many_gpus(p))
			return;		/* "GPU memory" says it all */
		if (r->site < GM_MAX_GPUS)
			snprintf(name, sizeof(name), "GPU %u memory", r->site);
		else
			snprintf(name, sizeof(name), "GPU ? memory");
		counter(w, x, p, name, r);
	} else if (r->type == REC_TENSORS)
		counter(w, x, p, "Tensor memory", r);
	else if (r->type == REC_SITE && names[r->proc][r->site])
		counter(w, x, p, names[r->proc][r->site], r);
	else if (r->type == REC_FAILURE)
		failure(w, x, p, r);
}

static void other_data(struct json_writer *w, const struct exporter *x,
		       const struct timeline *tl, const struct snapshot *final)
{
	uint64_t unmatched = 0;

	for (size_t i = 0; i < tl->nprocs; i++)
		unmatched += tl->procs[i]->unmatched_frees;
	jw_key(w, "otherData");
	jw_object_begin(w);
	jw_kv_string(w, "producer", "gpumem " GPUMEM_VERSION);
	jw_kv_u64(w, "start_time_ns", x->start_wall_ns);
	jw_kv_string(w, "ts", "microseconds from start_time_ns (wall clock)");
	jw_kv_u64(w, "top_sites_per_process", CHROME_TOP_SITES);
	/* frees of allocations the events never showed: left out of the site tracks */
	jw_kv_u64(w, "unmatched_frees", unmatched);
	if (final) {	/* what the source could not see, as snapshot --json's "lost" */
		jw_key(w, "lost");
		json_lost(w, final);
	}
	jw_object_end(w);
}

/* Reads the scratch file back, one record at a time, into the trace. */
static int replay(struct json_writer *w, const struct exporter *x, FILE *scratch,
		  const struct timeline *tl, site_names *names, uint64_t nrecs)
{
	struct chrome_rec r;

	if (fflush(scratch) || fseek(scratch, 0, SEEK_SET)) {
		p_err("cannot read back the trace's scratch file: %s", strerror(errno));
		return -errno;
	}
	for (uint64_t i = 0; i < nrecs; i++) {
		if (fread(&r, sizeof(r), 1, scratch) != 1) {
			p_err("cannot read back the trace's scratch file: %s",
			      ferror(scratch) ? strerror(errno) : "it is short");
			return -EIO;
		}
		record(w, x, tl, names, &r);
	}
	return 0;
}

int chrome_write_json(const struct exporter *x, FILE *out, FILE *scratch,
		      const struct timeline *tl, uint64_t nrecs, const struct snapshot *final)
{
	site_names *names = xcalloc(tl->nprocs ? tl->nprocs : 1, sizeof(*names));
	struct json_writer *w = jw_new(out);
	int err;

	for (size_t i = 0; i < tl->nprocs; i++)
		names[i] = choose_sites(tl->procs[i]);
	jw_object_begin(w);
	jw_key(w, "traceEvents");
	jw_array_begin(w);
	process_names(w, tl);
	err = replay(w, x, scratch, tl, names, nrecs);
	jw_array_end(w);
	jw_kv_string(w, "displayTimeUnit", "ms");
	other_data(w, x, tl, final);
	jw_object_end(w);
	jw_newline(w);
	jw_free(w);
	for (size_t i = 0; i < tl->nprocs; i++) {
		for (size_t j = 0; j < tl->procs[i]->site_keys.n; j++)
			free(names[i][j]);
		free(names[i]);
	}
	free(names);
	return err;
}
