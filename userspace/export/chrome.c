// SPDX-License-Identifier: GPL-2.0
/* --format chrome: Chrome's trace-event JSON, for Perfetto (ui.perfetto.dev) and
 * chrome://tracing. Each process is a trace process named "comm (pid) [container]"; its
 * counter track "GPU memory" has the kernel's count of the GPU bytes it held after each of
 * its allocations and frees, and at each snapshot (-i S); a track per top call site (the
 * CHROME_TOP_SITES that held the most at their peak, replayed from the events) has what that
 * site held; a process's end drops its tracks to 0 (the driver frees what it held); a failed
 * allocation is an instant event on its thread with api, size, error and the call site. A
 * process with PyTorch tensors has a track "Tensor memory" too: what its tensors held
 * (allocated, inside "GPU memory"), and its tensor sites are sites like the others.
 * Samples go to a scratch file as they come; chrome_json.c writes the JSON at the end, when
 * the top sites are known. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "export/chrome.h"
#include "export/exporters.h"
#include "export/timeline.h"
#include "output/json.h"
#include "probes/table.h"

struct chrome {
	FILE *out;
	FILE *scratch;
	struct timeline tl;
	struct snapshot *final;	/* the source's last snapshot: its losses */
	uint64_t nrecs;
	uint64_t unkept;	/* samples the scratch file could not take */
	int unkept_errno;	/* why, the first time */
};

static void put_rec(struct chrome *c, const struct chrome_rec *r)
{
	if (fwrite(r, sizeof(*r), 1, c->scratch) == 1)
		c->nrecs++;
	else if (!c->unkept++)
		c->unkept_errno = errno;
}

static void process_sample(struct chrome *c, const struct tl_proc *p, uint64_t wall_ns,
			   uint64_t bytes)
{
	struct chrome_rec r = { .wall_ns = wall_ns, .value = bytes, .proc = (uint32_t)p->index,
				.type = REC_PROCESS };

	put_rec(c, &r);
}

static void tensor_sample(struct chrome *c, const struct tl_proc *p, uint64_t wall_ns,
			  uint64_t bytes)
{
	struct chrome_rec r = { .wall_ns = wall_ns, .value = bytes, .proc = (uint32_t)p->index,
				.type = REC_TENSORS };

	put_rec(c, &r);
}

static void site_sample(struct chrome *c, const struct tl_proc *p, const struct tl_site *site,
			uint64_t wall_ns)
{
	struct chrome_rec r = { .wall_ns = wall_ns, .value = site->bytes,
				.proc = (uint32_t)p->index,
				.site = (uint32_t)(site - p->sites), .type = REC_SITE };

	if (export_kind_is_gpu(site->kind))
		put_rec(c, &r);
}

/* What the process holds on one device (slot g of tl_proc.gpu_bytes). */
static void gpu_sample(struct chrome *c, const struct tl_proc *p, uint32_t g, uint64_t wall_ns)
{
	struct chrome_rec r = { .wall_ns = wall_ns, .value = p->gpu_bytes[g],
				.proc = (uint32_t)p->index, .site = g, .type = REC_GPU };

	put_rec(c, &r);
}

/* The device slot of a site's GPU memory, or -1 (host memory, tensors). */
static int site_gpu_slot(const struct tl_site *site, bool tensor)
{
	if (tensor || !gm_kind_is_gpu(site->kind))
		return -1;
	return (int)gm_gpu_slot(site->gpu);
}

/* The end of a process: the driver frees everything it held. */
static void process_end(struct chrome *c, struct tl_proc *p, uint64_t wall_ns)
{
	process_sample(c, p, wall_ns, 0);
	if (p->has_tensors)
		tensor_sample(c, p, wall_ns, 0);
	for (uint32_t g = 0; g <= GM_MAX_GPUS; g++) {
		if (!p->gpu_bytes[g])
			continue;
		p->gpu_bytes[g] = 0;
		gpu_sample(c, p, g, wall_ns);
	}
	for (size_t i = 0; i < p->site_keys.n; i++) {
		if (!p->sites[i].bytes)
			continue;
		p->sites[i].bytes = 0;
		site_sample(c, p, &p->sites[i], wall_ns);
	}
}

static void chrome_event(struct exporter *x, const struct snap_event *e)
{
	struct chrome *c = x->priv;
	struct chrome_rec r;
	struct tl_change ch;

	timeline_apply(&c->tl, e, &ch);
	switch (ch.what) {
	case TL_ALLOC:
	case TL_FREE:
		if (ch.tensor)
			tensor_sample(c, ch.p, e->wall_ns, e->ev->tensor_bytes);
		else
			process_sample(c, ch.p, e->wall_ns, e->ev->process_bytes);
		if (ch.early_free && ch.early_site != ch.site)
			site_sample(c, ch.p, ch.early_site, e->wall_ns);
		site_sample(c, ch.p, ch.site, e->wall_ns);
		if (ch.early_free && site_gpu_slot(ch.early_site, ch.tensor) !=
					     site_gpu_slot(ch.site, ch.tensor) &&
		    site_gpu_slot(ch.early_site, ch.tensor) >= 0)
			gpu_sample(c, ch.p, (uint32_t)site_gpu_slot(ch.early_site, ch.tensor),
				   e->wall_ns);
		if (site_gpu_slot(ch.site, ch.tensor) >= 0)
			gpu_sample(c, ch.p, (uint32_t)site_gpu_slot(ch.site, ch.tensor),
				   e->wall_ns);
		break;
	case TL_FAILED:
		r = (struct chrome_rec){ .wall_ns = e->wall_ns, .value = e->ev->size,
					 .proc = (uint32_t)ch.p->index,
					 .site = (uint32_t)(ch.site - ch.p->sites), .tid = e->ev->tid,
					 .error = e->ev->error, .api = e->ev->api,
					 .type = REC_FAILURE, .layer = e->ev->layer };
		put_rec(c, &r);
		break;
	case TL_EXIT:
		process_end(c, ch.p, e->wall_ns);
		break;
	case TL_NONE:
		break;
	}
}

/* The newest living process of pid in the timeline, or NULL. */
static struct tl_proc *living(struct chrome *c, int pid)
{
	int64_t slot = intern_find(&c->tl.pids, &pid, sizeof(pid));
	struct tl_proc *p;

	if (slot < 0)
		return NULL;
	p = c->tl.procs[c->tl.current[slot]];
	return p->ended ? NULL : p;
}

/* Every snapshot: what each living process holds, as the kernel counts it (a process with no
 * events in the window still gets its track). */
static void chrome_snapshot(struct exporter *x, const struct snapshot *snap, bool final)
{
	struct chrome *c = x->priv;
	uint64_t wall_ns = snapshot_wall_ns(snap, snap->time_ns);

	if (final) {
		snapshot_put(c->final);
		c->final = snapshot_get((struct snapshot *)snap);
	}
	for (size_t i = 0; i < snap->nprocs; i++) {
		const struct snap_proc *sp = &snap->procs[i];
		struct tl_proc *p;

		if (!sp->alive || !(sp->valid & SP_STATS))
			continue;
		p = living(c, sp->pid);
		if (!p)
			continue;	/* no event yet: named when one comes */
		process_sample(c, p, wall_ns, sp->st.current_bytes);
		if (sp->tensor.alloc_count)
			tensor_sample(c, p, wall_ns, sp->tensor.current_bytes);
	}
}

static int chrome_begin(struct exporter *x)
{
	struct chrome *c = xcalloc(1, sizeof(*c));

	c->out = outfile_create(x->path);
	if (!c->out) {
		free(c);
		return -EIO;
	}
	c->scratch = tmpfile();
	if (!c->scratch) {
		p_err("cannot make a scratch file for the trace: %s", strerror(errno));
		outfile_close(c->out, x->path);
		free(c);
		return -errno;
	}
	x->priv = c;
	return 0;
}

static int chrome_end(struct exporter *x)
{
	struct chrome *c = x->priv;
	int err = chrome_write_json(x, c->out, c->scratch, &c->tl, c->nrecs, c->final);

	if (c->unkept) {
		p_err("%s lacks %" PRIu64 " samples: the scratch file in $TMPDIR could not take them "
		      "(%s)", x->path, c->unkept, strerror(c->unkept_errno));
		err = err ? err : -EIO;
	}

	err = outfile_close(c->out, x->path) ? -EIO : err;
	fclose(c->scratch);
	timeline_free(&c->tl);
	snapshot_put(c->final);
	free(c);
	x->priv = NULL;
	return err;
}

const struct exporter_ops chrome_exporter = {
	.name = "chrome",
	.what = "Chrome trace-event JSON for Perfetto",
	.wants_events = true,
	.wants_samples = true,
	.begin = chrome_begin,
	.on_event = chrome_event,
	.on_snapshot = chrome_snapshot,
	.end = chrome_end,
};
