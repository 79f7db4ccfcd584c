// SPDX-License-Identifier: GPL-2.0
/* gpumem report FILE.db [VIEW]: the views, answered from a recording (next commit). */
#include "report_cmd.h"
#include "util.h"

int report_run(const struct options *o)
{
	(void)o;
	p_err("report is not implemented yet");
	return 1;
}
