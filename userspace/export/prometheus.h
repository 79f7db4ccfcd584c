/* SPDX-License-Identifier: GPL-2.0 */
/* The Prometheus endpoint (libmicrohttpd): GET /metrics renders the snapshot published last;
 * GET /healthz says whether one was, and whether the agent's loop still runs. */
#ifndef GPUMEM_PROMETHEUS_H
#define GPUMEM_PROMETHEUS_H

#include <stdint.h>
#include "model/snapshot.h"
#include "output/prom.h"

#define PROM_SERVER_THREADS 4		/* worker threads, each polling its connections */
#define PROM_SERVER_MAX_CONNS 64	/* connections at once; more are refused */
#define PROM_SERVER_SPARE_CONNS 16	/* kept for requests that arrive whole */
#define PROM_REQUEST_S 5		/* a request not in after this is cut off */
#define PROM_SERVER_TIMEOUT_S 10	/* an idle or slow connection is closed after this */
#define PROM_STALL_S 10		/* no beat for this long: /healthz says the agent stalled */

struct prom_server;

/*
 * Listens on listen, "ADDR:PORT" (IPv4, "127.0.0.1:9400") or "[ADDR]:PORT" (IPv6,
 * "[::1]:9400"); port 0 takes a free one (prom_server_port says which). Renders with *o
 * (copied; NULL: PROM_OPTS_DEFAULT). Returns 0 and *out, or -errno with one p_err line:
 * -EINVAL for an address gpumem cannot read, -EADDRINUSE, -EACCES, -EADDRNOTAVAIL from bind.
 */
int prom_server_start(const char *listen, const struct prom_opts *o, struct prom_server **out);

/* Makes s (a reference of the server's own; the caller keeps its own) what scrapes render
 * from now on, dropping the previous one. Never waits for a scrape in progress. NULL: none
 * (then /metrics and /healthz answer 503, as before the first). */
void prom_server_publish(struct prom_server *srv, struct snapshot *s);

/* The agent's loop ran now: /healthz answers 503 (stalled) after PROM_STALL_S without a beat,
 * once there was one. */
void prom_server_beat(struct prom_server *srv);

/* The port it listens on (the one chosen when started with port 0). */
uint16_t prom_server_port(const struct prom_server *srv);

/* Closes the listening socket and every connection, waits for the workers, drops the
 * snapshot. Call it before the session's symbolizer is freed: a scrape in progress reads the
 * frame names the snapshot lends from it. NULL is a no-op. */
void prom_server_stop(struct prom_server *srv);

#endif
