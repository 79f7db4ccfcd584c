// SPDX-License-Identifier: GPL-2.0
/* The command line: one table of options, which commands take each, and how each is parsed.
 * The parser and the help are both generated from the table. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gpumem.h"
#include "base/util.h"
#include "discover/discover.h"
#include "cmd/option_spec.h"
#include "export/exporters.h"
#include "host/oci.h"
#include "recording/rec_time.h"
#include "views/sink.h"

/* Seconds (--duration, --interval, --keep-ended-for): a millisecond to a year. A shorter one
 * rounds to no time at all; a longer one overflows nanoseconds in 64 bits. */
#define SECONDS_MIN 0.001
#define SECONDS_MAX (365.0 * 24 * 3600)

/* getopt_long's value for an option without a letter: its index in the table, past any char. */
#define LONG_ONLY_BASE 256

struct parser {
	struct options *o;
	const struct command *commands;
	size_t ncommands;
	const struct command *cmd; /* the command that runs */
	bool named;		   /* cmd was named on the command line, not the default */
	bool no_hold;
};

/* The offset of field f of struct options; a compile error unless f has type T. */
#define FIELD(T, f)                                                                                \
	(offsetof(struct options, f) + 0 * sizeof(_Generic(((struct options *)0)->f, T : 0)))

static void *field_of(struct parser *p, const struct option_spec *spec)
{
	return (char *)p->o + spec->field;
}

static int parse_whole(const struct option_spec *spec, const char *s, uint32_t *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || s[0] == '-' || v == 0 || v > spec->max) {
		p_err("--%s takes a whole number from 1 to %u, not '%s'", spec->name, spec->max, s);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

/* A bool field set by the option's presence. */
static int opt_flag(struct parser *p, const struct option_spec *spec, const char *arg)
{
	(void)arg;
	*(bool *)field_of(p, spec) = true;
	return 0;
}

/* A uint32_t field: a whole number from 1 to spec->max. */
static int opt_count(struct parser *p, const struct option_spec *spec, const char *arg)
{
	return parse_whole(spec, arg, field_of(p, spec));
}

/* A double field: seconds, finite and from SECONDS_MIN to SECONDS_MAX. */
static int opt_seconds(struct parser *p, const struct option_spec *spec, const char *arg)
{
	double v;
	char *end;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || *end || end == arg || !isfinite(v) || v < SECONDS_MIN || v > SECONDS_MAX) {
		p_err("--%s takes a number of seconds from %g to %.0f (a year), not '%s'",
		      spec->name, SECONDS_MIN, SECONDS_MAX, arg);
		return -EINVAL;
	}
	*(double *)field_of(p, spec) = v;
	return 0;
}

static int opt_pids(struct parser *p, const struct option_spec *spec, const char *arg)
{
	struct options *o = p->o;
	char *copy, *tok, *rest;
	int err = 0;

	if (!arg[strspn(arg, ",")]) {
		/* An empty list would silently mean every process. */
		p_err("--pid takes a process id, or a list PID,PID,..., not '%s'", arg);
		return -EINVAL;
	}
	copy = rest = xstrdup(arg);
	while (!err && (tok = strsep(&rest, ","))) {
		uint32_t pid;

		if (!*tok) {
			/* "1,,2" or a trailing comma: a pid left out by mistake, not nothing. */
			p_err("--pid has an empty element in '%s'", arg);
			err = -EINVAL;
			break;
		}
		err = parse_whole(spec, tok, &pid);
		if (err)
			break;
		o->pids = xrealloc(o->pids, (o->npids + 1) * sizeof(*o->pids));
		o->pids[o->npids++] = (int)pid;
	}
	free(copy);
	return err;
}

/* --cgroup, --container, --pod: the option's name is the selection's kind. */
static int opt_selection(struct parser *p, const struct option_spec *spec, const char *arg)
{
	struct options *o = p->o;

	if (!arg[0]) {
		/* An empty --cgroup would be the root cgroup: everything. */
		p_err("--%s takes a non-empty value", spec->name);
		return -EINVAL;
	}
	o->selections = xrealloc(o->selections, (o->nselections + 1) * sizeof(*o->selections));
	o->selections[o->nselections++] = (struct selection){ .kind = spec->name, .value = arg };
	return 0;
}

static int opt_lib(struct parser *p, const struct option_spec *spec, const char *arg)
{
	struct options *o = p->o;

	(void)spec;
	o->libs = xrealloc(o->libs, (o->nlibs + 1) * sizeof(*o->libs));
	o->libs[o->nlibs++] = (char *)arg;
	return 0;
}

/* ADDR:PORT or [ADDR]:PORT, checked when the agent binds it. */
static int opt_listen(struct parser *p, const struct option_spec *spec, const char *arg)
{
	const char *colon = strrchr(arg, ':');

	(void)spec;
	if (!colon || colon == arg || !colon[1] || strspn(colon + 1, "0123456789") !=
	    strlen(colon + 1)) {
		p_err("--listen takes ADDR:PORT (or [IPv6]:PORT), not '%s'", arg);
		return -EINVAL;
	}
	p->o->listen = arg;
	return 0;
}

static int opt_pin_dir(struct parser *p, const struct option_spec *spec, const char *arg)
{
	(void)spec;
	if (arg[0] != '/' || strlen(arg) > 200) {
		p_err("--pin-dir takes an absolute path of at most 200 characters, not '%s'", arg);
		return -EINVAL;
	}
	p->o->pin_dir = arg;
	return 0;
}

/* --bundle-dir: where a runtime keeps its OCI bundles (the first one replaces the defaults). */
static int opt_bundle_dir(struct parser *p, const struct option_spec *spec, const char *arg)
{
	struct options *o = p->o;

	if (arg[0] != '/') {
		p_err("--%s takes an absolute path, not '%s'", spec->name, arg);
		return -EINVAL;
	}
	if (o->nbundle_dirs == OCI_MAX_ROOTS) {
		p_err("--%s can be given at most %u times", spec->name, OCI_MAX_ROOTS);
		return -EINVAL;
	}
	o->bundle_dirs = xrealloc(o->bundle_dirs, (o->nbundle_dirs + 1) * sizeof(*o->bundle_dirs));
	o->bundle_dirs[o->nbundle_dirs++] = (char *)arg;
	return 0;
}

/* export --format: one of the exporters. */
static int opt_format(struct parser *p, const struct option_spec *spec, const char *arg)
{
	(void)spec;
	if (!exporter_find(arg)) {
		p_err("--format takes %s, not '%s'", exporter_names(), arg);
		return -EINVAL;
	}
	p->o->format = arg;
	return 0;
}

static int opt_output(struct parser *p, const struct option_spec *spec, const char *arg)
{
	(void)spec;
	p->o->output = arg;
	return 0;
}

/* -c reaches getopt only when it is not an argument of its own (-bc, -cCMD, after --). */
static int opt_command(struct parser *p, const struct option_spec *spec, const char *arg)
{
	(void)p;
	(void)spec;
	(void)arg;
	p_err("-c must be an argument of its own, followed by the command to run: "
	      "-c CMD [ARGS...], last");
	return -EINVAL;
}

static int opt_group(struct parser *p, const struct option_spec *spec, const char *arg)
{
	static const char *const names[] = {
		[GROUP_PROCESS] = "process", [GROUP_SITE] = "site", [GROUP_CONTAINER] = "container",
		[GROUP_LIBRARY] = "library",
	};

	(void)spec;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (!strcmp(arg, names[i])) {
			p->o->group = (enum top_group)i;
			return 0;
		}
	}
	p_err("--group takes process, site, container or library, not '%s'", arg);
	return -EINVAL;
}

static int opt_unwind(struct parser *p, const struct option_spec *spec, const char *arg)
{
	static const struct {
		const char *name;
		enum gm_stack_mode mode;
	} modes[] = {
		{ "dwarf", GM_STACKS_DWARF },
		{ "fp", GM_STACKS_FP },
		{ "none", GM_STACKS_NONE },
	};

	(void)spec;
	for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
		if (!strcmp(arg, modes[i].name)) {
			p->o->tracer.stack_mode = modes[i].mode;
			return 0;
		}
	}
	p_err("--unwind takes dwarf, fp or none, not '%s'", arg);
	return -EINVAL;
}

static int opt_ringbuf_mb(struct parser *p, const struct option_spec *spec, const char *arg)
{
	uint32_t *mb = &p->o->tracer.ringbuf_mb;
	int err = parse_whole(spec, arg, mb);

	if (!err && (*mb & (*mb - 1))) {
		p_err("--ringbuf-mb must be a power of two, not %u", *mb);
		err = -EINVAL;
	}
	return err;
}

static int opt_stack_bytes(struct parser *p, const struct option_spec *spec, const char *arg)
{
	uint32_t *bytes = &p->o->tracer.stack_bytes;
	int err = parse_whole(spec, arg, bytes);

	if (!err && *bytes % 8) {
		p_err("--stack-bytes must be a multiple of 8, not %u", *bytes);
		err = -EINVAL;
	}
	return err;
}

static int opt_no_hold(struct parser *p, const struct option_spec *spec, const char *arg)
{
	(void)spec;
	(void)arg;
	p->no_hold = true;
	return 0;
}

static int opt_verbose(struct parser *p, const struct option_spec *spec, const char *arg)
{
	(void)p;
	(void)spec;
	(void)arg;
	verbose = true;
	return 0;
}

/* serve --record FILE.db */
static int opt_record(struct parser *p, const struct option_spec *spec, const char *arg)
{
	(void)spec;
	p->o->record_path = arg;
	return 0;
}

static int opt_retention(struct parser *p, const struct option_spec *spec, const char *arg)
{
	double v;

	if (rec_duration_parse(arg, &v) || v < 1) {
		p_err("--%s takes a duration of at least a second: 90s, 30m, 1h, 2d, not '%s'",
		      spec->name, arg);
		return -EINVAL;
	}
	p->o->retention_s = v;
	return 0;
}

/* --at, --since, --until: a TIME, resolved once the recording is open. */
static int opt_time(struct parser *p, const struct option_spec *spec, const char *arg)
{
	struct rec_time t;

	if (rec_time_parse(arg, &t)) {
		p_err("--%s takes a time: 2026-01-31T03:12:00Z (RFC 3339), '2026-01-31 03:12:00' "
		      "or 03:12[:00] (local time), +30s from the start, -10m from the end, "
		      "not '%s'", spec->name, arg);
		return -EINVAL;
	}
	*(const char **)field_of(p, spec) = arg;
	return 0;
}

static int opt_help(struct parser *p, const struct option_spec *spec, const char *arg)
{
	(void)spec;
	(void)arg;
	if (p->named)
		help_command(stdout, p->cmd);
	else
		help_general(stdout, p->commands, p->ncommands);
	p->o->help = true;
	return 0;
}

/* Every option, in the order the help lists them. */
const struct option_spec option_specs[] = {
	{ "pid", 'p', "PID", CMD_TRACING | CMD_REPORT, opt_pids, .max = INT_MAX,
	  .help = "only this process (repeat, or PID,PID,...)" },
	{ "cgroup", 0, "PATH", CMD_TRACING, opt_selection,
	  .help = "only processes in this cgroup (the v2 path as /proc/PID/cgroup shows it) or "
		  "below it" },
	{ "container", 0, "ID", CMD_TRACING | CMD_REPORT, opt_selection,
	  .help = "only processes in this container (an id prefix will do)" },
	{ "pod", 0, "UID", CMD_TRACING | CMD_REPORT, opt_selection,
	  .help = "only processes in this pod" },
	{ "bundle-dir", 0, "DIR", CMD_ALL, opt_bundle_dir,
	  .help = "where a container runtime keeps its OCI bundles, whose config.json names pods "
		  "and containers (repeat; replaces " OCI_ROOT_CONTAINERD " and "
		  OCI_ROOT_CRIO ")" },
	{ "command", 'c', "CMD [ARGS...]", CMD_TRACING, opt_command,
	  .help = "run CMD (and follow its children); report when it ends and exit with its exit "
		  "status; must come last" },
	{ "lib", 0, "PATH", CMD_ALL, opt_lib, .help = "also attach to this library or executable" },
	{ "json", 0, NULL, CMD_SNAPSHOT | CMD_TRACE | CMD_LEAKS | CMD_OOM | CMD_REPORT, opt_flag,
	  .field = FIELD(bool, json),
	  .help = "JSON instead of text: the contracts in docs/json.md",
	  .help_for = (const struct command_help[]){
		  { CMD_SNAPSHOT, "one JSON object: every process, its sites and frames, failures "
				  "and loss counters (docs/json.md)" },
		  { CMD_TRACE, "one JSON object a line, an event each (docs/json.md)" },
		  { CMD_LEAKS, "one JSON object a report, a line each (docs/json.md)" },
		  { CMD_OOM, "one JSON object a line, a failed allocation each (docs/json.md)" },
		  { CMD_REPORT, "the view's JSON, as the live command writes it (docs/json.md)" },
		  { 0 } } },
	{ "output", 'o', "FILE", CMD_TRACING, opt_output,
	  .help = "where the output goes: the report, the recording or the exported file",
	  .help_for = (const struct command_help[]){
		  { CMD_RECORD, "the recording to write, FILE.db (an older recording there is "
				"replaced)" },
		  { CMD_EXPORT, "the file to write; for memviz, the directory" },
		  { CMD_VIEWS, "write the report to FILE instead of stdout (CMD keeps stdout)" },
		  { 0 } } },
	{ "format", 0, "F", CMD_EXPORT, opt_format,
	  .help = "pprof (gzipped profile.proto), folded (stacks weighted by bytes held), chrome "
		  "(trace-event JSON for Perfetto) or memviz (PyTorch memory_viz pickles)" },
	{ "duration", 'd', "S", CMD_ALL, opt_seconds, .field = FIELD(double, duration_s),
	  .help = "stop after S seconds (0.001 to a year)" },
	{ "interval", 'i', "S", CMD_TOP | CMD_LEAKS | CMD_SERVE | CMD_RECORD | CMD_EXPORT,
	  opt_seconds, .field = FIELD(double, interval_s),
	  .help = "seconds between refreshes, reports or samples",
	  .help_for = (const struct command_help[]){
		  { CMD_TOP, "seconds between refreshes (default 2)" },
		  { CMD_LEAKS, "a report every S seconds as well as the final one (default "
			       "without -c: 10; with -c: only the final one)" },
		  { CMD_SERVE, "seconds between the snapshots that scrapes read (default 1)" },
		  { CMD_RECORD, "seconds between samples (default 1)" },
		  { CMD_EXPORT, "chrome: seconds between the samples of the top call sites "
				"(default 1)" },
		  { 0 } } },
	{ "record", 0, "FILE.db", CMD_SERVE, opt_record,
	  .help = "also record to FILE.db, as gpumem record does (appended to when it is a "
		  "recording already); turns per-allocation events on" },
	{ "retention", 0, "DURATION", CMD_SERVE | CMD_RECORD, opt_retention,
	  .help = "delete what is older than DURATION from the recording as it runs (90s, 30m, "
		  "1h, 2d): the file stops growing" },
	{ "sample-events", 0, "N", CMD_SERVE | CMD_RECORD, opt_count,
	  .field = FIELD(uint32_t, sample_events), .max = 1000000,
	  .help = "record 1 allocation in N (chosen by its address, so its free goes with it); "
		  "failures and process ends are all recorded, samples are exact" },
	{ "at", 0, "TIME", CMD_REPORT, opt_time, .field = FIELD(const char *, at),
	  .help = "the state at TIME (the same as --until): RFC 3339, 'YYYY-MM-DD HH:MM:SS' or "
		  "HH:MM[:SS] in local time, +30s after the start, -10m before the end" },
	{ "since", 0, "TIME", CMD_REPORT, opt_time, .field = FIELD(const char *, since),
	  .help = "from TIME on (default: the recording's start)" },
	{ "until", 0, "TIME", CMD_REPORT, opt_time, .field = FIELD(const char *, until),
	  .help = "up to TIME (default: the recording's end)" },
	{ "listen", 0, "ADDR:PORT", CMD_SERVE, opt_listen,
	  .help = "serve the metrics here (default " SERVE_LISTEN_DEFAULT
		  "; [ADDR]:PORT for IPv6); 0.0.0.0 or [::] for every address" },
	{ "site-series", 0, "N", CMD_SERVE, opt_count, .field = FIELD(uint32_t, site_series),
	  .max = 1000, .deflt = SERVE_SITE_SERIES_DEFAULT,
	  .help = "call-site series per process: the N holding the most (default {default})" },
	{ "pin-dir", 0, "DIR", CMD_SERVE | CMD_TOP | CMD_SNAPSHOT | CMD_LEAKS, opt_pin_dir,
	  .help = "the agent's pinned maps and links (default " GM_PIN_DIR_DEFAULT ")",
	  .help_for = (const struct command_help[]){
		  { CMD_SERVE, "where the agent pins its maps and links (default "
			       GM_PIN_DIR_DEFAULT ")" },
		  { CMD_TOP | CMD_SNAPSHOT | CMD_LEAKS,
		    "read the agent pinned there (default " GM_PIN_DIR_DEFAULT "), when one runs "
		    "and no process is selected, instead of attaching probes" },
		  { 0 } } },
	{ "reset", 0, NULL, CMD_SERVE, opt_flag, .field = FIELD(bool, reset),
	  .help = "remove everything the agent pinned, which detaches its probes, and exit" },
	{ "no-agent", 0, NULL, CMD_TOP | CMD_SNAPSHOT | CMD_LEAKS, opt_flag,
	  .field = FIELD(bool, no_agent),
	  .help = "attach probes of its own even when an agent runs" },
	{ "batch", 'b', NULL, CMD_TOP, opt_flag, .field = FIELD(bool, batch),
	  .help = "a plain table every interval, not the full screen" },
	{ "iterations", 'n', "N", CMD_TOP, opt_count, .field = FIELD(uint32_t, iterations),
	  .max = UINT32_MAX, .help = "stop after N refreshes" },
	{ "group", 0, "BY", CMD_TOP, opt_group,
	  .help = "rows by process (default), site, container (a container or pod, with its "
		  "processes' totals) or library (each process's memory by owning library)" },
	{ "bytes", 0, NULL, (CMD_VIEWS & ~CMD_RECORD) | CMD_REPORT, opt_flag,
	  .field = FIELD(bool, exact_bytes),
	  .help = "sizes as exact numbers of bytes" },
	{ "keep-ended", 0, "N", CMD_ALL, opt_count, .field = FIELD(uint32_t, keep_ended),
	  .max = 1u << 22,
	  .help = "ended processes kept with their final numbers, the oldest dropped first "
		  "(default 1000 processes)" },
	{ "keep-ended-for", 0, "S", CMD_ALL, opt_seconds, .field = FIELD(double, keep_ended_s),
	  .help = "seconds an ended process is kept (default 300 s)" },
	{ "keep-failures", 0, "N", CMD_VIEWS & ~CMD_RECORD, opt_count,
	  .field = FIELD(uint32_t, keep_failures),
	  .max = 1u << 20,
	  .help = "failure records kept: the first N and the last N (default 100); "
		  "failure counts stay exact" },
	{ "max-allocs", 0, "N", CMD_ALL, opt_count, .field = FIELD(uint32_t, tracer.max_allocs),
	  .max = 1u << 26, .deflt = GM_DEFAULT_MAX_ALLOCS,
	  .help = "live allocations tracked (default {default}; 128 bytes each, from the start)" },
	{ "max-stacks", 0, "N", CMD_ALL, opt_count, .field = FIELD(uint32_t, tracer.max_stacks),
	  .max = 1u << 20, .deflt = GM_DEFAULT_MAX_STACKS,
	  .help = "distinct call stacks (default {default})" },
	{ "max-sites", 0, "N", CMD_ALL, opt_count, .field = FIELD(uint32_t, tracer.max_sites),
	  .max = 1u << 24, .deflt = GM_DEFAULT_MAX_SITES,
	  .help = "call sites (default {default})" },
	{ "max-procs", 0, "N", CMD_ALL, opt_count, .field = FIELD(uint32_t, tracer.max_procs),
	  .max = 1u << 22, .deflt = GM_DEFAULT_MAX_PROCS, .help = "processes (default {default})" },
	{ "max-files", 0, "N", CMD_ALL, opt_count, .field = FIELD(uint32_t, max_files),
	  .max = 1u << 16, .deflt = DISCOVERY_FILES_DEFAULT,
	  .help = "CUDA files attached at once (default {default}); one that no process maps "
		  "any more is let go" },
	{ "ringbuf-mb", 0, "N", CMD_ALL, opt_ringbuf_mb, .max = 1024,
	  .deflt = GM_DEFAULT_RINGBUF_BYTES >> 20,
	  .help = "event ring buffer size in MiB, a power of two (default {default})" },
	{ "unwind", 0, "MODE", CMD_ALL, opt_unwind,
	  .help = "call stacks: dwarf (default: frame pointers, and each new site's first stack "
		  "unwound with CFI), fp, or none" },
	{ "stack-bytes", 0, "N", CMD_ALL, opt_stack_bytes, .max = GM_STACK_COPY_MAX,
	  .deflt = GM_STACK_COPY_DEFAULT,
	  .help = "stack copied for DWARF unwinding, a multiple of 8 (default {default}, "
		  "max {max}); less where the thread's stack ends sooner; a stack deeper than "
		  "that is cut, counted in stacks_cut" },
	{ "all-frames", 0, NULL, CMD_ALL, opt_flag, .field = FIELD(bool, all_frames),
	  .help = "also show frames inside the CUDA libraries" },
	{ "by-address", 0, NULL, CMD_ALL, opt_flag, .field = FIELD(bool, by_address),
	  .help = "a call site per stack of return addresses: calls made on one line of code "
		  "are sites apart (default: one site per line)" },
	{ "no-demangle", 0, NULL, CMD_ALL, opt_flag, .field = FIELD(bool, no_demangle),
	  .help = "C++ function names as the binary spells them" },
	{ "no-python", 0, NULL, CMD_ALL, opt_flag, .field = FIELD(bool, tracer.no_python),
	  .help = "native frames only, no CPython frames (file, function and line)" },
	{ "no-tensors", 0, NULL, CMD_ALL, opt_flag, .field = FIELD(bool, tracer.no_tensors),
	  .help = "leave PyTorch's tensor probes (pytorch:malloc/free in libc10_cuda.so) off: "
		  "segments only, and PyTorch skips its probe sites" },
	{ "no-hold", 0, NULL, CMD_ALL, opt_no_hold,
	  .help = "never pause a process that opens a CUDA library gpumem has not attached yet "
		  "(its first calls may then be missed: late_attach_unheld counts them)" },
	{ "verbose", 'v', NULL, CMD_ALL, opt_verbose, .help = "libbpf and discovery diagnostics" },
	{ "help", 'h', NULL, CMD_ALL | CMD_REPORT, opt_help, .help = "this text" },
};
const size_t option_nspecs = ARRAY_SIZE(option_specs);

/* getopt_long's tables, from ours: a long option per entry, and the letters. */
static void build_getopt(struct option *longs, char *shorts)
{
	size_t n = 0;

	shorts[n++] = ':'; /* a missing argument returns ':', not '?' */
	for (size_t i = 0; i < option_nspecs; i++) {
		const struct option_spec *spec = &option_specs[i];

		longs[i] = (struct option){
			.name = spec->name,
			.has_arg = spec->arg ? required_argument : no_argument,
			.val = spec->letter ? spec->letter : LONG_ONLY_BASE + (int)i,
		};
		if (!spec->letter)
			continue;
		shorts[n++] = spec->letter;
		if (spec->arg)
			shorts[n++] = ':';
	}
	longs[option_nspecs] = (struct option){ 0 };
	shorts[n] = '\0';
}

/* The entry getopt_long's value stands for, or NULL. */
static const struct option_spec *spec_of(int val)
{
	if (val >= LONG_ONLY_BASE && (size_t)(val - LONG_ONLY_BASE) < option_nspecs)
		return &option_specs[val - LONG_ONLY_BASE];
	for (size_t i = 0; val > 0 && i < option_nspecs; i++)
		if (option_specs[i].letter == val)
			return &option_specs[i];
	return NULL;
}

static int not_taken(const struct parser *p, const struct option_spec *spec, bool spelled_long)
{
	if (spelled_long)
		p_err("%s does not take --%s (see gpumem %s --help)", p->cmd->name, spec->name,
		      p->cmd->name);
	else
		p_err("%s does not take -%c (see gpumem %s --help)", p->cmd->name, spec->letter,
		      p->cmd->name);
	return -EINVAL;
}

/* What getopt_long could not parse: c is '?' or ':', optopt the option it concerns, word the
 * argument it was in (not for an unknown letter, which may not have moved optind on). */
static int bad_option(const struct parser *p, int c, const char *word)
{
	const struct option_spec *spec = spec_of(optopt);
	bool spelled_long = !strncmp(word, "--", 2);

	if (!spec && optopt > 0) {
		p_err("unknown option -%c (see gpumem %s --help)", optopt, p->cmd->name);
		return -EINVAL;
	}
	if (!spec) {
		p_err("unknown or ambiguous option '%s' (see gpumem %s --help)", word,
		      p->cmd->name);
		return -EINVAL;
	}
	if (!(spec->commands & p->cmd->bit))
		return not_taken(p, spec, spelled_long);
	if (c == ':')
		p_err("--%s needs an argument: --%s %s", spec->name, spec->name, spec->arg);
	else
		p_err("--%s takes no argument, not '%s'", spec->name, word);
	return -EINVAL;
}

/* What is left after the options: the command's own arguments, as many as it takes. */
static int take_args(struct parser *p, int n, char **args)
{
	const struct command *cmd = p->cmd;

	if (n > 0 && (!cmd->args || (unsigned int)n > cmd->max_args)) {
		p_err("unexpected argument '%s' (%s)", args[cmd->args ? cmd->max_args : 0],
		      cmd->args ? "too many arguments" : "a command to run goes after -c");
		return -EINVAL;
	}
	if (cmd->args && (unsigned int)n < cmd->min_args) {
		p_err("%s needs %s", cmd->name, cmd->args);
		return -EINVAL;
	}
	p->o->args = args;
	p->o->nargs = (size_t)n;
	return 0;
}

static int parse_args(struct parser *p, int argc, char **argv)
{
	struct option longs[ARRAY_SIZE(option_specs) + 1];
	char shorts[2 * ARRAY_SIZE(option_specs) + 2];

	build_getopt(longs, shorts);
	opterr = 0;
	optind = 1;
	for (;;) {
		const struct option_spec *spec;
		int c, at = -1, err;

		c = getopt_long(argc, argv, shorts, longs, &at);
		if (c == -1)
			break;
		if (c == '?' || c == ':')
			return bad_option(p, c, argv[optind - 1]);
		spec = at >= 0 ? &option_specs[at] : spec_of(c);
		if (!(spec->commands & p->cmd->bit))
			return not_taken(p, spec, at >= 0);
		err = spec->parse(p, spec, optarg);
		if (err || p->o->help)
			return err;
	}
	return take_args(p, argc - optind, argv + optind);
}

/* Splits off "-c CMD [ARGS...]": everything after -c belongs to CMD. */
static int split_command(int *argc, char **argv, struct options *o)
{
	for (int i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--"))
			return 0;
		if (strcmp(argv[i], "-c") && strcmp(argv[i], "--command"))
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

/* The command named by argv[1], else the default; *argv then starts at it. */
static int find_command(struct parser *p, int *argc, char ***argv)
{
	const char *word = *argc > 1 ? (*argv)[1] : NULL;

	p->cmd = &p->commands[0];
	if (!word || word[0] == '-')
		return 0;
	for (size_t i = 0; i < p->ncommands; i++) {
		if (!strcmp(word, p->commands[i].name)) {
			p->cmd = &p->commands[i];
			p->named = true;
			(*argv)++;
			(*argc)--;
			return 0;
		}
	}
	p_err("unknown command '%s' (try gpumem --help)", word);
	return -EINVAL;
}

/* export: a format, a place to write, and one source (a recording, or a live run). */
static int finish_export(struct parser *p)
{
	struct options *o = p->o;

	if (!o->format) {
		p_err("export needs --format F: %s", exporter_names());
		return -EINVAL;
	}
	if (!o->output) {
		p_err("export needs -o OUT: the file it writes (for memviz, a directory)");
		return -EINVAL;
	}
	if (o->nargs && o->cmd_argv) {
		p_err("export reads FILE.db or traces a live run (-c), not both");
		return -EINVAL;
	}
	for (size_t i = 0; o->nargs && i < o->nselections; i++) {
		if (!strcmp(o->selections[i].kind, "cgroup")) {
			p_err("export FILE.db selects processes by -p, --container and --pod, "
			      "not --cgroup");
			return -EINVAL;
		}
	}
	if (o->interval_s > 0 && !exporter_find(o->format)->wants_samples) {
		p_err("-i applies to --format chrome only (its samples); %s reads the final "
		      "snapshot", o->format);
		return -EINVAL;
	}
	o->tracer.stream_calls = exporter_find(o->format)->wants_events;
	return 0;
}

/* What follows from the options together. */
static int finish(struct parser *p)
{
	struct options *o = p->o;

	if (o->cmd_argv && p->cmd->bit == CMD_SERVE) {
		p_err("serve does not take -c (see gpumem serve --help)");
		return -EINVAL;
	}
	if (o->npids && o->cmd_argv) {
		p_err("-p and -c cannot be used together");
		return -EINVAL;
	}
	o->command = p->cmd;
	o->command_name = p->cmd->name;
	o->replace_recording = p->cmd->bit == CMD_RECORD;	/* serve --record appends */
	o->view = p->cmd->view;
	if (o->at && o->until) {
		p_err("--at and --until both name the end of what is reported: give one");
		return -EINVAL;
	}
	if (p->cmd->bit == CMD_REPORT)
		return 0;	/* a recording's: nothing to trace */
	if (p->cmd->bit == CMD_RECORD) {
		if (!o->output) {
			p_err("record needs -o FILE.db, the recording to write");
			return -EINVAL;
		}
		o->record_path = o->output;	/* the session's report stays on stdout */
		o->output = NULL;
	}
	if ((o->retention_s > 0 || o->sample_events) && !o->record_path) {
		p_err("--retention and --sample-events need --record FILE.db");
		return -EINVAL;
	}
	o->tracer.stream_calls = o->view->stream_calls || o->record_path;
	o->tracer.filter_pids = o->npids || o->cmd_argv;
	o->tracer.hold_new_procs = o->cmd_argv && !p->no_hold;
	o->tracer.hold_new_libs = !p->no_hold;
	if (p->cmd->bit == CMD_EXPORT)
		return finish_export(p);
	if (p->cmd->bit == CMD_SERVE) {
		/* System-wide: the host's accountant holds what no terminal can see held. */
		o->tracer.pin_dir = o->pin_dir;
		o->tracer.hold_ttyless = !p->no_hold;
	}
	return 0;
}

int options_parse(int argc, char **argv, const struct command *commands, size_t ncommands,
		  struct options *o)
{
	struct parser p = { .o = o, .commands = commands, .ncommands = ncommands };
	int err;

	*o = (struct options){ .tracer.stack_mode = GM_STACKS_DWARF,
			       .listen = SERVE_LISTEN_DEFAULT, .pin_dir = GM_PIN_DIR_DEFAULT,
			       .site_series = SERVE_SITE_SERIES_DEFAULT };
	err = split_command(&argc, argv, o);
	if (!err)
		err = find_command(&p, &argc, &argv);
	if (!err)
		err = parse_args(&p, argc, argv);
	if (!err && !o->help)
		err = finish(&p);
	if (err)
		help_usage_line(stderr, p.named ? p.cmd : NULL);
	return err;
}

void options_free(struct options *o)
{
	free(o->pids);
	free(o->selections);
	free(o->libs);
	free(o->bundle_dirs);
	o->bundle_dirs = NULL;
	o->pids = NULL;
	o->selections = NULL;
	o->libs = NULL;
}
