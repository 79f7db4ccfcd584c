// SPDX-License-Identifier: GPL-2.0
/* The recording without BPF: TIME and DURATION parsing, the recorder's hash map, and a round
 * trip of synthetic snapshots and events through the recorder (export/sqlite.c) and back
 * through the reader (model/recording.c): states between samples, failures, process ends,
 * sampling by address, retention. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "analysis/history.h"
#include "recording/idmap.h"
#include "recording/rec_time.h"
#include "recording/reader.h"
#include "recording/writer.h"
#include "base/util.h"
#include "output/report.h"

#define SEC 1000000000ull

/* ---- TIME and DURATION ---- */

static void test_durations(void **state)
{
	double s;

	(void)state;
	assert_int_equal(rec_duration_parse("90s", &s), 0);
	assert_true(s == 90);
	assert_int_equal(rec_duration_parse("30m", &s), 0);
	assert_true(s == 1800);
	assert_int_equal(rec_duration_parse("1.5h", &s), 0);
	assert_true(s == 5400);
	assert_int_equal(rec_duration_parse("2d", &s), 0);
	assert_true(s == 172800);
	assert_int_equal(rec_duration_parse("250ms", &s), 0);
	assert_true(s == 0.25);
	assert_int_equal(rec_duration_parse("45", &s), 0);
	assert_true(s == 45);
	for (const char *const *bad = (const char *const[]){ "", "-1s", "1x", "inf", "nan", "s",
							     " 5s", "1e30s", NULL };
	     *bad; bad++)
		assert_int_not_equal(rec_duration_parse(*bad, &s), 0);
}

static void test_times_absolute_and_relative(void **state)
{
	struct rec_time t;
	uint64_t start = 1700000000ull * SEC, end = start + 3600 * SEC;

	(void)state;
	assert_int_equal(rec_time_parse("2023-11-14T22:13:20Z", &t), 0);
	assert_int_equal(t.kind, REC_TIME_ABSOLUTE);
	assert_true(t.ns == 1700000000ull * SEC);
	assert_int_equal(rec_time_parse("2023-11-14T23:13:20.5+01:00", &t), 0);
	assert_true(t.ns == 1700000000ull * SEC + SEC / 2);
	assert_int_equal(rec_time_parse("+30s", &t), 0);
	assert_true(rec_time_resolve(&t, start, end) == start + 30 * SEC);
	assert_int_equal(rec_time_parse("-10m", &t), 0);
	assert_true(rec_time_resolve(&t, start, end) == end - 600 * SEC);
	assert_int_equal(rec_time_parse("start", &t), 0);
	assert_true(rec_time_resolve(&t, start, end) == start);
	assert_int_equal(rec_time_parse("end", &t), 0);
	assert_true(rec_time_resolve(&t, start, end) == end);
	for (const char *const *bad = (const char *const[]){ "", "yesterday", "25:00", "12:60",
							     "2023-13-01 00:00", "+", "-5q",
							     "2023-01-01T00:00:00+25:00",
							     "2023-01-01X00:00", NULL };
	     *bad; bad++)
		assert_int_not_equal(rec_time_parse(*bad, &t), 0);
}

static void test_time_of_day_is_the_last_one_not_after_the_end(void **state)
{
	struct rec_time t;
	struct tm tm = { .tm_year = 123, .tm_mon = 10, .tm_mday = 14, .tm_hour = 10,
			 .tm_isdst = -1 };
	uint64_t end = (uint64_t)mktime(&tm) * SEC;	/* 10:00 local */
	uint64_t got;
	time_t secs;

	(void)state;
	assert_int_equal(rec_time_parse("09:30", &t), 0);
	assert_int_equal(t.kind, REC_TIME_OF_DAY);
	assert_true(rec_time_resolve(&t, end - 7200 * SEC, end) == end - 1800 * SEC);
	assert_int_equal(rec_time_parse("11:00:00.25", &t), 0);	/* later today: yesterday's */
	got = rec_time_resolve(&t, end - 86400 * SEC, end);
	secs = (time_t)(got / SEC);
	localtime_r(&secs, &tm);
	assert_int_equal(tm.tm_mday, 13);
	assert_int_equal(tm.tm_hour, 11);
	assert_true(got % SEC == SEC / 4);
	assert_int_equal(rec_time_parse("2023-11-14 09:30:00", &t), 0);	/* local too */
	assert_true(t.ns == end - 1800 * SEC);
}

/* ---- idmap ---- */

static void test_idmap_matches_a_plain_array_through_puts_and_deletes(void **state)
{
	enum { N = 5000 };
	static uint64_t ref[N];	/* 0: absent */
	struct idmap m = { 0 };
	uint64_t seed = 42;

	(void)state;
	for (int step = 0; step < 200000; step++) {
		uint64_t k, op;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		k = (seed >> 33) % N;
		op = (seed >> 20) % 3;
		if (op < 2) {
			idmap_put(&m, k + 1, k * 7, step + 1, k);
			ref[k] = (uint64_t)step + 1;
		} else {
			assert_int_equal(idmap_del(&m, k + 1, k * 7, NULL), ref[k] != 0);
			ref[k] = 0;
		}
	}
	for (uint64_t k = 0; k < N; k++) {
		struct idmap_slot *s = idmap_find(&m, k + 1, k * 7);

		assert_int_equal(s != NULL, ref[k] != 0);
		if (s)
			assert_true(s->v == ref[k] && s->v2 == k);
		assert_null(idmap_find(&m, k + 1, k * 7 + 1));
	}
	idmap_free(&m);
}

/* ---- a round trip through the recorder and the reader ---- */

struct rig {
	char dir[64], path[96];
	uint64_t wall0;		/* the wall-clock time of mono 0 */
	struct snap_stack *site_stack, *free_stack;
};

static struct snap_stack *make_stack(const char *fn, uint64_t addr)
{
	struct snap_stack *st = calloc(1, sizeof(*st) + 2 * sizeof(struct snap_frame));

	st->refs = 1;
	st->nframes = 2;
	st->frames[0] = (struct snap_frame){ .addr = addr, .offset = addr - 0x1000,
					     .symbol_offset = 4, .module = "/opt/train",
					     .symbol = fn, .file = "train.c", .line = 42 };
	st->frames[1] = (struct snap_frame){ .addr = addr + 0x100, .offset = addr - 0xf00,
					     .symbol_offset = 9, .module = "/opt/train",
					     .symbol = "main", .file = "train.c", .line = 7 };
	return st;
}

static int rig_setup(void **state)
{
	struct rig *g = calloc(1, sizeof(*g));

	snprintf(g->dir, sizeof(g->dir), "/tmp/gpumem-unit-rec-XXXXXX");
	assert_non_null(mkdtemp(g->dir));
	snprintf(g->path, sizeof(g->path), "%s/r.db", g->dir);
	g->wall0 = realtime_ns() + 60 * SEC;	/* after the session's start */
	g->site_stack = make_stack("alloc_activations", 0x401000);
	g->free_stack = make_stack("free_activations", 0x402000);
	*state = g;
	return 0;
}

static int rig_teardown(void **state)
{
	struct rig *g = *state;
	char cmd[128];

	snap_stack_put(g->site_stack);
	snap_stack_put(g->free_stack);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g->dir);
	assert_int_equal(system(cmd), 0);
	free(g);
	return 0;
}

/* One process (pid 4000, serial 1) with one site, at mono time t. */
struct fake {
	struct snapshot snap;
	struct snap_proc proc;
	struct snap_site site;
};

static void fake_at(struct rig *g, struct fake *f, uint64_t t, uint64_t held, uint64_t allocs,
		    uint64_t frees, uint64_t failed)
{
	memset(f, 0, sizeof(*f));
	f->snap = (struct snapshot){ .refs = 1, .time_ns = t, .mono_to_real_ns = g->wall0,
				     .procs = &f->proc, .nprocs = 1 };
	f->proc = (struct snap_proc){ .serial = 1, .pid = 4000, .alive = true, .end_ns = t,
				      .valid = SP_STATS | SP_COMM | SP_CMDLINE, .comm = "train",
				      .cmdline = "train --steps 3", .sites = &f->site,
				      .nsites = 1 };
	strcpy(f->proc.container.id,
	       "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
	strcpy(f->proc.container.runtime, "docker");
	f->proc.container.has_id = true;
	f->site = (struct snap_site){ .stack_id = 7, .api = 0, .kind = GM_KIND_DEVICE,
				      .stack = g->site_stack };
	f->site.st = (struct gm_site_stats){ .current_bytes = held, .current_allocs = held / 1000,
					     .alloc_count = allocs, .free_count = frees,
					     .alloc_bytes_total = allocs * 1000,
					     .failed_count = failed };
	f->proc.st = (struct gm_proc_stats){ .current_bytes = held, .current_allocs = held / 1000,
					     .peak_bytes = held, .alloc_count = allocs,
					     .free_count = frees,
					     .alloc_bytes_total = allocs * 1000,
					     .failed_count = failed, .first_seen_ns = t - SEC };
	f->proc.st.by_kind[GM_KIND_DEVICE] = held;
}

static void event(struct rig *g, struct recorder *r, __u32 type, uint64_t t, uint64_t addr,
		  uint64_t size, uint64_t process_bytes, int error)
{
	struct gm_call_event ev = { .type = type, .pid = 4000, .tid = 4001, .stack_id = 7,
				    .time_ns = t, .addr = addr, .size = size,
				    .process_bytes = process_bytes, .error = error,
				    .kind = GM_KIND_DEVICE, .comm = "train" };
	struct snap_event se = { .ev = &ev, .wall_ns = t + g->wall0, .stack_id = ev.stack_id,
				 .stack = type == GM_REC_FREE ? g->free_stack : g->site_stack };

	if (type == GM_REC_PROCESS_EXIT)
		se.stack = NULL;
	assert_int_equal(recorder_on_event(r, &se), 0);
}

/* Samples at 10 s, 11 s and 12 s; between them an allocation (10.5 s), its free (10.7 s), a
 * failure (10.8 s) and the process's end (11.5 s, exit code 3). */
static void write_recording(struct rig *g, uint32_t sample_events)
{
	struct recorder_opts o = { .path = g->path, .replace = true, .sample_interval_s = 1,
				   .sample_events = sample_events, .command = "record (unit)" };
	struct recorder *r;
	struct fake f;

	assert_int_equal(recorder_open(&o, &r), 0);
	fake_at(g, &f, 10 * SEC, 1000, 1, 0, 0);
	assert_int_equal(recorder_on_snapshot(r, &f.snap), 0);
	event(g, r, GM_REC_ALLOC, 10 * SEC + SEC / 2, 0x7e0000001000, 2000, 3000, 0);
	event(g, r, GM_REC_FREE, 10 * SEC + 7 * SEC / 10, 0x7e0000001000, 2000, 1000, 0);
	event(g, r, GM_REC_ALLOC_FAILED, 10 * SEC + 8 * SEC / 10, 0, 1ull << 30, 1000, 2);
	fake_at(g, &f, 11 * SEC, 1000, 2, 1, 1);
	assert_int_equal(recorder_on_snapshot(r, &f.snap), 0);
	event(g, r, GM_REC_PROCESS_EXIT, 11 * SEC + SEC / 2, 0, 0, 0, 3);
	fake_at(g, &f, 12 * SEC, 1000, 2, 1, 1);
	f.proc.alive = false;
	f.proc.end_ns = 11 * SEC + SEC / 2;
	f.proc.valid |= SP_EXIT_CODE;
	f.proc.exit_code = 3;
	assert_int_equal(recorder_on_snapshot(r, &f.snap), 0);
	assert_int_equal(recorder_close(r), 0);
}

static const struct snap_proc *only_proc(const struct snapshot *s)
{
	assert_int_equal(s->error, 0);
	assert_int_equal(s->nprocs, 1);
	return &s->procs[0];
}

static void test_states_between_samples_are_replayed_from_the_events(void **state)
{
	struct rig *g = *state;
	struct recording *rec;
	struct snapshot *s;
	const struct snap_proc *p;

	write_recording(g, 1);
	assert_int_equal(recording_open(g->path, &rec), 0);
	/* After the allocation, before the next sample. */
	s = recording_snapshot_at(rec, g->wall0 + 10 * SEC + 6 * SEC / 10);
	p = only_proc(s);
	assert_int_equal(p->st.current_bytes, 3000);
	assert_int_equal(p->st.peak_bytes, 3000);
	assert_int_equal(p->nsites, 1);
	assert_int_equal(p->sites[0].st.current_bytes, 3000);
	assert_int_equal(p->sites[0].st.alloc_count, 2);
	assert_string_equal(p->sites[0].stack->frames[0].symbol, "alloc_activations");
	assert_int_equal(p->sites[0].stack->frames[1].line, 7);
	assert_true(p->alive);
	snapshot_put(s);
	s = recording_snapshot_at(rec, g->wall0 + 10 * SEC + 9 * SEC / 10);	/* after the free */
	p = only_proc(s);
	assert_int_equal(p->st.current_bytes, 1000);
	assert_int_equal(p->st.failed_count, 1);
	assert_int_equal(p->sites[0].st.free_count, 1);
	assert_int_equal(p->sites[0].st.failed_count, 1);
	assert_int_equal(s->nfailures, 1);
	assert_true(s->failures[0].ev.size == 1ull << 30);
	assert_int_equal(s->failures[0].ev.process_bytes, 1000);
	assert_true(s->failures[0].has_container && s->failures[0].container.has_id);
	snapshot_put(s);
	s = recording_snapshot_at(rec, g->wall0 + 12 * SEC);
	p = only_proc(s);
	assert_false(p->alive);
	assert_true(p->valid & SP_EXIT_CODE);
	assert_int_equal(p->exit_code, 3);
	assert_string_equal(p->cmdline, "train --steps 3");
	assert_string_equal(p->container.runtime, "docker");
	snapshot_put(s);
	recording_close(rec);
}

struct counted {
	unsigned int n[8];
	uint64_t alloc_id, free_alloc_id;
	const struct snap_stack *alloc_site;
};

static int count_event(void *ctx, const struct snap_event *e, const struct rec_event_extra *x)
{
	struct counted *c = ctx;

	c->n[e->ev->type]++;
	if (e->ev->type == GM_REC_ALLOC)
		c->alloc_id = x->event_id;
	if (e->ev->type == GM_REC_FREE) {
		c->free_alloc_id = x->alloc_id;
		c->alloc_site = x->alloc_site;
		assert_string_equal(e->stack->frames[0].symbol, "free_activations");
	}
	return 0;
}

static void test_events_sites_and_history_read_back(void **state)
{
	struct rig *g = *state;
	struct counted c = { 0 };
	struct recording *rec;
	struct rec_sites sites;
	struct history *h = history_new();
	struct snapshot *s;
	uint64_t start, end;

	write_recording(g, 1);
	assert_int_equal(recording_open(g->path, &rec), 0);
	recording_span(rec, &start, &end);
	assert_true(end >= g->wall0 + 12 * SEC && start <= g->wall0 + 10 * SEC);
	assert_int_equal(recording_for_each_event(rec, start, end, 0, count_event, &c), 0);
	assert_int_equal(c.n[GM_REC_ALLOC], 1);
	assert_int_equal(c.n[GM_REC_FREE], 1);
	assert_int_equal(c.n[GM_REC_ALLOC_FAILED], 1);
	assert_int_equal(c.n[GM_REC_PROCESS_EXIT], 1);
	assert_true(c.free_alloc_id == c.alloc_id && c.alloc_id);
	assert_string_equal(c.alloc_site->frames[0].symbol, "alloc_activations");
	assert_int_equal(recording_sites(rec, start, end, &sites), 0);
	assert_int_equal(sites.n, 1);
	assert_true(sites.peaks_exact);
	assert_int_equal(sites.rows[0].peak_bytes, 3000);
	assert_int_equal(sites.rows[0].ss->st.alloc_count, 2);
	recording_sites_free(&sites);
	s = recording_history(rec, start, end, h);
	assert_int_equal(history_count(h), 2);	/* the process and its site */
	snapshot_put(s);
	history_free(h);
	recording_close(rec);
}

static void test_sampling_keeps_failures_and_ends(void **state)
{
	struct rig *g = *state;
	struct counted c = { 0 };
	struct recording *rec;
	uint64_t start, end;

	write_recording(g, 1000000);	/* the one allocation is all but surely dropped */
	assert_int_equal(recording_open(g->path, &rec), 0);
	recording_span(rec, &start, &end);
	assert_false(recording_exact_at(rec, end));
	assert_int_equal(recording_for_each_event(rec, start, end, 0, count_event, &c), 0);
	assert_int_equal(c.n[GM_REC_ALLOC] + c.n[GM_REC_FREE], c.n[GM_REC_ALLOC] * 2);
	assert_int_equal(c.n[GM_REC_ALLOC_FAILED], 1);
	assert_int_equal(c.n[GM_REC_PROCESS_EXIT], 1);
	recording_close(rec);
}

static void test_retention_deletes_what_is_old_and_keeps_each_series_last_value(void **state)
{
	struct rig *g = *state;
	struct recorder_opts o = { .path = g->path, .replace = true, .sample_interval_s = 1,
				   .retention_s = 30 };
	struct recording *rec;
	struct recorder *r;
	struct snapshot *s;
	struct fake f;
	uint64_t old = realtime_ns() - 100 * SEC - g->wall0;	/* mono times 100 s ago */

	assert_int_equal(recorder_open(&o, &r), 0);
	fake_at(g, &f, old, 1000, 1, 0, 0);
	assert_int_equal(recorder_on_snapshot(r, &f.snap), 0);
	event(g, r, GM_REC_ALLOC, old + SEC, 0x1000, 500, 1500, 0);
	assert_int_equal(recorder_tick(r), 0);	/* the first tick runs retention */
	event(g, r, GM_REC_ALLOC, old + 100 * SEC, 0x2000, 700, 2200, 0);
	assert_int_equal(recorder_close(r), 0);
	assert_int_equal(recording_open(g->path, &rec), 0);
	s = recording_snapshot_at(rec, realtime_ns());
	assert_int_equal(only_proc(s)->sites[0].st.current_bytes, 1700);	/* 1000 + 700 */
	snapshot_put(s);
	recording_close(rec);
}

static size_t loss_index(const char *name)
{
	for (size_t i = 0; i < loss_count(); i++)
		if (!strcmp(loss_name(i), name))
			return i;
	fail_msg("no loss named %s", name);
	return 0;
}

/* One session appended to the recording, on pins pins_id (0: counters made for it), its last
 * sample at mono time t with these counts of a kernel loss and of a userspace one. */
static void append_session(struct rig *g, uint64_t pins_id, uint64_t t, uint64_t kernel,
			   uint64_t user)
{
	struct recorder_opts o = { .path = g->path, .sample_interval_s = 1, .pins_id = pins_id,
				   .command = "serve (unit)" };
	struct recorder *r;
	struct fake f;

	assert_int_equal(recorder_open(&o, &r), 0);
	fake_at(g, &f, t, 1000, 1, 0, 0);
	loss_set(&f.snap, loss_index("alloc_map_full"), kernel);
	loss_set(&f.snap, loss_index("bad_records"), user);
	assert_int_equal(recorder_on_snapshot(r, &f.snap), 0);
	assert_int_equal(recorder_close(r), 0);
}

static uint64_t recorded_loss(struct rig *g, const char *name)
{
	struct recording *rec;
	struct snapshot *s;
	uint64_t v;

	assert_int_equal(recording_open(g->path, &rec), 0);
	s = recording_snapshot_at(rec, realtime_ns() + 3600 * SEC);
	assert_int_equal(s->error, 0);
	v = loss_value(s, loss_index(name));
	snapshot_put(s);
	recording_close(rec);
	return v;
}

/* A recording's losses are every session's: a session adds what its counters counted from
 * zero; an agent's kernel counters are its pins', and what a session before counted of the
 * very same pins is not counted again, whatever ran between (a record on counters of its own,
 * an agent on pins made anew). */
static void test_losses_add_across_sessions_and_pins_count_once(void **state)
{
	struct rig *g = *state;
	const uint64_t P = 1111, Q = 2222;

	append_session(g, P, 10 * SEC, 10, 1);		/* A: agent on pins P */
	assert_int_equal(recorded_loss(g, "alloc_map_full"), 10);
	append_session(g, 0, 20 * SEC, 3, 1);		/* B: its own counters */
	assert_int_equal(recorded_loss(g, "alloc_map_full"), 13);
	append_session(g, P, 30 * SEC, 15, 1);		/* C: P again, 5 more since A */
	assert_int_equal(recorded_loss(g, "alloc_map_full"), 18);
	append_session(g, Q, 40 * SEC, 12, 1);		/* D: pins Q, never recorded before */
	assert_int_equal(recorded_loss(g, "alloc_map_full"), 30);
	append_session(g, P, 50 * SEC, 15, 1);		/* E: P, nothing more on it */
	assert_int_equal(recorded_loss(g, "alloc_map_full"), 30);
	/* Userspace's counters begin at zero in every session. */
	assert_int_equal(recorded_loss(g, "bad_records"), 5);
}

/* A recording is a file anyone may have edited: values no recorder writes must not crash the
 * reader (this runs under ASan and UBSan too). */
static void test_a_tampered_recording_is_read_without_harm(void **state)
{
	struct rig *g = *state;
	struct counted c = { 0 };
	struct recording *rec;
	struct rec_sites sites;
	struct snapshot *s;
	uint64_t start, end;
	sqlite3 *db;

	write_recording(g, 1);
	assert_int_equal(sqlite3_open(g->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"UPDATE events SET type = 99 WHERE type = 4; UPDATE events SET type = -5 WHERE"
		" type = 6; UPDATE events SET kind = 200, api = 70000, layer = 9;"
		" UPDATE sites SET kind = 250, api = -1, stack_id = 12345;"
		" UPDATE frames SET module = NULL, symbol = printf('%.*c', 5000, 'x'), line = -1;"
		" UPDATE processes SET comm = printf('%.*c', 400, 'c'), cmdline = NULL,"
		" container = printf('%.*c', 300, 'a'), pod = printf('%.*c', 300, 'p');",
		NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(recording_open(g->path, &rec), 0);
	recording_span(rec, &start, &end);
	s = recording_snapshot_at(rec, end);
	assert_int_equal(s->nprocs, 1);
	assert_int_equal(strlen(s->procs[0].comm), GM_COMM_LEN);
	snapshot_put(s);
	assert_int_equal(recording_for_each_event(rec, start, end, 1u << GM_REC_ALLOC, count_event,
						  &c), 0);
	assert_int_equal(recording_sites(rec, start, end, &sites), 0);
	recording_sites_free(&sites);
	recording_close(rec);
}

/* A session of n allocations then their frees (addresses base + 0x1000 * i), appended to
 * the recording (or replacing it). */
static void alloc_free_session(struct rig *g, bool replace, uint64_t t, uint64_t base, int n)
{
	struct recorder_opts o = { .path = g->path, .replace = replace, .sample_interval_s = 1,
				   .command = "record (unit)" };
	struct recorder *r;

	assert_int_equal(recorder_open(&o, &r), 0);
	for (int i = 0; i < n; i++)
		event(g, r, GM_REC_ALLOC, t + (uint64_t)i, base + 0x1000ull * i, 1000, 0, 0);
	for (int i = 0; i < n; i++)
		event(g, r, GM_REC_FREE, t + (uint64_t)(n + i), base + 0x1000ull * i, 1000, 0, 0);
	assert_int_equal(recorder_close(r), 0);
}

static int64_t query_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	int64_t v;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Events go in 16 to an insert, the first with its id and the others with SQLite's next: the
 * ids stay the writer's, past every earlier row and span, even when the newest rows were
 * deleted (as retention deletes a recording whose events are all old), and each free names
 * its allocation's row. */
static void test_event_ids_run_on_past_deleted_rows_and_frees_name_their_allocations(
	void **state)
{
	struct rig *g = *state;
	sqlite3 *db;

	alloc_free_session(g, true, 10 * SEC, 0x7e0000000000, 40);
	assert_int_equal(sqlite3_open(g->path, &db), SQLITE_OK);
	assert_int_equal(query_int(db, "SELECT max(id) FROM events"), 80);
	assert_int_equal(sqlite3_exec(db, "DELETE FROM events WHERE id > 8", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	alloc_free_session(g, false, 20 * SEC, 0x7f0000000000, 40);
	assert_int_equal(sqlite3_open(g->path, &db), SQLITE_OK);
	assert_int_equal(query_int(db, "SELECT count(*) FROM events WHERE id > 80"), 80);
	assert_int_equal(query_int(db, "SELECT min(id) FROM events WHERE id > 8"), 81);
	assert_int_equal(query_int(db, "SELECT max(id) FROM events"), 160);
	assert_int_equal(query_int(db, "SELECT count(*) FROM events f JOIN events a ON"
				       " a.id = f.alloc_id AND a.addr = f.addr AND a.type = 1"
				       " WHERE f.type = 2 AND f.id > 80"), 40);
	sqlite3_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_times_absolute_and_relative),
		cmocka_unit_test(test_time_of_day_is_the_last_one_not_after_the_end),
		cmocka_unit_test(test_idmap_matches_a_plain_array_through_puts_and_deletes),
		cmocka_unit_test_setup_teardown(
			test_states_between_samples_are_replayed_from_the_events, rig_setup,
			rig_teardown),
		cmocka_unit_test_setup_teardown(test_events_sites_and_history_read_back, rig_setup,
						rig_teardown),
		cmocka_unit_test_setup_teardown(test_sampling_keeps_failures_and_ends, rig_setup,
						rig_teardown),
		cmocka_unit_test_setup_teardown(
			test_retention_deletes_what_is_old_and_keeps_each_series_last_value,
			rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_losses_add_across_sessions_and_pins_count_once,
						rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_a_tampered_recording_is_read_without_harm,
						rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(
			test_event_ids_run_on_past_deleted_rows_and_frees_name_their_allocations,
			rig_setup, rig_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
