// SPDX-License-Identifier: GPL-2.0
/* `gpumem report FILE.db sites`: each call site of the window with its process, API and
 * kind, what it held at the end and at its peak, and the allocations, frees and failures it
 * made in the window, with its frames. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include "base/util.h"
#include "output/report.h"
#include "output/site_text.h"
#include "output/units.h"
#include "probes/table.h"
#include "recording/reader.h"
#include "views/common.h"

static void row_json(struct json_writer *w, const struct rec_site_summary *row)
{
	const struct snap_proc *p = row->p;
	const struct snap_site *ss = row->ss;

	jw_object_begin(w);
	jw_kv_i64(w, "pid", p->pid);
	json_kv_known(w, "comm", p->comm, p->valid & SP_COMM);
	json_container(w, &p->container);
	jw_kv_bool(w, "alive", p->alive);
	jw_kv_string(w, "api", probe_api_name(ss->api));
	jw_kv_string(w, "kind", site_kind_name(ss));
	json_kv_gpu(w, ss->gpu);
	jw_kv_u64(w, "current_bytes", ss->st.current_bytes);
	jw_kv_u64(w, "current_allocs", ss->st.current_allocs);
	jw_kv_u64(w, "peak_bytes", row->peak_bytes);
	jw_kv_u64(w, "alloc_count", ss->st.alloc_count);
	jw_kv_u64(w, "free_count", ss->st.free_count);
	jw_kv_u64(w, "alloc_bytes", ss->st.alloc_bytes_total);
	jw_kv_u64(w, "failed_count", ss->st.failed_count);
	jw_kv_i64(w, "stack_id", ss->stack_id);
	jw_key(w, "frames");
	json_frames(w, ss->stack);
	jw_object_end(w);
}

static void sites_json(struct sink *s, const struct rec_sites *rs, uint64_t since,
		       uint64_t until)
{
	struct json_writer *w = jw_new(s->out);

	jw_object_begin(w);
	jw_kv_u64(w, "version", 1);
	jw_kv_u64(w, "since_ns", since);
	jw_kv_u64(w, "until_ns", until);
	jw_kv_string(w, "peaks", rs->peaks_exact ? "events" : "samples");
	jw_key(w, "sites");
	jw_array_begin(w);
	for (size_t i = 0; i < rs->n; i++)
		row_json(w, &rs->rows[i]);
	jw_array_end(w);
	jw_key(w, "lost");
	json_lost(w, rs->at_until);
	jw_object_end(w);
	jw_newline(w);
	jw_free(w);
}

/* Whether the window's sites are on more than GPU 0: each is then named with its device. */
static bool many_gpus(const struct rec_sites *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		if (rs->rows[i].ss->gpu > 1)
			return true;
	return false;
}

static void sites_text(struct sink *s, const struct rec_sites *rs)
{
	bool exact = s->opt->exact_bytes, gpus = many_gpus(rs);
	char comm[GM_COMM_LEN + 1], held[32], peak[32];
	const struct snap_stack **st = xcalloc(rs->n ? rs->n : 1, sizeof(*st));
	unsigned int *depth = xcalloc(rs->n ? rs->n : 1, sizeof(*depth));

	for (size_t i = 0; i < rs->n; i++)
		st[i] = rs->rows[i].ss->stack;
	site_text_depths(st, rs->n, SITE_TEXT_FRAMES, depth);
	free(st);

	fprintf(s->out, "%7s %-16s %-22s %-7s %12s %12s %8s %8s %6s %s\n", "PID", "COMM", "API",
		"KIND", "HELD", "PEAK", "ALLOCS", "FREES", "FAILED", "SITE");
	for (size_t i = 0; i < rs->n; i++) {
		const struct rec_site_summary *row = &rs->rows[i];
		const struct snap_site *ss = row->ss;

		text_known(comm, sizeof(comm), row->p->comm, row->p->valid & SP_COMM);
		fmt_size(held, sizeof(held), ss->st.current_bytes, exact);
		fmt_size(peak, sizeof(peak), row->peak_bytes, exact);
		fprintf(s->out, "%7d %-16s %-22s %-7s %12s %12s %8llu %8llu %6llu ", row->p->pid,
			comm, probe_api_name(ss->api), site_kind_name(ss), held, peak,
			ss->st.alloc_count, ss->st.free_count, ss->st.failed_count);
		if (gpus && ss->gpu)
			fprintf(s->out, "[GPU %u] ", ss->gpu - 1);
		text_site(s->out, ss->stack, depth[i], s->opt->all_frames);
		fputc('\n', s->out);
	}
	free(depth);
	if (!rs->peaks_exact)
		fputs("peaks are the highest samples (events were sampled down)\n", s->out);
	text_lost(s->out, rs->at_until);
}

static int sites_report(struct sink *s, const struct rec_sites *rs, uint64_t since,
			uint64_t until)
{
	if (s->opt->json)
		sites_json(s, rs, since, until);
	else
		sites_text(s, rs);
	return fflush(s->out) || ferror(s->out) ? -1 : 0;
}

/* Every site's numbers over the window: read from the recording, not from one snapshot (its
 * peak in the window needs the events). */
static int sites_finish(struct sink *s, const struct snapshot *snap)
{
	struct rec_sites rs;
	int err;

	(void)snap;
	if (!s->recording)
		return -1;	/* no command reaches it live */
	err = recording_sites(s->recording, s->since_ns, s->until_ns, &rs);
	if (!err)
		err = sites_report(s, &rs, s->since_ns, s->until_ns);
	recording_sites_free(&rs);
	return err;
}

const struct sink_ops sites_view = {
	.name = "sites",
	.finish = sites_finish,
};
