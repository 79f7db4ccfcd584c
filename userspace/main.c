// SPDX-License-Identifier: GPL-2.0
/* gpumem: the commands, and main(): parse the command line, check the system, run. */
#include <string.h>
#include "base/util.h"
#include "cmd/options.h"
#include "cmd/system.h"
#include "session/session.h"
#include "views/common.h"

/* The first is the default, run when no command is named. */
static const struct command commands[] = {
	{
		.name = "top",
		.bit = CMD_TOP,
		.view = &top_view,
		.summary = "live table of processes and call sites (the default); a plain table "
			   "every interval when stdout is not a terminal, or -b",
		.description =
			"A live table of the processes that hold GPU memory, refreshed every "
			"interval: full screen (ncurses) when stdin and stdout are a "
			"terminal, otherwise, or with -b, a plain table every interval. "
			"Rows are processes, call sites or containers (--group; the s and c "
			"keys change it); h shows the keys, q quits. gpumem with no command "
			"runs top.",
	},
	{
		.name = "snapshot",
		.bit = CMD_SNAPSHOT,
		.view = &snapshot_view,
		.summary = "the state once: at Ctrl-C, --duration, or the end of CMD",
		.description =
			"The state once: what every process and each of its call sites "
			"holds, with peaks, counts and the loss counters, printed at Ctrl-C, "
			"when --duration is over, or when CMD ends. --json prints the "
			"contract in docs/json.md.",
	},
	{
		.name = "trace",
		.bit = CMD_TRACE,
		.view = &trace_view,
		.summary = "one line per allocation, free, failure and process end",
		.description = "One line per allocation, free, failed allocation and process end, "
			       "as they happen, each with its call site. --json prints one object "
			       "per event (docs/json.md).",
	},
	{
		.name = "leaks",
		.bit = CMD_LEAKS,
		.view = &leaks_view,
		.summary = "call sites that hold memory and keep growing, per second and per "
			   "step; a final report when CMD ends (-i S: every S s too)",
		.description = "Call sites that hold memory and keep growing: every 0.5 s each "
			       "site's bytes held are sampled, a line is fitted to the last 60 s, "
			       "and growth is reported per second and per step of the program's "
			       "loop. With -c CMD the report comes when CMD ends; -i S prints one "
			       "every S seconds as well (without -c: every 10 s, and at Ctrl-C).",
	},
	{
		.name = "oom",
		.bit = CMD_OOM,
		.view = &oom_view,
		.summary = "every failed allocation as it happens, with its context",
		.description = "Every failed allocation as it happens: the process, the API, the "
			       "size and the error, what the process held and its peak, the sites "
			       "holding the most at that instant, the failing call site, and each "
			       "GPU's free and total memory (from NVML, where it can be loaded).",
	},
	{
		.name = "serve",
		.bit = CMD_SERVE,
		.view = &serve_view,
		.usage = "[OPTIONS]",
		.summary = "the agent: pinned state that survives restarts, and Prometheus "
			   "metrics over HTTP",
		.description =
			"The always-on agent, in the foreground: its probes, maps and links "
			"are pinned under --pin-dir, so they keep counting while it restarts "
			"or is upgraded; a new agent adopts them, and top, snapshot and leaks "
			"read them instead of attaching probes of their own. GET /metrics on "
			"--listen serves the Prometheus text format, GET /healthz says whether "
			"it is ready. SIGTERM or SIGINT stop it and leave the pins in place; "
			"--reset removes them, which detaches the probes.",
	},
	{
		.name = "record",
		.bit = CMD_RECORD,
		.view = &record_view,
		.usage = "-o FILE.db [OPTIONS] [-c CMD [ARGS...]]",
		.summary = "a recording in SQLite: samples every -i S, every allocation and free "
			   "with its named call stack, failures, process ends",
		.description =
			"Records to FILE.db (SQLite, WAL; a kill loses at most the last second): "
			"a sample of every process's and call site's numbers every -i seconds "
			"(default 1), every allocation, free, failure and process end with its "
			"call stack named as it happens, and the loss counters. System-wide, or "
			"-p, -c, --cgroup, --container, --pod; until Ctrl-C, --duration or the "
			"end of CMD. --sample-events N keeps 1 allocation in N; --retention "
			"keeps the file from growing. gpumem report reads it; "
			"docs/recording.md has the tables.",
	},
	{
		.name = "report",
		.bit = CMD_REPORT,
		.args = "FILE.db [snapshot|leaks|oom|sites]",
		.min_args = 1,
		.max_args = 2,
		.usage = "FILE.db [snapshot|leaks|oom|sites] [OPTIONS]",
		.view = &snapshot_view,	/* the default; report_view() names the others */
		.summary = "the views, answered from a recording: snapshot (the default), leaks, "
			   "oom, sites",
		.description =
			"Answers a view from a recording made by gpumem record or serve --record, "
			"with the live view's output (--json: the same shapes): snapshot, the "
			"state at --at (default: the end); leaks, fitted over the samples "
			"between --since and --until; oom, the failures between them with what "
			"each process held then; sites, every call site's numbers over the "
			"window. Needs no privileges and attaches nothing.",
	},
	{
		.name = "export",
		.bit = CMD_EXPORT,
		.view = &export_view,
		.args = "[FILE.db]",
		.max_args = 1,
		.usage = "--format F -o OUT [OPTIONS] [-c CMD [ARGS...] | FILE.db]",
		.summary = "a file for pprof, flame graphs, Perfetto or PyTorch's memory_viz, "
			   "written at the end of CMD, --duration or Ctrl-C, or from a recording",
		.description =
			"Writes what gpumem saw into a file that other tools read: --format "
			"pprof (a gzipped profile.proto: bytes and allocations held at the end "
			"and allocated over the run, per call site, for go tool pprof), folded "
			"(stacks weighted by the bytes held at the end, for flame graphs and "
			"speedscope), chrome (trace-event JSON for Perfetto and chrome://tracing: "
			"bytes per process and per top call site over time, failures as "
			"instants) or memviz (one pickle per process in the directory -o names, "
			"for PyTorch's memory_viz). Live, the file is written when CMD ends, when "
			"--duration is over, or at Ctrl-C; from FILE.db (a recording), from what "
			"it holds.",
	},
};

/* report FILE.db VIEW: the sink of that view, from the recording. */
static const struct {
	const char *name;
	const struct sink_ops *sink;
} report_views[] = {
	{ "snapshot", &snapshot_view },
	{ "leaks", &leaks_view },
	{ "oom", &oom_view },
	{ "sites", &sites_view },
};

/* report and export FILE.db read a recording: which, and report's view. 0, or the exit
 * status of a command line that cannot run. */
static int choose_replay(struct options *o)
{
	const char *name = o->nargs > 1 ? o->args[1] : "snapshot";
	size_t v;

	if (o->command->bit == CMD_EXPORT && o->nargs)
		o->replay_path = o->args[0];	/* FILE.db: no probes, no system checks */
	if (o->command->bit != CMD_REPORT)
		return 0;
	for (v = 0; v < ARRAY_SIZE(report_views) && strcmp(name, report_views[v].name); v++)
		;
	if (v == ARRAY_SIZE(report_views)) {
		p_err("report shows snapshot, leaks, oom or sites, not '%s'", name);
		return 2;
	}
	o->view = report_views[v].sink;
	o->replay_path = o->args[0];
	return 0;
}

int main(int argc, char **argv)
{
	struct options o;
	int rc;

	if (options_parse(argc, argv, commands, ARRAY_SIZE(commands), &o)) {
		options_free(&o);
		return 2;
	}
	if (o.help)
		rc = 0;
	else if ((rc = choose_replay(&o)))
		;
	else if (!o.replay_path && check_system(&o))
		rc = 1;
	else
		rc = session_run(&o);
	options_free(&o);
	return rc;
}
