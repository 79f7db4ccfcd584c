// SPDX-License-Identifier: GPL-2.0
/* Symbolization workload: three levels of calls down to cudaMalloc, and a helper that is always
 * inlined. Built with and without frame pointers, and with its debug info split off. Each call
 * line carries a LINE:name marker that tests/integration/test_symbols.py looks for. */
#include <stdio.h>
#include <stdlib.h>
#include "mock_cuda.h"

/* No inlining, no clones (sym_level3.constprop.0), no tail calls: the names and frames the
 * tests expect are the ones in this file. */
#define SYM_FRAME __attribute__((noipa))

static void keep_live(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

SYM_FRAME void *sym_level3(size_t size)
{
	void *p = NULL;

	if (cudaMalloc(&p, size) != 0) /* LINE:sym_level3 */
		return NULL;
	keep_live(p);
	return p;
}

SYM_FRAME void *sym_level2(size_t size)
{
	void *p = sym_level3(size + 4096); /* LINE:sym_level2 */

	keep_live(p);
	return p;
}

SYM_FRAME void *sym_level1(size_t size)
{
	void *p = sym_level2(size * 2); /* LINE:sym_level1 */

	keep_live(p);
	return p;
}

static inline __attribute__((always_inline)) void *sym_inlined_alloc(size_t size)
{
	void *p = NULL;

	if (cudaMalloc(&p, size) != 0) /* LINE:sym_inlined_alloc */
		return NULL;
	return p;
}

SYM_FRAME void *sym_inline_caller(size_t size)
{
	void *p = sym_inlined_alloc(size + 512); /* LINE:sym_inline_caller */

	keep_live(p);
	return p;
}

int main(void)
{
	void *a = sym_level1(1 << 20); /* LINE:main_level1 */
	void *b = sym_inline_caller(1 << 16); /* LINE:main_inline */

	printf("allocated %p %p\n", a, b);
	return a && b ? 0 : 1;
}
