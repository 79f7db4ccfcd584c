/* SPDX-License-Identifier: GPL-2.0 */
/* The model: every process seen (alive, or ended with its final numbers, for a bounded time),
 * its call sites and failures, filled from the BPF maps and the rare ring-buffer records. It
 * is the only reader of the accounting maps and the only code that deletes their entries;
 * outputs read the snapshots it publishes (snapshot.h), never the model itself: struct state
 * is the model's own (state.h). */
#ifndef GPUMEM_MODEL_H
#define GPUMEM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpumem.h"
#include "loader/tracer.h"
#include "model/snapshot.h"

#define STATE_KEEP_ENDED_DEFAULT 1000		/* --keep-ended */
#define STATE_KEEP_ENDED_S_DEFAULT 300.0	/* --keep-ended-for */
#define STATE_KEEP_FAILURES_DEFAULT 100		/* --keep-failures: the first and the last */

struct state;
struct oci_cache;

struct state_opts {
	bool all_frames;	/* keep the CUDA libraries' own frames */
	bool no_demangle;
	uint32_t keep_ended;	/* 0: STATE_KEEP_ENDED_DEFAULT */
	double keep_ended_s;	/* 0: STATE_KEEP_ENDED_S_DEFAULT */
	uint32_t keep_failures;	/* 0: STATE_KEEP_FAILURES_DEFAULT */
	bool read_only;		/* another's maps (a running agent's): never delete entries */
	bool no_python;		/* --no-python */
	bool by_address;	/* --by-address: a site per stack of return addresses */
};

struct state *state_new(const struct model_maps *maps, const struct state_opts *opt);
void state_free(struct state *s);
/* Ring-buffer records. */
void state_on_process_new(struct state *s, const struct gm_call_event *e);
void state_on_failure(struct state *s, const struct gm_call_event *e);
/* Whether the stack of call event e names as well as it will: each native frame in a module,
 * or its process's end seen (the module map of its exit is the last word). Names it if need
 * be. */
bool state_event_named(struct state *s, const struct gm_call_event *e);
/* A process exec'd: remember where its executable is while it can still be asked, and see
 * whether it is CPython (python.h). */
void state_on_exec(struct state *s, const struct gm_file_event *e);
/* One executable mapping of an ending process (sent before its exit record). */
void state_on_exit_vma(struct state *s, const struct gm_vma_event *e);
/* Queues every process that gpumem holds as living but that is gone (its end was not seen:
 * it ended while no agent ran, or its exit record was lost); returns how many. */
size_t state_sweep_vanished(struct state *s);
/* Deletes the allocation entries ended processes left, in one walk, when enough wait or long
 * enough (now: whatever waits); returns the entries deleted. */
uint64_t state_purge(struct state *s, bool now);
/* Deletes allocation entries no living process of the model owns (pins an earlier agent
 * left), in one walk; returns how many. */
uint64_t state_purge_orphans(struct state *s);
/* Processes that made an accounted call: living, and ended but kept. */
void state_count(const struct state *s, size_t *living, size_t *ended);
/* Queues an ended process; state_reap() captures its final numbers and drops its entries. */
void state_on_process_exit(struct state *s, const struct gm_call_event *e);
/* The image an exec replaced ended (GM_REC_PROCESS_EXEC): as an exit, with no exit code. */
void state_on_process_exec(struct state *s, const struct gm_call_event *e);
/* A process opened a CUDA library: is it CPython now? (python.h) */
void state_on_lib_open_python(struct state *s, const struct gm_file_event *e);
/* A new Python stack: its code objects are named while the process lives. */
void state_on_py_stack(struct state *s, const struct gm_py_stack_event *e);
/* Registers and stack top of a new site's first allocation: unwinds them with CFI. */
void state_on_stack_copy(struct state *s, const struct gm_stack_event *e);
void state_on_bad_record(struct state *s);
/* Handles queued exits in one pass over the maps, then lets go of ended processes past
 * --keep-ended / --keep-ended-for; returns how many processes ended. */
size_t state_reap(struct state *s);
/* Publishing (publish.c): one snapshot of everything kept, after a refresh with wants. */
struct snapshot *state_publish(struct state *s, unsigned int wants);
/* One call event, its process's container and its stack named (release with
 * snap_event_release). */
void state_describe_event(struct state *s, const struct gm_call_event *e, struct snap_event *out);
/* What to capture of a process when it ends (enum snap_want), and where its pod and container
 * names come from (lent; NULL: none). */
void state_set_exit_wants(struct state *s, unsigned int wants);
void state_set_oci(struct state *s, struct oci_cache *oci);

#endif
