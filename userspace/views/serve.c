// SPDX-License-Identifier: GPL-2.0
/* gpumem serve: the agent's view. It publishes a snapshot every interval for the metrics
 * endpoint, and logs the notable events on stderr, one line each: start and adoption (the
 * session says those), CUDA files attached, failed allocations, processes that end, stop. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "base/util.h"
#include "export/prometheus.h"
#include "output/json.h"
#include "output/units.h"
#include "probes/table.h"
#include "views/common.h"
#include "views/sink.h"

#define FAILURE_LINES_PER_S 10	/* a failure storm is summed up, not logged a line each */

struct serve_state {
	struct prom_server *prom;
	unsigned int files;	/* CUDA files attached, as last logged */
	uint64_t second;	/* the second whose failure lines are counted */
	unsigned int lines, unlogged;
	struct recorder *rec;	/* --record */
};

static double serve_interval(const struct options *o)
{
	return o->interval_s > 0 ? o->interval_s : 1.0;
}

static int serve_begin(struct sink *s)
{
	const struct prom_opts po = { .site_series = s->opt->site_series };
	struct serve_state *st = xcalloc(1, sizeof(*st));

	if (prom_server_start(s->opt->listen, &po, &st->prom)) {
		free(st);
		return 1;
	}
	if (s->opt->record_path && record_open(s, &st->rec)) {
		prom_server_stop(st->prom);
		free(st);
		return 1;
	}
	s->state = st;
	p_info("serving metrics on http://%s/metrics (port %u); state pinned in %s",
		 s->opt->listen, prom_server_port(st->prom), s->opt->pin_dir);
	if (st->rec)
		p_info("recording to %s", s->opt->record_path);
	return 0;
}

/* Failure lines: at most FAILURE_LINES_PER_S a second, and how many were not logged. */
static bool failure_line_allowed(struct serve_state *st, uint64_t now)
{
	uint64_t second = now / 1000000000ull;

	if (second != st->second) {
		if (st->unlogged)
			p_info("%u more failed allocations in the last second (counted in "
				 "gpumem_failed_allocations_total)", st->unlogged);
		st->second = second;
		st->lines = st->unlogged = 0;
	}
	if (st->lines < FAILURE_LINES_PER_S) {
		st->lines++;
		return true;
	}
	st->unlogged++;
	return false;
}

static void serve_event(struct sink *s, const struct snap_event *se)
{
	struct serve_state *st = s->state;
	const struct gm_call_event *e = se->ev;
	char comm[4 * GM_COMM_LEN + 1], size[32];

	record_on_event(s, st->rec, se);
	if (e->type != GM_REC_PROCESS_EXIT && e->type != GM_REC_ALLOC_FAILED)
		return;	/* per-allocation events (--record) are not logged */
	text_sanitize(comm, sizeof(comm), e->comm);
	if (e->type == GM_REC_PROCESS_EXIT) {
		p_info("process %u (%s) ended, exit status %d", e->pid, comm, e->error);
	} else if (e->type == GM_REC_ALLOC_FAILED && failure_line_allowed(st, now_ns())) {
		fmt_size(size, sizeof(size), e->size, s->opt->exact_bytes);
		p_info("allocation failed: process %u (%s) %s of %s: %s (%d)", e->pid, comm,
			 probe_api_name(e->api), size, gpu_error_name(e->layer, e->error), e->error);
	}
}

static void serve_report(struct sink *s, const struct snapshot *snap)
{
	struct serve_state *st = s->state;

	/* Scrapes read this one until the next: a reference of the server's own. */
	prom_server_publish(st->prom, (struct snapshot *)snap);
	record_on_snapshot(s, st->rec, snap);
	if (snap->disc.files != st->files) {
		p_info("probes on %u CUDA files (%u probes)", snap->disc.files, snap->disc.probes);
		st->files = snap->disc.files;
	}
	failure_line_allowed(st, now_ns());	/* a storm's summary line, once it is over */
}

static void serve_tick(struct sink *s)
{
	struct serve_state *st = s->state;

	prom_server_beat(st->prom);	/* /healthz: the loop runs */
	record_on_tick(s, st->rec);
}

/* --record: the last snapshot recorded, the file closed; a write that failed is exit 1. */
static int serve_finish(struct sink *s, const struct snapshot *snap)
{
	struct serve_state *st = s->state;
	int err = record_close(s, st->rec, snap);

	st->rec = NULL;
	return err;
}

static void serve_end(struct sink *s)
{
	struct serve_state *st = s->state;

	record_close(s, st->rec, NULL);
	prom_server_stop(st->prom);	/* before the model, whose names a scrape reads */
	p_info("stopped; the probes stay pinned in %s and keep counting (gpumem serve "
		 "--reset removes them)", s->opt->pin_dir);
	free(s->state);
	s->state = NULL;
}

const struct sink_ops serve_view = {
	.name = "serve",
	.report_interval = serve_interval,
	.report_at_start = true,
	.report_wants = SNAP_DEVICES | SNAP_FORECAST | SNAP_COST,	/* gpumem_nvml_up, the
								 * forecast, the cost */
	.keeps_history = true,	/* the forecast's fits, one sample a report */
	.tick_s = 0.1,
	.begin = serve_begin,
	.on_event = serve_event,
	.on_report = serve_report,
	.on_tick = serve_tick,
	.finish = serve_finish,
	.end = serve_end,
};
