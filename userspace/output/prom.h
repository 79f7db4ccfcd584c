/* SPDX-License-Identifier: GPL-2.0 */
/* gpumem's metrics: every family of the Prometheus endpoint, written from one published
 * snapshot (names, labels and meanings: docs/metrics.md). */
#ifndef GPUMEM_PROM_H
#define GPUMEM_PROM_H

#include <stdio.h>
#include "model/snapshot.h"

#define PROM_SITE_SERIES_DEFAULT 10	/* call sites per process in each site family */
#define PROM_SITE_SERIES_MAX 1000
#define PROM_SITE_FRAMES 3		/* named frames in a site label, innermost first */
#define PROM_SITE_FRAME_LEN 64		/* bytes of one frame's name in it */
#define PROM_SITE_LEN 256		/* bytes of a whole site label, NUL included */

struct prom_opts {
	unsigned int site_series;	/* top call sites per process and family; 0: none */
};

/* The options `serve` starts from: PROM_SITE_SERIES_DEFAULT sites. */
#define PROM_OPTS_DEFAULT ((struct prom_opts){ .site_series = PROM_SITE_SERIES_DEFAULT })

/*
 * Writes every gpumem family for s in the text exposition format 0.0.4. Only processes alive
 * in s that made an accounted call have series; ended ones have none. o NULL: the defaults.
 * Returns 0, -ENOMEM (nothing more is written), or -EIO when out reports an error.
 */
int prom_write(FILE *out, const struct snapshot *s, const struct prom_opts *o);

/* The short symbolic stack of a site label: up to PROM_SITE_FRAMES named frames, innermost
 * first, joined by "<-" ("step<-train<-main"); the first frame's module+0xoffset when none is
 * named; "[no stack]" when there are no frames. Untrusted text: the writer escapes it. */
void prom_site_text(const struct snap_stack *st, char *buf, size_t len);

#endif
