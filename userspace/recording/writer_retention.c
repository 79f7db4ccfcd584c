// SPDX-License-Identifier: GPL-2.0
/* --retention: rows older than the retention go as the recording runs, and the pages they
 * held are reused (auto_vacuum=INCREMENTAL, then incremental_vacuum), so the file stops
 * growing. A series keeps its last row from before the cut, and the samples their last tick
 * before it: the value of each at the cut is still known. */
#include <stdio.h>
#include "base/util.h"
#include "recording/writer_int.h"

static const char retention_sql[] =
	/* The events before the cut: among the ids of the spans that began before it. */
	"DELETE FROM events WHERE id <= (SELECT max(last_id) FROM event_spans WHERE"
	" min_time_ns < ?1) AND time_ns < ?1;"
	"DELETE FROM event_spans WHERE max_time_ns < ?1;"
	"DELETE FROM samples WHERE time_ns < (SELECT max(time_ns) FROM samples WHERE"
	" time_ns < ?1);"
	"DELETE FROM process_samples WHERE time_ns < ?1 AND (process_id, time_ns) NOT IN"
	" (SELECT process_id, max(time_ns) FROM process_samples WHERE time_ns < ?1"
	" GROUP BY process_id);"
	"DELETE FROM site_samples WHERE time_ns < ?1 AND (site_id, time_ns) NOT IN"
	" (SELECT site_id, max(time_ns) FROM site_samples WHERE time_ns < ?1 GROUP BY site_id);"
	"DELETE FROM losses WHERE time_ns < ?1 AND (name, time_ns) NOT IN"
	" (SELECT name, max(time_ns) FROM losses WHERE time_ns < ?1 GROUP BY name);"
	"DELETE FROM tracer_stats WHERE time_ns < ?1 AND (name, time_ns) NOT IN"
	" (SELECT name, max(time_ns) FROM tracer_stats WHERE time_ns < ?1 GROUP BY name);"
	/* Processes that ended before the cut, with their sites and the rows of those. */
	"DELETE FROM site_samples WHERE site_id IN (SELECT s.id FROM sites s JOIN processes p"
	" ON p.id = s.process_id WHERE p.end_ns < ?1);"
	"DELETE FROM process_samples WHERE process_id IN (SELECT id FROM processes WHERE"
	" end_ns < ?1);"
	"DELETE FROM sites WHERE process_id IN (SELECT id FROM processes WHERE end_ns < ?1);"
	"DELETE FROM processes WHERE end_ns < ?1;"
	/* Stacks nothing kept uses any more. */
	"DELETE FROM frames WHERE stack_id IN (SELECT id FROM stacks WHERE last_used_ns < ?1"
	" AND id NOT IN (SELECT stack_id FROM sites WHERE stack_id IS NOT NULL));"
	"DELETE FROM stacks WHERE last_used_ns < ?1 AND id NOT IN (SELECT stack_id FROM sites"
	" WHERE stack_id IS NOT NULL);"
	"INSERT OR REPLACE INTO meta VALUES ('retained_from_ns', ?1);";

/* Runs each statement of sql with ?1 bound to cut. */
static int run_with_cut(sqlite3 *db, const char *sql, uint64_t cut)
{
	const char *next = sql;
	int rc = SQLITE_OK;

	while (rc == SQLITE_OK && next && *next) {
		sqlite3_stmt *st = NULL;

		rc = sqlite3_prepare_v2(db, next, -1, &st, &next);
		if (rc != SQLITE_OK || !st)
			break;
		sqlite3_bind_int64(st, 1, (int64_t)cut);
		rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
		sqlite3_finalize(st);
	}
	return rc;
}

/* The in-memory processes whose rows went: nothing more is written for them. */
static void mark_deleted(struct recorder *r, uint64_t cut)
{
	for (size_t i = 0; i < r->nprocs; i++) {
		struct rec_proc *p = r->procs[i];

		if (!p->open && p->end_ns < cut)
			p->deleted = true;
	}
}

void rec_retention(struct recorder *r, uint64_t now_wall)
{
	uint64_t cut = now_wall - (uint64_t)(r->opt.retention_s * 1e9);

	if (r->err)
		return;
	rec_stacks_flush(r, now_wall, true);	/* what is in use is not old */
	if (run_with_cut(r->db, retention_sql, cut) != SQLITE_OK) {
		rec_fail(r, "delete old rows of");
		return;
	}
	mark_deleted(r, cut);
	if (sqlite3_exec(r->db, "PRAGMA incremental_vacuum", NULL, NULL, NULL) != SQLITE_OK)
		rec_fail(r, "reuse the free pages of");
}
