/* SPDX-License-Identifier: GPL-2.0 */
/* Processes that run CPython: their interpreter found and checked, its offsets given to the
 * BPF side (py_procs); their Python stacks named while they live; Python frames merged into
 * native stacks in place of the interpreter's own. */
#ifndef GPUMEM_PYTHON_H
#define GPUMEM_PYTHON_H

#include <stdbool.h>
#include <stdint.h>
#include "gpumem.h"
#include "host/procs.h"
#include "model/snapshot.h"

#define PY_MAX_NAMED 4096	/* Python stacks named per process */

struct python;

/* py_procs_fd, py_stacks_fd: -1 for none (a reader of an agent's maps); py_procs_gen_fd: the
 * count of entries made in py_procs, -1 for none (a reader). refused: where the processes
 * whose interpreter did not pass the checks are counted. */
/* read_only: a running agent's maps (it registers processes; this names their frames). */
struct python *python_new(int py_procs_fd, int py_stacks_fd, int py_procs_gen_fd,
			  uint64_t *refused, bool read_only);
void python_free(struct python *py);
/* Names (files, functions) not kept: past the bound on what Python names may cost. */
uint64_t python_names_dropped(const struct python *py);
/* Python stacks not named: a process had as many as gpumem names for one (PY_MAX_NAMED). */
uint64_t python_stacks_unnamed(const struct python *py);
/* pid exec'd exe (its /proc/PID/exe; NULL: not known): whatever it ran before is forgotten,
 * and its new program examined when its name may be an interpreter's (at exec a shared
 * libpython is not mapped yet: such a process is examined at its CUDA library's open). */
void python_on_exec(struct python *py, int pid, const char *exe);
/* pid opened a CUDA library or made its first call (a target is held at both): examined now
 * if it was not, its interpreter mapped by then (at exec, a shared libpython is not yet). */
void python_examine_pid(struct python *py, int pid);
/* python_examine_pid at a process's first call, where a failed check of the live process is
 * final (earlier ones are tried again then). */
void python_examine_final(struct python *py, int pid);
/* pid allocates: a refusal of its interpreter now counts in python_refused. */
void python_on_traced(struct python *py, int pid);
/* pid's module map was read: examined once, if it was not at exec. */
void python_examine(struct python *py, int pid, const struct module_map *mm);
/* A new Python stack: its code objects named now, while the process lives. */
void python_on_stack(struct python *py, const struct gm_py_stack_event *e);
/* pid ended: its interpreter's entry goes from the BPF side. */
void python_on_exit(struct python *py, int pid);
/* Says (-v) which processes the BPF side found unlike their offsets; drops the entries of
 * processes that are gone. */
void python_refresh(struct python *py);
/* Python frames in place of the interpreter's native frames of st (frames[0..*n), innermost
 * first, room for GM_PY_MAX_FRAMES + 1 more); *n is updated. */
void python_merge(struct python *py, int pid, int32_t py_stack_id, struct snap_frame *frames,
		  uint32_t *n);

#endif
