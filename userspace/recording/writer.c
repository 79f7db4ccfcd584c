// SPDX-License-Identifier: GPL-2.0
/* The recorder's life: open the file and start a session, write each event as it comes (one
 * prepared INSERT), commit at least twice a second, end the session. A write error (a full
 * disk, a locked file) is printed once and stops the recording; the run then ends with it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/util.h"
#include "output/report.h"
#include "recording/schema.h"
#include "recording/writer_int.h"

#define COMMIT_NS 500000000ull	/* a kill loses at most this much (and what the ring held) */
#define CLOCK_EVERY 256		/* events between looks at the clock */

/* An event's row of parameters, and REC_EVENT_BATCH of them. */
#define EVENT_ROW "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
#define EVENT_ROWS_2 EVENT_ROW ", " EVENT_ROW
#define EVENT_ROWS_4 EVENT_ROWS_2 ", " EVENT_ROWS_2
#define EVENT_ROWS_8 EVENT_ROWS_4 ", " EVENT_ROWS_4
#define EVENT_ROWS_16 EVENT_ROWS_8 ", " EVENT_ROWS_8
_Static_assert(REC_EVENT_BATCH == 16, "EVENT_ROWS_16 is the batch's insert");

static const char *const stmt_sql[ST_COUNT] = {
	[ST_EVENT] = "INSERT INTO events VALUES " EVENT_ROW,
	[ST_EVENTS] = "INSERT INTO events VALUES " EVENT_ROWS_16,
	[ST_PROC_NEW] = "INSERT INTO processes (id, session_id, pid, comm, start_ns)"
			" VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_PROC_IDENTITY] = "UPDATE processes SET serial = ?2, ns_pid = ?3, comm = ?4,"
			     " cmdline = ?5, cgroup = ?6, user = ?7, container_runtime = ?8,"
			     " container = ?9, pod = ?10, pod_qos = ?11, pod_name = ?12,"
			     " pod_namespace = ?13, container_name = ?14 WHERE id = ?1",
	[ST_PROC_END] = "UPDATE processes SET end_ns = ?2, exit_code = ?3 WHERE id = ?1",
	[ST_SITE_NEW] = "INSERT INTO sites VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	[ST_SITE_STACK] = "UPDATE sites SET stack_id = ?2 WHERE id = ?1",
	[ST_STACK_FIND] = "SELECT id FROM stacks WHERE hash = ?1 AND nframes = ?2",
	[ST_STACK_NEW] = "INSERT INTO stacks VALUES (?1, ?2, ?3, ?4)",
	[ST_FRAME_NEW] = "INSERT INTO frames VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
			 " ?11)",
	[ST_STACK_TOUCH] = "UPDATE stacks SET last_used_ns = ?2 WHERE id = ?1",
	[ST_TICK] = "INSERT OR IGNORE INTO samples VALUES (?1, ?2)",
	[ST_PROC_SAMPLE] = "INSERT OR REPLACE INTO process_samples VALUES (?1, ?2, ?3, ?4, ?5,"
			   " ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
	[ST_SITE_SAMPLE] = "INSERT OR REPLACE INTO site_samples VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
			   " ?7, ?8)",
	[ST_LOSS] = "INSERT OR REPLACE INTO losses VALUES (?1, ?2, ?3)",
	[ST_TRACER_STAT] = "INSERT OR REPLACE INTO tracer_stats VALUES (?1, ?2, ?3)",
	[ST_SPAN] = "INSERT OR REPLACE INTO event_spans VALUES (?1, ?2, ?3, ?4)",
};

void rec_fail(struct recorder *r, const char *what)
{
	if (r->err)
		return;
	r->err = sqlite3_errcode(r->db);
	if (!r->err)
		r->err = SQLITE_ERROR;
	if ((r->err & 0xff) == SQLITE_BUSY)
		p_err("cannot %s the recording %s: another process holds it (database is locked)",
		      what, r->path);
	else
		p_err("cannot %s the recording %s: %s", what, r->path, sqlite3_errmsg(r->db));
}

bool rec_step(struct recorder *r, enum rec_stmt which)
{
	sqlite3_stmt *st = r->st[which];
	int rc = sqlite3_step(st);

	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		rec_fail(r, "write");
		sqlite3_reset(st);
		return false;
	}
	sqlite3_reset(st);
	return true;
}

void rec_bind_text(sqlite3_stmt *st, int col, const char *s)
{
	if (s && s[0])
		sqlite3_bind_text(st, col, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, col);
}

static int exec_or_fail(struct recorder *r, const char *sql, const char *what)
{
	if (recdb_exec(r->db, sql) == SQLITE_OK)
		return 0;
	rec_fail(r, what);
	return -EIO;
}

/* Commits the batch and begins the next one. */
static int commit(struct recorder *r, bool begin_next)
{
	rec_events_settle(r);
	if (r->err)
		return -EIO;
	if (r->in_txn && exec_or_fail(r, "COMMIT", "write"))
		return -EIO;
	r->in_txn = false;
	r->last_commit_ns = now_ns();
	if (begin_next && exec_or_fail(r, "BEGIN IMMEDIATE", "write"))
		return -EIO;
	r->in_txn = begin_next;
	return 0;
}

/* One past the largest of column in table (each a rowid, or a table of few rows). */
static uint64_t next_id_of(struct recorder *r, const char *column, const char *table)
{
	char sql[96];
	sqlite3_stmt *st;
	uint64_t id = 1;

	snprintf(sql, sizeof(sql), "SELECT coalesce(max(%s), 0) + 1 FROM %s", column, table);
	if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		id = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return id;
}

static uint64_t next_id(struct recorder *r, const char *table)
{
	return next_id_of(r, "id", table);
}

/* An appended recording: what an earlier session left open (its agent was killed) ends at the
 * last thing it wrote, a sample or an event (the events of the file's last session are the
 * file's last; a session closed after its events would make the peaks of its rows replay
 * events of no process). */
static int close_old_sessions(struct recorder *r)
{
	return exec_or_fail(r,
		"UPDATE sessions SET end_ns = max(start_ns, coalesce((SELECT max(time_ns) FROM"
		" samples WHERE session_id = sessions.id), start_ns),"
		" CASE WHEN id = (SELECT max(id) FROM sessions) THEN coalesce((SELECT"
		" max(max_time_ns) FROM event_spans), start_ns) ELSE start_ns END)"
		" WHERE end_ns IS NULL;"
		"UPDATE processes SET end_ns = (SELECT end_ns FROM sessions WHERE sessions.id ="
		" processes.session_id) WHERE end_ns IS NULL;", "open");
}

static int start_session(struct recorder *r)
{
	char host[256] = "";
	sqlite3_stmt *st;
	int rc;

	gethostname(host, sizeof(host) - 1);
	rc = sqlite3_prepare_v2(r->db, "INSERT INTO sessions (start_ns, command, gpumem_pid,"
				" gpumem_version, hostname, sample_interval_ns, sample_events,"
				" retention_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, (int64_t)realtime_ns());
		rec_bind_text(st, 2, r->command);
		sqlite3_bind_int(st, 3, (int)getpid());
		sqlite3_bind_text(st, 4, GPUMEM_VERSION, -1, SQLITE_STATIC);
		rec_bind_text(st, 5, host);
		sqlite3_bind_int64(st, 6, (int64_t)(r->opt.sample_interval_s * 1e9));
		sqlite3_bind_int64(st, 7, r->opt.sample_events > 1 ? r->opt.sample_events : 1);
		sqlite3_bind_int64(st, 8, (int64_t)(r->opt.retention_s * 1e9));
		rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK) {
		rec_fail(r, "start a session in");
		return -EIO;
	}
	r->session_id = (uint64_t)sqlite3_last_insert_rowid(r->db);
	return 0;
}

/* Each counter's last row in table (the value at the file's end), by loss index; prefix:
 * before the loss's name in that table. */
static int last_counts(struct recorder *r, const char *table, const char *prefix,
		       uint64_t *out)
{
	size_t n = loss_count(), plen = strlen(prefix);
	char sql[128];
	sqlite3_stmt *st;
	int rc;

	snprintf(sql, sizeof(sql), "SELECT name, value, max(time_ns) FROM %s GROUP BY name", table);
	if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK) {
		rec_fail(r, "read the losses of");
		return -EIO;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		int64_t v = sqlite3_column_int64(st, 1);

		if (!name || v <= 0 || strncmp(name, prefix, plen))
			continue;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(name + plen, loss_name(i)))
				out[i] = (uint64_t)v;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {	/* a total half read would go backwards */
		rec_fail(r, "read the losses of");
		return -EIO;
	}
	return 0;
}

/* What the file's sessions counted of each loss so far (its last row: every row is the
 * recording's total), added to what this session counts: its counters begin at zero. An
 * agent's kernel counters are its pins': what a session before counted of these very pins
 * (their last kernel.PINS.NAME row) is in the total already, and taken off here. Pins made
 * anew since (serve --reset) have rows of their own, or none: nothing is taken off. */
static int losses_before(struct recorder *r)
{
	size_t n = loss_count();
	uint64_t *counted;
	char prefix[64];
	int err;

	r->loss_before = xcalloc(n ? n : 1, sizeof(*r->loss_before));
	err = last_counts(r, "losses", "", r->loss_before);
	if (err || !r->opt.pins_id)
		return err;
	counted = xcalloc(n ? n : 1, sizeof(*counted));
	rec_kernel_prefix(prefix, sizeof(prefix), r->opt.pins_id);
	err = last_counts(r, "tracer_stats", prefix, counted);
	for (size_t i = 0; i < n && !err; i++)
		if (loss_is_kernel(i))
			r->loss_before[i] -= counted[i] < r->loss_before[i] ? counted[i]
									 : r->loss_before[i];
	free(counted);
	return err;
}

static int prepare_all(struct recorder *r)
{
	for (int i = 0; i < ST_COUNT; i++) {
		if (sqlite3_prepare_v3(r->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &r->st[i],
				       NULL) != SQLITE_OK) {
			rec_fail(r, "prepare");
			return -EIO;
		}
	}
	return 0;
}

int recorder_open(const struct recorder_opts *o, struct recorder **out)
{
	struct recorder *r = xcalloc(1, sizeof(*r));
	int err = recdb_open_write(o->path, o->replace, &r->db);

	r->opt = *o;
	for (size_t i = 0; i < REC_EVENT_BATCH; i++)
		r->held[i].null_mask = REC_ROW_ALL_NULL;
	r->held_one.null_mask = REC_ROW_ALL_NULL;
	r->path = xstrdup(o->path);
	r->command = o->command ? xstrdup(o->command) : NULL;
	r->opt.path = r->path;
	r->opt.command = r->command;
	if (!err)
		err = prepare_all(r);
	if (!err)
		err = commit(r, true);
	if (!err)
		err = close_old_sessions(r);
	if (!err)
		err = losses_before(r);
	if (!err)
		err = start_session(r);
	if (!err) {
		/* Past every span's too (retention may have deleted a span's last events). */
		uint64_t past_spans = next_id_of(r, "last_id", "event_spans");

		r->next_event_id = next_id(r, "events");
		if (past_spans > r->next_event_id)
			r->next_event_id = past_spans;
		r->next_proc_id = next_id(r, "processes");
		r->next_site_id = next_id(r, "sites");
		r->next_stack_id = next_id(r, "stacks");
		err = commit(r, true);	/* the session row is there even if killed at once */
	}
	if (err) {
		r->err = r->err ? r->err : SQLITE_ERROR;
		recorder_close(r);
		return err;
	}
	*out = r;
	return 0;
}

/* 1 in N by the address (and pid), so an allocation and its free are kept together. */
static bool sampled_out(const struct recorder *r, const struct gm_call_event *e)
{
	uint64_t h = e->addr ^ ((uint64_t)e->pid << 48);

	if (r->opt.sample_events <= 1 || e->type == RECDB_EV_ALLOC_FAILED ||
	    e->type == RECDB_EV_PROCESS_EXIT)
		return false;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h % r->opt.sample_events != 0;
}

/* The live map's key: the process row and the address space (VMM handles, mappings and
 * reservations of one address, imports and PyTorch's tensors, which lie inside the segments,
 * apart: the kind stands for the space). forget() reads the row back (REC_LIVE_SPACE_BITS). */
static uint64_t live_key(const struct rec_proc *p, const struct gm_call_event *e)
{
	uint64_t space = e->layer == GM_LAYER_TENSOR ? GM_KIND_COUNT
			 : e->kind < GM_KIND_COUNT  ? e->kind : 0;

	return p->id << REC_LIVE_SPACE_BITS | space;
}

/* What an event refers to beyond its own columns: its site, and a free's allocation. */
static void event_refs(struct recorder *r, struct rec_proc *p, const struct snap_event *se,
		       uint64_t id, uint64_t *site, uint64_t *alloc)
{
	const struct gm_call_event *e = se->ev;
	struct idmap_slot old;
	struct rec_site *s;

	*site = *alloc = 0;
	if (e->type == RECDB_EV_ALLOC || e->type == RECDB_EV_ALLOC_FAILED) {
		s = rec_site_of(r, p, se->stack_id, se->py_stack_id, e->api, e->kind,
				gm_site_gpu(e->kind, e->layer, (int32_t)e->gpu - 1), se->stack);
		*site = s ? s->id : 0;
	}
	if (e->type == RECDB_EV_ALLOC) {
		size_t before = r->live.n;

		idmap_put(&r->live, live_key(p, e), e->addr, id, *site);
		p->live += r->live.n - before;	/* an address seen live again replaces it */
	} else if (e->type == RECDB_EV_FREE && idmap_del(&r->live, live_key(p, e), e->addr, &old)) {
		*alloc = old.v;
		*site = old.v2;
		p->live--;
	}
}

/* Binds a waiting row's columns from parameter first on, those whose value differs from the
 * one the statement holds (held), which then holds the row. With auto_id its id goes in as
 * NULL: SQLite gives the row the table's largest id + 1, which is the id it was given (the row
 * before it in the insert has the largest, written explicitly), and SQLite then finds the
 * row's place with no search. An explicit id is searched for first, in case it exists: 15 of
 * a batch's 16 searches cut are 13% of SQLite's instructions a row (callgrind, the events
 * table alone). */
static void bind_event_row(sqlite3_stmt *st, int first, const struct rec_event_row *row,
			   struct rec_event_row *held, bool auto_id)
{
	uint32_t null_mask = row->null_mask | (auto_id ? 1u : 0u);

	for (int c = 0; c < REC_EVENT_COLS; c++) {
		bool null = null_mask & (1u << c);

		if (null == !!(held->null_mask & (1u << c)) && (null || row->v[c] == held->v[c]))
			continue;
		if (null)
			sqlite3_bind_null(st, first + c);
		else
			sqlite3_bind_int64(st, first + c, row->v[c]);
	}
	*held = *row;
	held->null_mask = null_mask;
}

/* The recording stops unless the rows just inserted took the ids they were given: a free's
 * alloc_id and the spans name rows by these ids. */
static void check_event_ids(struct recorder *r, const struct rec_event_row *last)
{
	int64_t got = sqlite3_last_insert_rowid(r->db);

	if (got == last->v[0] || r->err)
		return;
	r->err = SQLITE_INTERNAL;
	p_err("cannot write the recording %s: an event took id %lld, not %lld", r->path,
	      (long long)got, (long long)last->v[0]);
}

void rec_events_flush(struct recorder *r)
{
	size_t n = r->npending;

	r->npending = 0;
	if (r->err || !n)
		return;
	if (n == REC_EVENT_BATCH) {
		/* The ids are consecutive: the first row's given, the others SQLite's. */
		for (size_t i = 0; i < n; i++)
			bind_event_row(r->st[ST_EVENTS], 1 + (int)i * REC_EVENT_COLS,
				       &r->pending[i], &r->held[i], i > 0);
		if (rec_step(r, ST_EVENTS))
			check_event_ids(r, &r->pending[n - 1]);
		return;
	}
	for (size_t i = 0; i < n && !r->err; i++) {
		bind_event_row(r->st[ST_EVENT], 1, &r->pending[i], &r->held_one, false);
		rec_step(r, ST_EVENT);
	}
}

static void span_write(struct recorder *r)
{
	sqlite3_stmt *st = r->st[ST_SPAN];

	if (!r->span.unwritten || r->err)
		return;
	sqlite3_bind_int64(st, 1, (int64_t)r->span.first);
	sqlite3_bind_int64(st, 2, (int64_t)r->span.last);
	sqlite3_bind_int64(st, 3, (int64_t)r->span.min_ns);
	sqlite3_bind_int64(st, 4, (int64_t)r->span.max_ns);
	if (rec_step(r, ST_SPAN))
		r->span.unwritten = false;
}

void rec_events_settle(struct recorder *r)
{
	rec_events_flush(r);
	span_write(r);
}

/* Event id, of time t, joins the open span; a full one is written and closed. */
static void span_add(struct recorder *r, uint64_t id, uint64_t t)
{
	struct rec_span *s = &r->span;

	if (!s->first)
		*s = (struct rec_span){ .first = id, .min_ns = t, .max_ns = t };
	s->last = id;
	s->min_ns = t < s->min_ns ? t : s->min_ns;
	s->max_ns = t > s->max_ns ? t : s->max_ns;
	s->unwritten = true;
	if (id - s->first + 1 >= REC_SPAN_EVENTS) {
		span_write(r);
		s->first = 0;
	}
}

/* Column col (1-16) of row: v, or NULL. */
static void event_col(struct rec_event_row *row, int col, bool null, int64_t v)
{
	row->v[col - 1] = v;
	if (null)
		row->null_mask |= 1u << (col - 1);
}

static void write_event(struct recorder *r, struct rec_proc *p, const struct snap_event *se)
{
	const struct gm_call_event *e = se->ev;
	struct rec_event_row *row = &r->pending[r->npending];
	uint64_t id = r->next_event_id++, site, alloc, stack;
	bool exit = e->type == RECDB_EV_PROCESS_EXIT;
	/* A tensor event's or a failure's: what the process's tensors held after it (or at it). */
	bool tensor = !exit && (e->layer == GM_LAYER_TENSOR || e->type == RECDB_EV_ALLOC_FAILED);

	event_refs(r, p, se, id, &site, &alloc);
	stack = rec_stack_row(r, se->stack);
	row->null_mask = 0;
	event_col(row, 1, false, (int64_t)id);
	event_col(row, 2, false, (int64_t)se->wall_ns);
	event_col(row, 3, false, (int64_t)p->id);
	event_col(row, 4, false, e->type);
	event_col(row, 5, false, e->tid);
	event_col(row, 6, exit, e->api);
	event_col(row, 7, exit, e->layer);
	event_col(row, 8, exit || e->type == RECDB_EV_UNKNOWN_FREE, e->kind);
	event_col(row, 9, exit, (int64_t)e->addr);
	event_col(row, 10, exit, (int64_t)e->size);
	event_col(row, 11, false, e->error);
	event_col(row, 12, exit, (int64_t)e->process_bytes);
	event_col(row, 13, !stack, (int64_t)stack);
	event_col(row, 14, !site, (int64_t)site);
	event_col(row, 15, !alloc, (int64_t)alloc);
	event_col(row, 16, !tensor, (int64_t)e->tensor_bytes);
	span_add(r, id, se->wall_ns);
	if (++r->npending == REC_EVENT_BATCH)
		rec_events_flush(r);
}

int recorder_on_event(struct recorder *r, const struct snap_event *se)
{
	const struct gm_call_event *e = se->ev;
	struct rec_proc *p;

	if (r->err)
		return -EIO;
	if (sampled_out(r, e))
		return 0;
	p = rec_proc_of_event(r, e, se->wall_ns);
	if (p && !p->deleted)
		write_event(r, p, se);
	if (p && e->type == RECDB_EV_PROCESS_EXIT)
		rec_proc_close(r, p, se->wall_ns, true, e->error);
	if (++r->calls_since_clock >= CLOCK_EVERY) {
		r->calls_since_clock = 0;
		if (now_ns() - r->last_commit_ns >= COMMIT_NS)
			commit(r, true);
	}
	return r->err ? -EIO : 0;
}

int recorder_on_snapshot(struct recorder *r, const struct snapshot *snap)
{
	if (r->err)
		return -EIO;
	rec_write_samples(r, snap);
	rec_prune(r);
	return r->err ? -EIO : 0;
}

int recorder_tick(struct recorder *r)
{
	uint64_t now = now_ns();

	if (r->err)
		return -EIO;
	if (r->opt.retention_s > 0 && now >= r->next_retention_ns) {
		double every = r->opt.retention_s / 8;

		every = every < 1 ? 1 : every > 60 ? 60 : every;
		r->next_retention_ns = now + (uint64_t)(every * 1e9);
		rec_events_settle(r);	/* the events it may delete are in the file */
		rec_retention(r, realtime_ns());
		if (commit(r, false))
			return -EIO;
		/* The freed pages reach the file, and the WAL starts over: both stop growing. */
		sqlite3_wal_checkpoint_v2(r->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		return commit(r, true);
	}
	if (now - r->last_commit_ns >= COMMIT_NS)
		return commit(r, true);
	return 0;
}

bool recorder_failed(const struct recorder *r)
{
	return r->err != 0;
}

static void end_session(struct recorder *r)
{
	char sql[128];

	rec_stacks_flush(r, realtime_ns(), false);
	snprintf(sql, sizeof(sql), "UPDATE sessions SET end_ns = %lld WHERE id = %llu",
		 (long long)realtime_ns(), (unsigned long long)r->session_id);
	exec_or_fail(r, sql, "write");
}

int recorder_close(struct recorder *r)
{
	int err;

	if (!r)
		return 0;
	if (!r->err && r->session_id) {
		end_session(r);
		commit(r, false);
	}
	err = r->err ? -EIO : 0;
	rec_forget_all(r);
	for (int i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(r->st[i]);
	if (r->db && sqlite3_close(r->db) != SQLITE_OK && !err) {
		p_err("cannot close the recording %s: %s", r->path, sqlite3_errmsg(r->db));
		err = -EIO;
	}
	free(r->path);
	free(r->command);
	free(r->loss_last);
	free(r->loss_before);
	free(r);
	return err;
}
