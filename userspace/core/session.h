/* SPDX-License-Identifier: GPL-2.0 */
/* One run of gpumem: options, the tracer, discovery, the model, and the view that prints. */
#ifndef GPUMEM_SESSION_H
#define GPUMEM_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "gpumem.h"
#include "select.h"
#include "options.h"
#include "tracer.h"

struct session;

/* What a view does with the run; any callback may be NULL. */
struct view_ops {
	const char *name;
	bool stream_calls;		/* needs an event per allocation and free */
	void (*on_call)(struct session *s, const struct gm_call_event *e);
	void (*on_exit)(struct session *s, const struct gm_call_event *e);
	void (*tick)(struct session *s);	/* every --interval, or every tick_s */
	int (*finish)(struct session *s);
	double tick_s;		/* >0: tick this often whatever --interval says (the view paces) */
};

struct session {
	const struct options *opt;
	struct tracer *tracer;
	struct discovery *disc;
	struct state *state;
	FILE *out;
	pid_t child;
	uint64_t start_mono_ns;
	uint64_t mono_to_real_ns;	/* add to a bpf_ktime_get_ns() time for wall-clock time */
	uint64_t bad_records;
};

/* Runs the whole session; returns the process exit status. */
int session_run(const struct options *opt);
/* Sums of the loss and health counters, bad ring-buffer records included. */
void session_counters(struct session *s, uint64_t out[GM_CNT_COUNT]);

#endif
