/* SPDX-License-Identifier: GPL-2.0 */
/* One kind of output: a sink, fed by the session loop whatever the source (live tracing or a
 * recording): call events, failures with the state at that instant, periodic snapshots, and
 * the final report. The views, the exporters (through the export sink), the recorder and the
 * metrics server are all sinks. */
#ifndef GPUMEM_VIEWS_SINK_H
#define GPUMEM_VIEWS_SINK_H

#include <stdbool.h>
#include <stdio.h>
#include "config/options.h"
#include "model/snapshot.h"

struct history;
struct recording;

/* How a sink steers the session that feeds it (the session's, lent). */
struct sink_control {
	void (*report_now)(void *ctx, unsigned int wants);	/* a report now, with wants */
	void (*set_report_interval)(void *ctx, double seconds);	/* from now on */
	void (*request_stop)(void *ctx);	/* ends the run as Ctrl-C would */
};

/* What the session lends a sink for the run. */
struct sink {
	const struct options *opt;
	FILE *out;		/* the report's: stdout, or -o */
	void *state;		/* the sink's own, between begin and end */
	const struct history *hist;	/* ops->keeps_history: the snapshots observed so far */
	double history_sample_s;	/* the history's sample interval, when not the sink's */
	bool failed;		/* its output failed: exit 1, whatever CMD's status */
	uint64_t start_wall_ns;	/* when the source began: tracing, or the recording's window */
	uint64_t pins_id;	/* the kernel's counters are these pins' (tracer_pins_id); 0: new */
	struct recording *recording;	/* the source, when it is a recording; else NULL */
	uint64_t since_ns, until_ns;	/* a recording's window, wall-clock */
	const struct sink_control *ctl;
	void *ctl_ctx;
};

/* What a sink needs and what it does; any callback may be NULL. */
struct sink_ops {
	const char *name;
	bool stream_calls;	/* needs an event per allocation and free */
	bool keeps_history;	/* its reports read the history of the snapshots */
	unsigned int sample_wants;	/* enum snap_want of the periodic samples */
	unsigned int report_wants;	/* and of the snapshots it reports (the last one too) */
	unsigned int exit_wants;	/* what to capture of a process when it ends */
	/* Seconds between samples (history only) and between reports; 0: none. */
	double (*sample_interval)(const struct options *o);
	double (*report_interval)(const struct options *o);
	bool report_at_start;	/* the first report as soon as tracing begins */
	/* Its periodic reports are part of what it writes from a recording too (an export's
	 * samples); a view's periodic reports are for watching, and a recording has only its
	 * final one. */
	bool replays_reports;
	/* Without -c, -p, selections or --lib, reads a running agent's state instead of
	 * attaching probes of its own (--no-agent: never). */
	bool reads_agent;
	/* -o names what the sink creates itself (export: a file, or a directory of files);
	 * the session opens nothing there. */
	bool writes_own_files;
	/* Once the source is open, before the first report; non-zero ends the run (exit 1). */
	int (*begin)(struct sink *s);
	void (*end)(struct sink *s);	/* after the final report */
	void (*on_event)(struct sink *s, const struct snap_event *e);
	/* A failed allocation, with a snapshot taken when it arrived (a burst shares one). */
	void (*on_failure)(struct sink *s, const struct snap_event *e, const struct snapshot *snap);
	void (*on_report)(struct sink *s, const struct snapshot *snap);
	void (*on_tick)(struct sink *s);	/* every tick_s: a screen's keys */
	double tick_s;
	/* The final report, from the last snapshot; returns non-zero on a write error. */
	int (*finish)(struct sink *s, const struct snapshot *snap);
};

static inline void sink_report_now(struct sink *s, unsigned int wants)
{
	s->ctl->report_now(s->ctl_ctx, wants);
}

static inline void sink_set_report_interval(struct sink *s, double seconds)
{
	s->ctl->set_report_interval(s->ctl_ctx, seconds);
}

static inline void sink_request_stop(struct sink *s)
{
	s->ctl->request_stop(s->ctl_ctx);
}

#endif
