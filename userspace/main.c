// SPDX-License-Identifier: GPL-2.0
/* gpumem: command line and subcommand dispatch. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "select.h"
#include "session.h"
#include "system.h"
#include "util.h"
#include "common.h"

static const struct {
	const char *name;
	const struct view_ops *view;
} commands[] = {
	{ "snapshot", &snapshot_view },
	{ "trace", &trace_view },
	{ "top", &top_view },
	{ "leaks", &leaks_view },
	{ "oom", &oom_view },
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: gpumem [COMMAND] [OPTIONS] [-c CMD [ARGS...]]\n"
		"\n"
		"Accounts for the GPU memory CUDA programs allocate, with eBPF uprobes.\n"
		"\n"
		"commands:\n"
		"  top                live table of processes and call sites (the default); a plain\n"
		"                     table every interval when stdout is not a terminal, or -b\n"
		"  snapshot           the state once: at Ctrl-C, --duration, or the end of CMD\n"
		"  trace              one line per allocation, free, failure and process end\n"
		"  leaks              call sites that hold memory and keep growing, per second and\n"
		"                     per step; a final report when CMD ends (-i S: every S s too)\n"
		"  oom                every failed allocation as it happens, with its context\n"
		"\n"
		"options:\n"
		"  -p, --pid PID      only this process (repeat, or PID,PID,...)\n"
		"  --cgroup PATH      only processes in this cgroup (v2 path as /proc/PID/cgroup\n"
		"                     shows it) or below it; --container ID (a prefix will do)\n"
		"                     and --pod UID select a container's or a pod's cgroup\n"
		"  -c CMD [ARGS...]   run CMD (and follow its children); report when it ends and\n"
		"                     exit with its exit status; must come last\n"
		"  --lib PATH         also attach to this library or executable\n"
		"  --json             machine-readable output (see DESIGN.md)\n"
		"  -o, --output FILE  write the report to FILE (CMD keeps stdout)\n"
		"  -d, --duration S   stop after S seconds\n"
		"  -i, --interval S   refresh interval of top (default 2), report interval of leaks\n"
		"  -b, --batch        top: a plain table every interval, not the full screen\n"
		"  -n, --iterations N top: stop after N refreshes\n"
		"  --group BY         top: rows by process (default), site or container (a\n"
		"                     container or pod, with its processes' totals)\n"
		"  --bytes            sizes as exact numbers of bytes\n"
		"  --max-allocs N     live allocations tracked (default %u)\n"
		"  --max-stacks N     distinct call stacks (default %u)\n"
		"  --max-sites N      call sites (default %u)\n"
		"  --max-procs N      processes (default %u)\n"
		"  --ringbuf-mb N     event ring buffer size (default %u)\n"
		"  --unwind MODE      call stacks: dwarf (default: frame pointers, and each new\n"
		"                     site's first stack unwound with CFI), fp, or none\n"
		"  --stack-bytes N    stack copied for DWARF unwinding (default %u, max %u)\n"
		"  --all-frames       also show frames inside the CUDA libraries\n"
		"  --no-demangle      C++ function names as the binary spells them\n"
		"  --no-hold          never pause a process that opens a CUDA library gpumem has\n"
		"                     not attached yet (its first calls may then be missed)\n"
		"  -v, --verbose      libbpf and discovery diagnostics\n"
		"  -h, --help         this text\n",
		GM_DEFAULT_MAX_ALLOCS, GM_DEFAULT_MAX_STACKS, GM_DEFAULT_MAX_SITES,
		GM_DEFAULT_MAX_PROCS, GM_DEFAULT_RINGBUF_BYTES >> 20, GM_STACK_COPY_DEFAULT,
		GM_STACK_COPY_MAX);
}

enum long_only {
	OPT_LIB = 256,
	OPT_JSON,
	OPT_MAX_ALLOCS,
	OPT_MAX_STACKS,
	OPT_MAX_SITES,
	OPT_MAX_PROCS,
	OPT_RINGBUF_MB,
	OPT_ALL_FRAMES,
	OPT_NO_DEMANGLE,
	OPT_NO_HOLD,
	OPT_UNWIND,
	OPT_CGROUP,
	OPT_CONTAINER,
	OPT_POD,
	OPT_STACK_BYTES,
	OPT_GROUP,
	OPT_BYTES,
};

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "lib", required_argument, NULL, OPT_LIB },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "duration", required_argument, NULL, 'd' },
	{ "interval", required_argument, NULL, 'i' },
	{ "output", required_argument, NULL, 'o' },
	{ "max-allocs", required_argument, NULL, OPT_MAX_ALLOCS },
	{ "max-stacks", required_argument, NULL, OPT_MAX_STACKS },
	{ "max-sites", required_argument, NULL, OPT_MAX_SITES },
	{ "max-procs", required_argument, NULL, OPT_MAX_PROCS },
	{ "ringbuf-mb", required_argument, NULL, OPT_RINGBUF_MB },
	{ "all-frames", no_argument, NULL, OPT_ALL_FRAMES },
	{ "no-demangle", no_argument, NULL, OPT_NO_DEMANGLE },
	{ "no-hold", no_argument, NULL, OPT_NO_HOLD },
	{ "batch", no_argument, NULL, 'b' },
	{ "iterations", required_argument, NULL, 'n' },
	{ "bytes", no_argument, NULL, OPT_BYTES },
	{ "unwind", required_argument, NULL, OPT_UNWIND },
	{ "cgroup", required_argument, NULL, OPT_CGROUP },
	{ "container", required_argument, NULL, OPT_CONTAINER },
	{ "pod", required_argument, NULL, OPT_POD },
	{ "stack-bytes", required_argument, NULL, OPT_STACK_BYTES },
	{ "group", required_argument, NULL, OPT_GROUP },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static int parse_group(const char *s, enum top_group *out)
{
	static const char *const names[] = { [GROUP_PROCESS] = "process", [GROUP_SITE] = "site",
					     [GROUP_CONTAINER] = "container" };

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i])) {
			*out = (enum top_group)i;
			return 0;
		}
	p_err("--group takes process, site or container, not '%s'", s);
	return -EINVAL;
}

static int parse_uint(const char *flag, const char *s, unsigned long max, uint32_t *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v == 0 || v > max) {
		p_err("%s takes a whole number from 1 to %lu, not '%s'", flag, max, s);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_seconds(const char *flag, const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || *end || end == s || !(*out > 0)) {
		p_err("%s takes a positive number of seconds, not '%s'", flag, s);
		return -EINVAL;
	}
	return 0;
}

static int parse_pids(struct options *o, const char *arg)
{
	char *copy = xstrdup(arg), *tok, *save = NULL;
	int err = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint32_t pid;

		err = parse_uint("-p", tok, INT_MAX, &pid);
		if (err)
			break;
		o->pids = xrealloc(o->pids, (o->npids + 1) * sizeof(*o->pids));
		o->pids[o->npids++] = (int)pid;
	}
	free(copy);
	return err;
}

static void add_selection(struct options *o, const char *kind, const char *value)
{
	o->selections = xrealloc(o->selections, (o->nselections + 1) * sizeof(*o->selections));
	o->selections[o->nselections++] = (struct selection){ .kind = kind, .value = value };
}

static int parse_unwind(const char *s, uint32_t *mode)
{
	static const struct {
		const char *name;
		enum gm_stack_mode mode;
	} modes[] = {
		{ "dwarf", GM_STACKS_DWARF }, { "fp", GM_STACKS_FP }, { "none", GM_STACKS_NONE },
	};

	for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
		if (strcmp(s, modes[i].name) == 0) {
			*mode = modes[i].mode;
			return 0;
		}
	}
	p_err("--unwind takes dwarf, fp or none, not '%s'", s);
	return -EINVAL;
}

/* Splits off "-c CMD [ARGS...]": everything after -c belongs to CMD. */
static int split_command(int *argc, char **argv, struct options *o)
{
	for (int i = 1; i < *argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return 0;
		if (strcmp(argv[i], "-c") != 0 && strcmp(argv[i], "--command") != 0)
			continue;
		if (i + 1 >= *argc) {
			p_err("-c needs a command to run");
			return -EINVAL;
		}
		o->cmd_argv = &argv[i + 1];
		argv[i] = NULL;
		*argc = i;
		return 0;
	}
	return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	bool no_hold = false;
	int c, first = 1;

	o->view = &top_view;
	if (argc > 1 && argv[1][0] != '-') {
		size_t i;

		for (i = 0; i < ARRAY_SIZE(commands); i++)
			if (strcmp(argv[1], commands[i].name) == 0)
				break;
		if (i == ARRAY_SIZE(commands)) {
			p_err("unknown command '%s' (try gpumem --help)", argv[1]);
			return -EINVAL;
		}
		o->view = commands[i].view;
		first = 2;
	}
	argv += first - 1;
	argc -= first - 1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "p:d:i:o:bn:vh", long_opts, NULL)) != -1) {
		int err = 0;

		switch (c) {
		case 'p':
			err = parse_pids(o, optarg);
			break;
		case OPT_LIB:
			o->libs = xrealloc(o->libs, (o->nlibs + 1) * sizeof(*o->libs));
			o->libs[o->nlibs++] = optarg;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case 'd':
			err = parse_seconds("--duration", optarg, &o->duration_s);
			break;
		case 'i':
			err = parse_seconds("--interval", optarg, &o->interval_s);
			break;
		case 'o':
			o->output = optarg;
			break;
		case OPT_MAX_ALLOCS:
			err = parse_uint("--max-allocs", optarg, 1u << 28, &o->tracer.max_allocs);
			break;
		case OPT_MAX_STACKS:
			err = parse_uint("--max-stacks", optarg, 1u << 24, &o->tracer.max_stacks);
			break;
		case OPT_MAX_SITES:
			err = parse_uint("--max-sites", optarg, 1u << 24, &o->tracer.max_sites);
			break;
		case OPT_MAX_PROCS:
			err = parse_uint("--max-procs", optarg, 1u << 22, &o->tracer.max_procs);
			break;
		case OPT_RINGBUF_MB:
			err = parse_uint("--ringbuf-mb", optarg, 1024, &o->tracer.ringbuf_mb);
			if (!err && (o->tracer.ringbuf_mb & (o->tracer.ringbuf_mb - 1))) {
				p_err("--ringbuf-mb must be a power of two, not %u",
				      o->tracer.ringbuf_mb);
				err = -EINVAL;
			}
			break;
		case OPT_ALL_FRAMES:
			o->all_frames = true;
			break;
		case OPT_NO_DEMANGLE:
			o->no_demangle = true;
			break;
		case OPT_NO_HOLD:
			no_hold = true;
			break;
		case 'b':
			o->batch = true;
			break;
		case 'n':
			err = parse_uint("--iterations", optarg, UINT32_MAX, &o->iterations);
			break;
		case OPT_BYTES:
			o->exact_bytes = true;
			break;
		case OPT_CGROUP:
		case OPT_CONTAINER:
		case OPT_POD:
			add_selection(o, c == OPT_CGROUP ? "cgroup" : c == OPT_POD ? "pod"
							   : "container", optarg);
			break;
		case OPT_UNWIND:
			err = parse_unwind(optarg, &o->tracer.stack_mode);
			break;
		case OPT_STACK_BYTES:
			err = parse_uint("--stack-bytes", optarg, GM_STACK_COPY_MAX,
					 &o->tracer.stack_bytes);
			if (!err && o->tracer.stack_bytes % 8) {
				p_err("--stack-bytes must be a multiple of 8, not %u",
				      o->tracer.stack_bytes);
				err = -EINVAL;
			}
			break;
		case OPT_GROUP:
			err = parse_group(optarg, &o->group);
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
		if (err)
			return err;
	}
	if (optind < argc) {
		p_err("unexpected argument '%s' (a command to run goes after -c)", argv[optind]);
		return -EINVAL;
	}
	if (o->npids && o->cmd_argv) {
		p_err("-p and -c cannot be used together");
		return -EINVAL;
	}
	o->tracer.stream_calls = o->view->stream_calls;
	o->tracer.filter_pids = o->npids || o->cmd_argv;
	o->tracer.hold_new_procs = o->cmd_argv != NULL && !no_hold;
	o->tracer.hold_new_libs = !no_hold;
	return 0;
}

int main(int argc, char **argv)
{
	struct options o = { .tracer.stack_mode = GM_STACKS_DWARF };
	int rc;

	if (split_command(&argc, argv, &o) || parse_options(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	if (check_system(&o))
		return 1;
	rc = session_run(&o);
	free(o.pids);
	free(o.selections);
	free(o.libs);
	return rc;
}
