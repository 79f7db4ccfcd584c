// SPDX-License-Identifier: GPL-2.0
/* The rows of top's table, from the last snapshot and the history of snapshots: one per
 * process, per call site, or per container, filtered and sorted as the screen asks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/analysis.h"
#include "base/util.h"
#include "host/gpu_map.h"
#include "output/json.h"
#include "output/report.h"
#include "output/site_text.h"
#include "probes/table.h"
#include "views/top/top.h"

/* The host devices a process holds GPU memory on (struct row's gpus), its ordinals mapped:
 * top is the host's view. */
static uint64_t proc_gpus(struct top_ui *t, const struct snap_proc *p)
{
	uint64_t bytes[SNAP_SLOTS] = { 0 }, bits = 0;

	snap_host_gpu_add(t->snap, p, bytes);
	for (unsigned int g = 0; g < SNAP_SLOTS; g++)
		if (bytes[g])
			bits |= UINT64_C(1) << g;
	return bits;
}

/* A site's host device; a site of GPU memory whose device is not known: that bit. */
static uint64_t site_gpus(struct top_ui *t, const struct snap_proc *p, const struct snap_site *ss)
{
	int host = snap_site_host_gpu(t->snap, p, ss);

	if (host >= 0)
		return UINT64_C(1) << host;
	return gm_kind_is_gpu(ss->kind) && ss->st.current_bytes ?
		UINT64_C(1) << SNAP_SLOT_UNKNOWN : 0;
}

static struct row *new_row(struct top_ui *t)
{
	if (t->nrows == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 64;
		t->rows = xrealloc(t->rows, t->cap * sizeof(*t->rows));
	}
	memset(&t->rows[t->nrows], 0, sizeof(*t->rows));
	return &t->rows[t->nrows++];
}

void top_rows_free(struct top_ui *t)
{
	free(t->rows);
	free(t->peaks);
}

/* The command line with its program's directory left out, as htop shows it. */
static void command_name(const char *cmdline, char *buf, size_t len)
{
	size_t prog = strcspn(cmdline, " ");
	const char *base = cmdline;

	for (size_t i = 0; i < prog; i++)
		if (cmdline[i] == '/')
			base = cmdline + i + 1;
	text_sanitize(buf, len, base);
}

static void fit_row(struct top_ui *t, struct row *r)
{
	struct trend tr = trend_of(t->hist, &r->key, t->now, t->interval * 1.5 + 0.5,
				   GROWTH_WINDOW_S);

	r->arate = tr.alloc_rate;
	r->frate = tr.free_rate;
	r->growth_min = tr.growth_per_s * 60;
}

static void forecast_row(struct top_ui *t, struct row *r)
{
	const struct snap_forecast *f = &r->p->forecast;	/* SNAP_FORECAST */

	struct proc_cost c;

	r->oom_s = f->valid ? f->seconds : -1;
	t->any_forecast |= f->valid;
	proc_cost_of(t->snap, r->p, &c);
	r->cost_share = c.share_known ? c.share : -1;
}

static void site_label(struct top_ui *t, const struct snap_site *ss, char *buf, size_t len,
		       unsigned int frames)
{
	FILE *f = fmemopen(buf, len, "w");

	if (!f) {
		snprintf(buf, len, "?");
		return;
	}
	fprintf(f, "%s %s ", probe_api_name(ss->api), site_kind_name(ss));
	text_site(f, ss->stack, frames, t->all_frames);
	fclose(f);
	buf[len - 1] = 0;
}

static bool matches(struct top_ui *t, const struct row *r)
{
	char pid[16];

	if (!t->filter[0])
		return true;
	snprintf(pid, sizeof(pid), "%d", r->p->pid);
	if (!r->has_series)	/* a container row: its ids and name only */
		return strcasestr(r->name, t->filter) || strcasestr(r->cont, t->filter);
	return strcasestr(r->name, t->filter) || strstr(pid, t->filter) ||
	       strcasestr(r->user, t->filter) || strcasestr(r->p->comm, t->filter) ||
	       strcasestr(r->cont, t->filter);
}

/* Descending for numbers, ascending for names: -1, 0 or 1. */
#define DESC(a, b) (((a) < (b)) - ((a) > (b)))

/* qsort_r's comparator: the screen's sort key and direction in ctx. */
static int row_cmp(const void *a, const void *b, void *ctx)
{
	const struct top_ui *t = ctx;
	const struct row *x = a, *y = b;
	int c = 0;

	switch (t->sort_key) {
	case 'P': c = -DESC(x->p->pid, y->p->pid); break;
	case 'U': c = strcmp(x->user, y->user); break;
	case 'C': c = strcmp(x->name, y->name); break;
	case 'K': c = DESC(x->peak, y->peak); break;
	case 'T': c = DESC(x->tensor, y->tensor); break;
	case 'L': c = DESC(x->live, y->live); break;
	case 'A': c = DESC(x->arate, y->arate); break;
	case 'F': c = DESC(x->frate, y->frate); break;
	case 'G': c = DESC(x->growth_min, y->growth_min); break;
	case 'X': c = DESC(x->fails, y->fails); break;
	case 'N': c = DESC(x->nprocs, y->nprocs); break;
	case 'O': c = DESC(x->oldest_age, y->oldest_age); break;
	}
	if (!c)
		c = DESC(x->cur, y->cur);
	if (!c)
		c = -DESC(x->p->pid, y->p->pid);
	return t->sort_reverse ? -c : c;
}

void top_group_key(const struct snap_proc *p, char *buf, size_t len)
{
	if (p->container.has_id)
		snprintf(buf, len, "%s", p->container.id);
	else if (p->container.has_pod)
		snprintf(buf, len, "pod:%s", p->container.pod_uid);
	else
		snprintf(buf, len, "%s", "");
}

/* A container row's last column: its pod and container names where its OCI bundle gave them
 * (printable ASCII, no spaces: oci.c), then the container with its runtime, and its pod. */
static void group_name(const struct container_info *ci, char *buf, size_t len)
{
	int o = 0;

	if (!ci->has_id && !ci->has_pod) {
		snprintf(buf, len, "(host: in no container)");
		return;
	}
	if (ci->pod_name[0] || ci->container_name[0])
		o = snprintf(buf, len, "%s%s%s%s%s  ", ci->pod_namespace,
			     ci->pod_namespace[0] ? "/" : "", ci->pod_name[0] ? ci->pod_name : "-",
			     ci->container_name[0] ? " " : "", ci->container_name);
	if (ci->has_id && o >= 0 && (size_t)o < len)
		o += snprintf(buf + o, len - (size_t)o, "%s %s", ci->runtime[0] ? ci->runtime :
			      "container", ci->id);
	if (ci->has_pod && o >= 0 && (size_t)o < len)
		snprintf(buf + o, len - (size_t)o, "%spod %s%s%s", o ? "  " : "", ci->pod_uid,
			 ci->qos[0] ? " " : "", ci->qos);
}

/* The row of p's container, made at its first process. */
static struct row *group_row(struct top_ui *t, const struct snap_proc *p)
{
	char key[GROUP_KEY_LEN];
	struct row *r;

	top_group_key(p, key, sizeof(key));
	for (size_t i = 0; i < t->nrows; i++)
		if (!strcmp(t->rows[i].group, key))
			return &t->rows[i];
	r = new_row(t);
	r->p = p;
	snprintf(r->group, sizeof(r->group), "%s", key);
	container_short(&p->container, r->cont, sizeof(r->cont));
	group_name(&p->container, r->name, sizeof(r->name));
	snprintf(r->user, sizeof(r->user), "-");
	return r;
}

/* A container's peak as far as top can tell: the highest total seen at a refresh, or one of
 * its processes' own (exact) peak when that is higher. */
static uint64_t group_peak(struct top_ui *t, const char *key, uint64_t seen)
{
	struct group_peak *g;

	for (size_t i = 0; i < t->npeaks; i++) {
		g = &t->peaks[i];
		if (strcmp(g->key, key))
			continue;
		if (seen > g->peak)
			g->peak = seen;
		return g->peak;
	}
	if (t->npeaks == t->peaks_cap) {
		t->peaks_cap = t->peaks_cap ? 2 * t->peaks_cap : 16;
		t->peaks = xrealloc(t->peaks, t->peaks_cap * sizeof(*t->peaks));
	}
	g = &t->peaks[t->npeaks++];
	snprintf(g->key, sizeof(g->key), "%s", key);
	g->peak = seen;
	return seen;
}

/* Adds process p (its rates in pr) to its container's row. */
static void add_to_group(struct top_ui *t, const struct snap_proc *p, const struct row *pr)
{
	struct row *r = group_row(t, p);

	r->nprocs++;
	if (p->alive)
		r->cur += p->st.current_bytes;
	if (p->st.peak_bytes > r->peak)
		r->peak = p->st.peak_bytes;
	r->live += p->st.current_allocs;
	r->fails += p->st.failed_count;
	if (p->alive) {
		r->tensor += p->tensor.current_bytes;
		r->gpus |= proc_gpus(t, p);
	}
	r->has_tensors |= p->tensor.alloc_count > 0;
	r->arate += pr->arate;
	r->frate += pr->frate;
}

/* Container rows: their peaks, then the filter. */
static void finish_groups(struct top_ui *t)
{
	size_t kept = 0;

	for (size_t i = 0; i < t->nrows; i++) {
		struct row *r = &t->rows[i];

		r->peak = group_peak(t, r->group, r->cur > r->peak ? r->cur : r->peak);
		if (matches(t, r))
			t->rows[kept++] = *r;
	}
	t->nrows = kept;
}

static void keep_if_matches(struct top_ui *t, struct row *r)
{
	t->total_arate += r->arate;
	t->total_frate += r->frate;
	if (!matches(t, r))
		t->nrows--;
}

static void process_row(struct top_ui *t, const struct snap_proc *p)
{
	struct row *r = new_row(t);

	r->p = p;
	r->key = hist_key_proc(p);
	r->has_series = true;
	container_short(&p->container, r->cont, sizeof(r->cont));
	r->cur = p->st.current_bytes;
	r->peak = p->st.peak_bytes;
	r->live = p->st.current_allocs;
	r->fails = p->st.failed_count;
	r->tensor = p->tensor.current_bytes;
	r->has_tensors = p->tensor.alloc_count > 0;
	r->gpus = proc_gpus(t, p);
	text_known(r->user, sizeof(r->user), p->user, p->valid & SP_USER);
	if (p->cmdline && p->cmdline[0])
		command_name(p->cmdline, r->name, sizeof(r->name));
	else
		text_known(r->name, sizeof(r->name), p->comm, p->valid & SP_COMM);
	if (!p->alive)
		strncat(r->name, " <ended>", sizeof(r->name) - strlen(r->name) - 1);
	fit_row(t, r);
	forecast_row(t, r);
	keep_if_matches(t, r);
}

static void site_row(struct top_ui *t, const struct snap_proc *p, const struct snap_site *ss,
		     bool tensor)
{
	struct row *r = new_row(t);

	r->p = p;
	r->ss = ss;
	r->key = hist_key_site(p, ss);
	r->has_series = true;
	container_short(&p->container, r->cont, sizeof(r->cont));
	if (tensor) {	/* allocated inside what the segment sites reserved */
		r->tensor = ss->st.current_bytes;
		r->has_tensors = r->tensor_site = true;
	} else {
		r->cur = ss->st.current_bytes;
		r->peak = ss->st.current_bytes;
	}
	r->live = ss->st.current_allocs;
	r->fails = ss->st.failed_count;
	r->gpus = site_gpus(t, p, ss);
	r->oldest_age = snap_site_oldest_age(p, ss);
	snprintf(r->user, sizeof(r->user), "-");
	site_label(t, ss, r->name, sizeof(r->name), t->drill_pid ? 8 : 3);
	fit_row(t, r);
	keep_if_matches(t, r);
}

static void site_rows(struct top_ui *t, const struct snap_proc *p)
{
	for (size_t j = 0; j < p->nsites; j++)
		site_row(t, p, &p->sites[j], false);
	for (size_t j = 0; j < p->ntensor_sites; j++)
		site_row(t, p, &p->tensor_sites[j], true);
}

/* A row per library that holds memory or made calls: what it holds for p (model/owners.h). */
static void library_rows(struct top_ui *t, const struct snap_proc *p)
{
	for (size_t j = 0; j < p->nlibraries; j++) {
		const struct snap_library *l = &p->libraries[j];
		struct row *r = new_row(t);

		r->p = p;
		container_short(&p->container, r->cont, sizeof(r->cont));
		r->cur = l->st.current_bytes;
		r->peak = l->valid & SL_PEAK ? l->peak_bytes : l->st.current_bytes;
		r->live = l->st.current_allocs;
		r->fails = l->st.failed_count;
		snprintf(r->user, sizeof(r->user), "-");
		library_text(r->name, sizeof(r->name), l);
		if (!p->alive)
			strncat(r->name, " <ended>", sizeof(r->name) - strlen(r->name) - 1);
		keep_if_matches(t, r);
	}
}

/* Whether p is on the current screen at all. */
static bool shown(struct top_ui *t, const struct snap_proc *p, bool by_group)
{
	char key[GROUP_KEY_LEN];

	if (!(p->valid & SP_STATS))
		return false;
	if (!p->alive && t->now - p->end_ns >= TOP_ENDED_SHOWN_NS)
		return false;
	if (t->drill_pid && p->pid != t->drill_pid)
		return false;
	if (t->in_group && !by_group) {
		top_group_key(p, key, sizeof(key));
		if (strcmp(key, t->group_key))
			return false;
	}
	return true;
}

void top_build_rows(struct top_ui *t)
{
	bool by_group = t->group == GROUP_CONTAINER && !t->drill_pid;
	const struct snapshot *snap = t->snap;

	t->nrows = 0;
	t->total_cur = t->total_host = t->total_tensor = 0;
	memset(t->gpu_cur, 0, sizeof(t->gpu_cur));
	t->any_tensors = false;
	t->any_forecast = false;
	t->many_gpus = false;
	t->total_arate = t->total_frate = 0;
	t->nshown_procs = 0;
	for (size_t i = 0; snap && i < snap->nprocs; i++) {
		const struct snap_proc *p = &snap->procs[i];

		if (!shown(t, p, by_group))
			continue;
		t->nshown_procs++;
		if (p->alive) {
			t->total_cur += p->st.current_bytes;
			t->total_host += p->st.by_kind[GM_KIND_HOST];
			t->total_tensor += p->tensor.current_bytes;
			snap_host_gpu_add(snap, p, t->gpu_cur);
		}
		t->any_tensors |= p->tensor.alloc_count > 0;
		t->many_gpus |= (proc_gpus(t, p) & ~UINT64_C(1)) != 0;	/* an ended one's rows show too */
		if (by_group) {
			struct row pr = { .key = hist_key_proc(p) };

			fit_row(t, &pr);
			t->total_arate += pr.arate;
			t->total_frate += pr.frate;
			add_to_group(t, p, &pr);
		} else if (t->group == GROUP_LIBRARY && !t->drill_pid) {
			library_rows(t, p);
		} else if (t->group != GROUP_SITE && !t->drill_pid) {
			process_row(t, p);
		} else {
			site_rows(t, p);
		}
	}
	if (by_group)
		finish_groups(t);
	if (t->nrows > 1)
		qsort_r(t->rows, t->nrows, sizeof(*t->rows), row_cmp, t);
}
