// SPDX-License-Identifier: GPL-2.0
/* `gpumem record -o FILE.db`: every published snapshot (each -i seconds) and every event, to
 * the recorder (export/sqlite.c). A failed write stops the run, which then exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "recording/writer.h"
#include "output/report.h"
#include "views/common.h"

#define RECORD_DEFAULT_INTERVAL_S 1.0

static double record_interval(const struct options *o)
{
	return o->interval_s > 0 ? o->interval_s : RECORD_DEFAULT_INTERVAL_S;
}

/* "record -c CMD ARGS..." (or "serve"), for the session row; at most a line's worth. */
static char *command_text(const struct options *o)
{
	char buf[1024];
	size_t n = (size_t)snprintf(buf, sizeof(buf), "%s", o->command_name ? o->command_name : "");

	for (char **a = o->cmd_argv; a && *a && n < sizeof(buf); a++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", a == o->cmd_argv ? " -c " :
				      " ", *a);
	return xstrdup(buf);
}

int record_open(struct sink *s, struct recorder **out)
{
	const struct options *o = s->opt;
	char *cmd = command_text(o);
	struct recorder_opts ro = {
		.path = o->record_path, .replace = o->replace_recording,
		.sample_interval_s = record_interval(o), .retention_s = o->retention_s,
		.sample_events = o->sample_events, .command = cmd,
		.pins_id = s->pins_id,
	};
	int err = recorder_open(&ro, out);

	free(cmd);
	return err;
}

static int record_begin(struct sink *s)
{
	struct recorder *r;

	if (record_open(s, &r))
		return 1;
	s->state = r;
	return 0;
}

/* A write failed (printed then): the run ends, and exits 1. */
static void stop_on(struct sink *s, int err)
{
	if (!err)
		return;
	s->failed = true;
	sink_request_stop(s);
}

void record_on_event(struct sink *s, struct recorder *r, const struct snap_event *se)
{
	if (r)
		stop_on(s, recorder_on_event(r, se));
}

void record_on_snapshot(struct sink *s, struct recorder *r, const struct snapshot *snap)
{
	if (r)
		stop_on(s, recorder_on_snapshot(r, snap));
}

void record_on_tick(struct sink *s, struct recorder *r)
{
	if (r)
		stop_on(s, recorder_tick(r));
}

int record_close(struct sink *s, struct recorder *r, const struct snapshot *last)
{
	if (!r)
		return 0;
	if (last)
		recorder_on_snapshot(r, last);
	if (!recorder_close(r))
		return 0;
	s->failed = true;
	return -1;
}

static void record_event(struct sink *s, const struct snap_event *se)
{
	record_on_event(s, s->state, se);
}

static void record_report(struct sink *s, const struct snapshot *snap)
{
	record_on_snapshot(s, s->state, snap);
}

static void record_tick(struct sink *s)
{
	record_on_tick(s, s->state);
}

/* The last snapshot (with -c: the command's process at its end), then the file closed; what
 * the recording is missing said on stderr too (it is in the file's losses), as an export says
 * it: a recording that dropped events does not look whole until someone reports from it. */
static int record_finish(struct sink *s, const struct snapshot *snap)
{
	int err = record_close(s, s->state, snap);

	s->state = NULL;
	if (snap)
		text_lost(stderr, snap);
	return err;
}

static void record_end(struct sink *s)
{
	record_close(s, s->state, NULL);	/* a run that failed before its end */
	s->state = NULL;
}

const struct sink_ops record_view = {
	.name = "record",
	.stream_calls = true,
	.report_interval = record_interval,
	.on_event = record_event,
	.on_report = record_report,
	.on_tick = record_tick,
	.tick_s = 0.1,
	.begin = record_begin,
	.finish = record_finish,
	.end = record_end,
};
