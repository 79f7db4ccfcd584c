// SPDX-License-Identifier: GPL-2.0
/* The help text, generated from the command and option tables. */
#include <stdio.h>
#include <string.h>
#include "cmd/option_spec.h"

#define HELP_WIDTH  92 /* text is wrapped before this column */
#define HELP_COLUMN 22 /* where an option's help starts */

static const char usage_tail[] = "[OPTIONS] [-c CMD [ARGS...]]";

/* Prints text word by word from column col, wrapping to column indent; ends the line. */
static void print_wrapped(FILE *out, const char *text, int col, int indent)
{
	const char *word = text + strspn(text, " ");

	while (*word) {
		int len = (int)strcspn(word, " ");

		if (col > indent && col + 1 + len > HELP_WIDTH) {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', out);
			col++;
		}
		fprintf(out, "%.*s", len, word);
		col += len;
		word += len;
		word += strspn(word, " ");
	}
	fputc('\n', out);
}

const char *option_help(const struct option_spec *spec, unsigned int bit)
{
	for (const struct command_help *h = spec->help_for; bit && h && h->commands; h++)
		if (h->commands & bit)
			return h->help;
	return spec->help;
}

/* spec's help for bit with {default} and {max} replaced by its numbers. */
static void expand_help(const struct option_spec *spec, unsigned int bit, char *buf,
			size_t size)
{
	static const char def_token[] = "{default}", max_token[] = "{max}";
	const char *s = option_help(spec, bit);
	size_t n = 0;

	while (*s && n + 1 < size) {
		int wrote = 0;

		if (!strncmp(s, def_token, sizeof(def_token) - 1)) {
			wrote = snprintf(buf + n, size - n, "%u", spec->deflt);
			s += sizeof(def_token) - 1;
		} else if (!strncmp(s, max_token, sizeof(max_token) - 1)) {
			wrote = snprintf(buf + n, size - n, "%u", spec->max);
			s += sizeof(max_token) - 1;
		} else {
			buf[n++] = *s++;
		}
		n += wrote > 0 ? (size_t)wrote : 0;
		n = n < size ? n : size - 1;
	}
	buf[n] = '\0';
}

static void print_option(FILE *out, const struct option_spec *spec, unsigned int bit)
{
	char help[512];
	int col;

	if (spec->letter)
		col = fprintf(out, "  -%c, --%s", spec->letter, spec->name);
	else
		col = fprintf(out, "  --%s", spec->name);
	if (spec->arg)
		col += fprintf(out, " %s", spec->arg);
	if (col >= HELP_COLUMN - 1) {
		fputc('\n', out);
		col = 0;
	}
	fprintf(out, "%*s", HELP_COLUMN - col, "");
	expand_help(spec, bit, help, sizeof(help));
	print_wrapped(out, help, HELP_COLUMN, HELP_COLUMN);
}

/* The options a command takes (bit), or every command of all (all_of) but not every one of
 * beyond (0: no such limit). */
static void print_options(FILE *out, unsigned int bit, unsigned int all_of, unsigned int beyond)
{
	for (size_t i = 0; i < option_nspecs; i++) {
		unsigned int c = option_specs[i].commands;
		bool listed = bit ? c & bit : (c & all_of) == all_of &&
					      (!beyond || (c & beyond) != beyond);

		if (listed)
			print_option(out, &option_specs[i], bit);
	}
}

void help_usage_line(FILE *out, const struct command *cmd)
{
	if (cmd)
		fprintf(out, "usage: gpumem %s %s\n", cmd->name, cmd->usage ? cmd->usage : usage_tail);
	else
		fprintf(out, "usage: gpumem [COMMAND] %s\n", usage_tail);
}

void help_command(FILE *out, const struct command *cmd)
{
	help_usage_line(out, cmd);
	fputc('\n', out);
	print_wrapped(out, cmd->description, 0, 0);
	fprintf(out, "\noptions:\n");
	print_options(out, cmd->bit, 0, 0);
}

void help_general(FILE *out, const struct command *commands, size_t ncommands)
{
	help_usage_line(out, NULL);
	fprintf(out, "\nAccounts for the GPU memory CUDA programs allocate, with eBPF uprobes.\n"
		     "\ncommands:\n");
	for (size_t i = 0; i < ncommands; i++) {
		int col = fprintf(out, "  %s", commands[i].name);

		fprintf(out, "%*s", HELP_COLUMN - col, "");
		print_wrapped(out, commands[i].summary, HELP_COLUMN, HELP_COLUMN);
	}
	fprintf(out, "\noptions every command that traces takes (all but report):\n");
	print_options(out, 0, CMD_ALL, 0);
	fprintf(out, "\noptions every command that traces but serve takes:\n");
	print_options(out, 0, CMD_TRACING, CMD_ALL);
	fprintf(out, "\ngpumem COMMAND --help lists all of that command's options.\n");
}
