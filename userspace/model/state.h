/* SPDX-License-Identifier: GPL-2.0 */
/* The model the views read: processes (alive or ended, with their final numbers), their call
 * sites, failures; built from the BPF maps and the rare ring-buffer records. */
#ifndef GPUMEM_STATE_H
#define GPUMEM_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpumem.h"
#include "container.h"
#include "procs.h"

struct site_snap {
	struct gm_site_key key;
	struct gm_site_stats st;
	uint64_t oldest_ns;	/* allocation time of its oldest live allocation; 0: none */
	uint64_t median_ns;	/* that of its median live allocation (want_median_ages); 0: none */
};

struct proc_rec {
	int pid;
	bool alive;
	bool have_stats;
	char comm[GM_COMM_LEN + 1];
	char *cmdline;
	char *cgroup;
	struct container_info container;	/* parsed from cgroup */
	int ns_pid;		/* its pid in its own pid namespace; 0: unknown */
	struct module_map mm;	/* captured while the process lived */
	bool have_mm;
	struct module_map exit_mm;	/* its executable mappings as the kernel saw them at exit */
	struct unwinder *unwinder;	/* DWARF unwinding over mm, made at its first new site */
	struct dwarf_stack *dwarf_stacks;	/* sites whose stack was unwound with CFI */
	size_t ndwarf_stacks;
	struct gm_stack_event *pending_copies;	/* to unwind once a module map arrives */
	size_t npending_copies;
	struct gm_proc_stats st;
	struct site_snap *sites;
	size_t nsites;
	uint64_t end_ns;	/* exit time (alive: time of the last refresh) */
	int exit_code;
};

#define STATE_MAX_PENDING_COPIES 16

/* A site's stack as DWARF unwinding saw it at the site's first allocation. */
struct dwarf_stack {
	int32_t stack_id;
	uint32_t nips;
	uint64_t ips[GM_MAX_STACK_DEPTH];
};

struct failure_rec {
	struct gm_call_event ev;
	uint32_t nips;
	uint64_t ips[GM_MAX_STACK_DEPTH];
};

/* Where a file (kernel dev, inode) was seen, for mappings known only by inode at exit. */
struct known_path {
	uint64_t dev, ino;
	char *path;
};

struct state_fds {
	int procs, sites, allocs, stacks;
};

struct state {
	struct state_fds fd;
	struct proc_rec **procs;	/* every process seen, alive or ended */
	size_t nprocs, procs_cap;
	struct proc_rec **by_pid;	/* open addressing: each pid's newest record */
	size_t by_pid_cap, by_pid_used;
	struct failure_rec *failures;
	size_t nfailures, failures_cap;
	int *pending_exits;
	size_t npending, pending_cap;
	struct symbolizer *sym;
	struct known_path *paths;
	size_t npaths, paths_cap;
	/* Entries in the maps at the last refresh: capacity in use, and proof of cleanup. */
	uint64_t map_procs, map_sites, map_allocs;
	bool want_median_ages;	/* set by a view: walks also find each site's median age */
	struct age_note *ages;	/* scratch for the median: (site, time) of live allocations */
	size_t nages, ages_cap;
};

struct state *state_new(const struct state_fds *fds);
void state_free(struct state *s);
struct proc_rec *state_proc(struct state *s, int pid);	/* finds or creates */
struct proc_rec *state_find(struct state *s, int pid);
/* Identity and module map of a process that just started allocating. */
void state_on_process_new(struct state *s, const struct gm_call_event *e);
void state_on_failure(struct state *s, const struct gm_call_event *e);
/* A process exec'd: remember where its executable is while it can still be asked. */
void state_on_exec(struct state *s, int pid);
/* One executable mapping of an ending process (sent before its exit record). */
void state_on_exit_vma(struct state *s, const struct gm_vma_event *e);
/* Queues an ended process; state_reap() captures its final numbers and drops its entries. */
void state_on_process_exit(struct state *s, const struct gm_call_event *e);
/* Handles queued exits in one pass over the maps; returns how many processes ended. */
size_t state_reap(struct state *s);
/* Reads the maps into the records of living processes (numbers, sites, ages). */
int state_refresh(struct state *s);
/* The same without the walk over every live allocation: numbers and sites, ages left 0. */
int state_refresh_counts(struct state *s);
/* The user stack of a site of pid, innermost first: unwound with CFI where it was, else the
 * frame-pointer stack of stack_id. Returns the frame count (0: none). */
uint32_t state_stack(struct state *s, int pid, int32_t stack_id, uint64_t *ips);
/* Reads a living process's maps again (code loaded since); false if it cannot, and then its
 * captured map stays. */
bool state_reread_maps(struct state *s, struct proc_rec *p);
/* Registers and stack top of a new site's first allocation: unwinds them with CFI. */
void state_on_stack_copy(struct state *s, const struct gm_stack_event *e);

#endif
