/* SPDX-License-Identifier: GPL-2.0 */
/* One run of gpumem: a source (live tracing, or the recording o->replay_path names) feeding the
 * sink o->view through one loop (session_int.h). */
#ifndef GPUMEM_SESSION_H
#define GPUMEM_SESSION_H

#include "config/options.h"

/* Runs the whole session; returns the process exit status. */
int session_run(const struct options *opt);

#endif
