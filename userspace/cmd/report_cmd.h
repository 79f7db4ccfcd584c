/* SPDX-License-Identifier: GPL-2.0 */
/* gpumem report FILE.db [VIEW]: the views, answered from a recording. */
#ifndef GPUMEM_REPORT_CMD_H
#define GPUMEM_REPORT_CMD_H

#include "options.h"

/* Runs the report the options ask for; returns the exit status. */
int report_run(const struct options *o);

#endif
