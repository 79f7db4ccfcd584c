// SPDX-License-Identifier: GPL-2.0
/* top's rows as text: the columns a width allows, cells, the sparkline, header and summary
 * lines; printed as a plain table (batch) or drawn on the full screen (ncurses). */
#include <curses.h>
#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "analysis/analysis.h"
#include "analysis/history.h"
#include "base/util.h"
#include "host/gpu_map.h"
#include "output/json.h"
#include "output/report.h"
#include "output/units.h"
#include "probes/table.h"
#include "views/top/top.h"

const struct column top_columns[C_COUNT] = {
	[C_PID] = { "PID", 7, false, 'P' },
	[C_USER] = { "USER", 8, true, 'U' },
	[C_CONT] = { "CONTAINER", 12, true, 0 },
	[C_NPROCS] = { "PROCS", 5, false, 'N' },
	[C_GPU] = { "GPU", 5, true, 0 },
	[C_CUR] = { "CURRENT", 9, false, 'M' },
	[C_PEAK] = { "PEAK", 9, false, 'K' },
	[C_TENSOR] = { "TENSORS", 9, false, 'T' },
	[C_LIVE] = { "LIVE", 7, false, 'L' },
	[C_ARATE] = { "ALLOC/s", 7, false, 'A' },
	[C_FRATE] = { "FREE/s", 7, false, 'F' },
	[C_GROWTH] = { "GROW/min", 9, false, 'G' },
	[C_FAIL] = { "FAIL", 5, false, 'X' },
	[C_OOM] = { "OOM IN", 7, false, 0 },
	[C_COST] = { "GPUMEM", 6, false, 0 },
	[C_OLDEST] = { "OLDEST", 7, false, 'O' },
	[C_SPARK] = { "LAST MINUTE", 10, true, 0 },
	[C_COMM] = { "COMMAND", 0, true, 'C' },
	[C_SITE] = { "CALL SITE", 0, true, 0 },
	[C_GROUP] = { "CONTAINER / POD", 0, true, 0 },
	[C_LIBRARY] = { "LIBRARY", 0, true, 0 },
};

/* Column col right after the column after: TENSORS (PyTorch's allocated bytes beside the
 * reserved ones) after CURRENT, OOM IN and GPUMEM after FAIL. */
static size_t with_column_after(enum col_id *ids, size_t n, enum col_id after, enum col_id col)
{
	for (size_t i = 0; i < n; i++) {
		if (ids[i] != after)
			continue;
		memmove(&ids[i + 2], &ids[i + 1], (n - i - 1) * sizeof(*ids));
		ids[i + 1] = col;
		return n + 1;
	}
	return n;
}

/* The devices a row holds memory on, after its PID (or first): shown where memory is held on
 * more than GPU 0. */
static size_t with_gpu_column(enum col_id *ids, size_t n)
{
	size_t at = ids[0] == C_PID ? 1 : 0;

	memmove(&ids[at + 1], &ids[at], (n - at) * sizeof(*ids));
	ids[at] = C_GPU;
	return n + 1;
}

/* The columns this mode shows at this width, and the width left for the last one. */
size_t top_layout(struct top_ui *t, int width, enum col_id *ids, int *spark_w, int *name_w)
{
	size_t n = 0;
	int used = 0;

	*spark_w = 0;
	if (t->drill_pid) {
		static const enum col_id drill[] = { C_CUR, C_LIVE, C_ARATE, C_FRATE, C_GROWTH,
						     C_FAIL, C_OLDEST };
		memcpy(ids, drill, sizeof(drill));
		n = ARRAY_SIZE(drill);
	} else if (t->group == GROUP_CONTAINER) {
		static const enum col_id cont[] = { C_CONT, C_NPROCS, C_CUR, C_PEAK, C_ARATE,
						    C_FRATE, C_FAIL };
		memcpy(ids, cont, sizeof(cont));
		n = ARRAY_SIZE(cont);
	} else if (t->group == GROUP_LIBRARY) {
		static const enum col_id lib[] = { C_PID, C_CUR, C_PEAK, C_LIVE, C_FAIL };
		memcpy(ids, lib, sizeof(lib));
		n = ARRAY_SIZE(lib);
	} else if (t->group == GROUP_SITE) {
		static const enum col_id site[] = { C_PID, C_CUR, C_LIVE, C_ARATE, C_FRATE,
						    C_GROWTH, C_FAIL };
		memcpy(ids, site, sizeof(site));
		n = ARRAY_SIZE(site);
	} else {
		static const enum col_id proc[] = { C_PID, C_USER, C_CUR, C_PEAK, C_ARATE,
						    C_FRATE, C_GROWTH, C_FAIL };
		memcpy(ids, proc, sizeof(proc));
		n = ARRAY_SIZE(proc);
		if (width >= 130) {
			memmove(&ids[3], &ids[2], (n - 2) * sizeof(*ids));
			ids[2] = C_CONT;
			n++;
		}
	}
	if (t->any_tensors)
		n = with_column_after(ids, n, C_CUR, C_TENSOR);
	if (t->any_forecast && !t->drill_pid && t->group == GROUP_PROCESS)
		n = with_column_after(ids, n, C_FAIL, C_OOM);
	if (width >= 140 && !t->drill_pid && t->group == GROUP_PROCESS)
		n = with_column_after(ids, n, C_FAIL, C_COST);	/* gpumem's own cost */
	if (t->many_gpus)
		n = with_gpu_column(ids, n);
	for (size_t i = 0; i < n; i++)
		used += top_columns[ids[i]].width + 1;
	if (width >= 100 && !t->drill_pid && t->group != GROUP_CONTAINER &&
	    t->group != GROUP_LIBRARY) {
		*spark_w = (width - 100) / 2 + 10;
		if (*spark_w > TOP_SPARK_MAX)
			*spark_w = TOP_SPARK_MAX;
		ids[n++] = C_SPARK;
		used += *spark_w + 1;
	}
	if (t->drill_pid || t->group == GROUP_SITE)
		ids[n++] = C_SITE;
	else if (t->group == GROUP_LIBRARY)
		ids[n++] = C_LIBRARY;
	else
		ids[n++] = t->group == GROUP_CONTAINER ? C_GROUP : C_COMM;
	*name_w = width - used - 1;
	if (*name_w < 8)
		*name_w = 8;
	return n;
}

static void put_cell(char **pos, char *end, const char *text, int width, bool left)
{
	int n = snprintf(*pos, (size_t)(end - *pos), left ? "%-*.*s " : "%*.*s ", width, width,
			 text);

	if (n > 0)
		*pos += n < end - *pos ? n : end - *pos - 1;
}

static void spark(struct top_ui *t, const struct row *r, int width, char *out, size_t len)
{
	static const char *const blocks[] = { "\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83",
		"\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88" };
	static const char ascii[] = "_.-~=+*#";
	uint64_t bins[TOP_SPARK_MAX], max;
	size_t o = 0;

	const struct hist_series *h = r->has_series ? history_find(t->hist, &r->key) : NULL;

	if (!h) {
		snprintf(out, len, "%*s", width, "");
		return;
	}
	max = history_bins(h, t->now, GROWTH_WINDOW_S, bins, (unsigned int)width);
	for (int i = 0; i < width && o + 4 < len; i++) {
		int level = max ? (int)((bins[i] * 7 + max - 1) / max) : 0;

		if (!bins[i]) {
			out[o++] = ' ';
		} else if (t->utf8 && t->curses) {
			memcpy(out + o, blocks[level], 3);
			o += 3;
		} else {
			out[o++] = ascii[level];
		}
	}
	out[o] = 0;
}

/* A size, or "-" where the row has none (a tensor site reserves nothing; a process without
 * PyTorch's allocator has no tensors). */
static void fmt_known_size(char *cell, size_t len, uint64_t bytes, bool known, bool exact)
{
	if (known)
		fmt_size(cell, len, bytes, exact);
	else
		snprintf(cell, len, "-");
}

/* "0", "0,1", "A0" (AMD's GPU 0), "?" (a device not known), "-" (none). */
static void fmt_gpus(char *cell, size_t len, uint64_t gpus)
{
	size_t o = 0;

	cell[0] = 0;
	for (unsigned int g = 0; g < SNAP_SLOTS && o + 5 < len; g++) {
		if (!(gpus & (UINT64_C(1) << g)))
			continue;
		if (g < SNAP_AMD_SLOT)
			o += (size_t)snprintf(cell + o, len - o, "%s%u", o ? "," : "", g);
		else if (g < SNAP_SLOT_UNKNOWN)
			o += (size_t)snprintf(cell + o, len - o, "%sA%u", o ? "," : "",
					      g - SNAP_AMD_SLOT);
		else
			o += (size_t)snprintf(cell + o, len - o, "%s?", o ? "," : "");
	}
	if (!o)
		snprintf(cell, len, "-");
}

static void format_row(struct top_ui *t, const struct row *r, const enum col_id *ids, size_t n,
		       int spark_w, int name_w, char *buf, size_t len)
{
	bool exact = t->exact;
	char cell[TOP_SPARK_MAX * 3 + 8], *pos = buf, *end = buf + len;

	buf[0] = 0;
	for (size_t i = 0; i < n; i++) {
		int w = top_columns[ids[i]].width;

		switch (ids[i]) {
		case C_PID:
			snprintf(cell, sizeof(cell), "%d", r->p->pid);
			break;
		case C_USER:
			snprintf(cell, sizeof(cell), "%s", r->user);
			break;
		case C_CONT:
			snprintf(cell, sizeof(cell), "%s", r->cont[0] ? r->cont : "-");
			break;
		case C_NPROCS:
			snprintf(cell, sizeof(cell), "%u", r->nprocs);
			break;
		case C_GPU:
			fmt_gpus(cell, sizeof(cell), r->gpus);
			break;
		case C_CUR:
			fmt_known_size(cell, sizeof(cell), r->cur, !r->tensor_site, exact);
			break;
		case C_PEAK:
			fmt_known_size(cell, sizeof(cell), r->peak, !r->tensor_site, exact);
			break;
		case C_TENSOR:
			fmt_known_size(cell, sizeof(cell), r->tensor, r->has_tensors, exact);
			break;
		case C_LIVE:
			snprintf(cell, sizeof(cell), "%" PRIu64, r->live);
			break;
		case C_ARATE:
			fmt_rate(cell, sizeof(cell), r->arate);
			break;
		case C_FRATE:
			fmt_rate(cell, sizeof(cell), r->frate);
			break;
		case C_GROWTH:
			fmt_delta(cell, sizeof(cell), r->growth_min, exact);
			break;
		case C_FAIL:
			snprintf(cell, sizeof(cell), "%" PRIu64, r->fails);
			break;
		case C_OLDEST:
			fmt_age(cell, sizeof(cell), r->oldest_age);
			break;
		case C_COST:
			if (r->cost_share < 0)
				snprintf(cell, sizeof(cell), "-");
			else
				snprintf(cell, sizeof(cell), "%.1f%%", r->cost_share * 100);
			break;
		case C_OOM:
			if (r->oom_s < 0)
				snprintf(cell, sizeof(cell), "-");
			else
				fmt_age(cell, sizeof(cell), r->oom_s < 1e9 ? (uint64_t)(r->oom_s * 1e9) :
							    UINT64_C(1) << 62);
			break;
		case C_SPARK:
			spark(t, r, spark_w, cell, sizeof(cell));
			pos += snprintf(pos, (size_t)(end - pos), "%s ", cell);
			continue;
		case C_COMM:
		case C_SITE:
		case C_GROUP:
		case C_LIBRARY:
		case C_COUNT:
			/* A plain table is not a screen: its last column is never cut. */
			put_cell(&pos, end, r->name, t->curses ? name_w : (int)strlen(r->name), true);
			continue;
		}
		put_cell(&pos, end, cell, w, top_columns[ids[i]].left);
	}
	while (pos > buf && pos[-1] == ' ')
		*--pos = 0;
}

static void format_header(const enum col_id *ids, size_t n, int spark_w, int name_w,
			  char *buf, size_t len)
{
	char *pos = buf, *end = buf + len, title[32];

	for (size_t i = 0; i < n; i++) {
		const struct column *c = &top_columns[ids[i]];
		int w = ids[i] == C_SPARK ? spark_w : c->width ? c->width : name_w;

		snprintf(title, sizeof(title), "%s", c->title);
		put_cell(&pos, end, title, w, c->left || ids[i] == C_SPARK);
	}
	while (pos > buf && pos[-1] == ' ')
		*--pos = 0;
}

static const char *sort_title(struct top_ui *t)
{
	for (size_t i = 0; i < ARRAY_SIZE(top_columns); i++)
		if (top_columns[i].key == t->sort_key)
			return top_columns[i].title;
	return "?";
}

static void summary_line(struct top_ui *t, char *buf, size_t len)
{
	char when[16], cur[32], host[32], ar[16], fr[16], tensors[32], held[80];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	fmt_size(cur, sizeof(cur), t->total_cur, t->exact);
	fmt_size(host, sizeof(host), t->total_host, t->exact);
	fmt_rate(ar, sizeof(ar), t->total_arate);
	fmt_rate(fr, sizeof(fr), t->total_frate);
	if (t->any_tensors) {
		fmt_size(tensors, sizeof(tensors), t->total_tensor, t->exact);
		snprintf(held, sizeof(held), "%s (tensors %s)", cur, tensors);
	} else {
		snprintf(held, sizeof(held), "%s", cur);
	}
	snprintf(buf, len, "gpumem top %s  %u process%s  held %s  host %s  alloc/s %s  free/s %s",
		 when, t->nshown_procs,
		 t->nshown_procs == 1 ? "" : "es", held, host, ar, fr);
}

/* What the traced processes hold on the device of slot g (SNAP_SLOT_UNKNOWN: not known), and
 * its vendor's use of it: "0 H100 70.0 GiB/80.0 GiB (traced 1.0 GiB)", "A0 gfx90a ...". */
static size_t device_cell(struct top_ui *t, char *buf, size_t len, int g)
{
	char held[32], used[32], total[32], id[16];
	struct snap_gpu d;

	fmt_size(held, sizeof(held), t->gpu_cur[g], t->exact);
	if (!snap_gpu_of_slot(t->snap, g, &d))
		return (size_t)snprintf(buf, len, "  ? held %s", held);
	snprintf(id, sizeof(id), "%s%d", strcmp(d.vendor, "amd") ? "" : "A", d.index);
	if (!d.memory_known)
		return (size_t)snprintf(buf, len, "  %s held %s", id, held);
	fmt_size(used, sizeof(used), d.used, t->exact);
	fmt_size(total, sizeof(total), d.total, t->exact);
	if (!t->gpu_cur[g])
		return (size_t)snprintf(buf, len, "  %s %s %s/%s", id, d.name, used, total);
	return (size_t)snprintf(buf, len, "  %s %s %s/%s (traced %s)", id, d.name, used, total,
				held);
}

/* Each host device: its name and memory in use (NVML's, then amdgpu's), and what the processes
 * shown hold on it (their ordinals mapped to host devices); then what is held on a device not
 * listed or not known. */
static void devices_line(struct top_ui *t, char *buf, size_t len)
{
	const struct snapshot *snap = t->snap;
	bool nvml = snap && snap->devices_valid;
	size_t o = (size_t)snprintf(buf, len, "GPUs:");
	struct snap_gpu d;

	for (int g = 0; snap && g < SNAP_SLOTS && o < len; g++)
		if ((snap_gpu_of_slot(snap, g, &d) && d.memory_known) || t->gpu_cur[g])
			o += device_cell(t, buf + o, len - o, g);
	if (o >= len || nvml)
		return;
	if (!strcmp(buf, "GPUs:"))
		snprintf(buf + o, len - o, " -");
	o += strlen(buf + o);
	if (o < len)
		snprintf(buf + o, len - o, " (NVML: %s)", snap ? devices_reason(snap) : "not read yet");
}

static void lost_line(struct top_ui *t, char *buf, size_t len)
{
	buf[0] = 0;
	if (t->snap)
		text_lost_line(t->snap, buf, len);
}

/* ---- batch ---- */

void top_batch_print(struct top_ui *t, FILE *out)
{
	enum col_id ids[TOP_MAX_COLUMNS];
	int spark_w, name_w, width = 80;
	size_t n;
	char line[2048];

	const char *cols = getenv("COLUMNS");	/* as procps' top -b: the width asked for */

	width = cols && atoi(cols) >= 40 ? atoi(cols) : 80;
	n = top_layout(t, width, ids, &spark_w, &name_w);
	summary_line(t, line, sizeof(line));
	fprintf(out, "%s\n", line);
	if (t->many_gpus) {
		devices_line(t, line, sizeof(line));
		fprintf(out, "%s\n", line);
	}
	lost_line(t, line, sizeof(line));
	if (line[0])
		fprintf(out, "%s\n", line);
	format_header(ids, n, spark_w, name_w, line, sizeof(line));
	fprintf(out, "%s\n", line);
	for (size_t i = 0; i < t->nrows; i++) {
		format_row(t, &t->rows[i], ids, n, spark_w, name_w, line, sizeof(line));
		fprintf(out, "%s\n", line);
	}
	fputc('\n', out);
	fflush(out);
}

/* ---- screen ---- */

void top_screen_start(struct top_ui *t)
{
	const char *cs;

	setlocale(LC_CTYPE, "");
	cs = nl_langinfo(CODESET);
	t->utf8 = cs && !strcmp(cs, "UTF-8");
	initscr();
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	curs_set(0);
	set_escdelay(25);
	if (has_colors()) {
		start_color();
		use_default_colors();
		init_pair(1, COLOR_BLACK, COLOR_CYAN);
		init_pair(2, COLOR_YELLOW, -1);
	}
	t->curses = true;
}

void top_screen_end(struct top_ui *t)
{
	if (!t->curses)
		return;
	endwin();
	t->curses = false;
}

static const char *const help_text[] = {
	"gpumem top: GPU memory of CUDA processes, from eBPF uprobes",
	"",
	"  q            quit",
	"  h ?          this help (any key closes it)",
	"  space        pause / resume refreshing",
	"  + -          refresh interval longer / shorter",
	"  s            group by process / by call site",
	"  c            group by process, call site, container (or pod), library in turn",
	"  /            filter: type text, Enter keeps it, Esc clears it",
	"  Enter        the call sites of the selected process, with their frames;",
	"               the processes of the selected container",
	"  Esc, Left    back from a process's call sites, or a container's processes",
	"  Up Down PgUp PgDn Home End   move the selection",
	"  < >          sort by the previous / next column",
	"  P U C M K L A F G X O N T sort by PID, user, command, current, peak, live",
	"               allocations, allocs/s, frees/s, growth per minute, failures, oldest",
	"               age, processes (of a container), tensors",
	"  r            reverse the sort order",
	"",
	"GROW/min is a least-squares fit of the bytes held over the last minute.",
	"LAST MINUTE is the bytes held over the last 60 s, scaled to the row's maximum.",
	"TENSORS (shown when a process uses PyTorch's caching allocator) is what its tensors",
	"hold (allocated), inside CURRENT (reserved); a tensor site's row has only TENSORS.",
	"GPU (shown when memory is held on more than GPU 0) is the devices a row holds memory",
	"on, ? for one not known; the GPUs line has what the processes shown hold on each.",
	"CONTAINER is the container id's first 12 digits, else pod: and the pod UID's first 8.",
	"A container's PEAK is the highest total seen at a refresh, or the peak of one of its",
	"processes when that is higher (the kernel keeps exact peaks per process only).",
};

static const char *group_title(struct top_ui *t)
{
	switch (t->group) {
	case GROUP_SITE:
		return "call site";
	case GROUP_CONTAINER:
		return "container";
	case GROUP_LIBRARY:
		return "library";
	case GROUP_PROCESS:
		break;
	}
	return "process";
}

/* Lines under a process's sites for the frames of the selected one. */
static int detail_lines(int rows)
{
	int n = rows / 3;

	return n > 12 ? 12 : n < 2 ? 0 : n;
}

static void draw_frames(const struct row *r, int y, int n, int cols)
{
	char *text = NULL, *line, *save = NULL;
	size_t size = 0;
	FILE *f;

	if (n < 2 || !r->ss)
		return;
	f = open_memstream(&text, &size);
	if (!f)
		return;
	fprintf(f, "frames of the selected site (%s %s):\n  ", probe_api_name(r->ss->api),
		site_kind_name(r->ss));
	text_frames(f, r->ss->stack, "\n  ", (unsigned int)n - 1);
	fclose(f);
	attron(A_BOLD);
	for (line = strtok_r(text, "\n", &save); line && n > 0; line = strtok_r(NULL, "\n", &save)) {
		mvaddnstr(y++, 0, line, cols - 1);
		attroff(A_BOLD);
		n--;
	}
	free(text);
}

/* What the table shows and how: the line above the column titles. */
static void mode_line(struct top_ui *t, char *line, size_t len)
{
	if (t->drill_pid) {
		const struct snap_proc *p = t->snap ? snapshot_find(t->snap, t->drill_pid) : NULL;
		char comm[GM_COMM_LEN + 1] = "?";

		if (p)
			text_known(comm, sizeof(comm), p->comm, p->valid & SP_COMM);
		snprintf(line, len, "pid %d %s: call sites (Esc: back), sorted by %s%s%s%s",
			 t->drill_pid, comm, sort_title(t), t->filter[0] ? "  filter: " : "",
			 t->filter, t->paused ? "  [paused]" : "");
	} else if (t->in_group) {
		snprintf(line, len, "%s %s: processes (Esc: back), sorted by %s%s%s%s",
			 t->group_key[0] ? "container" : "host,", t->group_key[0] ? t->group_key
			 : "in no container", sort_title(t), t->filter[0] ? "  filter: " : "",
			 t->filter, t->paused ? "  [paused]" : "");
	} else {
		snprintf(line, len, "by %s, sorted by %s%s, interval %.1f s%s%s%s", group_title(t),
			 sort_title(t), t->sort_reverse ? " (reversed)" : "", t->interval,
			 t->filter[0] ? "  filter: " : "", t->filter,
			 t->paused ? "  [paused]" : "");
	}
}

/* Lines the loss counters may take at the head of the screen. */
#define TOP_LOST_LINES 3

/* The counters in a ", "-separated list. */
static int counters_in(const char *s)
{
	int n = *s != 0;

	for (; *s; s++)
		n += s[0] == ',' && s[1] == ' ';
	return n;
}

/* The last row of a list that does not fit: the counters that go whole, then how many do not,
 * so that none is hidden without a word. */
static void draw_last_row(int y, const char *text, size_t width)
{
	char more[32];

	for (size_t k = width; k > 0; k--) {
		if (text[k - 1] != ',' || text[k] != ' ')
			continue;
		snprintf(more, sizeof(more), " +%d more", counters_in(text + k + 1));
		if (k + strlen(more) <= width) {
			mvaddnstr(y, 0, text, (int)k);
			addstr(more);
			return;
		}
	}
	snprintf(more, sizeof(more), "+%d more", counters_in(text));
	mvaddnstr(y, 0, more, (int)width);
}

/* text from row y on, broken after a ", " where a row of width ends (a counter is never cut
 * where it can go whole on the next row), on max rows at most, the last one saying how many
 * counters it could not show; returns the row after. */
static int draw_wrapped(int y, const char *text, int width, int max)
{
	size_t len = strlen(text), at = 0, cut;

	for (int row = 0; row < max && at < len && width > 0; row++) {
		cut = len - at;
		if (cut > (size_t)width && row == max - 1) {
			draw_last_row(y++, text + at, (size_t)width);
			break;
		}
		if (cut > (size_t)width) {
			cut = (size_t)width;
			for (size_t k = cut; k > 0; k--)
				if (text[at + k - 1] == ',' && text[at + k] == ' ') {
					cut = k;
					break;
				}
		}
		mvaddnstr(y++, 0, text + at, (int)cut);
		at += cut;
		while (text[at] == ' ')
			at++;
	}
	return y;
}

/* Summary, devices, losses and mode lines; returns the next free line. */
static int draw_head(struct top_ui *t, int cols)
{
	char line[2048];
	int y = 0;

	summary_line(t, line, sizeof(line));
	mvaddnstr(y++, 0, line, cols - 1);
	devices_line(t, line, sizeof(line));
	mvaddnstr(y++, 0, line, cols - 1);
	lost_line(t, line, sizeof(line));
	if (line[0]) {
		attron(COLOR_PAIR(2) | A_BOLD);
		y = draw_wrapped(y, line, cols - 1, TOP_LOST_LINES);
		attroff(COLOR_PAIR(2) | A_BOLD);
	}
	mode_line(t, line, sizeof(line));
	mvaddnstr(y++, 0, line, cols - 1);
	return y;
}

/* Keeps the selection on a row and in view of a body of that many lines. */
static void clamp_selection(struct top_ui *t, int body)
{
	if (t->selected >= (int)t->nrows)
		t->selected = t->nrows ? (int)t->nrows - 1 : 0;
	if (t->selected < 0)
		t->selected = 0;
	if (t->selected < t->scroll)
		t->scroll = t->selected;
	if (body > 0 && t->selected >= t->scroll + body)
		t->scroll = t->selected - body + 1;
}

static void draw_rows(struct top_ui *t, const enum col_id *ids, size_t n, int spark_w, int name_w,
		      int y, int body, int cols)
{
	char line[2048];

	for (int i = 0; i < body && t->scroll + i < (int)t->nrows; i++) {
		const struct row *r = &t->rows[t->scroll + i];
		bool selected = t->scroll + i == t->selected;

		format_row(t, r, ids, n, spark_w, name_w, line, sizeof(line));
		if (selected)
			attron(has_colors() ? COLOR_PAIR(1) : A_REVERSE);
		mvaddstr(y + i, 0, line);
		if (selected) {
			for (int x = getcurx(stdscr); x > 0 && x < cols - 1; x++)
				addch(' ');
			attroff(has_colors() ? COLOR_PAIR(1) : A_REVERSE);
		}
	}
}

void top_draw(struct top_ui *t)
{
	enum col_id ids[TOP_MAX_COLUMNS];
	int spark_w, name_w, rows, cols, y, body;
	size_t n;
	char line[2048];

	getmaxyx(stdscr, rows, cols);
	erase();
	if (t->help) {
		for (size_t i = 0; i < ARRAY_SIZE(help_text) && (int)i < rows; i++)
			mvaddnstr((int)i, 0, help_text[i], cols - 1);
		refresh();
		return;
	}
	y = draw_head(t, cols);
	n = top_layout(t, cols, ids, &spark_w, &name_w);
	format_header(ids, n, spark_w, name_w, line, sizeof(line));
	attron(A_REVERSE);
	mvaddnstr(y, 0, line, cols - 1);
	for (int x = (int)strlen(line); x < cols - 1; x++)
		mvaddch(y, x, ' ');
	attroff(A_REVERSE);
	y++;
	body = rows - y - 1;
	if (t->drill_pid && t->nrows)
		body -= detail_lines(rows);
	clamp_selection(t, body);
	draw_rows(t, ids, n, spark_w, name_w, y, body, cols);
	if (t->drill_pid && t->selected < (int)t->nrows)
		draw_frames(&t->rows[t->selected], y + (body > 0 ? body : 0), detail_lines(rows),
			    cols);
	if (t->typing)
		snprintf(line, sizeof(line), "filter: %s_", t->filter);
	else
		snprintf(line, sizeof(line), "h help  q quit  / filter  s c group  Enter details  "
			 "< > sort  space pause  +/- interval");
	mvaddnstr(rows - 1, 0, line, cols - 1);
	refresh();
}
