// SPDX-License-Identifier: GPL-2.0
/* Reading a recording: the file and its span, the filter, processes as the processes table
 * names them, stacks named from the frames table (each loaded once), and the events. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "recording/reader_int.h"
#include "recording/schema.h"

int rec_prepare(struct recording *r, sqlite3_stmt **st, const char *sql)
{
	if (sqlite3_prepare_v2(r->db, sql, -1, st, NULL) == SQLITE_OK)
		return 0;
	recdb_error(r->db, "read", r->path);
	return -EIO;
}

uint64_t rec_query_u64(struct recording *r, const char *sql, uint64_t arg, uint64_t deflt)
{
	sqlite3_stmt *st;
	uint64_t v = deflt;

	if (rec_prepare(r, &st, sql))
		return deflt;
	sqlite3_bind_int64(st, 1, (int64_t)arg);
	/* Only a whole number: text where a time belongs (an edited file) is no time; read as 0,
	 * it made every replayed sample read the state again (7,000 samples a second). */
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER)
		v = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* A time as SQLite holds it: recordings' times are below 2^63. */
static int64_t sql_time(uint64_t t)
{
	return t > INT64_MAX ? INT64_MAX : (int64_t)t;
}

int rec_bind_event_ids(struct recording *r, sqlite3_stmt *st, int param, uint64_t since,
		       uint64_t until)
{
	int64_t lo = 1, hi = 0;
	sqlite3_stmt *q;
	int rc;

	if (rec_prepare(r, &q, "SELECT min(first_id), max(last_id) FROM event_spans WHERE"
			" max_time_ns >= ?1 AND min_time_ns <= ?2"))
		return -EIO;
	sqlite3_bind_int64(q, 1, sql_time(since));
	sqlite3_bind_int64(q, 2, sql_time(until));
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) {
		lo = sqlite3_column_int64(q, 0);
		hi = sqlite3_column_int64(q, 1);
	}
	if (rc != SQLITE_ROW)	/* interrupted, or a damaged file: not "no events" */
		recdb_error(r->db, "read", r->path);
	sqlite3_finalize(q);
	sqlite3_bind_int64(st, param, lo);
	sqlite3_bind_int64(st, param + 1, hi);
	return rc == SQLITE_ROW ? 0 : -EIO;
}

static void read_span(struct recording *r)
{
	uint64_t cut = rec_query_u64(r, "SELECT value FROM meta WHERE key = 'retained_from_ns'",
				     0, 0);
	uint64_t ends[3] = {
		rec_query_u64(r, "SELECT max(time_ns) FROM samples", 0, 0),
		rec_query_u64(r, "SELECT max(max_time_ns) FROM event_spans", 0, 0),
		rec_query_u64(r, "SELECT max(end_ns) FROM sessions", 0, 0),
	};

	r->start_ns = rec_query_u64(r, "SELECT min(start_ns) FROM sessions", 0, 0);
	if (cut > r->start_ns)
		r->start_ns = cut;
	r->end_ns = r->start_ns;
	for (size_t i = 0; i < ARRAY_SIZE(ends); i++)
		if (ends[i] > r->end_ns)
			r->end_ns = ends[i];
}

int recording_open(const char *path, struct recording **out)
{
	struct recording *r = xcalloc(1, sizeof(*r));
	int err = recdb_open_read(path, &r->db);

	r->path = xstrdup(path);
	if (!err && !rec_query_u64(r, "SELECT count(*) FROM sessions", 0, 0)) {
		p_err("%s is an empty recording (no session was ever started in it)", path);
		err = -ENODATA;
	}
	if (err) {
		recording_close(r);
		return err;
	}
	read_span(r);
	*out = r;
	return 0;
}

static void ident_free(struct rec_ident *id)
{
	free(id->cmdline);
	free(id->cgroup);
	free(id->user);
	free(id);
}

void recording_close(struct recording *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->stacks.cap; i++)
		if (r->stacks.slots[i].k1)
			snap_stack_put((struct snap_stack *)(uintptr_t)r->stacks.slots[i].v);
	for (size_t i = 0; i < r->idents.cap; i++)
		if (r->idents.slots[i].k1)
			ident_free((struct rec_ident *)(uintptr_t)r->idents.slots[i].v);
	idmap_free(&r->stacks);
	idmap_free(&r->idents);
	sqlite3_close(r->db);
	free(r->path);
	free(r);
}

void recording_set_filter(struct recording *r, const struct rec_filter *f)
{
	r->filter = f;
}

void recording_span(const struct recording *r, uint64_t *start_ns, uint64_t *end_ns)
{
	*start_ns = r->start_ns;
	*end_ns = r->end_ns;
}

/* The newest session started by t (else the first) says. */
static uint64_t session_value(struct recording *r, const char *column, uint64_t t)
{
	char at[160], first[128];
	uint64_t v;

	snprintf(at, sizeof(at), "SELECT %s FROM sessions WHERE start_ns <= ?1 ORDER BY start_ns"
		 " DESC LIMIT 1", column);
	snprintf(first, sizeof(first), "SELECT %s FROM sessions ORDER BY start_ns LIMIT 1", column);
	v = rec_query_u64(r, at, t, 0);
	return v ? v : rec_query_u64(r, first, 0, 0);
}

double recording_sample_interval(struct recording *r, uint64_t t)
{
	return session_value(r, "sample_interval_ns", t) / 1e9;
}

bool recording_exact_at(struct recording *r, uint64_t t)
{
	return session_value(r, "sample_events", t) <= 1;
}

static bool selection_passes(const struct selection *sel, const struct container_info *ci)
{
	if (!strcmp(sel->kind, "pod"))
		return ci->has_pod && !strcasecmp(ci->pod_uid, sel->value);
	if (!strcmp(sel->kind, "container"))
		return container_id_matches(ci, sel->value);
	return false;
}

bool rec_filter_passes(const struct recording *r, const struct rec_ident *id)
{
	const struct rec_filter *f = r->filter;
	bool pid_ok, sel_ok;

	if (!f)
		return true;
	pid_ok = !f->npids;
	for (size_t i = 0; i < f->npids && !pid_ok; i++)
		pid_ok = f->pids[i] == id->pid;
	sel_ok = !f->nsel;
	for (size_t i = 0; i < f->nsel && !sel_ok; i++)
		sel_ok = selection_passes(&f->sel[i], &id->container);
	return pid_ok && sel_ok;
}

static const char *col_text(sqlite3_stmt *st, int col)
{
	return (const char *)sqlite3_column_text(st, col);
}

static void copy_text(char *dst, size_t len, sqlite3_stmt *st, int col)
{
	const char *s = col_text(st, col);

	snprintf(dst, len, "%s", s ? s : "");
}

/* A string of a recording, cut at REC_TEXT_MAX bytes as live ones are: the file is untrusted
 * input, and a name a megabyte long would be printed at every row that shows it. */
static char *dup_col(sqlite3_stmt *st, int col, unsigned int bit, unsigned int *valid)
{
	const char *s = col_text(st, col);

	if (!s)
		return NULL;
	*valid |= bit;
	return xstrndup(s, REC_TEXT_MAX);
}

/* The columns of the processes table a reader needs, in the order ident_from_row reads. */
#define IDENT_COLUMNS "id, pid, ns_pid, comm, cmdline, cgroup, user, container_runtime," \
	" container, pod, pod_qos, pod_name, pod_namespace, container_name, start_ns," \
	" end_ns, exit_code"

static struct rec_ident *ident_from_row(sqlite3_stmt *st)
{
	struct rec_ident *id = xcalloc(1, sizeof(*id));
	struct container_info *ci = &id->container;

	id->id = (uint64_t)sqlite3_column_int64(st, 0);
	id->pid = sqlite3_column_int(st, 1);
	if (sqlite3_column_type(st, 2) != SQLITE_NULL) {
		id->ns_pid = sqlite3_column_int(st, 2);
		id->valid |= SP_NS_PID;
	}
	if (col_text(st, 3)) {
		copy_text(id->comm, sizeof(id->comm), st, 3);
		id->valid |= SP_COMM;
	}
	id->cmdline = dup_col(st, 4, SP_CMDLINE, &id->valid);
	id->cgroup = dup_col(st, 5, SP_CGROUP, &id->valid);
	id->user = dup_col(st, 6, SP_USER, &id->valid);
	copy_text(ci->runtime, sizeof(ci->runtime), st, 7);
	copy_text(ci->id, sizeof(ci->id), st, 8);
	copy_text(ci->pod_uid, sizeof(ci->pod_uid), st, 9);
	copy_text(ci->qos, sizeof(ci->qos), st, 10);
	copy_text(ci->pod_name, sizeof(ci->pod_name), st, 11);
	copy_text(ci->pod_namespace, sizeof(ci->pod_namespace), st, 12);
	copy_text(ci->container_name, sizeof(ci->container_name), st, 13);
	ci->has_id = ci->id[0];
	ci->has_pod = ci->pod_uid[0];
	id->start_ns = (uint64_t)sqlite3_column_int64(st, 14);
	id->end_ns = (uint64_t)sqlite3_column_int64(st, 15);
	id->has_exit = sqlite3_column_type(st, 16) != SQLITE_NULL;
	id->exit_code = sqlite3_column_int(st, 16);
	return id;
}

/* The process of a row, kept for the recording's life (NULL: no such row). */
static struct rec_ident *ident_keep(struct recording *r, sqlite3_stmt *st)
{
	uint64_t row = (uint64_t)sqlite3_column_int64(st, 0);
	struct idmap_slot *s = idmap_find(&r->idents, row, 0);
	struct rec_ident *id;

	if (s)
		return (struct rec_ident *)(uintptr_t)s->v;
	id = ident_from_row(st);
	idmap_put(&r->idents, row, 0, (uintptr_t)id, 0);
	return id;
}

struct rec_ident *rec_ident_of(struct recording *r, uint64_t process_id)
{
	struct idmap_slot *s = idmap_find(&r->idents, process_id, 0);
	struct rec_ident *id = NULL;
	sqlite3_stmt *st;

	if (s)
		return (struct rec_ident *)(uintptr_t)s->v;
	if (rec_prepare(r, &st, "SELECT " IDENT_COLUMNS " FROM processes WHERE id = ?1"))
		return NULL;
	sqlite3_bind_int64(st, 1, (int64_t)process_id);
	if (sqlite3_step(st) == SQLITE_ROW)
		id = ident_keep(r, st);
	sqlite3_finalize(st);
	return id;
}

/* Every process that lived at some point of [since, at], kept; returns how many, or -1. */
ssize_t rec_idents_between(struct recording *r, uint64_t since, uint64_t at,
			   struct rec_ident ***out)
{
	struct rec_ident **v = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st;

	if (rec_prepare(r, &st, "SELECT " IDENT_COLUMNS " FROM processes WHERE start_ns <= ?2"
			" AND (end_ns IS NULL OR end_ns >= ?1) ORDER BY id"))
		return -1;
	sqlite3_bind_int64(st, 1, (int64_t)since);
	sqlite3_bind_int64(st, 2, (int64_t)at);
	while (sqlite3_step(st) == SQLITE_ROW) {
		struct rec_ident *id = ident_keep(r, st);

		if (!rec_filter_passes(r, id))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[n++] = id;
	}
	sqlite3_finalize(st);
	*out = v;
	return (ssize_t)n;
}

/* One allocation holds the stack, its frames and their strings: snap_stack_put frees it. */
static struct snap_stack *stack_build(sqlite3_stmt *st, uint32_t n, size_t text)
{
	size_t head = sizeof(struct snap_stack) + n * sizeof(struct snap_frame);
	struct snap_stack *s = xcalloc(1, head + text);
	char *pool = (char *)s + head, *pool_end = pool + text;
	uint32_t i = 0;

	s->refs = 1;
	while (i < n && sqlite3_step(st) == SQLITE_ROW) {
		struct snap_frame *f = &s->frames[i++];
		const char **strs[3] = { &f->module, &f->symbol, &f->file };
		const int cols[3] = { 1, 2, 5 };

		f->addr = (uint64_t)sqlite3_column_int64(st, 0);
		f->offset = (uint64_t)sqlite3_column_int64(st, 3);
		f->symbol_offset = (uint64_t)sqlite3_column_int64(st, 4);
		f->line = (uint32_t)sqlite3_column_int(st, 6);
		f->inlined = sqlite3_column_int(st, 7);
		f->python = sqlite3_column_int(st, 8);
		for (int k = 0; k < 3; k++) {
			const char *t = col_text(st, cols[k]);
			size_t len = t ? strnlen(t, REC_TEXT_MAX) : 0;

			/* The rows were counted by a first pass: a file that changed since gets
			 * what still fits, never more. */
			if (!t || len + 1 > (size_t)(pool_end - pool))
				continue;
			memcpy(pool, t, len);
			pool[len] = '\0';
			*strs[k] = pool;
			pool += len + 1;
		}
	}
	s->nframes = i;
	return s;
}

static struct snap_stack *stack_load(struct recording *r, uint64_t row)
{
	static const char sql[] = "SELECT addr, module, symbol, offset, symbol_offset, file, line,"
				  " inlined, python FROM frames WHERE stack_id = ?1 ORDER BY idx";
	sqlite3_stmt *st;
	size_t text = 0;
	uint32_t n = 0;
	struct snap_stack *s;

	if (rec_prepare(r, &st, sql))
		return NULL;
	sqlite3_bind_int64(st, 1, (int64_t)row);
	while (n < REC_MAX_FRAMES && sqlite3_step(st) == SQLITE_ROW) {
		for (int k = 1; k <= 5; k += k == 2 ? 3 : 1) {	/* module, symbol, file */
			size_t b = (size_t)sqlite3_column_bytes(st, k);

			text += (b < REC_TEXT_MAX ? b : REC_TEXT_MAX) + 1;
		}
		n++;
	}
	sqlite3_reset(st);
	s = n ? stack_build(st, n, text) : NULL;
	sqlite3_finalize(st);
	return s;
}

struct snap_stack *rec_stack_of(struct recording *r, uint64_t row)
{
	struct idmap_slot *slot;
	struct snap_stack *s;

	if (!row)
		return NULL;
	slot = idmap_find(&r->stacks, row, 0);
	if (slot)
		return (struct snap_stack *)(uintptr_t)slot->v;
	s = stack_load(r, row);
	if (s)
		idmap_put(&r->stacks, row, 0, (uintptr_t)s, 0);
	return s;
}
