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

/* What a row of top stands for. */
enum top_group { GROUP_PROCESS, GROUP_SITE, GROUP_CONTAINER };

struct options {
	const struct view_ops *view;
	bool json;
	bool all_frames;	/* CUDA libraries' own frames too */
	bool no_demangle;	/* C++ names as the binary spells them */
	int *pids;
	size_t npids;
	char **cmd_argv;	/* -c CMD [ARGS...] */
	char **libs;		/* --lib */
	size_t nlibs;
	double duration_s;	/* 0: until Ctrl-C (or CMD's end) */
	double interval_s;	/* 0: the view's default */
	struct selection *selections;	/* --cgroup, --container, --pod */
	size_t nselections;
	const char *output;	/* -o: the report goes there, not to stdout (CMD keeps stdout) */
	bool batch;		/* -b: plain text every interval, never the full-screen table */
	uint32_t iterations;	/* -n: stop after this many refreshes (0: no limit) */
	enum top_group group;	/* --group: top's rows at start (the 'c' and 's' keys change it) */
	bool exact_bytes;	/* --bytes: sizes as exact numbers of bytes */
	struct tracer_opts tracer;
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
