/* SPDX-License-Identifier: GPL-2.0 */
/* The BPF skeleton's life (open, size, load, attach, close) and the ring-buffer loop. */
#ifndef GPUMEM_TRACER_H
#define GPUMEM_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpumem.h"
#include "discover/discover.h"

struct tracer_opts {
	bool stream_calls;	/* per-allocation events (trace, record) */
	bool filter_pids;	/* only targets and their children */
	bool hold_new_procs;	/* stop a target at its first allocation until it is examined */
	bool hold_new_libs;	/* stop a process at its first open of an unknown CUDA library */
	bool hold_ttyless;	/* with no targets: such a process too, if it has no terminal */
	uint32_t stack_mode;	/* enum gm_stack_mode */
	uint32_t stack_bytes;	/* DWARF mode: stack copied per new site */
	bool no_python;		/* --no-python: no CPython frames */
	bool no_tensors;	/* --no-tensors: PyTorch's USDT probes left off */
	char **cgroup_dirs;	/* --cgroup/--container/--pod: trace only below these */
	size_t ncgroup_dirs;
	uint32_t max_allocs;
	uint32_t max_stacks;
	uint32_t max_sites;
	uint32_t max_procs;
	uint32_t ringbuf_mb;
	const char *pin_dir;	/* an agent: maps and links pinned there, adopted at restart */
};

/* Receives every ring-buffer record; returns 0 or -errno. */
typedef int (*record_fn)(void *ctx, const void *data, size_t size);

struct tracer;
struct attached_file;

/* The accounting maps and the loss counters, for the model: their only reader. */
struct model_maps {
	int procs, sites, allocs, stacks, counters;
	int py_procs, py_stacks;	/* a reader's are the agent's, never written */
	int py_procs_gen;		/* counts py_procs' new entries; -1: a reader */
	int procs_made;			/* the slots of processes' entries; -1: a reader */
};

int tracer_open(const struct tracer_opts *opts, record_fn on_record, void *ctx,
		struct tracer **out);
void tracer_close(struct tracer *t);
/* serve --reset: what an agent pinned in dir removed (loader/pin.h), the object's map names. */
int tracer_reset_pins(const char *dir);
struct model_maps tracer_model_maps(const struct tracer *t);
/* Attaches the probe table's programs to the CUDA functions path defines (probes.c). */
int tracer_attach_file(struct tracer *t, const char *path, struct attached_file **out);
/* Tells the BPF side a file was examined, as it was then (its ctime, ns): opening it again
 * unchanged holds nobody. dev: the kernel's encoding (gm_kernel_dev). */
int tracer_mark_known_file(struct tracer *t, uint64_t dev, uint64_t ino, uint64_t ctime_ns);
/* What discovery attaches with: this tracer's attach, detach and holds. */
struct discovery_attacher tracer_attacher(struct tracer *t);
/* An agent's pins of files' links that in_use says no to (an earlier agent attached them; no
 * process maps them now) are removed: their probes go. Returns how many pins went. */
int tracer_unpin_stale_files(struct tracer *t, bool (*in_use)(void *ctx, uint64_t kdev,
							       uint64_t ino), void *ctx);
int tracer_add_target(struct tracer *t, int pid);
int tracer_remove_target(struct tracer *t, int pid);
/* Returns records handled, or -errno: within timeout_ms, sooner when records come or the
 * descriptor given to tracer_wake_on polls readable. */
int tracer_poll(struct tracer *t, int timeout_ms);
/* How many of this gpumem's held processes its watchdog resumed because the loop could not
 * answer them (blocked writing output); a new count is said on stderr once. */
unsigned int tracer_holds_let_go(struct tracer *t);
/* Resumes the processes paused by a gpumem that has ended since (at most once a second). */
void tracer_resume_orphans(struct tracer *t);
/* Makes tracer_poll return when fd polls readable too (fd < 0: nothing); 0 or -errno. */
int tracer_wake_on(struct tracer *t, int fd);
/* Whether that descriptor polled readable in a poll since the last call. */
bool tracer_woken(struct tracer *t);
bool tracer_watches_opens(const struct tracer *t);
/* Tells the BPF side its consumer is alive: holds are taken only while this is fresh. */
void tracer_heartbeat(struct tracer *t);
/* Resumes a process this instance paused, and forgets the hold. */
void tracer_release(struct tracer *t, int pid);
/* Whether the agent adopted the pinned state of an earlier one. */
bool tracer_adopted(const struct tracer *t);
/* The identity of the agent's pins, whose kernel counters it counts with: when they were
 * made (CLOCK_MONOTONIC ns; kept by every agent that adopts them). 0: no agent, its
 * counters made for this run. */
uint64_t tracer_pins_id(const struct tracer *t);
/* A reader of a running agent's pinned maps (no probes, no ring buffer); -ESRCH when no
 * agent of this layout runs on pin_dir. */
int tracer_open_reader(const char *pin_dir, struct tracer **out);
bool tracer_is_reader(const struct tracer *t);
/* The agent a reader reads, or this agent. */
int tracer_agent_pid(const struct tracer *t);
/* What one probe hit costs a traced thread, in ns (loader/calibrate.h), measured at the first
 * call (an agent keeps it in its record; a reader takes the agent's); negative: not known. */
double tracer_trap_ns(struct tracer *t);
/* What a run of gpumem's probe programs costs beyond the calibration's (calibrate.h), from
 * the kernel's statistics; negative: they are off (kernel.bpf_stats_enabled), or not known (a
 * reader, an agent that adopted an earlier one's links, no calibration). */
double tracer_bpf_run_ns(const struct tracer *t);
/* Stops holding processes that map new CUDA libraries; a drain after it answers every hold. */
void tracer_stop_watching(struct tracer *t);

#endif
