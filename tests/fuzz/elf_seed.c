// SPDX-License-Identifier: GPL-2.0
/* The source of the generated ELF seeds (fuzz.mk): global, weak, local and IFUNC functions,
 * a versioned-looking name, and an entry point for the static executable. */

static int counter;

__attribute__((noinline)) static int seed_local(int x)
{
	asm volatile("");
	return x + counter;
}

int seed_global(int x)
{
	return seed_local(x) * 2;
}

__attribute__((weak)) int seed_weak(int x)
{
	return x - 1;
}

static int seed_impl(int x)
{
	return x;
}

static int (*seed_resolve(void))(int)
{
	return seed_impl;
}

int seed_ifunc(int x) __attribute__((ifunc("seed_resolve")));

void seed_entry(void)
{
	counter = seed_global(1) + seed_weak(2);
	for (;;)
		asm volatile("");
}
