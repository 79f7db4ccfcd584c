// SPDX-License-Identifier: GPL-2.0
/* Symbolization workload, shared-library side: three levels down to cudaMalloc in a library
 * that sym_dl loads with dlopen. LINE:name markers as in sym_levels.c. */
#include <stdlib.h>
#include "mock_cuda.h"

#define SYM_FRAME __attribute__((noipa, visibility("default")))

static void keep_live(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

SYM_FRAME void *symdl_level3(size_t size)
{
	void *p = NULL;

	if (cudaMalloc(&p, size) != 0) /* LINE:symdl_level3 */
		return NULL;
	keep_live(p);
	return p;
}

SYM_FRAME void *symdl_level2(size_t size)
{
	void *p = symdl_level3(size + 4096); /* LINE:symdl_level2 */

	keep_live(p);
	return p;
}

SYM_FRAME void *symdl_level1(size_t size)
{
	void *p = symdl_level2(size * 2); /* LINE:symdl_level1 */

	keep_live(p);
	return p;
}
