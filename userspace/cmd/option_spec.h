/* SPDX-License-Identifier: GPL-2.0 */
/* The option table the parser and the help are both made from (cmd/ only). */
#ifndef GPUMEM_OPTION_SPEC_H
#define GPUMEM_OPTION_SPEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "cmd/options.h"

struct parser;
struct option_spec;

/* Stores what one occurrence of the option says; returns 0, or -EINVAL after one p_err(). */
typedef int (*option_fn)(struct parser *p, const struct option_spec *spec, const char *arg);

/* What an option means to some commands, where it means something else to each. */
struct command_help {
	enum command_bit commands;	/* 0: the end of the list */
	const char *help;
};

struct option_spec {
	const char *name;	   /* the long name, without "--" */
	char letter;		   /* the short form, or 0 */
	const char *arg;	   /* the argument's name in the help; NULL: takes none */
	enum command_bit commands; /* the commands that take it */
	option_fn parse;
	size_t field;	  /* the struct options field a generic handler writes */
	uint32_t max;	  /* whole numbers: the largest accepted; {max} in the help */
	uint32_t deflt;	  /* {default} in the help */
	const char *help; /* one sentence, wrapped when printed */
	/* gpumem COMMAND --help: the sentence for that command, where it differs; help is then
	 * gpumem --help's (what it is, in general). */
	const struct command_help *help_for;
};

/* The sentence that says what spec means to the commands of bit (0: to all of them). */
const char *option_help(const struct option_spec *spec, unsigned int bit);

extern const struct option_spec option_specs[];
extern const size_t option_nspecs;

/* "usage: gpumem CMD [OPTIONS] ..." on one line; cmd NULL: no command was named. */
void help_usage_line(FILE *out, const struct command *cmd);
/* gpumem CMD --help: usage, the description, and the options that cmd takes. */
void help_command(FILE *out, const struct command *cmd);
/* gpumem --help: the commands and the options every command takes. */
void help_general(FILE *out, const struct command *commands, size_t ncommands);

#endif
