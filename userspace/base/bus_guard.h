/* SPDX-License-Identifier: GPL-2.0 */
/* Reading a file through a mapping that its owner can cut short. libdw maps every file it
 * reads; a file truncated meanwhile (cp over it truncates first) raises SIGBUS at the next
 * read of a page past its new end, which would end gpumem. Such reads run under a guard: that
 * signal, on the guard's thread, returns to the guard's sigsetjmp, and the caller drops what
 * it was reading (libdw's state over the file is not to be used again).
 *
 *	struct bus_guard g;
 *
 *	bus_guard_enter(&g);
 *	if (sigsetjmp(g.env, 1)) {
 *		bus_guard_leave(&g);
 *		return ...;	// the file was cut short: nothing read from it stands
 *	}
 *	... reads through the mapping ...
 *	bus_guard_leave(&g);
 *
 * Guards nest; a SIGBUS with no guard set, or not of a mapping's missing page, ends the
 * process as it would without them. */
#ifndef GPUMEM_BUS_GUARD_H
#define GPUMEM_BUS_GUARD_H

#include <setjmp.h>

struct bus_guard {
	sigjmp_buf env;
	struct bus_guard *outer;
};

void bus_guard_enter(struct bus_guard *g);
void bus_guard_leave(struct bus_guard *g);

#endif
