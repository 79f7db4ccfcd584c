/* SPDX-License-Identifier: GPL-2.0 */
/* What chrome.c collects while the export runs and chrome_json.c writes at its end. */
#ifndef GPUMEM_CHROME_H
#define GPUMEM_CHROME_H

#include <stdint.h>
#include <stdio.h>
#include "export/exporters.h"
#include "export/timeline.h"

#define CHROME_TOP_SITES 10	/* site tracks per process */
#define CHROME_SITE_FRAMES 3	/* frames in a site track's name */

enum rec_type { REC_PROCESS, REC_SITE, REC_FAILURE, REC_TENSORS, REC_GPU };

/* One sample, as the scratch file keeps it until the end. */
struct chrome_rec {
	uint64_t wall_ns;
	uint64_t value;		/* bytes; a failure: the size asked for */
	uint32_t proc;		/* the timeline's process index */
	uint32_t site;		/* the process's site index; REC_GPU: the device slot */
	uint32_t tid;
	int32_t error;
	uint16_t api;
	uint8_t type, layer;
};

/* The trace: metadata naming each process, then every sample of the scratch file (nrecs
 * records) whose track is a process's or one of its top sites', and in otherData what the
 * source lost (final: its last snapshot; NULL: not known). Returns 0 or -errno (after p_err)
 * when the scratch file cannot be read back; write errors are the caller's to see. */
int chrome_write_json(const struct exporter *x, FILE *out, FILE *scratch,
		      const struct timeline *tl, uint64_t nrecs, const struct snapshot *final);

#endif
