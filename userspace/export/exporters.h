/* SPDX-License-Identifier: GPL-2.0 */
/* The exporters: files for the tools people already use (pprof, flame graphs, Perfetto,
 * PyTorch's memory_viz), made from the model's types only, so that any source can feed them
 * — the live session (views/export.c) or a recording. A source calls begin, then on_event for
 * each call event and on_snapshot for each periodic snapshot in time order, then on_snapshot
 * once with final set (the state "at the end"), then end. */
#ifndef GPUMEM_EXPORT_H
#define GPUMEM_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "base/outfile.h"
#include "model/snapshot.h"

struct exporter;

struct exporter_ops {
	const char *name;	/* --format NAME */
	const char *what;	/* a few words for the help */
	bool wants_events;	/* reads every allocation and free (the source must stream them) */
	bool wants_samples;	/* reads the periodic snapshots, not only the final one */
	/* Opens the output (before anything runs, so a bad -o fails at once); returns 0, or
	 * -errno after one p_err(), having freed what it took. */
	int (*begin)(struct exporter *x);
	/* Optional. Call events: allocations, frees, failures, unknown frees, process ends. */
	void (*on_event)(struct exporter *x, const struct snap_event *e);
	/* Optional. A snapshot; the final one comes once, last. */
	void (*on_snapshot)(struct exporter *x, const struct snapshot *snap, bool final);
	/* Writes what is left and closes; frees everything. Returns 0, or -errno after one
	 * p_err() (a write error is an error). Called once for every successful begin. */
	int (*end)(struct exporter *x);
};

struct exporter {
	const struct exporter_ops *ops;
	const char *path;	/* -o OUT: a file; for memviz a directory */
	uint64_t start_wall_ns;	/* when the source began: the origin of trace timestamps */
	double sample_s;	/* seconds between the periodic snapshots (0: none) */
	void *priv;		/* the format's own, between begin and end */
};

extern const struct exporter_ops pprof_exporter;
extern const struct exporter_ops folded_exporter;
extern const struct exporter_ops chrome_exporter;
extern const struct exporter_ops memviz_exporter;

/* The exporter of --format NAME, or NULL. */
const struct exporter_ops *exporter_find(const char *name);
/* "pprof, folded, chrome or memviz", for messages and the help. */
const char *exporter_names(void);

/* ---- helpers the formats share (export.c) ---- */

/* A frame as a function name: the symbol, else "module+0xOFFSET" (the module's base name),
 * else "0xADDR"; control characters become '?'. Returns buf. */
const char *export_frame_name(const struct snap_frame *f, char *buf, size_t len);
/* Whether a kind is GPU-side memory (pinned host memory is not). */
bool export_kind_is_gpu(uint32_t kind);
/* "comm (pid)", with " [container]" (its first 12 hex digits) when it runs in one. */
void export_process_name(char *buf, size_t len, const char *comm, int pid,
			 const struct container_info *ci);

#endif
