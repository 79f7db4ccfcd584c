// SPDX-License-Identifier: GPL-2.0
/* `gpumem top` (and `gpumem` alone): a live table of processes, call sites or containers, like
 * top, htop and nvtop; a plain table every interval when stdout is not a terminal, or with -b.
 * The view: the screen's state, and what it does with the session's reports and ticks. */
#include <curses.h>
#include <string.h>
#include <unistd.h>
#include "views/top/top.h"

struct top_ui top;

static bool batch_mode(struct sink *s)
{
	return s->opt->batch || s->opt->json || s->out != stdout || !isatty(STDOUT_FILENO) ||
	       !isatty(STDIN_FILENO);
}

static void start(struct sink *s)
{
	top.started = true;
	top.hist = s->hist;
	top.interval = s->opt->interval_s > 0 ? s->opt->interval_s : TOP_DEFAULT_S;
	top.sort_key = 'M';
	top.group = s->opt->group;
	top.exact = s->opt->exact_bytes;
	top.all_frames = s->opt->all_frames;
	if (!batch_mode(s))
		top_screen_start();
}

void top_quit(struct sink *s)
{
	top.quit_sent = true;
	sink_request_stop(s);
}

void top_refresh(struct sink *s)
{
	/* Ages need a walk over every live allocation: only for the process drilled into. */
	sink_report_now(s, top.drill_pid ? SNAP_AGES : 0);
}

/* A new snapshot: the rows are rebuilt from it (the old one goes once they are). */
static void take(const struct snapshot *snap)
{
	struct snapshot *old = top.snap;

	top.snap = snapshot_get((struct snapshot *)snap);
	top.now = snap->time_ns;
	top_build_rows();
	snapshot_put(old);
}

static void top_report(struct sink *s, const struct snapshot *snap)
{
	if (!top.started)
		start(s);
	if (top.paused)
		return;
	take(snap);
	top.refreshes++;
	if (top.curses)
		top_draw();
	else
		top_batch_print(s->out);
	if (s->opt->iterations && top.refreshes >= s->opt->iterations)
		top_quit(s);
}

static void top_tick(struct sink *s)
{
	bool dirty = false;
	int ch;

	if (!top.curses)
		return;
	while ((ch = getch()) != ERR) {
		if (top_on_key(s, ch))
			top_build_rows();
		dirty = true;
	}
	if (dirty)
		top_draw();
}

static int top_finish(struct sink *s, const struct snapshot *snap)
{
	top_screen_end();
	/* CMD ended before the refreshes asked for: its last numbers, once. */
	if (!top.quit_sent && s->opt->cmd_argv && batch_mode(s)) {
		if (!top.started)
			start(s);
		take(snap);
		top_batch_print(s->out);
	}
	snapshot_put(top.snap);
	top_rows_free();
	memset(&top, 0, sizeof(top));
	return 0;
}

static double report_interval(const struct options *o)
{
	return o->interval_s > 0 ? o->interval_s : TOP_DEFAULT_S;
}

const struct sink_ops top_view = {
	.reads_agent = true,
	.name = "top",
	.keeps_history = true,
	.report_wants = SNAP_DEVICES,
	.report_interval = report_interval,
	.report_at_start = true,
	.on_report = top_report,
	.on_tick = top_tick,
	.tick_s = TOP_TICK_S,
	.finish = top_finish,
};
