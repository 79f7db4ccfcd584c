/* SPDX-License-Identifier: GPL-2.0 */
/* The command line: the commands, which options each takes, and the parser that fills struct
 * options (config/options.h). */
#ifndef GPUMEM_CMD_OPTIONS_H
#define GPUMEM_CMD_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "config/options.h"

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
	const struct sink_ops *view;	/* its sink (report: the default view's) */
	const char *summary;		/* one line, for gpumem --help */
	const char *description;	/* one paragraph, for gpumem COMMAND --help */
	/* Arguments of its own, as the usage line shows them ("FILE.db [VIEW]"); NULL: none.
	 * At most max_args are taken, at least min_args. */
	const char *args;
	unsigned int min_args, max_args;
	/* The usage line's tail; NULL: "[OPTIONS] [-c CMD [ARGS...]]". */
	const char *usage;
};

/* Parses argv (the command first, when one is named) into *o. Returns 0, or -EINVAL after
 * one error line and the usage line on stderr; -h prints the help and sets o->help. */
int options_parse(int argc, char **argv, const struct command *commands, size_t ncommands,
		  struct options *o);
/* Frees what options_parse() allocated; o may be partly parsed. */
void options_free(struct options *o);

#endif
