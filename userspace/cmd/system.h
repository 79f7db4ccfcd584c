/* SPDX-License-Identifier: GPL-2.0 */
/* What gpumem needs from the system, checked before anything loads. */
#ifndef GPUMEM_SYSTEM_H
#define GPUMEM_SYSTEM_H

#include "cmd/options.h"

/* Returns 0, or -errno after one line saying what is missing; may turn holding off (with a
 * warning) where gpumem could not resume what it held. */
int check_system(struct options *o);

#endif
