// SPDX-License-Identifier: GPL-2.0
/* top's keys: a table from key to action; each action returns whether the rows must be
 * rebuilt. Typing a filter takes every key until Enter or Esc. */
#include <curses.h>
#include <string.h>
#include "base/util.h"
#include "views/top/top.h"

static bool act_quit(struct sink *s)
{
	top_quit(s);
	return false;
}

static bool act_help(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->help = true;
	return false;
}

static bool act_pause(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->paused = !t->paused;
	return false;
}

static bool act_slower(struct sink *s)
{
	struct top_ui *t = s->state;

	t->interval = t->interval * 2 > 60 ? 60 : t->interval * 2;
	sink_set_report_interval(s, t->interval);
	return false;
}

static bool act_faster(struct sink *s)
{
	struct top_ui *t = s->state;

	t->interval = t->interval / 2 < 0.25 ? 0.25 : t->interval / 2;
	sink_set_report_interval(s, t->interval);
	return false;
}

static bool act_filter(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->typing = true;
	t->filter[0] = 0;
	return true;
}

static bool act_sites(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->group = t->group == GROUP_SITE ? GROUP_PROCESS : GROUP_SITE;
	t->selected = t->scroll = 0;
	return true;
}

static bool act_next_group(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->group = (t->group + 1) % (GROUP_LIBRARY + 1);
	t->drill_pid = 0;
	t->in_group = false;
	t->selected = t->scroll = 0;
	return true;
}

/* Into the selected container's processes, or the selected process's sites. */
static bool act_enter(struct sink *s)
{
	struct top_ui *t = s->state;

	if (t->selected >= (int)t->nrows)
		return true;
	if (t->group == GROUP_CONTAINER && !t->drill_pid) {
		snprintf(t->group_key, sizeof(t->group_key), "%s", t->rows[t->selected].group);
		t->in_group = true;
		t->group = GROUP_PROCESS;
		t->selected = t->scroll = 0;
	} else if (!t->drill_pid) {
		t->drill_pid = t->rows[t->selected].p->pid;
		t->selected = t->scroll = 0;
		top_refresh(s);
	}
	return true;
}

static bool act_back(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	if (t->drill_pid) {
		t->drill_pid = 0;
	} else if (t->in_group) {
		t->in_group = false;
		t->group = GROUP_CONTAINER;
	}
	t->selected = t->scroll = 0;
	return true;
}

static bool act_up(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->selected--;
	return false;
}

static bool act_down(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->selected++;
	return false;
}

static bool act_page_up(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->selected -= LINES - 6;
	return false;
}

static bool act_page_down(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->selected += LINES - 6;
	return false;
}

static bool act_home(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->selected = 0;
	return false;
}

static bool act_end(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->selected = (int)t->nrows - 1;
	return false;
}

/* The sort key dir columns further along those the current layout shows. */
static void sort_step(struct top_ui *t, int dir)
{
	enum col_id ids[TOP_MAX_COLUMNS];
	int spark_w, name_w, cur = -1, k = 0;
	size_t n = top_layout(t, COLS, ids, &spark_w, &name_w);
	char keys[TOP_MAX_COLUMNS];

	for (size_t i = 0; i < n; i++) {
		if (!top_columns[ids[i]].key)
			continue;
		if (top_columns[ids[i]].key == t->sort_key)
			cur = k;
		keys[k++] = top_columns[ids[i]].key;
	}
	if (!k)
		return;
	cur = cur < 0 ? 0 : (cur + dir + k) % k;
	t->sort_key = keys[cur];
}

static bool act_sort_prev(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	sort_step(t, -1);
	return true;
}

static bool act_sort_next(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	sort_step(t, 1);
	return true;
}

static bool act_reverse(struct sink *s)
{
	struct top_ui *t = s->state;

	(void)s;
	t->sort_reverse = !t->sort_reverse;
	return true;
}

static bool act_nothing(struct sink *s)
{
	(void)s;
	return false;
}

static const struct {
	int key;
	bool (*action)(struct sink *s);
} key_table[] = {
	{ 'q', act_quit },		{ 'h', act_help },	     { '?', act_help },
	{ ' ', act_pause },		{ '+', act_slower },	     { '=', act_slower },
	{ '-', act_faster },		{ '/', act_filter },	     { 's', act_sites },
	{ 'g', act_sites },		{ 'c', act_next_group },     { '\n', act_enter },
	{ KEY_ENTER, act_enter },	{ KEY_RIGHT, act_enter },    { 27, act_back },
	{ KEY_LEFT, act_back },		{ KEY_BACKSPACE, act_back }, { KEY_UP, act_up },
	{ KEY_DOWN, act_down },		{ KEY_PPAGE, act_page_up },  { KEY_NPAGE, act_page_down },
	{ KEY_HOME, act_home },		{ KEY_END, act_end },	     { '<', act_sort_prev },
	{ '>', act_sort_next },		{ 'r', act_reverse },	     { KEY_RESIZE, act_nothing },
};

/* A key while typing the filter. */
static bool filter_key(struct top_ui *t, int ch)
{
	size_t len = strlen(t->filter);

	if (ch == '\n' || ch == KEY_ENTER) {
		t->typing = false;
	} else if (ch == 27) {
		t->typing = false;
		t->filter[0] = 0;
	} else if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && len) {
		t->filter[len - 1] = 0;
	} else if (ch >= 32 && ch < 127 && len + 1 < sizeof(t->filter)) {
		t->filter[len] = (char)ch;
		t->filter[len + 1] = 0;
	} else {
		return false;
	}
	return true;
}

bool top_on_key(struct sink *s, int ch)
{
	struct top_ui *t = s->state;

	if (t->help) {
		t->help = false;
		return false;
	}
	if (t->typing)
		return filter_key(t, ch);
	for (size_t i = 0; i < ARRAY_SIZE(key_table); i++)
		if (key_table[i].key == ch)
			return key_table[i].action(s);
	if (ch > 0 && ch < 128 && strchr("PUCMKLAFGXONT", ch)) {
		t->sort_key = (char)ch;	/* sort by the column with this letter */
		return true;
	}
	return false;
}
