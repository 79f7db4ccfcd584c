/* SPDX-License-Identifier: GPL-2.0 */
/* Error reporting, verbosity and small helpers shared by every userspace file. */
#ifndef GPUMEM_UTIL_H
#define GPUMEM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* A macro's value as a string literal: a limit said in a message is the one defined. */
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

extern bool verbose;

/* The one way to report an error: "gpumem: <message>" on stderr. */
void p_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A notable event, one line on stderr as p_err writes it (the agent's log). */
void p_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Diagnostics shown only with -v. */
void p_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

uint64_t now_ns(void);		/* CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns() */
uint64_t realtime_ns(void);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t size);
char *xstrdup(const char *s);
/* A copy of at most max bytes of s (cut on a UTF-8 character's start). */
char *xstrndup(const char *s, size_t max);

/* Set by the signal that asks the run to stop (SIGINT, SIGTERM, SIGHUP): long work below the
 * session's loop (a query of a recording) looks at it and gives up. */
extern volatile sig_atomic_t gm_stop_requested;

#endif
