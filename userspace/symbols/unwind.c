// SPDX-License-Identifier: GPL-2.0
/* DWARF unwinding of a copied user stack (as perf --call-graph dwarf does), with libdwfl and
 * the CFI (.eh_frame, .debug_frame) of the modules in a process's captured module map. */
#include <elfutils/libdwfl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/bus_guard.h"
#include "base/util.h"
#include "symbols/debuginfo.h"
#include "symbols/symbolize.h"
#include "symbols/unwind.h"

/* DWARF register numbers on x86-64. */
enum {
	DW_RBX = 3,
	DW_RBP = 6,
	DW_RSP = 7,
	DW_R12 = 12,
	DW_RIP = 16,
};

struct unwinder {
	Dwfl *dwfl;
	struct symbolizer *sym;
	bool attached;
	const struct gm_stack_event *ev;	/* the stack being unwound now */
	uint64_t *ips;
	uint32_t max, n;
	bool ran_off;	/* a read of the stack past the bytes copied */
};

/* How far above the copy a read is taken for the stack's own (a thread's stack is at most a
 * few MiB): one further off is no frame's. */
#define STACK_SPAN (64ull << 20)

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = debuginfo_find,	/* its path: a module's userdata, none here */
	.debuginfo_path = &debuginfo_path,
};

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct unwinder *u = arg;

	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = u;
	return (pid_t)u->ev->tid;
}

/* Only the copied stack is readable: CFI rarely needs anything else. */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct unwinder *u = arg;
	uint64_t sp = u->ev->regs[GM_REG_SP], off = addr - sp, len = u->ev->len;

	(void)dwfl;
	/* No sum that may wrap: addr is the traced program's (its registers, its CFI). */
	if (addr < sp || off > len || len - off < sizeof(*result)) {
		u->ran_off |= addr >= sp && off < STACK_SPAN;	/* above the copy */
		return false;
	}
	memcpy(result, u->ev->stack + off, sizeof(*result));
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct unwinder *u = arg;
	const __u64 *r = u->ev->regs;
	Dwarf_Word bx = r[GM_REG_BX], bp_sp[2] = { r[GM_REG_BP], r[GM_REG_SP] };
	Dwarf_Word r12_15[4] = { r[GM_REG_R12], r[GM_REG_R13], r[GM_REG_R14], r[GM_REG_R15] };

	if (!dwfl_thread_state_registers(thread, DW_RBX, 1, &bx) ||
	    !dwfl_thread_state_registers(thread, DW_RBP, 2, bp_sp) ||
	    !dwfl_thread_state_registers(thread, DW_R12, 4, r12_15))
		return false;
	dwfl_thread_state_register_pc(thread, r[GM_REG_IP]);
	return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* Whether a file only root can have written (and so cut short): owned by root, writable by
 * no group or other. */
static bool root_written(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* One module per file, at the bias of its first mapping (as perf reports them); past the bound
 * of sessions dropped (SYM_CUT_SHORT_MAX), only files root wrote: stacks unwind through those
 * and stop at the others' frames. */
static void report_modules(Dwfl *dwfl, struct symbolizer *sym, int pid,
			   const struct module_map *mm)
{
	bool root_only = symbolizer_cut_short_count(sym) >= SYM_CUT_SHORT_MAX;

	char file[PATH_MAX];
	int fd;

	dwfl_report_begin(dwfl);
	for (size_t i = 0; i < mm->count; i++) {
		const struct mapping *m = &mm->maps[i];
		bool seen = false;

		if (!m->path || m->path[0] != '/')
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = mm->maps[j].path && strcmp(mm->maps[j].path, m->path) == 0;
		if (seen)
			continue;
		/* As the symbolizer opens it: handed to libdwfl as a descriptor. */
		fd = symbolizer_open_mapped(sym, pid, m, file, sizeof(file));
		if (fd < 0) {
			p_debug("unwinding PID %d: cannot open %s: %s", pid, file, strerror(-fd));
			continue;
		}
		if (root_only && !root_written(fd)) {
			close(fd);
			continue;
		}
		/* libdwfl takes the descriptor over, but not when it refuses the file. */
		if (!dwfl_report_elf(dwfl, m->path, file, fd, m->start - m->pgoff, false)) {
			p_debug("unwinding PID %d: cannot use %s: %s", pid, file, dwfl_errmsg(-1));
			close(fd);
		}
	}
	dwfl_report_end(dwfl, NULL, NULL);
}

/* libdw's read of one of the modules raised SIGBUS: a file cut short under its mapping
 * (written in place). The session is dropped, not ended (symbolize.h, SYM_CUT_SHORT_MAX): no
 * stack of the process is unwound by it again. */
static void cut_short(struct unwinder *u)
{
	symbolizer_note_cut_short(u->sym, u->dwfl);
	u->dwfl = NULL;
	u->attached = false;
}

struct unwinder *unwinder_new(struct symbolizer *sym, int pid, const struct module_map *mm)
{
	struct unwinder *u;
	struct bus_guard g;

	u = xcalloc(1, sizeof(*u));
	u->sym = sym;
	u->dwfl = dwfl_begin(&callbacks);
	if (!u->dwfl) {
		free(u);
		return NULL;
	}
	bus_guard_enter(&g);
	if (sigsetjmp(g.env, 1)) {
		bus_guard_leave(&g);
		cut_short(u);
		return u;
	}
	report_modules(u->dwfl, sym, pid, mm);
	u->attached = dwfl_attach_state(u->dwfl, NULL, pid, &thread_callbacks, u);
	bus_guard_leave(&g);
	if (!u->attached)
		p_debug("cannot unwind PID %d (%zu mappings): %s", pid, mm->count, dwfl_errmsg(-1));
	return u;
}

void unwinder_free(struct unwinder *u)
{
	if (!u)
		return;
	if (u->dwfl)
		dwfl_end(u->dwfl);
	free(u);
}

static int on_frame(Dwfl_Frame *frame, void *arg)
{
	struct unwinder *u = arg;
	Dwarf_Addr pc;

	if (!dwfl_frame_pc(frame, &pc, NULL) || !pc)
		return DWARF_CB_ABORT;
	u->ips[u->n++] = pc;
	return u->n < u->max ? DWARF_CB_OK : DWARF_CB_ABORT;
}

uint32_t unwind_stack(struct unwinder *u, const struct gm_stack_event *ev, uint64_t *ips,
		      uint32_t max, bool *cut)
{
	struct bus_guard g;

	*cut = false;
	if (!u || !u->attached || !max)
		return 0;
	u->ev = ev;
	u->ips = ips;
	u->max = max;
	u->n = 0;
	u->ran_off = false;
	bus_guard_enter(&g);
	if (sigsetjmp(g.env, 1)) {
		bus_guard_leave(&g);
		cut_short(u);
		u->ev = NULL;
		return 0;
	}
	/* Stops with an error where the CFI or the copied stack ends: the frames so far stand. */
	dwfl_getthread_frames(u->dwfl, (pid_t)ev->tid, on_frame, u);
	bus_guard_leave(&g);
	u->ev = NULL;
	/* A copy known to hold the stack whole cuts nothing: a read above it is no frame's
	 * (the outermost frame's return address guessed from a leftover frame pointer). */
	*cut = u->ran_off && !(ev->flags & GM_STACK_COPY_WHOLE) && u->n < max;
	return u->n;
}
