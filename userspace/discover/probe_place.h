/* SPDX-License-Identifier: GPL-2.0 */
/* Where a function's probe goes: at its symbol, or just past a leading instruction that only
 * sets flags, on the next one when the kernel emulates it (x86-64). */
#ifndef GPUMEM_PROBE_PLACE_H
#define GPUMEM_PROBE_PLACE_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of a function read to decide: two instructions fit (a flag-setting one is at most 12
 * bytes here, the emulated one at most 6). */
#define PROBE_PLACE_BYTES 32

struct probe_place {
	unsigned int offset;	/* bytes past the symbol; 0: at the symbol */
	const char *skipped;	/* the instruction stepped over ("cmpl"); NULL at the symbol */
	const char *landing;	/* the emulated instruction probed instead ("je") */
};

/*
 * Decodes code[0..len), a function's first bytes (len no more than the function's size), and
 * says where its probe goes. The probe moves only past one instruction that writes nothing but
 * the flags (cmp, test: no register, memory or stack pointer changes, no branch), onto a jcc,
 * jmp, call rel32, push of a register or nop, the instructions arch/x86/kernel/uprobes.c
 * emulates (branch_setup_xol_ops, push_setup_xol_ops); any other shape, an unknown prefix or
 * bytes that end early keep it at the symbol.
 */
void probe_place_decode(const uint8_t *code, size_t len, struct probe_place *out);

/* Whether the file open on fd is a 64-bit x86 ELF (the decoder's instruction set) and this
 * gpumem runs on x86-64; otherwise every probe stays at its symbol. */
int probe_place_file_ok(int fd);

/* Reads at most PROBE_PLACE_BYTES of the function at file_off (never past size: a size of 0,
 * unknown, keeps the symbol; a short read is decoded as bytes that end early). */
void probe_place_read(int fd, uint64_t file_off, uint64_t size, struct probe_place *out);

/* Puts back at its symbol each moved probe that would share its place with another function's
 * probe (both go back), or move past or onto another function's symbol (in a file made so),
 * so that each call keeps its api:
 * symbol[i] is function i's file offset (0: absent), placed[i] and where[i] its placement,
 * both updated. Aliases (one offset, two names) are not a collision. */
void probe_place_unshare(const uint64_t *symbol, uint64_t *placed, struct probe_place *where,
			 unsigned int n);

#endif
