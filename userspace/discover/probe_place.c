// SPDX-License-Identifier: GPL-2.0
/* Probe placement past a flag-setting entry instruction: the decoder of the few x86-64
 * encodings it accepts, over bytes read from an untrusted file with bounded reads. */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "discover/probe_place.h"

/*
 * Why: the kernel emulates a probed jcc/jmp/call/push/nop, but single-steps any other
 * instruction out of line, a trap more (NVIDIA's driver stubs begin with a RIP-relative
 * cmpl: an empty probe costs 12x more there than on the je after it, docs/benchmark.md).
 * After an instruction that writes only the flags, the registers, the stack pointer and the
 * return address at [sp] are as they were at the symbol, so the entry program reads the same
 * arguments and stack pointer, and a return probe placed there hijacks the same return
 * address.
 */

#define REX_W 0x08

/* Length of a ModRM operand (ModRM, SIB, displacement) at c[0..n), 0 if cut short. */
static size_t modrm_operand_len(const uint8_t *c, size_t n)
{
	unsigned int mod, rm;
	size_t len = 1, disp = 0;

	if (n < 1)
		return 0;
	mod = c[0] >> 6;
	rm = c[0] & 7;
	if (mod != 3 && rm == 4) {	/* a SIB byte follows */
		if (n < 2)
			return 0;
		len = 2;
		if (mod == 0 && (c[1] & 7) == 5)
			disp = 4;	/* no base: disp32 */
	}
	if (mod == 0 && rm == 5)
		disp = 4;		/* RIP-relative */
	else if (mod == 1)
		disp = 1;
	else if (mod == 2)
		disp = 4;
	len += disp;
	return len <= n ? len : 0;
}

/* cmp and test, the instructions that write nothing but the flags: their length, else 0. */
static size_t flag_only_len(const uint8_t *c, size_t n, const char **name)
{
	size_t i = 0, operand, imm = 0;
	unsigned int rex = 0, op, reg;
	bool wide;

	if (n > 0 && (c[0] & 0xf0) == 0x40)
		rex = c[i++];	/* one REX prefix; any other prefix keeps the symbol */
	if (i >= n)
		return 0;
	op = c[i++];
	wide = rex & REX_W;
	switch (op) {
	case 0x3c:	/* cmp $imm8,%al */
	case 0xa8:	/* test $imm8,%al */
		*name = op == 0x3c ? "cmp" : "test";
		return i + 1 <= n ? i + 1 : 0;
	case 0x3d:	/* cmp $imm32,%eax */
	case 0xa9:	/* test $imm32,%eax */
		*name = op == 0x3d ? "cmp" : "test";
		return i + 4 <= n ? i + 4 : 0;
	case 0x38: case 0x39: case 0x3a: case 0x3b:	/* cmp r, r/m and r/m, r */
	case 0x84: case 0x85:				/* test r/m, r */
		*name = op >= 0x84 ? "test" : "cmp";
		break;
	case 0x80: case 0x81: case 0x83:	/* group 1: only /7 is cmp */
	case 0xf6: case 0xf7:			/* group 3: only /0 is test */
		if (i >= n)
			return 0;
		reg = (c[i] >> 3) & 7;
		if (op >= 0xf6 ? reg != 0 : reg != 7)
			return 0;
		imm = op == 0x81 || op == 0xf7 ? 4 : 1;
		if (op == 0x80 || op == 0xf6)
			*name = op == 0x80 ? "cmpb" : "testb";
		else if (op == 0xf7)
			*name = wide ? "testq" : "testl";
		else
			*name = wide ? "cmpq" : "cmpl";
		break;
	default:
		return 0;
	}
	operand = modrm_operand_len(c + i, n - i);
	if (!operand || operand + imm > n - i)
		return 0;
	return i + operand + imm;
}

/* The instructions the kernel emulates at a probe, with no prefix the kernel refuses (66 on a
 * branch fails the attach): their length, else 0. */
static size_t emulated_len(const uint8_t *c, size_t n, const char **name)
{
	static const char *const jcc[16] = {
		"jo", "jno", "jb", "jae", "je", "jne", "jbe", "ja",
		"js", "jns", "jp", "jnp", "jl", "jge", "jle", "jg",
	};
	size_t len;

	if (n < 1)
		return 0;
	if (c[0] >= 0x70 && c[0] <= 0x7f) {
		*name = jcc[c[0] & 15];
		len = 2;
	} else if (c[0] == 0x0f && n >= 2 && c[1] >= 0x80 && c[1] <= 0x8f) {
		*name = jcc[c[1] & 15];
		len = 6;
	} else if (c[0] == 0xeb || c[0] == 0xe9) {
		*name = "jmp";
		len = c[0] == 0xeb ? 2 : 5;
	} else if (c[0] == 0xe8) {
		*name = "call";
		len = 5;
	} else if (c[0] >= 0x50 && c[0] <= 0x57) {
		*name = "push";
		len = 1;
	} else if (c[0] == 0x41 && n >= 2 && c[1] >= 0x50 && c[1] <= 0x57) {
		*name = "push";	/* %r8-%r15: the one REX push_setup_xol_ops takes */
		len = 2;
	} else if (c[0] == 0x90) {
		*name = "nop";
		len = 1;
	} else {
		return 0;
	}
	return len <= n ? len : 0;
}

void probe_place_decode(const uint8_t *code, size_t len, struct probe_place *out)
{
	const char *skipped = NULL, *landing = NULL;
	size_t first, second;

	memset(out, 0, sizeof(*out));
	if (!code)
		return;
	first = flag_only_len(code, len, &skipped);
	if (!first)
		return;
	second = emulated_len(code + first, len - first, &landing);
	if (!second)
		return;
	out->offset = (unsigned int)first;
	out->skipped = skipped;
	out->landing = landing;
}

int probe_place_file_ok(int fd)
{
#if defined(__x86_64__)
	uint8_t ehdr[20];

	if (pread(fd, ehdr, sizeof(ehdr), 0) != (ssize_t)sizeof(ehdr))
		return 0;
	/* \177ELF, ELFCLASS64, little-endian, e_machine EM_X86_64 (62) */
	return memcmp(ehdr, "\177ELF", 4) == 0 && ehdr[4] == 2 && ehdr[5] == 1 &&
	       ehdr[18] == 62 && ehdr[19] == 0;
#else
	(void)fd;
	return 0;
#endif
}

void probe_place_read(int fd, uint64_t file_off, uint64_t size, struct probe_place *out)
{
	uint8_t code[PROBE_PLACE_BYTES];
	size_t want = size < sizeof(code) ? (size_t)size : sizeof(code);
	ssize_t got;

	memset(out, 0, sizeof(*out));
	if (!want || file_off > INT64_MAX)
		return;
	got = pread(fd, code, want, (off_t)file_off);
	if (got <= 0)
		return;
	probe_place_decode(code, (size_t)got, out);
}

/* Another function j whose probe would share i's place, or whose symbol lies in the bytes i's
 * probe moved past or at its new place; -1 if none. Aliases (one offset) are no conflict. */
static int place_conflict(const uint64_t *symbol, const uint64_t *placed, unsigned int n,
			  unsigned int i)
{
	for (unsigned int j = 0; j < n; j++) {
		if (!symbol[j] || symbol[j] == symbol[i])
			continue;
		if (placed[j] == placed[i] || (symbol[j] > symbol[i] && symbol[j] <= placed[i]))
			return (int)j;
	}
	return -1;
}

static void place_back(const uint64_t *symbol, uint64_t *placed, struct probe_place *where,
		       unsigned int i)
{
	memset(&where[i], 0, sizeof(where[i]));
	placed[i] = symbol[i];
}

void probe_place_unshare(const uint64_t *symbol, uint64_t *placed, struct probe_place *where,
			 unsigned int n)
{
	bool changed = true;

	while (changed) {	/* each pass puts one back at least: at most n passes */
		changed = false;
		for (unsigned int i = 0; i < n; i++) {
			int j;

			if (!where[i].offset)
				continue;
			j = place_conflict(symbol, placed, n, i);
			if (j < 0)
				continue;
			if (placed[j] == placed[i])	/* both back, whatever the order */
				place_back(symbol, placed, where, (unsigned int)j);
			place_back(symbol, placed, where, i);
			changed = true;
		}
	}
}
