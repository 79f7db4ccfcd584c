/* SPDX-License-Identifier: GPL-2.0 */
/* What the command line asked for: the parsed options, the commands, and the parser. */
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
	const struct command *command;	/* the command that runs */
	/* Recordings: record -o FILE.db, serve --record FILE.db; report's --at/--since/--until
	 * (checked by rec_time_parse when parsed) */
	const char *record_path;
	double retention_s;	/* --retention: rows older than this are deleted (0: kept) */
	uint32_t sample_events;	/* --sample-events N: 1 allocation (and its free) in N kept */
	const char *at, *since, *until;
};

#define SERVE_LISTEN_DEFAULT "127.0.0.1:9473"
#define SERVE_SITE_SERIES_DEFAULT 10

/* Which commands take an option: one bit per command. */
enum command_bit {
	CMD_TOP = 1u << 0,
	CMD_SNAPSHOT = 1u << 1,
	CMD_TRACE = 1u << 2,
	CMD_LEAKS = 1u << 3,
	CMD_OOM = 1u << 4,
	CMD_SERVE = 1u << 5,
	CMD_RECORD = 1u << 6,	/* record -o FILE.db */
	CMD_REPORT = 1u << 7,	/* report FILE.db [VIEW]: the views, from a recording */
	CMD_EXPORT = 1u << 8,	/* export --format F -o OUT [FILE.db] */
	/* The commands that trace what they select (-p, -c, --cgroup...), serve aside. */
	CMD_VIEWS = CMD_TOP | CMD_SNAPSHOT | CMD_TRACE | CMD_LEAKS | CMD_OOM | CMD_RECORD,
	CMD_TRACING = CMD_VIEWS | CMD_EXPORT,	/* follow processes, run -c CMD, write -o */
	CMD_ALL = CMD_TRACING | CMD_SERVE,	/* every command that traces */
};

/* A command of the dispatch table; the first is the one run when none is named. */
struct command {
	const char *name;
	enum command_bit bit;
	const struct view_ops *view;
	const char *summary;		/* one line, for gpumem --help */
	const char *description;	/* one paragraph, for gpumem COMMAND --help */
	/* Arguments of its own, as the usage line shows them ("FILE.db [VIEW]"); NULL: none.
	 * At most max_args are taken, at least min_args. */
	const char *args;
	unsigned int min_args, max_args;
	/* The usage line's tail; NULL: "[OPTIONS] [-c CMD [ARGS...]]". */
	const char *usage;
	/* Runs the command without probes (report reads a file); NULL: a session of view. */
	int (*run)(const struct options *o);
};

/* Parses argv (the command first, when one is named) into *o. Returns 0, or -EINVAL after
 * one error line and the usage line on stderr; -h prints the help and sets o->help. */
int options_parse(int argc, char **argv, const struct command *commands, size_t ncommands,
		  struct options *o);
/* Frees what options_parse() allocated; o may be partly parsed. */
void options_free(struct options *o);

#endif
