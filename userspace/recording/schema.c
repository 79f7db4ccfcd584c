// SPDX-License-Identifier: GPL-2.0
/* The recording file: its tables (docs/recording.md documents them), the lookup tables and
 * the Nsight-shaped view, and opening it: never through a symbolic link, refusing files that
 * are not recordings of this schema, and files another process is writing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "gpumem.h"
#include "base/util.h"
#include "model/snapshot.h"
#include "probes/table.h"
#include "recording/schema.h"

static const char schema_sql[] =
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
	"CREATE TABLE sessions (id INTEGER PRIMARY KEY, start_ns INTEGER NOT NULL, end_ns INTEGER,"
	" command TEXT, gpumem_pid INTEGER, gpumem_version TEXT, hostname TEXT,"
	" sample_interval_ns INTEGER, sample_events INTEGER, retention_ns INTEGER);"
	"CREATE TABLE processes (id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL,"
	" serial INTEGER, pid INTEGER NOT NULL, ns_pid INTEGER, comm TEXT, cmdline TEXT,"
	" cgroup TEXT, user TEXT, container_runtime TEXT, container TEXT, pod TEXT, pod_qos TEXT,"
	" pod_name TEXT, pod_namespace TEXT, container_name TEXT, start_ns INTEGER NOT NULL,"
	" end_ns INTEGER, exit_code INTEGER);"
	"CREATE INDEX processes_pid ON processes (pid);"
	"CREATE TABLE stacks (id INTEGER PRIMARY KEY, hash INTEGER NOT NULL,"
	" nframes INTEGER NOT NULL, last_used_ns INTEGER NOT NULL);"
	"CREATE INDEX stacks_hash ON stacks (hash);"
	"CREATE TABLE frames (stack_id INTEGER NOT NULL, idx INTEGER NOT NULL,"
	" addr INTEGER NOT NULL, module TEXT, symbol TEXT, offset INTEGER NOT NULL,"
	" symbol_offset INTEGER, file TEXT, line INTEGER, inlined INTEGER NOT NULL,"
	" python INTEGER NOT NULL, PRIMARY KEY (stack_id, idx)) WITHOUT ROWID;"
	"CREATE TABLE sites (id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL,"
	" stack_key INTEGER NOT NULL, api INTEGER NOT NULL, kind INTEGER NOT NULL,"
	" stack_id INTEGER, py_stack_id INTEGER, gpu INTEGER);"
	"CREATE INDEX sites_process ON sites (process_id);"
	"CREATE TABLE samples (time_ns INTEGER PRIMARY KEY, session_id INTEGER NOT NULL);"
	"CREATE TABLE process_samples (process_id INTEGER NOT NULL, time_ns INTEGER NOT NULL,"
	" current_bytes INTEGER, current_allocs INTEGER, peak_bytes INTEGER,"
	" alloc_count INTEGER, free_count INTEGER, alloc_bytes_total INTEGER,"
	" failed_count INTEGER, device_bytes INTEGER, managed_bytes INTEGER,"
	" host_bytes INTEGER, async_bytes INTEGER, vmm_bytes INTEGER,"
	" tensor_bytes INTEGER, tensor_allocs INTEGER, tensor_peak_bytes INTEGER,"
	" PRIMARY KEY (process_id, time_ns)) WITHOUT ROWID;"
	"CREATE INDEX process_samples_time ON process_samples (time_ns);"
	"CREATE TABLE site_samples (site_id INTEGER NOT NULL, time_ns INTEGER NOT NULL,"
	" current_bytes INTEGER, current_allocs INTEGER, alloc_count INTEGER,"
	" free_count INTEGER, alloc_bytes_total INTEGER, failed_count INTEGER,"
	" PRIMARY KEY (site_id, time_ns)) WITHOUT ROWID;"
	"CREATE INDEX site_samples_time ON site_samples (time_ns);"
	"CREATE TABLE events (id INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL,"
	" process_id INTEGER NOT NULL, type INTEGER NOT NULL, tid INTEGER, api INTEGER,"
	" layer INTEGER, kind INTEGER, addr INTEGER, size INTEGER, error INTEGER,"
	" process_bytes INTEGER, stack_id INTEGER, site_id INTEGER, alloc_id INTEGER,"
	" process_tensor_bytes INTEGER);"
	/* No index on time_ns (it cost an event a third of its write): the ids are in the order
	 * the ring gave the events, their times nearly so, and event_spans bounds the ids of a
	 * time. */
	"CREATE TABLE event_spans (first_id INTEGER PRIMARY KEY, last_id INTEGER NOT NULL,"
	" min_time_ns INTEGER NOT NULL, max_time_ns INTEGER NOT NULL);"
	"CREATE INDEX events_failures ON events (time_ns) WHERE type = 3;"
	"CREATE TABLE losses (name TEXT NOT NULL, time_ns INTEGER NOT NULL, value INTEGER,"
	" PRIMARY KEY (name, time_ns)) WITHOUT ROWID;"
	"CREATE TABLE tracer_stats (name TEXT NOT NULL, time_ns INTEGER NOT NULL,"
	" value INTEGER, PRIMARY KEY (name, time_ns)) WITHOUT ROWID;"
	"CREATE TABLE event_types (type INTEGER PRIMARY KEY, name TEXT NOT NULL);"
	"INSERT INTO event_types VALUES (1, 'alloc'), (2, 'free'), (3, 'alloc_failed'),"
	" (4, 'unknown_free'), (6, 'process_exit');"
	"CREATE TABLE apis (api INTEGER PRIMARY KEY, name TEXT NOT NULL, layer TEXT NOT NULL);"
	"CREATE TABLE kinds (kind INTEGER PRIMARY KEY, name TEXT NOT NULL, gpu INTEGER NOT NULL);"
	/* Nsight Systems' enumerations, with the values its SQLite export gives them. */
	"CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT);"
	"INSERT INTO ENUM_CUDA_MEM_KIND VALUES"
	" (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),"
	" (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'),"
	" (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device'),"
	" (3, 'CUDA_MEMOPR_MEMORY_KIND_ARRAY', 'Array'),"
	" (4, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED', 'Managed'),"
	" (5, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC', 'Device Static'),"
	" (6, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC', 'Managed Static'),"
	" (7, 'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN', 'Unknown');"
	"CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER PRIMARY KEY, name TEXT,"
	" label TEXT);"
	"INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES"
	" (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', 'Allocation'),"
	" (1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation');"
	/* Nsight's start is relative to the session's start, which this table gives. */
	"CREATE VIEW TARGET_INFO_SESSION_START_TIME AS SELECT CAST(value AS INTEGER) AS"
	" utcEpochNs, strftime('%Y-%m-%dT%H:%M:%fZ', value / 1e9, 'unixepoch') AS utcTime"
	" FROM meta WHERE key = 'created_ns';"
	"CREATE VIEW CUDA_GPU_MEMORY_USAGE_EVENTS AS SELECT"
	" e.time_ns - (SELECT value FROM meta WHERE key = 'created_ns') AS start,"
	" p.pid * 16777216 AS globalPid, NULL AS deviceId, NULL AS contextId,"
	" e.addr AS address,"
	" (SELECT f.addr FROM frames f WHERE f.stack_id = e.stack_id AND f.idx = 0) AS pc,"
	" e.size AS bytes,"
	" CASE e.kind WHEN 0 THEN 2 WHEN 1 THEN 4 WHEN 2 THEN 1 WHEN 3 THEN 2 WHEN 4 THEN 2"
	" ELSE 7 END AS memKind,"
	" CASE e.type WHEN 1 THEN 0 ELSE 1 END AS memoryOperationType,"
	" NULL AS name, e.id AS correlationId, NULL AS streamId,"
	" NULL AS localMemoryPoolAddress, NULL AS localMemoryPoolReleaseThreshold,"
	" NULL AS localMemoryPoolSize, NULL AS localMemoryPoolUtilizedSize,"
	" NULL AS importedMemoryPoolAddress, NULL AS importedMemoryPoolProcessId"
	" FROM events e JOIN processes p ON p.id = e.process_id WHERE e.type IN (1, 2)"
	" AND e.layer != 2;";	/* PyTorch's tensors are inside the allocations it lists */

/* The tracer's numbers of tracer_stats: where each lives in a snapshot. */
enum stat_home { IN_COUNTERS, IN_DISC_UINT, IN_DISC_U64, IN_SNAPSHOT_U64 };

static const struct {
	const char *name;
	enum stat_home home;
	size_t at;	/* the counter's index, or the field's offset */
} stats[] = {
	{ "files_attached", IN_DISC_UINT, offsetof(struct discovery_stats, files) },
	{ "probes_attached", IN_DISC_UINT, offsetof(struct discovery_stats, probes) },
	{ "late_attaches", IN_DISC_UINT, offsetof(struct discovery_stats, late_attaches) },
	{ "late_attach_ns_max", IN_DISC_U64, offsetof(struct discovery_stats, late_attach_ns_max) },
	{ "nested_calls", IN_COUNTERS, GM_CNT_NESTED_CALLS },
	{ "stale_inflight", IN_COUNTERS, GM_CNT_STALE_INFLIGHT },
	{ "failed_frees", IN_COUNTERS, GM_CNT_FAILED_FREES },
	{ "holds", IN_COUNTERS, GM_CNT_HOLDS },
	{ "module_maps_busy", IN_COUNTERS, GM_CNT_MODULE_MAPS_BUSY },
	{ "failed_allocs", IN_COUNTERS, GM_CNT_FAILED_ALLOCS },
	{ "map_procs", IN_SNAPSHOT_U64, offsetof(struct snapshot, map_procs) },
	{ "map_sites", IN_SNAPSHOT_U64, offsetof(struct snapshot, map_sites) },
};

size_t recdb_stat_count(void)
{
	return ARRAY_SIZE(stats);
}

const char *recdb_stat_name(size_t i)
{
	return i < ARRAY_SIZE(stats) ? stats[i].name : "unknown";
}

/* Where the i-th is in snap, and whether it is an unsigned int (else a uint64_t). */
static void *stat_at(const struct snapshot *snap, size_t i, bool *narrow)
{
	*narrow = stats[i].home == IN_DISC_UINT;
	switch (stats[i].home) {
	case IN_COUNTERS:
		return (void *)&snap->counters[stats[i].at];
	case IN_DISC_UINT:
	case IN_DISC_U64:
		return (char *)&snap->disc + stats[i].at;
	case IN_SNAPSHOT_U64:
		break;
	}
	return (char *)snap + stats[i].at;
}

uint64_t recdb_stat_get(const struct snapshot *snap, size_t i)
{
	bool narrow;
	void *p;

	if (i >= ARRAY_SIZE(stats))
		return 0;
	p = stat_at(snap, i, &narrow);
	return narrow ? *(unsigned int *)p : *(uint64_t *)p;
}

void recdb_stat_set(struct snapshot *snap, size_t i, uint64_t v)
{
	bool narrow;
	void *p;

	if (i >= ARRAY_SIZE(stats))
		return;
	p = stat_at(snap, i, &narrow);
	if (narrow)
		*(unsigned int *)p = (unsigned int)v;
	else
		*(uint64_t *)p = v;
}

int recdb_exec(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

void recdb_error(sqlite3 *db, const char *what, const char *path)
{
	p_err("cannot %s %s: %s", what, path, db ? sqlite3_errmsg(db) : "out of memory");
}

/* The lookup tables of this binary's numbering: API names and layers, kinds. */
static int fill_lookups(sqlite3 *db)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, "INSERT INTO apis VALUES (?, ?, ?)", -1, &st, NULL);

	for (unsigned int i = 0; rc == SQLITE_OK && i < probe_count; i++) {
		sqlite3_bind_int(st, 1, (int)i);
		sqlite3_bind_text(st, 2, probe_api_name(i), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, probe_layer_name(probe_table[i].layer), -1, SQLITE_STATIC);
		rc = sqlite3_step(st) == SQLITE_DONE ? sqlite3_reset(st) : sqlite3_errcode(db);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_prepare_v2(db, "INSERT INTO kinds VALUES (?, ?, ?)", -1, &st, NULL);
	for (unsigned int k = 0; rc == SQLITE_OK && k < GM_KIND_COUNT; k++) {
		sqlite3_bind_int(st, 1, (int)k);
		sqlite3_bind_text(st, 2, kind_name(k), -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 3, gm_kind_is_gpu(k));
		rc = sqlite3_step(st) == SQLITE_DONE ? sqlite3_reset(st) : sqlite3_errcode(db);
	}
	sqlite3_finalize(st);
	return rc;
}

/* A new recording: page reuse set before the first table exists, then the schema. */
static int create_schema(sqlite3 *db)
{
	char sql[256];
	int rc;

	snprintf(sql, sizeof(sql),
		 "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_mode = WAL;"
		 "PRAGMA application_id = %d; PRAGMA user_version = %d;",
		 RECDB_APPLICATION_ID, RECDB_SCHEMA_VERSION);
	rc = recdb_exec(db, sql);
	if (rc == SQLITE_OK)
		rc = recdb_exec(db, "BEGIN");
	if (rc == SQLITE_OK)
		rc = recdb_exec(db, schema_sql);
	if (rc == SQLITE_OK)
		rc = fill_lookups(db);
	if (rc == SQLITE_OK) {
		snprintf(sql, sizeof(sql), "INSERT INTO meta VALUES ('created_ns', %llu),"
			 " ('schema', %d), ('gpumem_version', '%s')",
			 (unsigned long long)realtime_ns(), RECDB_SCHEMA_VERSION, GPUMEM_VERSION);
		rc = recdb_exec(db, sql);
	}
	if (rc == SQLITE_OK)
		rc = recdb_exec(db, "COMMIT");
	return rc;
}

/* The tables gpumem reads and writes. Each must be a table: a view in a table's place, or a
 * trigger, would have gpumem's own queries run what the file says (an endless recursive
 * query, for one), and a recording is untrusted input. */
static const char *const recording_tables[] = {
	"meta", "sessions", "processes", "stacks", "frames", "sites", "samples",
	"process_samples", "site_samples", "events", "losses", "tracer_stats", "event_types",
	"apis", "kinds", "event_spans",
};

/* Why db's schema is not one gpumem wrote (into why), or NULL. */
static const char *schema_mismatch(sqlite3 *db, char *why, size_t len)
{
	bool seen[ARRAY_SIZE(recording_tables)] = { false };
	sqlite3_stmt *st;
	const char *bad = NULL;

	if (sqlite3_prepare_v2(db, "SELECT type, name FROM sqlite_schema", -1, &st, NULL))
		return "its schema cannot be read";
	while (!bad && sqlite3_step(st) == SQLITE_ROW) {
		const char *type = (const char *)sqlite3_column_text(st, 0);
		const char *name = (const char *)sqlite3_column_text(st, 1);

		if (!type || !name)
			continue;
		if (!strcmp(type, "trigger")) {
			snprintf(why, len, "it holds a trigger (%.60s), which no recording has", name);
			bad = why;
		}
		for (size_t i = 0; !bad && i < ARRAY_SIZE(recording_tables); i++) {
			if (strcmp(name, recording_tables[i]))
				continue;
			seen[i] = !strcmp(type, "table");
			if (!seen[i]) {
				snprintf(why, len, "'%s' is a %.20s, not a table", name, type);
				bad = why;
			}
		}
	}
	sqlite3_finalize(st);
	for (size_t i = 0; !bad && i < ARRAY_SIZE(recording_tables); i++)
		if (!seen[i]) {
			snprintf(why, len, "its table '%s' is missing", recording_tables[i]);
			bad = why;
		}
	return bad;
}

static uint64_t writer_stop_seen_ns;	/* a process writes one recording */

/* Ctrl-C (or SIGTERM) ends a long query of a recording. */
static int interruptible(void *ctx)
{
	(void)ctx;
	return gm_stop_requested != 0;
}

/* A write goes on for RECDB_STOP_GRACE_NS after a stop was asked: the last samples, events and
 * the session's end are written then (ended at once, a statement of theirs longer than a few
 * thousand steps was lost, and the agent exited 1). One still running past it (a trigger
 * another process added) is ended. ctx: when the stop was first seen (0: none yet). */
#define RECDB_STOP_GRACE_NS (5 * 1000000000ull)

static int write_interruptible(void *ctx)
{
	uint64_t *stop_seen = ctx, now;

	if (!gm_stop_requested) {
		*stop_seen = 0;
		return 0;
	}
	now = now_ns();
	if (!*stop_seen)
		*stop_seen = now;
	return now - *stop_seen > RECDB_STOP_GRACE_NS;
}

static int int_pragma(sqlite3 *db, const char *pragma, int *value)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, pragma, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		*value = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
		rc = rc == SQLITE_ROW ? SQLITE_OK : sqlite3_errcode(db);
	}
	sqlite3_finalize(st);
	return rc;
}

/* Whether db is a recording of this schema; prints why not. */
static int check_recording(sqlite3 *db, const char *path)
{
	int app = 0, version = 0;

	if (int_pragma(db, "PRAGMA application_id", &app) ||
	    int_pragma(db, "PRAGMA user_version", &version)) {
		if ((sqlite3_errcode(db) & 0xff) == SQLITE_BUSY) {
			p_err("cannot read %s: another process holds it locked", path);
			return -EBUSY;
		}
		p_err("%s is not a gpumem recording: %s", path, sqlite3_errmsg(db));
		return -EINVAL;
	}
	if (app != RECDB_APPLICATION_ID) {
		p_err("%s is not a gpumem recording (an SQLite database of something else)", path);
		return -EINVAL;
	}
	if (version != RECDB_SCHEMA_VERSION) {
		p_err("%s is a gpumem recording of schema %d; this gpumem reads and writes schema "
		      "%d", path, version, RECDB_SCHEMA_VERSION);
		return -EPROTO;
	}
	return 0;
}

/* event_spans is the events' only index by time: a span whose numbers are not whole numbers
 * or are reversed, two that overlap, or an event in no span would have every window query (and
 * the retention's delete) leave events out without a word. One query per span boundary, each
 * an index probe of events, not a scan. */
static const char spans_sql[] =
	"WITH s AS (SELECT first_id, last_id, min_time_ns, max_time_ns,"
	" coalesce(lag(last_id) OVER (ORDER BY first_id), -9223372036854775808) AS prev"
	" FROM event_spans), c AS (SELECT *, EXISTS (SELECT 1 FROM events WHERE id > prev AND"
	" id < first_id) AS uncovered FROM s)"
	" SELECT first_id, uncovered FROM c WHERE uncovered OR first_id <= prev OR"
	" typeof(last_id) != 'integer' OR typeof(min_time_ns) != 'integer' OR"
	" typeof(max_time_ns) != 'integer' OR last_id < first_id OR max_time_ns < min_time_ns"
	" UNION ALL SELECT NULL, 1 WHERE EXISTS (SELECT 1 FROM events WHERE id >"
	" (SELECT coalesce(max(last_id), -9223372036854775808) FROM event_spans))"
	" LIMIT 1";

/* Why db's event_spans does not index its events (into why), or NULL. */
static const char *spans_mismatch(sqlite3 *db, char *why, size_t len)
{
	const char *bad = NULL;
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db, spans_sql, -1, &st, NULL))
		return "its table 'event_spans' cannot be read";
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_NULL) {
		bad = "events lie past the last row of its table 'event_spans'";
	} else if (rc == SQLITE_ROW) {
		snprintf(why, len, "the row of its table 'event_spans' with first_id %lld %s",
			 (long long)sqlite3_column_int64(st, 0),
			 sqlite3_column_int(st, 1) ? "leaves events before it in no row"
						    : "is reversed, overlaps the row before, or holds"
						      " what is not a whole number");
		bad = why;
	} else if (rc != SQLITE_DONE) {
		bad = "its table 'event_spans' cannot be read";
	}
	sqlite3_finalize(st);
	return bad;
}

/* A recording of this schema, whose tables are tables and which holds no trigger. */
static int check_recording_schema(sqlite3 *db, const char *path)
{
	char why[160];
	const char *bad;
	int err = check_recording(db, path);

	if (err)
		return err;
	bad = schema_mismatch(db, why, sizeof(why));
	if (bad) {
		p_err("%s is not a gpumem recording: %s", path, bad);
		return -EINVAL;
	}
	bad = spans_mismatch(db, why, sizeof(why));
	if (bad) {
		p_err("%s is a damaged recording: %s", path, bad);
		return -EINVAL;
	}
	sqlite3_progress_handler(db, 10000, interruptible, NULL);
	return 0;
}

/* path and its -wal and -shm companions must be regular files or absent. */
static int check_no_links(const char *path, const char *what, off_t *size)
{
	static const char *const suffixes[] = { "", "-wal", "-shm", "-journal" };
	char buf[4096];
	struct stat st;

	*size = -1;
	for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
		snprintf(buf, sizeof(buf), "%s%s", path, suffixes[i]);
		if (lstat(buf, &st)) {
			if (errno == ENOENT)
				continue;
			p_err("cannot %s %s: %s", what, buf, strerror(errno));
			return -errno;
		}
		if (S_ISLNK(st.st_mode)) {
			p_err("cannot %s %s: it is a symbolic link, which gpumem does not follow",
			      what, buf);
			return -ELOOP;
		}
		if (!S_ISREG(st.st_mode)) {
			p_err("cannot %s %s: not a regular file", what, buf);
			return -EINVAL;
		}
		if (i == 0)
			*size = st.st_size;
	}
	return 0;
}

static void remove_files(const char *path)
{
	static const char *const suffixes[] = { "", "-wal", "-shm", "-journal" };
	char buf[4096];

	for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
		snprintf(buf, sizeof(buf), "%s%s", path, suffixes[i]);
		unlink(buf);
	}
}

/* A writer's connection: used by the session's thread alone, so without SQLite's mutexes
 * (SQLITE_OPEN_NOMUTEX), and without its count of the memory it holds (a global mutex at each
 * of its allocations; set before SQLite's first use, a no-op after): a lock and an unlock at
 * each call of every row's insert, 10% of what recording cost an event. */
static int open_db(const char *path, int flags, sqlite3 **db)
{
	int rc;

	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	rc = sqlite3_open_v2(path, db, flags | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX, NULL);

	if (rc != SQLITE_OK) {
		recdb_error(*db, "open", path);
		sqlite3_close(*db);
		*db = NULL;
		return rc == SQLITE_CANTOPEN ? -ENOENT : -EIO;
	}
	sqlite3_extended_result_codes(*db, 1);
	return 0;
}

/* An existing recording: ours, of this schema, and nobody else is writing it. */
static int claim_existing(const char *path, sqlite3 **db)
{
	int err = open_db(path, SQLITE_OPEN_READWRITE, db);

	if (err)
		return err;
	err = check_recording_schema(*db, path);
	if (!err && recdb_exec(*db, "BEGIN IMMEDIATE")) {
		if ((sqlite3_errcode(*db) & 0xff) == SQLITE_BUSY)
			p_err("cannot record to %s: another process is writing it (database is "
			      "locked)", path);
		else
			recdb_error(*db, "record to", path);
		err = -EBUSY;
	}
	if (!err)
		recdb_exec(*db, "ROLLBACK");
	if (err) {
		sqlite3_close(*db);
		*db = NULL;
	}
	return err;
}

static int setup_writer(sqlite3 *db)
{
	return recdb_exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
			      "PRAGMA cache_size = -16384; PRAGMA temp_store = MEMORY;"
			      "PRAGMA journal_size_limit = 67108864;"
			      "PRAGMA wal_autocheckpoint = 4096;");
}

int recdb_open_write(const char *path, bool replace, sqlite3 **out)
{
	off_t size;
	int err = check_no_links(path, "record to", &size);

	*out = NULL;
	if (err)
		return err;
	if (size > 0) {
		err = claim_existing(path, out);
		if (err)
			return err;
		if (replace) {
			sqlite3_close(*out);
			*out = NULL;
			remove_files(path);
			size = -1;
		}
	}
	if (!*out) {
		if (size < 0)
			remove_files(path);	/* no stale -wal may be replayed into a new file */
		err = open_db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, out);
		if (!err && create_schema(*out)) {
			recdb_error(*out, "create the recording", path);
			err = -EIO;
		}
	}
	sqlite3_busy_timeout(*out, 2000);
	sqlite3_progress_handler(*out, 10000, write_interruptible, &writer_stop_seen_ns);
	if (!err && setup_writer(*out)) {
		recdb_error(*out, "set up the recording", path);
		err = -EIO;
	}
	if (err) {
		sqlite3_close(*out);
		*out = NULL;
	}
	return err;
}

/* Whether path's write-ahead log holds anything: a recorder killed before its checkpoint. */
static bool wal_has_frames(const char *path)
{
	char wal[4096];
	struct stat st;

	snprintf(wal, sizeof(wal), "%s-wal", path);
	return !stat(wal, &st) && st.st_size > 0;
}

/* Read-only, never a write: a user who may read the file may report on it, and the reader
 * leaves no trace. Where WAL mode needs a -shm that cannot be made (a directory the user
 * cannot write) and the log is empty, the file alone is the whole recording (immutable). */
static int open_read_only(const char *path, sqlite3 **db)
{
	char uri[4200];

	if (sqlite3_open_v2(path, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, NULL) ==
		    SQLITE_OK &&
	    sqlite3_exec(*db, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL) == SQLITE_OK)
		return 0;
	if (wal_has_frames(path))
		return -EIO;	/* what the log holds cannot be read without its -shm */
	sqlite3_close(*db);
	*db = NULL;
	snprintf(uri, sizeof(uri), "file:%s?immutable=1", path);
	return sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI |
					       SQLITE_OPEN_NOFOLLOW, NULL) == SQLITE_OK ? 0 : -EIO;
}

int recdb_open_read(const char *path, sqlite3 **out)
{
	struct stat st;
	int err;

	*out = NULL;
	if (stat(path, &st)) {
		p_err("cannot read %s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		p_err("cannot read %s: not a regular file", path);
		return -EINVAL;
	}
	err = open_read_only(path, out);
	if (err) {
		recdb_error(*out, "read", path);
	} else {
		sqlite3_busy_timeout(*out, 2000);
		err = check_recording_schema(*out, path);
	}
	if (!err)
		recdb_exec(*out, "PRAGMA query_only = 1");
	if (err) {
		sqlite3_close(*out);
		*out = NULL;
	}
	return err;
}
