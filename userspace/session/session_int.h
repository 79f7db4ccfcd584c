/* SPDX-License-Identifier: GPL-2.0 */
/* Inside the session: one loop, one sink, and a source that feeds it (live tracing, live.c; a
 * recording, replay.c). What the sources and the loop share. */
#ifndef GPUMEM_SESSION_INT_H
#define GPUMEM_SESSION_INT_H

#include <stdbool.h>
#include <stdint.h>
#include "config/options.h"
#include "model/snapshot.h"
#include "views/sink.h"

struct session;

/* Where the sink's events and snapshots come from. */
struct source_ops {
	const char *name;
	bool live;	/* its clock is CLOCK_MONOTONIC now: --duration and ticks apply */
	/* Opens it, before the sink begins; non-zero: the exit status of a run that failed. */
	int (*open)(struct session *s);
	/* Once the sink has begun: the first events may flow. */
	void (*start)(struct session *s);
	/* Feeds the sink what came since the last step, through session_event() and
	 * session_advance(). Returns 0 while more may come, 1 once the source has ended (its
	 * exit status in s->status), -1 on an error that ends the run. */
	int (*step)(struct session *s);
	/* After the loop: the source ends what it started (a command still running) and
	 * delivers what is left; returns the exit status the run has so far, given rc. */
	int (*stop)(struct session *s, int rc);
	/* The state now (a recording: at the clock), wants as enum snap_want. */
	struct snapshot *(*publish)(struct session *s, unsigned int wants);
	void (*close)(struct session *s);
};

extern const struct source_ops live_source, replay_source;

struct session {
	const struct options *opt;
	const struct sink_ops *ops;	/* the sink's */
	struct sink sink;
	const struct source_ops *src;
	void *src_state;	/* the source's own */
	struct history *hist;	/* ops->keeps_history */
	uint64_t clock_ns;	/* the source's time now: monotonic live, wall-clock replayed */
	uint64_t start_ns;	/* on that clock: when the source started */
	double report_s;	/* the sink's report interval (a screen may change it) */
	uint64_t next_report, next_sample;
	bool stop;
	bool samples_from_source;	/* the source feeds the history (a recording's samples) */
	int status;		/* the source's exit status once it ended (CMD's) */
	int write_errno;	/* the first failed write of the report */
	struct snapshot *last_failure_snap;
	uint64_t last_failure_snap_ns;
};

/* A snapshot of the source now, observed by the history when the sink keeps one. */
struct snapshot *session_publish(struct session *s, unsigned int wants);
/* One call event for the sink, and a failure with the state when it arrived. */
void session_event(struct session *s, const struct snap_event *se);
/* The source's clock moves to now_ns: the samples and reports due by then are made. */
void session_advance(struct session *s, uint64_t now_ns);
/* Whether the run is to stop (Ctrl-C, a sink's request). */
bool session_stopping(const struct session *s);
/* The signal that asked the run to stop (SIGINT, SIGTERM, SIGHUP), 0 if none did. */
int session_signal(void);

#endif
