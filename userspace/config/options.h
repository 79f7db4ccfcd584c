/* SPDX-License-Identifier: GPL-2.0 */
/* What one run of gpumem was asked to do: the options as parsed (cmd/options.c), read by the
 * session that runs and the sinks that write. */
#ifndef GPUMEM_CONFIG_OPTIONS_H
#define GPUMEM_CONFIG_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "discover/select.h"
#include "loader/tracer.h"

struct sink_ops;
struct command;

/* What a row of top stands for. */
enum top_group { GROUP_PROCESS, GROUP_SITE, GROUP_CONTAINER, GROUP_LIBRARY };

struct options {
	const struct sink_ops *view;	/* the sink the command runs */
	bool json;
	bool all_frames;	/* CUDA libraries' own frames too */
	bool by_address;	/* --by-address: a site per stack of return addresses */
	bool no_demangle;	/* C++ names as the binary spells them */
	int *pids;
	size_t npids;
	char **cmd_argv;	/* -c CMD [ARGS...] */
	char **libs;		/* --lib */
	size_t nlibs;
	char **bundle_dirs;	/* --bundle-dir: OCI bundle roots (none: the runtimes' own) */
	size_t nbundle_dirs;
	double duration_s;	/* 0: until Ctrl-C (or CMD's end) */
	double interval_s;	/* 0: the view's default */
	struct selection *selections;	/* --cgroup, --container, --pod */
	size_t nselections;
	const char *output;	/* -o: the report goes there, not to stdout (CMD keeps stdout) */
	bool batch;		/* -b: plain text every interval, never the full-screen table */
	uint32_t iterations;	/* -n: stop after this many refreshes (0: no limit) */
	enum top_group group;	/* --group: top's rows at start (the 'c' and 's' keys change it) */
	bool exact_bytes;	/* --bytes: sizes as exact numbers of bytes */
	uint32_t keep_failures;	/* --keep-failures: first and last failure records kept */
	struct tracer_opts tracer;
	uint32_t keep_ended;	/* --keep-ended: ended processes kept in the model (0: default) */
	double keep_ended_s;	/* --keep-ended-for: seconds one is kept (0: default) */
	uint32_t max_files;	/* --max-files: CUDA files attached at once (0: default) */
	bool help;		/* -h: the help is printed, there is nothing to run */
	/* serve, and the commands that read a running agent's state */
	const char *listen;	/* --listen ADDR:PORT */
	const char *pin_dir;	/* --pin-dir */
	bool reset;		/* serve --reset */
	uint32_t site_series;	/* --site-series */
	bool no_agent;		/* --no-agent: probes of its own even when an agent runs */
	/* The command's own arguments (struct command.args says which): report FILE.db VIEW */
	char **args;
	size_t nargs;
	const char *format;	/* export --format: the exporter's name (export.h) */
	const struct command *command;	/* the command that runs (cmd/options.h) */
	const char *command_name;	/* its name, for what the sinks write ("record") */
	bool replace_recording;	/* record -o: an older recording there is replaced */
	/* Recordings: record -o FILE.db, serve --record FILE.db; report's --at/--since/--until
	 * (checked by rec_time_parse when parsed) */
	const char *record_path;
	double retention_s;	/* --retention: rows older than this are deleted (0: kept) */
	uint32_t sample_events;	/* --sample-events N: 1 allocation (and its free) in N kept */
	const char *at, *since, *until;
	/* The recording a run reads instead of tracing (report FILE.db, export FILE.db). */
	const char *replay_path;
};

#define SERVE_LISTEN_DEFAULT "127.0.0.1:9473"
#define SERVE_SITE_SERIES_DEFAULT 10

#endif
