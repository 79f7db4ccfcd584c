// SPDX-License-Identifier: GPL-2.0
/* `gpumem top` (and `gpumem` alone): a live table of processes, call sites or containers, like
 * top, htop and nvtop; a plain table every interval when stdout is not a terminal, or with -b.
 * The view: the screen's state, and what it does with the session's reports and ticks. */
#include <curses.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/util.h"
#include "views/top/top.h"

static bool batch_mode(struct sink *s)
{
	return s->opt->batch || s->opt->json || s->out != stdout || !isatty(STDOUT_FILENO) ||
	       !isatty(STDIN_FILENO);
}

static void start(struct sink *s)
{
	struct top_ui *t = s->state;

	t->started = true;
	t->hist = s->hist;
	t->interval = s->opt->interval_s > 0 ? s->opt->interval_s : TOP_DEFAULT_S;
	t->sort_key = 'M';
	t->group = s->opt->group;
	t->exact = s->opt->exact_bytes;
	t->all_frames = s->opt->all_frames;
	if (!batch_mode(s))
		top_screen_start(t);
}

void top_quit(struct sink *s)
{
	struct top_ui *t = s->state;

	t->quit_sent = true;
	sink_request_stop(s);
}

void top_refresh(struct sink *s)
{
	struct top_ui *t = s->state;

	/* Ages need a walk over every live allocation: only for the process drilled into. */
	sink_report_now(s, t->drill_pid ? SNAP_AGES : 0);
}

/* A new snapshot: the rows are rebuilt from it (the old one goes once they are). */
static void take(struct top_ui *t, const struct snapshot *snap)
{
	struct snapshot *old = t->snap;

	t->snap = snapshot_get((struct snapshot *)snap);
	t->now = snap->time_ns;
	top_build_rows(t);
	snapshot_put(old);
}

static void top_report(struct sink *s, const struct snapshot *snap)
{
	struct top_ui *t = s->state;

	if (!t->started)
		start(s);
	if (t->paused)
		return;
	take(t, snap);
	t->refreshes++;
	if (t->curses)
		top_draw(t);
	else
		top_batch_print(t, s->out);
	if (s->opt->iterations && t->refreshes >= s->opt->iterations)
		top_quit(s);
}

static void top_tick(struct sink *s)
{
	struct top_ui *t = s->state;
	bool dirty = false;
	int ch;

	if (!t->curses)
		return;
	while ((ch = getch()) != ERR) {
		if (top_on_key(s, ch))
			top_build_rows(t);
		dirty = true;
	}
	if (dirty)
		top_draw(t);
}

static int top_finish(struct sink *s, const struct snapshot *snap)
{
	struct top_ui *t = s->state;

	top_screen_end(t);
	/* CMD ended before the refreshes asked for: its last numbers, once. */
	if (!t->quit_sent && s->opt->cmd_argv && batch_mode(s)) {
		if (!t->started)
			start(s);
		take(t, snap);
		top_batch_print(t, s->out);
	}
	return 0;
}

/* The screen's state is the sink's own, from begin to end. */
static int top_begin(struct sink *s)
{
	s->state = xcalloc(1, sizeof(struct top_ui));
	return 0;
}

static void top_end(struct sink *s)
{
	struct top_ui *t = s->state;

	if (!t)
		return;
	snapshot_put(t->snap);
	top_rows_free(t);
	free(t);
	s->state = NULL;
}

static double report_interval(const struct options *o)
{
	return o->interval_s > 0 ? o->interval_s : TOP_DEFAULT_S;
}

const struct sink_ops top_view = {
	.reads_agent = true,
	.name = "top",
	.keeps_history = true,
	.report_wants = SNAP_DEVICES | SNAP_FORECAST | SNAP_COST,
	.report_interval = report_interval,
	.report_at_start = true,
	.begin = top_begin,
	.end = top_end,
	.on_report = top_report,
	.on_tick = top_tick,
	.tick_s = TOP_TICK_S,
	.finish = top_finish,
};
