/* SPDX-License-Identifier: GPL-2.0 */
/* Inside the model (model.h is its face): every process seen, its call sites, named stacks
 * and failures, as the files of model/ share them. Nothing outside model/ includes this. */
#ifndef GPUMEM_STATE_H
#define GPUMEM_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpumem.h"
#include "host/container.h"
#include "host/procs.h"
#include "loader/tracer.h"
#include "model/alloc_table.h"
#include "model/model.h"
#include "model/owners.h"
#include "model/slot_table.h"
#include "model/snapshot.h"

#define STATE_MAX_PENDING_COPIES 16
#define STATE_MAX_KNOWN_PATHS 4096	/* (dev, inode) -> path, for exit-time maps */

struct site_rec {
	struct gm_site_key key;
	struct gm_site_stats st;
	uint64_t oldest_ns;	/* of its oldest live allocation; 0: none (or not walked) */
	uint64_t median_ns;	/* of its median one (SNAP_MEDIAN_AGES); 0: none */
	/* One row per named call site (state_group_sites): the index in its process's sites of
	 * the record this one is shown with (itself for the first of its group), whose ages
	 * are the group's; group_st, on that first record only, is the group's sums. */
	size_t group;
	struct gm_site_stats group_st;
	int32_t site_stack_id, site_py_stack_id;	/* the group's ids (state_site_ids) */
};

/* A site's stack as DWARF unwinding saw it at the site's first allocation. */
struct dwarf_stack {
	int32_t stack_id;
	uint32_t nips;
	uint64_t ips[GM_MAX_STACK_DEPTH];
};

/* A stack named for one process, kept while the process is. */
struct named_stack {
	int32_t stack_id;
	int32_t py_stack_id;	/* negative: none */
	/* The ids of the first stack of this process whose frames are named the same (module,
	 * function, file and line each; function+offset where no line is known): one call
	 * site, whatever return addresses its calls had. Its own ids with --by-address. */
	int32_t site_stack_id, site_py_stack_id;
	bool complete;		/* every frame found its module: never named again */
	uint64_t named_ns;
	unsigned int maps_gen;	/* of the module map it was named with */
	struct snap_stack *stack;
};

/* One process: a pid and a generation (gm_proc_gen of its start), so a pid the kernel hands to a
 * new process before the old one is reaped numbers two records. */
struct proc_rec {
	uint64_t serial;
	int pid;
	uint32_t gen;		/* as the BPF side keys it */
	uint64_t start_ns;	/* ns since boot; 0: not known yet */
	struct proc_rec *older;	/* the pid's previous record, if kept */
	bool alive;
	bool over_bound;	/* ended, among the oldest past --keep-ended: let go (retention.c) */
	bool have_stats;
	/* When reads of /proc about it began (CLOCK_MONOTONIC; 0: never): its identity (comm,
	 * cmdline, cgroup, owner, first module map), its module map again. */
	uint64_t identity_ns, maps_ns;
	char comm[GM_COMM_LEN + 1];
	char *cmdline;
	char *cgroup;
	uint64_t cgroup_id;	/* the id cgroup was taken from; 0: from /proc */
	struct container_info container;	/* parsed from cgroup */
	int ns_pid;		/* its pid in its own pid namespace; 0: unknown */
	char *user;		/* the owner's name; NULL: unknown */
	struct gpu_visible visible;	/* its GPU list variables at its first call (identity) */
	bool visible_tried;		/* read_visible ran (visible may still be unknown) */
	struct module_map mm;	/* captured while the process lived */
	bool have_mm;
	unsigned int maps_gen;	/* bumped whenever mm is (re)captured: names may improve */
	struct module_map exit_mm;	/* its executable mappings as the kernel saw them at exit */
	/* ... and at its first call: kept until a read of its maps proves to be of this image
	 * (an exec may end it before userspace reads them; its map then stands in). */
	struct module_map start_mm;
	/* Its end came with no map of the kernel's (the walk refused: its mmap_lock was held),
	 * and once a frame then found no module, that loss was counted. */
	bool end_map_refused, end_map_loss_counted;
	struct unwinder *unwinder;	/* DWARF unwinding over mm, made at its first new site */
	struct dwarf_stack *dwarf_stacks;	/* sites whose stack was unwound with CFI */
	size_t ndwarf_stacks;
	struct gm_stack_event *pending_copies;	/* to unwind once a module map arrives */
	size_t npending_copies;
	struct named_stack *named;	/* by (stack_id, py_stack_id) */
	size_t nnamed;
	struct site_chain *chains;	/* open addressing: each named chain's first stack */
	size_t chains_cap, nchains;
	struct gm_proc_stats st;
	struct gm_site_stats tensor;	/* PyTorch tensors: the sums of their sites */
	struct owner_peaks lib_peaks;	/* what each owning library held most, at a publish */
	uint64_t other_allocs;		/* live entries of the kinds that are no GPU memory */
	uint64_t imported_allocs;	/* of those, IPC imports (their size is unknown) */
	struct site_rec *sites;	/* by key (site_cmp), for the walk over allocations; tensor
				 * sites (probe_is_tensor) among them */
	size_t nsites;
	uint64_t end_ns;	/* exit time (alive: time of the last refresh) */
	int exit_code;
	bool reaped;		/* ended and its entries dropped from the maps */
	bool no_proc_entry;	/* its sites were recorded but not its totals (--max-procs) */
	bool exit_known;	/* the kernel reported its end, with its exit code */
	uint64_t exit_cpu_ns;	/* exit_known: its CPU time then (0: none, or not known) */
	bool execed;		/* its end was an exec (no exit code): another image took its
				 * pid, a record of its own */
	bool exit_queued;	/* waits in pending_exits for state_reap */
	bool reaping;		/* one of the records the current read_maps pass reaps */
	uint64_t reaped_ns;	/* when: --keep-ended-for counts from here */
	bool ages_known;	/* sites' oldest_ns are as the last walk of allocs found them */
	bool medians_known;
};

struct failure_rec {
	uint64_t serial;	/* its process record's: named again while that one is kept */
	struct gm_call_event ev;
	struct snap_stack *stack;
	struct container_info container;
	bool has_container;
};

/* Where a file (kernel dev, inode) was seen, for mappings known only by inode at exit. */
struct known_path {
	uint64_t dev, ino;
	char *path;
};


struct age_note;
struct cgroup_cache;
struct oci_cache;
struct user_cache;

struct state {
	struct model_maps fd;
	struct state_opts opt;
	uint64_t next_serial;
	struct proc_rec **procs;	/* every process kept, alive or ended */
	size_t nprocs, procs_cap;
	struct proc_rec **by_pid;	/* open addressing: each pid's newest record (older ones
					 * hang from it, newest first) */
	size_t by_pid_cap, by_pid_used;
	/* Failure records: the first keep_failures, then the most recent keep_failures in a ring
	 * (recent[recent_head] is the oldest of those); the ones between are counted, not kept.
	 * Per-site and per-process failure counts stay exact in the maps. */
	struct failure_rec *failures, *recent;
	size_t nfailures, nrecent, recent_head;
	struct proc_rec **pending_exits;	/* ended, to reap (alive until then) */
	size_t npending, pending_cap;
	struct symbolizer *sym;
	struct purge *purge;	/* ended processes whose allocation entries wait (purge.h) */
	uint64_t alloc_capacity;	/* the allocations the table holds: half its slots */
	struct alloc_table allocs;	/* that map, mapped */
	struct slot_table sites;	/* the sites map, mapped */
	struct slot_table proc_table;	/* the procs map, mapped */
	struct cgroup_cache *cgroups;
	struct user_cache *users;
	struct known_path *paths;
	size_t npaths, paths_cap;
	/* Entries in the maps at the last refresh: capacity in use, and proof of cleanup. */
	uint64_t map_procs, map_sites, map_allocs;
	bool map_allocs_valid;	/* map_allocs was counted (a walk of allocs happened) */
	unsigned int exit_wants;	/* enum snap_want: what to capture of a process at its end */
	struct age_note *ages;	/* scratch for the median: (site, time) of live allocations */
	size_t nages, ages_cap;
	uint64_t lost[SNAP_LOST_COUNT];
	struct oci_cache *oci;	/* pod and container names from OCI bundles (lent; NULL: none) */
	uint64_t mono_to_real_ns;	/* wall clock minus CLOCK_MONOTONIC, read once at start */
	struct python *py;	/* CPython processes and their frames (python.h) */
};

/* The record of process (pid, gen), made if there is none; start_ns (0: unknown) is kept if the
 * record had none. */
struct proc_rec *state_proc(struct state *s, int pid, uint32_t gen, uint64_t start_ns);
/* The record of process (pid, gen), or NULL. */
struct proc_rec *state_find_gen(struct state *s, int pid, uint32_t gen);
/* The newest record of pid, or NULL. */
struct proc_rec *state_find(struct state *s, int pid);
/* The cgroup an event of p was made in: p's container, even when /proc no longer tells. */
void state_follow_event_cgroup(struct state *s, struct proc_rec *p, uint64_t cgroup_id);
/* Reads the maps into the records of living processes; wants: SNAP_AGES, SNAP_MEDIAN_AGES. A
 * table that could not be mapped (said by state_new) reads as empty. */
void state_refresh(struct state *s, unsigned int wants);
/* The named stack of a site of p (a new reference; NULL only when out of memory). */
struct snap_stack *state_named_stack(struct state *s, struct proc_rec *p, int32_t stack_id,
				     int32_t py_stack_id);
/* The ids of the site a stack of p counts in: the first stack of p named the same (names it if
 * need be). */
void state_site_ids(struct state *s, struct proc_rec *p, int32_t *stack_id,
		    int32_t *py_stack_id);
/* Groups p's sites (sorted) by the site their stacks count in: each record's group, and the
 * first record's group_st. */
void state_group_sites(struct state *s, struct proc_rec *p);
void site_chains_free(struct proc_rec *p);
/* The raw user stack of a site of p, innermost first (CFI-unwound where it was). */
uint32_t state_stack_ips(struct state *s, const struct proc_rec *p, int32_t stack_id,
			 uint64_t *ips);
/* Reads a living process's maps again (code loaded since); false if it cannot, and then its
 * captured map stays. */
bool state_reread_maps(struct state *s, struct proc_rec *p);
/* A frame of p found no module: a loss (module_maps_missed, once for p) where the kernel's
 * walk at p's end was refused. */
void state_frame_unmapped(struct state *s, struct proc_rec *p);
/* The kernel's loss and health counters, summed over CPUs. */
void state_counters(struct state *s, uint64_t out[GM_CNT_COUNT]);


/* Letting go (retention.c): ended processes beyond the bounds, oldest end first. */
void state_retain(struct state *s, uint64_t now);
void proc_rec_free(struct proc_rec *p);
/* Rebuilds the pid index after records were dropped. */
void state_reindex(struct state *s);

#endif
