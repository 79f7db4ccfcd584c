// SPDX-License-Identifier: GPL-2.0
/* SIGBUS from a file cut short under a guarded read: back to the guard (bus_guard.h). */
#include <signal.h>
#include <stddef.h>
#include "base/bus_guard.h"

static __thread struct bus_guard *innermost;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	struct bus_guard *g = innermost;

	(void)uc;
	/* BUS_ADRERR: a mapped page with no file behind it any more. */
	if (g && si->si_code == BUS_ADRERR) {
		innermost = g->outer;
		siglongjmp(g->env, 1);
	}
	/* Any other: the faulting access runs again without a handler, and ends the process. */
	signal(sig, SIG_DFL);
}

void bus_guard_enter(struct bus_guard *g)
{
	/* Set at each outermost guard: another handler may have been set since (a test
	 * harness's), and one that fired unguarded put the default back. */
	if (!innermost) {
		struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGBUS, &sa, NULL);
	}
	g->outer = innermost;
	innermost = g;
}

void bus_guard_leave(struct bus_guard *g)
{
	if (innermost == g)
		innermost = g->outer;
}
