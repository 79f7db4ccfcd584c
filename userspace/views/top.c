// SPDX-License-Identifier: GPL-2.0
/* `gpumem top` (and `gpumem` alone): a live table of processes or call sites, like top,
 * htop and nvtop; a plain table every interval when stdout is not a terminal or with -b.
 * Model (state + history) -> rows -> text: the screen and batch output share the rows. */
#include <ctype.h>
#include <curses.h>
#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "common.h"
#include "history.h"
#include "nvml.h"
#include "probes.h"
#include "state.h"
#include "units.h"
#include "util.h"

#define TOP_TICK_S 0.05		/* keys are read this often */
#define TOP_DEFAULT_S 2.0
#define TOP_GROWTH_WINDOW_S 60.0
#define TOP_SPARK_WINDOW_S 60.0
#define TOP_SPARK_MAX 30
#define TOP_ENDED_SHOWN_NS 10000000000ull	/* an ended process stays listed this long */

enum col_id {
	C_PID, C_USER, C_CONT, C_NPROCS, C_CUR, C_PEAK, C_LIVE, C_ARATE, C_FRATE, C_GROWTH,
	C_FAIL, C_OLDEST, C_SPARK, C_COMM, C_SITE, C_GROUP,
};

struct column {
	const char *title;
	int width;		/* 0: takes what is left */
	bool left;
	char key;		/* sorts by it; 0: not sortable */
};

static const struct column columns[] = {
	[C_PID] = { "PID", 7, false, 'P' },
	[C_USER] = { "USER", 8, true, 'U' },
	[C_CONT] = { "CONTAINER", 12, true, 0 },
	[C_NPROCS] = { "PROCS", 5, false, 'N' },
	[C_CUR] = { "CURRENT", 9, false, 'M' },
	[C_PEAK] = { "PEAK", 9, false, 'K' },
	[C_LIVE] = { "LIVE", 7, false, 'L' },
	[C_ARATE] = { "ALLOC/s", 7, false, 'A' },
	[C_FRATE] = { "FREE/s", 7, false, 'F' },
	[C_GROWTH] = { "GROW/min", 9, false, 'G' },
	[C_FAIL] = { "FAIL", 5, false, 'X' },
	[C_OLDEST] = { "OLDEST", 7, false, 'O' },
	[C_SPARK] = { "LAST MINUTE", 10, true, 0 },
	[C_COMM] = { "COMMAND", 0, true, 'C' },
	[C_SITE] = { "CALL SITE", 0, true, 0 },
	[C_GROUP] = { "CONTAINER / POD", 0, true, 0 },
};

/* Processes are grouped by container id, else by pod UID, else as the host's. */
#define GROUP_KEY_LEN (CONTAINER_ID_LEN + 5)

struct row {
	struct proc_rec *p;	/* a container row: its first process */
	const struct site_snap *ss;	/* NULL: a process or container row */
	struct hist_series *h;	/* NULL: a container row */
	uint64_t cur, peak, live, fails, oldest_age;
	double arate, frate, growth_min;
	unsigned int nprocs;	/* a container row: processes in it */
	char user[16];
	char cont[24];		/* the CONTAINER cell */
	char key[GROUP_KEY_LEN];	/* a container row: its group */
	char name[512];		/* command line, call site, or container and pod */
};

/* The highest total a container was seen to hold (its own peak is not in the maps). */
struct group_peak {
	char key[GROUP_KEY_LEN];
	uint64_t peak;
};

static struct {
	bool started, curses, utf8, quit_sent;
	struct history *hist;
	double interval;
	uint64_t next_refresh;
	unsigned int refreshes;
	char sort_key;
	bool sort_reverse;
	enum top_group group;
	bool paused, help, typing;
	char filter[64];
	int drill_pid;		/* 0: the main table */
	bool in_group;		/* the processes of one container (Enter on a container row) */
	char group_key[GROUP_KEY_LEN];
	struct group_peak *peaks;
	size_t npeaks, peaks_cap;
	int selected, scroll;
	struct row *rows;
	size_t nrows, cap;
	uint64_t now;
	uint64_t total_cur, total_host;
	double total_arate, total_frate;
	unsigned int nshown_procs;
	uid_t last_uid;
	char last_user[16];
} top;

/* ---- model ---- */

static void user_of(int pid, char *buf, size_t len)
{
	char path[32];
	struct stat st;
	struct passwd *pw;

	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (stat(path, &st)) {
		snprintf(buf, len, "-");
		return;
	}
	if (top.last_user[0] && st.st_uid == top.last_uid) {
		snprintf(buf, len, "%s", top.last_user);
		return;
	}
	pw = getpwuid(st.st_uid);
	if (pw)
		snprintf(top.last_user, sizeof(top.last_user), "%s", pw->pw_name);
	else
		snprintf(top.last_user, sizeof(top.last_user), "%u", (unsigned int)st.st_uid);
	top.last_uid = st.st_uid;
	snprintf(buf, len, "%s", top.last_user);
}

static struct row *new_row(void)
{
	if (top.nrows == top.cap) {
		top.cap = top.cap ? 2 * top.cap : 64;
		top.rows = xrealloc(top.rows, top.cap * sizeof(*top.rows));
	}
	memset(&top.rows[top.nrows], 0, sizeof(*top.rows));
	return &top.rows[top.nrows++];
}

/* The command line with its program's directory left out, as htop shows it. */
static void command_name(const char *cmdline, char *buf, size_t len)
{
	size_t prog = strcspn(cmdline, " ");
	const char *base = cmdline;

	for (size_t i = 0; i < prog; i++)
		if (cmdline[i] == '/')
			base = cmdline + i + 1;
	text_sanitize(buf, len, base);
}

static void fit_row(struct row *r)
{
	struct hist_fit rate, growth;

	history_fit(r->h, top.now, top.interval * 1.5 + 0.5, &rate);
	history_fit(r->h, top.now, TOP_GROWTH_WINDOW_S, &growth);
	r->arate = rate.alloc_rate;
	r->frate = rate.free_rate;
	r->growth_min = growth.slope * 60;
}

static void site_label(struct session *s, const struct proc_rec *p, const struct site_snap *ss,
		       char *buf, size_t len, unsigned int frames)
{
	uint64_t ips[GM_MAX_STACK_DEPTH];
	uint32_t n = state_stack(s->state, p->pid, ss->key.stack_id, ips);
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	if (!f) {
		snprintf(buf, len, "?");
		return;
	}
	fprintf(f, "%s %s ", probe_api_name(ss->key.api), kind_name(ss->key.kind));
	frames_text(s, f, p->pid, ips, n, " <- ", frames);
	fclose(f);
	snprintf(buf, len, "%s", text);
	free(text);
}

static bool matches(const struct row *r)
{
	char pid[16];

	if (!top.filter[0])
		return true;
	snprintf(pid, sizeof(pid), "%d", r->p->pid);
	if (!r->h)	/* a container row: its ids and name only */
		return strcasestr(r->name, top.filter) || strcasestr(r->cont, top.filter);
	return strcasestr(r->name, top.filter) || strstr(pid, top.filter) ||
	       strcasestr(r->user, top.filter) || strcasestr(r->p->comm, top.filter) ||
	       strcasestr(r->cont, top.filter);
}

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	int c = 0;

	switch (top.sort_key) {
	case 'P':
		c = (x->p->pid > y->p->pid) - (x->p->pid < y->p->pid);
		break;
	case 'U':
		c = strcmp(x->user, y->user);
		break;
	case 'C':
		c = strcmp(x->name, y->name);
		break;
	case 'K':
		c = (x->peak < y->peak) - (x->peak > y->peak);
		break;
	case 'L':
		c = (x->live < y->live) - (x->live > y->live);
		break;
	case 'A':
		c = (x->arate < y->arate) - (x->arate > y->arate);
		break;
	case 'F':
		c = (x->frate < y->frate) - (x->frate > y->frate);
		break;
	case 'G':
		c = (x->growth_min < y->growth_min) - (x->growth_min > y->growth_min);
		break;
	case 'X':
		c = (x->fails < y->fails) - (x->fails > y->fails);
		break;
	case 'N':
		c = (x->nprocs < y->nprocs) - (x->nprocs > y->nprocs);
		break;
	case 'O':
		c = (x->oldest_age < y->oldest_age) - (x->oldest_age > y->oldest_age);
		break;
	}
	if (!c)
		c = (x->cur < y->cur) - (x->cur > y->cur);
	if (!c)
		c = (x->p->pid > y->p->pid) - (x->p->pid < y->p->pid);
	return top.sort_reverse ? -c : c;
}

static void group_key(const struct proc_rec *p, char *buf, size_t len)
{
	if (p->container.has_id)
		snprintf(buf, len, "%s", p->container.id);
	else if (p->container.has_pod)
		snprintf(buf, len, "pod:%s", p->container.pod_uid);
	else
		snprintf(buf, len, "%s", "");
}

/* A container row's last column: the container with its runtime, and its pod. */
static void group_name(const struct container_info *ci, char *buf, size_t len)
{
	int o = 0;

	if (!ci->has_id && !ci->has_pod) {
		snprintf(buf, len, "(host: in no container)");
		return;
	}
	if (ci->has_id)
		o = snprintf(buf, len, "%s %s", ci->runtime[0] ? ci->runtime : "container", ci->id);
	if (ci->has_pod && o >= 0 && (size_t)o < len)
		snprintf(buf + o, len - (size_t)o, "%spod %s%s%s", o ? "  " : "", ci->pod_uid,
			 ci->qos[0] ? " " : "", ci->qos);
}

/* The row of p's container, made at its first process. */
static struct row *group_row(struct proc_rec *p)
{
	char key[GROUP_KEY_LEN];
	struct row *r;

	group_key(p, key, sizeof(key));
	for (size_t i = 0; i < top.nrows; i++)
		if (!strcmp(top.rows[i].key, key))
			return &top.rows[i];
	r = new_row();
	r->p = p;
	snprintf(r->key, sizeof(r->key), "%s", key);
	container_short(&p->container, r->cont, sizeof(r->cont));
	group_name(&p->container, r->name, sizeof(r->name));
	snprintf(r->user, sizeof(r->user), "-");
	return r;
}

/* A container's peak as far as top can tell: the highest total seen at a refresh, or one of
 * its processes' own (exact) peak when that is higher. */
static uint64_t group_peak(const char *key, uint64_t seen)
{
	struct group_peak *g;

	for (size_t i = 0; i < top.npeaks; i++) {
		g = &top.peaks[i];
		if (strcmp(g->key, key))
			continue;
		if (seen > g->peak)
			g->peak = seen;
		return g->peak;
	}
	if (top.npeaks == top.peaks_cap) {
		top.peaks_cap = top.peaks_cap ? 2 * top.peaks_cap : 16;
		top.peaks = xrealloc(top.peaks, top.peaks_cap * sizeof(*top.peaks));
	}
	g = &top.peaks[top.npeaks++];
	snprintf(g->key, sizeof(g->key), "%s", key);
	g->peak = seen;
	return seen;
}

/* Adds process p (its rates in pr) to its container's row. */
static void add_to_group(struct proc_rec *p, const struct row *pr)
{
	struct row *r = group_row(p);

	r->nprocs++;
	if (p->alive)
		r->cur += p->st.current_bytes;
	if (p->st.peak_bytes > r->peak)
		r->peak = p->st.peak_bytes;
	r->live += p->st.current_allocs;
	r->fails += p->st.failed_count;
	r->arate += pr->arate;
	r->frate += pr->frate;
}

/* Container rows: their peaks, then the filter. */
static void finish_groups(void)
{
	size_t kept = 0;

	for (size_t i = 0; i < top.nrows; i++) {
		struct row *r = &top.rows[i];

		r->peak = group_peak(r->key, r->cur > r->peak ? r->cur : r->peak);
		if (matches(r))
			top.rows[kept++] = *r;
	}
	top.nrows = kept;
}

/* Samples every process and site, then builds the rows the current screen shows. */
static void build_rows(struct session *s)
{
	bool by_group = top.group == GROUP_CONTAINER && !top.drill_pid;
	char key[GROUP_KEY_LEN];

	struct state *st = s->state;

	top.nrows = 0;
	top.total_cur = top.total_host = 0;
	top.total_arate = top.total_frate = 0;
	top.nshown_procs = 0;
	for (size_t i = 0; i < st->nprocs; i++) {
		struct proc_rec *p = st->procs[i];
		struct hist_key pk = { .pid = p->pid, .stack_id = HIST_PROCESS };
		struct hist_series *ph;
		struct row *r;

		if (!p->have_stats)
			continue;
		ph = history_get(top.hist, &pk);
		history_add(ph, p->alive ? top.now : p->end_ns, p->st.current_bytes,
			    p->st.alloc_count, p->st.free_count);
		for (size_t j = 0; j < p->nsites; j++) {
			const struct site_snap *ss = &p->sites[j];
			struct hist_key k = { .pid = p->pid, .stack_id = ss->key.stack_id,
					      .api = ss->key.api, .kind = ss->key.kind };

			history_add(history_get(top.hist, &k), p->alive ? top.now : p->end_ns,
				    ss->st.current_bytes, ss->st.alloc_count, ss->st.free_count);
		}
		if (!p->alive && top.now - p->end_ns >= TOP_ENDED_SHOWN_NS)
			continue;
		if (top.drill_pid && p->pid != top.drill_pid)
			continue;
		if (top.in_group && !by_group) {
			group_key(p, key, sizeof(key));
			if (strcmp(key, top.group_key))
				continue;
		}
		top.nshown_procs++;
		if (p->alive) {
			top.total_cur += p->st.current_bytes;
			top.total_host += p->st.by_kind[GM_KIND_HOST];
		}
		if (by_group) {
			struct row pr = { .h = ph };

			fit_row(&pr);
			top.total_arate += pr.arate;
			top.total_frate += pr.frate;
			add_to_group(p, &pr);
			continue;
		}
		if (top.group != GROUP_SITE && !top.drill_pid) {
			r = new_row();
			r->p = p;
			r->h = ph;
			container_short(&p->container, r->cont, sizeof(r->cont));
			r->cur = p->st.current_bytes;
			r->peak = p->st.peak_bytes;
			r->live = p->st.current_allocs;
			r->fails = p->st.failed_count;
			user_of(p->pid, r->user, sizeof(r->user));
			if (p->cmdline && p->cmdline[0])
				command_name(p->cmdline, r->name, sizeof(r->name));
			else
				text_sanitize(r->name, sizeof(r->name), p->comm);
			if (!p->alive)
				strncat(r->name, " <ended>", sizeof(r->name) - strlen(r->name) - 1);
			fit_row(r);
			top.total_arate += r->arate;
			top.total_frate += r->frate;
			if (!matches(r))
				top.nrows--;
			continue;
		}
		for (size_t j = 0; j < p->nsites; j++) {
			const struct site_snap *ss = &p->sites[j];
			struct hist_key k = { .pid = p->pid, .stack_id = ss->key.stack_id,
					      .api = ss->key.api, .kind = ss->key.kind };

			r = new_row();
			r->p = p;
			r->ss = ss;
			r->h = history_get(top.hist, &k);
			container_short(&p->container, r->cont, sizeof(r->cont));
			r->cur = ss->st.current_bytes;
			r->peak = ss->st.current_bytes;
			r->live = ss->st.current_allocs;
			r->fails = ss->st.failed_count;
			r->oldest_age = ss->oldest_ns && p->end_ns > ss->oldest_ns
						? p->end_ns - ss->oldest_ns : 0;
			snprintf(r->user, sizeof(r->user), "-");
			site_label(s, p, ss, r->name, sizeof(r->name), top.drill_pid ? 8 : 3);
			fit_row(r);
			top.total_arate += r->arate;
			top.total_frate += r->frate;
			if (!matches(r))
				top.nrows--;
		}
	}
	if (by_group)
		finish_groups();
	if (top.nrows > 1)
		qsort(top.rows, top.nrows, sizeof(*top.rows), row_cmp);
}

static void refresh_model(struct session *s)
{
	int err;

	top.now = now_ns();
	/* Ages need a walk over every live allocation: only for the process drilled into. */
	err = top.drill_pid ? state_refresh(s->state) : state_refresh_counts(s->state);
	if (err)
		p_err("cannot read the BPF maps: %s", strerror(-err));
	top.now = now_ns();
	build_rows(s);
	top.refreshes++;
}

/* ---- text: one line per row, shared by the screen and batch mode ---- */

/* The columns this mode shows at this width, and the width left for the last one. */
static size_t layout(int width, enum col_id *ids, int *spark_w, int *name_w)
{
	size_t n = 0;
	int used = 0;

	*spark_w = 0;
	if (top.drill_pid) {
		static const enum col_id drill[] = { C_CUR, C_LIVE, C_ARATE, C_FRATE, C_GROWTH,
						     C_FAIL, C_OLDEST };
		memcpy(ids, drill, sizeof(drill));
		n = ARRAY_SIZE(drill);
	} else if (top.group == GROUP_CONTAINER) {
		static const enum col_id cont[] = { C_CONT, C_NPROCS, C_CUR, C_PEAK, C_ARATE,
						    C_FRATE, C_FAIL };
		memcpy(ids, cont, sizeof(cont));
		n = ARRAY_SIZE(cont);
	} else if (top.group == GROUP_SITE) {
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
	for (size_t i = 0; i < n; i++)
		used += columns[ids[i]].width + 1;
	if (width >= 100 && !top.drill_pid && top.group != GROUP_CONTAINER) {
		*spark_w = (width - 100) / 2 + 10;
		if (*spark_w > TOP_SPARK_MAX)
			*spark_w = TOP_SPARK_MAX;
		ids[n++] = C_SPARK;
		used += *spark_w + 1;
	}
	if (top.drill_pid || top.group == GROUP_SITE)
		ids[n++] = C_SITE;
	else
		ids[n++] = top.group == GROUP_CONTAINER ? C_GROUP : C_COMM;
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

static void spark(const struct row *r, int width, char *out, size_t len)
{
	static const char *const blocks[] = { "\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83",
		"\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88" };
	static const char ascii[] = "_.-~=+*#";
	uint64_t bins[TOP_SPARK_MAX], max;
	size_t o = 0;

	max = history_bins(r->h, top.now, TOP_SPARK_WINDOW_S, bins, (unsigned int)width);
	for (int i = 0; i < width && o + 4 < len; i++) {
		int level = max ? (int)((bins[i] * 7 + max - 1) / max) : 0;

		if (!bins[i]) {
			out[o++] = ' ';
		} else if (top.utf8 && top.curses) {
			memcpy(out + o, blocks[level], 3);
			o += 3;
		} else {
			out[o++] = ascii[level];
		}
	}
	out[o] = 0;
}

static void format_row(struct session *s, const struct row *r, const enum col_id *ids,
		       size_t n, int spark_w, int name_w, char *buf, size_t len)
{
	bool exact = s->opt->exact_bytes;
	char cell[TOP_SPARK_MAX * 3 + 8], *pos = buf, *end = buf + len;

	buf[0] = 0;
	for (size_t i = 0; i < n; i++) {
		int w = columns[ids[i]].width;

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
		case C_CUR:
			fmt_size(cell, sizeof(cell), r->cur, exact);
			break;
		case C_PEAK:
			fmt_size(cell, sizeof(cell), r->peak, exact);
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
		case C_SPARK:
			spark(r, spark_w, cell, sizeof(cell));
			pos += snprintf(pos, (size_t)(end - pos), "%s ", cell);
			continue;
		case C_COMM:
		case C_SITE:
		case C_GROUP:
			/* A plain table is not a screen: its last column is never cut. */
			put_cell(&pos, end, r->name, top.curses ? name_w : (int)strlen(r->name), true);
			continue;
		}
		put_cell(&pos, end, cell, w, columns[ids[i]].left);
	}
	while (pos > buf && pos[-1] == ' ')
		*--pos = 0;
}

static void format_header(const enum col_id *ids, size_t n, int spark_w, int name_w,
			  char *buf, size_t len)
{
	char *pos = buf, *end = buf + len, title[32];

	for (size_t i = 0; i < n; i++) {
		const struct column *c = &columns[ids[i]];
		int w = ids[i] == C_SPARK ? spark_w : c->width ? c->width : name_w;

		snprintf(title, sizeof(title), "%s", c->title);
		put_cell(&pos, end, title, w, c->left || ids[i] == C_SPARK);
	}
	while (pos > buf && pos[-1] == ' ')
		*--pos = 0;
}

static const char *sort_title(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(columns); i++)
		if (columns[i].key == top.sort_key)
			return columns[i].title;
	return "?";
}

static void summary_line(struct session *s, char *buf, size_t len)
{
	char when[16], cur[32], host[32], ar[16], fr[16];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	fmt_size(cur, sizeof(cur), top.total_cur, s->opt->exact_bytes);
	fmt_size(host, sizeof(host), top.total_host, s->opt->exact_bytes);
	fmt_rate(ar, sizeof(ar), top.total_arate);
	fmt_rate(fr, sizeof(fr), top.total_frate);
	snprintf(buf, len, "gpumem top %s  %u process%s  held %s  host %s  alloc/s %s  free/s %s",
		 when, top.nshown_procs,
		 top.nshown_procs == 1 ? "" : "es", cur, host, ar, fr);
}

static void devices_line(struct session *s, char *buf, size_t len)
{
	struct nvml_device dev[NVML_MAX_DEVICES];
	unsigned int n = nvml_devices(dev, NVML_MAX_DEVICES);
	size_t o;

	if (!n) {
		snprintf(buf, len, "GPUs: - (no NVML)");
		return;
	}
	o = (size_t)snprintf(buf, len, "GPUs:");
	for (unsigned int i = 0; i < n && o < len; i++) {
		char used[32], total[32];

		fmt_size(used, sizeof(used), dev[i].used, s->opt->exact_bytes);
		fmt_size(total, sizeof(total), dev[i].total, s->opt->exact_bytes);
		o += (size_t)snprintf(buf + o, len - o, "  %u %s %s/%s", dev[i].index, dev[i].name,
				      used, total);
	}
}

/* The loss counters, as lost_text prints them; empty when all are zero. */
static void lost_line(struct session *s, char *buf, size_t len)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	buf[0] = 0;
	if (!f)
		return;
	lost_text(s, f);
	fclose(f);
	if (text) {
		text[strcspn(text, "\n")] = 0;
		snprintf(buf, len, "%s", text);
	}
	free(text);
}

/* ---- batch ---- */

static void batch_print(struct session *s)
{
	enum col_id ids[16];
	int spark_w, name_w, width = 80;
	size_t n;
	char line[1024];

	if (isatty(fileno(s->out))) {
		const char *cols = getenv("COLUMNS");

		width = cols && atoi(cols) >= 40 ? atoi(cols) : 80;
	}
	n = layout(width, ids, &spark_w, &name_w);
	summary_line(s, line, sizeof(line));
	fprintf(s->out, "%s\n", line);
	lost_line(s, line, sizeof(line));
	if (line[0])
		fprintf(s->out, "%s\n", line);
	format_header(ids, n, spark_w, name_w, line, sizeof(line));
	fprintf(s->out, "%s\n", line);
	for (size_t i = 0; i < top.nrows; i++) {
		format_row(s, &top.rows[i], ids, n, spark_w, name_w, line, sizeof(line));
		fprintf(s->out, "%s\n", line);
	}
	fputc('\n', s->out);
	fflush(s->out);
}

/* ---- screen ---- */

static void screen_start(void)
{
	const char *cs;

	setlocale(LC_CTYPE, "");
	cs = nl_langinfo(CODESET);
	top.utf8 = cs && !strcmp(cs, "UTF-8");
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
	top.curses = true;
}

static void screen_end(void)
{
	if (!top.curses)
		return;
	endwin();
	top.curses = false;
}

static const char *const help_text[] = {
	"gpumem top: GPU memory of CUDA processes, from eBPF uprobes",
	"",
	"  q            quit",
	"  h ?          this help (any key closes it)",
	"  space        pause / resume refreshing",
	"  + -          refresh interval longer / shorter",
	"  s            group by process / by call site",
	"  c            group by process, call site, container (or pod) in turn",
	"  /            filter: type text, Enter keeps it, Esc clears it",
	"  Enter        the call sites of the selected process, with their frames;",
	"               the processes of the selected container",
	"  Esc, Left    back from a process's call sites, or a container's processes",
	"  Up Down PgUp PgDn Home End   move the selection",
	"  < >          sort by the previous / next column",
	"  P U C M K L A F G X O N   sort by PID, user, command, current, peak, live",
	"               allocations, allocs/s, frees/s, growth per minute, failures, oldest",
	"               age, processes (of a container)",
	"  r            reverse the sort order",
	"",
	"GROW/min is a least-squares fit of the bytes held over the last minute.",
	"LAST MINUTE is the bytes held over the last 60 s, scaled to the row's maximum.",
	"CONTAINER is the container id's first 12 digits, else pod: and the pod UID's first 8.",
	"A container's PEAK is the highest total seen at a refresh, or the peak of one of its",
	"processes when that is higher (the kernel keeps exact peaks per process only).",
};

static const char *group_title(void)
{
	switch (top.group) {
	case GROUP_SITE:
		return "call site";
	case GROUP_CONTAINER:
		return "container";
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

static void draw_frames(struct session *s, const struct row *r, int y, int n, int cols)
{
	uint64_t ips[GM_MAX_STACK_DEPTH];
	uint32_t nips;
	char *text = NULL, *line, *save = NULL;
	size_t size = 0;
	FILE *f;

	if (n < 2 || !r->ss)
		return;
	nips = state_stack(s->state, r->p->pid, r->ss->key.stack_id, ips);
	f = open_memstream(&text, &size);
	if (!f)
		return;
	fprintf(f, "frames of the selected site (%s %s):\n  ", probe_api_name(r->ss->key.api),
		kind_name(r->ss->key.kind));
	frames_text(s, f, r->p->pid, ips, nips, "\n  ", (unsigned int)n - 1);
	fclose(f);
	attron(A_BOLD);
	for (line = strtok_r(text, "\n", &save); line && n > 0; line = strtok_r(NULL, "\n", &save)) {
		mvaddnstr(y++, 0, line, cols - 1);
		attroff(A_BOLD);
		n--;
	}
	free(text);
}

static void draw(struct session *s)
{
	enum col_id ids[16];
	int spark_w, name_w, rows, cols, y = 0, body;
	size_t n;
	char line[2048];

	getmaxyx(stdscr, rows, cols);
	erase();
	if (top.help) {
		for (size_t i = 0; i < ARRAY_SIZE(help_text) && (int)i < rows; i++)
			mvaddnstr((int)i, 0, help_text[i], cols - 1);
		refresh();
		return;
	}
	summary_line(s, line, sizeof(line));
	mvaddnstr(y++, 0, line, cols - 1);
	devices_line(s, line, sizeof(line));
	mvaddnstr(y++, 0, line, cols - 1);
	lost_line(s, line, sizeof(line));
	if (line[0]) {
		attron(COLOR_PAIR(2) | A_BOLD);
		mvaddnstr(y++, 0, line, cols - 1);
		attroff(COLOR_PAIR(2) | A_BOLD);
	}
	if (top.drill_pid) {
		struct proc_rec *p = state_find(s->state, top.drill_pid);
		char comm[GM_COMM_LEN + 1] = "?";

		if (p)
			text_sanitize(comm, sizeof(comm), p->comm);
		snprintf(line, sizeof(line), "pid %d %s: call sites (Esc: back), sorted by %s%s%s%s",
			 top.drill_pid, comm, sort_title(), top.filter[0] ? "  filter: " : "",
			 top.filter, top.paused ? "  [paused]" : "");
	} else if (top.in_group) {
		snprintf(line, sizeof(line), "%s %s: processes (Esc: back), sorted by %s%s%s%s",
			 top.group_key[0] ? "container" : "host,", top.group_key[0] ? top.group_key
			 : "in no container", sort_title(), top.filter[0] ? "  filter: " : "",
			 top.filter, top.paused ? "  [paused]" : "");
	} else {
		snprintf(line, sizeof(line), "by %s, sorted by %s%s, interval %.1f s%s%s%s",
			 group_title(), sort_title(),
			 top.sort_reverse ? " (reversed)" : "", top.interval,
			 top.filter[0] ? "  filter: " : "", top.filter,
			 top.paused ? "  [paused]" : "");
	}
	mvaddnstr(y++, 0, line, cols - 1);
	n = layout(cols, ids, &spark_w, &name_w);
	format_header(ids, n, spark_w, name_w, line, sizeof(line));
	attron(A_REVERSE);
	mvaddnstr(y, 0, line, cols - 1);
	for (int x = (int)strlen(line); x < cols - 1; x++)
		mvaddch(y, x, ' ');
	attroff(A_REVERSE);
	y++;
	body = rows - y - 1;
	if (top.drill_pid && top.nrows)
		body -= detail_lines(rows);
	if (top.selected >= (int)top.nrows)
		top.selected = top.nrows ? (int)top.nrows - 1 : 0;
	if (top.selected < 0)
		top.selected = 0;
	if (top.selected < top.scroll)
		top.scroll = top.selected;
	if (body > 0 && top.selected >= top.scroll + body)
		top.scroll = top.selected - body + 1;
	for (int i = 0; i < body && top.scroll + i < (int)top.nrows; i++) {
		const struct row *r = &top.rows[top.scroll + i];

		format_row(s, r, ids, n, spark_w, name_w, line, sizeof(line));
		if (top.scroll + i == top.selected)
			attron(has_colors() ? COLOR_PAIR(1) : A_REVERSE);
		mvaddstr(y + i, 0, line);
		if (top.scroll + i == top.selected) {
			for (int x = getcurx(stdscr); x > 0 && x < cols - 1; x++)
				addch(' ');
			attroff(has_colors() ? COLOR_PAIR(1) : A_REVERSE);
		}
	}
	if (top.drill_pid && top.selected < (int)top.nrows)
		draw_frames(s, &top.rows[top.selected], y + (body > 0 ? body : 0), detail_lines(rows),
			    cols);
	if (top.typing)
		snprintf(line, sizeof(line), "filter: %s_", top.filter);
	else
		snprintf(line, sizeof(line), "h help  q quit  / filter  s c group  Enter details  "
			 "< > sort  space pause  +/- interval");
	mvaddnstr(rows - 1, 0, line, cols - 1);
	refresh();
}

static void quit(void)
{
	if (top.quit_sent)
		return;
	top.quit_sent = true;
	raise(SIGTERM);		/* the session's own way to stop: it ends the loop and cleans up */
}

static void sort_step(int dir)
{
	enum col_id ids[16];
	int spark_w, name_w, cur = -1, k = 0;
	size_t n = layout(COLS, ids, &spark_w, &name_w);
	char keys[16];

	for (size_t i = 0; i < n; i++)
		if (columns[ids[i]].key) {
			if (columns[ids[i]].key == top.sort_key)
				cur = k;
			keys[k++] = columns[ids[i]].key;
		}
	if (!k)
		return;
	cur = cur < 0 ? 0 : (cur + dir + k) % k;
	top.sort_key = keys[cur];
}

/* Returns whether the rows must be rebuilt now. */
static bool on_key(struct session *s, int ch)
{
	size_t len = strlen(top.filter);

	if (top.help) {
		top.help = false;
		return false;
	}
	if (top.typing) {
		if (ch == '\n' || ch == KEY_ENTER) {
			top.typing = false;
		} else if (ch == 27) {
			top.typing = false;
			top.filter[0] = 0;
		} else if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && len) {
			top.filter[len - 1] = 0;
		} else if (ch >= 32 && ch < 127 && len + 1 < sizeof(top.filter)) {
			top.filter[len] = (char)ch;
			top.filter[len + 1] = 0;
		} else {
			return false;
		}
		return true;
	}
	switch (ch) {
	case 'q':
		quit();
		return false;
	case 'h':
	case '?':
		top.help = true;
		return false;
	case ' ':
		top.paused = !top.paused;
		return false;
	case '+':
	case '=':
		top.interval = top.interval * 2 > 60 ? 60 : top.interval * 2;
		return false;
	case '-':
		top.interval = top.interval / 2 < 0.25 ? 0.25 : top.interval / 2;
		return false;
	case '/':
		top.typing = true;
		top.filter[0] = 0;
		return true;
	case 's':
	case 'g':
		top.group = top.group == GROUP_SITE ? GROUP_PROCESS : GROUP_SITE;
		top.selected = top.scroll = 0;
		return true;
	case 'c':
		top.group = (top.group + 1) % (GROUP_CONTAINER + 1);
		top.drill_pid = 0;
		top.in_group = false;
		top.selected = top.scroll = 0;
		return true;
	case '\n':
	case KEY_ENTER:
	case KEY_RIGHT:
		if (top.group == GROUP_CONTAINER && !top.drill_pid &&
		    top.selected < (int)top.nrows) {
			snprintf(top.group_key, sizeof(top.group_key), "%s",
				 top.rows[top.selected].key);
			top.in_group = true;
			top.group = GROUP_PROCESS;
			top.selected = top.scroll = 0;
		} else if (!top.drill_pid && top.selected < (int)top.nrows) {
			top.drill_pid = top.rows[top.selected].p->pid;
			top.selected = top.scroll = 0;
			refresh_model(s);
		}
		return true;
	case 27:
	case KEY_LEFT:
	case KEY_BACKSPACE:
		if (top.drill_pid) {
			top.drill_pid = 0;
		} else if (top.in_group) {
			top.in_group = false;
			top.group = GROUP_CONTAINER;
		}
		top.selected = top.scroll = 0;
		return true;
	case KEY_UP:
		top.selected--;
		return false;
	case KEY_DOWN:
		top.selected++;
		return false;
	case KEY_PPAGE:
		top.selected -= LINES - 6;
		return false;
	case KEY_NPAGE:
		top.selected += LINES - 6;
		return false;
	case KEY_HOME:
		top.selected = 0;
		return false;
	case KEY_END:
		top.selected = (int)top.nrows - 1;
		return false;
	case '<':
		sort_step(-1);
		return true;
	case '>':
		sort_step(1);
		return true;
	case 'r':
		top.sort_reverse = !top.sort_reverse;
		return true;
	case KEY_RESIZE:
		return false;
	default:
		if (strchr("PUCMKLAFGXON", ch) && ch) {
			top.sort_key = (char)ch;
			return true;
		}
		return false;
	}
}

/* ---- the view ---- */

static bool batch_mode(struct session *s)
{
	return s->opt->batch || s->opt->json || s->out != stdout || !isatty(STDOUT_FILENO) ||
	       !isatty(STDIN_FILENO);
}

static void start(struct session *s)
{
	top.started = true;
	top.hist = history_new();
	top.interval = s->opt->interval_s > 0 ? s->opt->interval_s : TOP_DEFAULT_S;
	top.sort_key = 'M';
	top.group = s->opt->group;
	top.next_refresh = now_ns();
	if (!batch_mode(s))
		screen_start();
}

static void top_tick(struct session *s)
{
	uint64_t now = now_ns();
	bool dirty = false;
	int ch;

	if (!top.started)
		start(s);
	if (top.curses) {
		while ((ch = getch()) != ERR) {
			if (on_key(s, ch))
				build_rows(s);
			dirty = true;
		}
	}
	if (now >= top.next_refresh && !top.paused) {
		if (s->opt->iterations && top.refreshes >= s->opt->iterations) {
			quit();
			return;
		}
		refresh_model(s);
		top.next_refresh = now + (uint64_t)(top.interval * 1e9);
		if (!top.curses)
			batch_print(s);
		dirty = true;
		if (s->opt->iterations && top.refreshes >= s->opt->iterations)
			quit();
	}
	if (top.curses && dirty)
		draw(s);
}

static int top_finish(struct session *s)
{
	int err = 0;

	screen_end();
	/* CMD ended before the refreshes asked for: its last numbers, once. */
	if (top.started && !top.quit_sent && s->opt->cmd_argv && batch_mode(s)) {
		refresh_model(s);
		batch_print(s);
	}
	history_free(top.hist);
	free(top.rows);
	free(top.peaks);
	memset(&top, 0, sizeof(top));
	nvml_close();
	return err;
}

const struct view_ops top_view = {
	.name = "top",
	.tick = top_tick,
	.finish = top_finish,
	.tick_s = TOP_TICK_S,
};
