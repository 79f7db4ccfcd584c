/* SPDX-License-Identifier: GPL-2.0 */
/* `gpumem top`, in four parts: top.c (the view: the screen's state and the session's calls),
 * rows.c (the rows a screen shows, from a snapshot and its history), render.c (rows as text,
 * on the screen or in batch), keys.c (the key table). */
#ifndef GPUMEM_TOP_H
#define GPUMEM_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "analysis/history.h"
#include "host/container.h"
#include "model/snapshot.h"
#include "views/sink.h"

#define TOP_TICK_S 0.05		/* keys are read this often */
#define TOP_DEFAULT_S 2.0
#define TOP_SPARK_MAX 30
#define TOP_ENDED_SHOWN_NS 10000000000ull	/* an ended process stays listed this long */
#define TOP_MAX_COLUMNS 16

enum col_id {
	C_PID, C_USER, C_CONT, C_NPROCS, C_GPU, C_CUR, C_PEAK, C_TENSOR, C_LIVE, C_ARATE,
	C_FRATE, C_GROWTH, C_FAIL, C_OOM, C_COST, C_OLDEST, C_SPARK, C_COMM, C_SITE, C_GROUP, C_LIBRARY, C_COUNT,
};

struct column {
	const char *title;
	int width;		/* 0: takes what is left */
	bool left;
	char key;		/* sorts by it; 0: not sortable */
};

extern const struct column top_columns[C_COUNT];

/* Processes are grouped by container id, else by pod UID, else as the host's. */
#define GROUP_KEY_LEN (CONTAINER_ID_LEN + 5)

struct row {
	const struct snap_proc *p;	/* a container row: its first process */
	const struct snap_site *ss;	/* NULL: a process or container row */
	struct hist_key key;
	bool has_series;	/* false: a container row (no series of its own) */
	uint64_t cur, peak, live, fails, oldest_age;
	/* PyTorch tensors (allocated, inside cur): a process's, or a tensor site's bytes (its
	 * cur is then 0: a tensor site reserves nothing). has_tensors: the cell is not "-". */
	uint64_t tensor;
	bool has_tensors, tensor_site;
	/* The host devices it holds GPU memory on: bit s for the device of slot s (snapshot.h:
	 * NVML's, then AMD's), bit SNAP_SLOT_UNKNOWN for a device not known. */
	uint64_t gpus;
	double arate, frate, growth_min;
	double oom_s;		/* seconds until its device runs out at this rate; < 0: none */
	double cost_share;	/* gpumem's share of its CPU time; < 0: not known */
	unsigned int nprocs;	/* a container row: processes in it */
	char user[16];
	char cont[24];		/* the CONTAINER cell */
	char group[GROUP_KEY_LEN];	/* a container row: its group */
	char name[512];		/* command line, call site, or container and pod */
};

/* The highest total a container was seen to hold (its own peak is not in the maps). */
struct group_peak {
	char key[GROUP_KEY_LEN];
	uint64_t peak;
};

/* Everything the screen shows and remembers between reports. */
struct top_ui {
	bool started, curses, utf8, quit_sent;
	struct snapshot *snap;	/* the one the rows come from */
	const struct history *hist;
	double interval;
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
	uint64_t total_cur, total_host, total_tensor;
	uint64_t gpu_cur[SNAP_SLOTS];	/* total_cur per host device's slot (last: not known) */
	bool any_forecast;	/* a process shown has an OOM forecast: the OOM IN column is shown */
	bool any_tensors;	/* a process shown made tensors: the TENSORS column is shown */
	bool many_gpus;		/* memory is held on a device other than NVML's GPU 0: the GPU column
				 * and, in batch, a GPUs line are shown */
	double total_arate, total_frate;
	unsigned int nshown_procs;
	bool exact;		/* --bytes */
	bool all_frames;	/* --all-frames: a site's every frame */
};


/* rows.c */
void top_build_rows(struct top_ui *t);
void top_group_key(const struct snap_proc *p, char *buf, size_t len);
void top_rows_free(struct top_ui *t);

/* render.c */
void top_batch_print(struct top_ui *t, FILE *out);
void top_screen_start(struct top_ui *t);
void top_screen_end(struct top_ui *t);
void top_draw(struct top_ui *t);
/* The columns this mode shows at this width, and the width left for the last one. */
size_t top_layout(struct top_ui *t, int width, enum col_id *ids, int *spark_w, int *name_w);

/* keys.c: handles one key; returns whether the rows must be rebuilt. */
bool top_on_key(struct sink *s, int ch);

/* top.c */
void top_quit(struct sink *s);
/* A report now: with ages for the process drilled into. */
void top_refresh(struct sink *s);

#endif
