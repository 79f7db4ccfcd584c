/* SPDX-License-Identifier: GPL-2.0 */
/* `gpumem report FILE.db sites`: every call site of a window, as a table or one JSON object. */
#ifndef GPUMEM_VIEWS_SITES_H
#define GPUMEM_VIEWS_SITES_H

#include "recording.h"
#include "session.h"

/* Prints the sites of [since, until] to s->out; returns non-zero on a write error. */
int sites_report(struct session *s, const struct rec_sites *rs, uint64_t since, uint64_t until);

#endif
