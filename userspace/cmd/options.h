/* SPDX-License-Identifier: GPL-2.0 */
/* What the command line asked for: the parsed options every command shares the shape of. */
#ifndef GPUMEM_OPTIONS_H
#define GPUMEM_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "select.h"
#include "tracer.h"

struct view_ops;

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
	uint32_t keep_ended;	/* --keep-ended: ended processes kept (0: the default) */
	double keep_ended_s;	/* --keep-ended-for: seconds one is kept (0: the default) */
	uint32_t keep_failures;	/* --keep-failures: first and last failure records kept */
	struct tracer_opts tracer;
};

#endif
