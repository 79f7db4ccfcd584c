/* SPDX-License-Identifier: GPL-2.0 */
/* The agent's pins: maps and links under a directory of the BPF file system (pin.c). */
#ifndef GPUMEM_PIN_H
#define GPUMEM_PIN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpumem.h"

struct bpf_object;
struct bpf_map;

#define PIN_FILE_PROGS 6	/* uprobe_multi links per attached file: one per program */

/* dir/name into buf; -ENAMETOOLONG when it does not fit. */
int pin_path(char *buf, size_t len, const char *dir, const char *name);
/* Whether m lives in the pin directory (the object's data sections and the holds do not). */
bool pin_keeps_map(const struct bpf_map *m);
/*
 * Before load: creates dir (on a BPF file system) and points each kept map at its pin, so
 * that load reuses pinned maps and pins new ones. *adopting: pinned state was there. Refuses
 * (with the command that resets it) state of another layout or other capacities, and state
 * whose agent still runs (-EBUSY).
 */
int pin_prepare(struct bpf_object *obj, const char *dir, const struct gm_agent *want,
		bool *adopting);
/* The agent record of dir's pins: -ENOENT when nothing is pinned there. */
int pin_read_agent(const char *dir, struct gm_agent *out);
int pin_write_agent(const char *dir, const struct gm_agent *a);
/* Whether a's agent is alive: its heartbeat is fresh and its PID is a gpumem. */
bool pin_agent_running(const struct gm_agent *a);
/* Whether pid is a running gpumem (by its comm). */
bool pid_is_gpumem(uint32_t pid);
/* The pin of an attached file's link for program prog (0..PIN_FILE_PROGS-1). */
int pin_file_link_name(char *buf, size_t len, const char *dir, uint64_t kdev, uint64_t ino,
		       unsigned int prog);
/* Whether the file's probes are pinned already (an earlier agent attached them). */
bool pin_file_linked(const char *dir, uint64_t kdev, uint64_t ino);
/* Takes the file's pinned links out, their probes gone when this returns: an earlier agent's,
 * made for what the file held then. Returns how many pins went. */
int pin_drop_file_links(const char *dir, uint64_t kdev, uint64_t ino);
/* Why the map pinned at fd cannot stand for m (type, key, value, capacity), written into why,
 * or NULL when it can. */
const char *pin_map_mismatch(int fd, const struct bpf_map *m, char *why, size_t len);
/* Removes the pins of files' links (an earlier agent's) for which in_use says no: the files no
 * process maps now. Returns how many pins went. */
int pin_unlink_stale_files(const char *dir, bool (*in_use)(void *ctx, uint64_t kdev, uint64_t ino),
			   void *ctx);
/* Pins a map or link fd at path (one error line when it fails). */
int pin_fd(int fd, const char *path);
/* serve --reset: removes what an agent pinned in dir (its record, the maps named in names, its
 * links) and dir when nothing else is left, which detaches the probes; refused while an agent
 * runs there, and where no agent's record is. */
int pin_reset(const char *dir, const char *const *names, size_t nnames);

/* The accounting maps of a running agent, for a reader that attaches nothing. */
struct pin_maps {
	int procs, sites, allocs, stacks, counters;
	int py_procs, py_stacks;	/* -1 when the agent has none (an older one) */
};
int pin_open_maps(const char *dir, struct pin_maps *out);
void pin_close_maps(struct pin_maps *m);

#endif
