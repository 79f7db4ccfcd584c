/* SPDX-License-Identifier: GPL-2.0 */
/* One run of gpumem: the tracer, discovery, the model, the history of its snapshots, and the
 * view that formats them. The session decides when the model publishes; views only format. */
#ifndef GPUMEM_SESSION_H
#define GPUMEM_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "gpumem.h"
#include "options.h"
#include "snapshot.h"
#include "tracer.h"

struct session;
struct history;
struct oci_cache;

/* What a view needs and how it formats; any callback may be NULL. */
struct view_ops {
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
	/* Without -c, -p, selections or --lib, reads a running agent's state instead of
	 * attaching probes of its own (--no-agent: never). */
	bool reads_agent;
	/* -o names what the view creates itself (export: a file, or a directory of files);
	 * the session opens nothing there. */
	bool writes_own_files;
	/* Once tracing has begun, before the first report; non-zero ends the run (exit 1). */
	int (*begin)(struct session *s);
	void (*end)(struct session *s);	/* after the final report */
	void (*on_event)(struct session *s, const struct snap_event *e);
	/* A failed allocation, with a snapshot taken when it arrived (a burst shares one). */
	void (*on_failure)(struct session *s, const struct snap_event *e,
			   const struct snapshot *snap);
	void (*on_report)(struct session *s, const struct snapshot *snap);
	void (*on_tick)(struct session *s);	/* every tick_s: a screen's keys */
	double tick_s;
	/* The final report, from the last snapshot; returns non-zero on a write error. */
	int (*finish)(struct session *s, const struct snapshot *snap);
};

struct session {
	const struct options *opt;
	struct tracer *tracer;
	struct discovery *disc;
	struct state *state;
	struct history *hist;	/* view->keeps_history */
	struct oci_cache *oci;	/* pod and container names, lent to the model */
	FILE *out;
	pid_t child;
	uint64_t start_mono_ns;
	double report_s;	/* the view's report interval (a screen may change it) */
	double history_sample_s;	/* the history's sample interval, when not the view's */
	uint64_t next_report, next_sample;
	bool stop;
	int write_errno;	/* the first failed write of the report */
	bool failed;		/* the view's output failed: exit 1, whatever CMD's status */
	struct snapshot *last_failure_snap;
	uint64_t last_failure_snap_ns;
	uint64_t next_sweep;	/* reader or agent: the next look for processes gone unseen */
	void *view_state;	/* the view's own, between begin and end */
};

/* Runs the whole session; returns the process exit status. */
int session_run(const struct options *opt);
/* A report now, with wants (a screen that drills down needs ages). */
void session_report_now(struct session *s, unsigned int wants);
/* The interval between reports from now on. */
void session_set_report_interval(struct session *s, double seconds);
/* Ends the run as Ctrl-C would (top's q, -n N reached). */
void session_request_stop(struct session *s);
const struct history *session_history(const struct session *s);

#endif
