/* SPDX-License-Identifier: GPL-2.0 */
/* The recording file (SQLite): its schema and version, and opening it safely, for the
 * recorder that writes it (sqlite.c) and the reader that answers reports (recording.c). */
#ifndef GPUMEM_SQLITE_SCHEMA_H
#define GPUMEM_SQLITE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>

/* PRAGMA application_id of every recording ("gpmr"), and the schema's version
 * (PRAGMA user_version): bumped whenever a table or column changes meaning. */
#define RECDB_APPLICATION_ID 0x67706d72
/* 2: PyTorch tensors (process_samples' tensor_*, events' process_tensor_bytes), sites keyed by
 * their Python stack too (sites.py_stack_id), frames that say they are Python's. */
#define RECDB_SCHEMA_VERSION 4

/* Event types in the events table: the ring buffer's record types (gpumem.h). */
enum recdb_event {
	RECDB_EV_ALLOC = 1,
	RECDB_EV_FREE = 2,
	RECDB_EV_ALLOC_FAILED = 3,
	RECDB_EV_UNKNOWN_FREE = 4,
	RECDB_EV_PROCESS_EXIT = 6,
};

/* The tracer's numbers that are no loss (snapshot --json's "tracer"), kept in tracer_stats:
 * how many, the name of the i-th, and its value in a snapshot. */
struct snapshot;
size_t recdb_stat_count(void);
const char *recdb_stat_name(size_t i);
uint64_t recdb_stat_get(const struct snapshot *snap, size_t i);
void recdb_stat_set(struct snapshot *snap, size_t i, uint64_t v);

/* Opens path for recording: never through a symbolic link (lstat, then
 * SQLITE_OPEN_NOFOLLOW); created with the schema when missing or empty. An existing
 * recording is replaced (replace) or appended to; a file that is not a recording of this
 * schema is refused, and so is one another process is writing. Prints why and returns
 * -errno on failure. */
int recdb_open_write(const char *path, bool replace, sqlite3 **out);
/* Opens a recording to read it (the reader never writes); prints why and returns -errno
 * when path is missing, not a database, or not a recording of this schema. */
int recdb_open_read(const char *path, sqlite3 **out);
/* Runs SQL that returns no rows; returns 0 or the SQLite error code. */
int recdb_exec(sqlite3 *db, const char *sql);
/* One line on what failed: "cannot <what> <path>: <SQLite's message>". */
void recdb_error(sqlite3 *db, const char *what, const char *path);

#endif
