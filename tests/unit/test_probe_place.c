// SPDX-License-Identifier: GPL-2.0
/* Probe placement (discover/probe_place.c) on byte patterns: NVIDIA's driver stub and its
 * variants move past the cmpl, every other shape keeps the symbol, cut bytes never read past
 * their end, and a moved probe never lands on another symbol's. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "discover/probe_place.h"

/* cuMemAlloc_v2 of libcuda.so.535.261.03 (Debian's libcuda1), its first 20 bytes:
 * cmpl $0x321cba00,0x193353e(%rip); je +0xc; jmp *0x183b8c6(%rip) */
static const uint8_t real_stub[] = {
	0x81, 0x3d, 0x3e, 0x35, 0x93, 0x01, 0x00, 0xba, 0x1c, 0x32,
	0x74, 0x0c,
	0xff, 0x25, 0xc6, 0xb8, 0x83, 0x01,
	0x66, 0x0f,
};

static struct probe_place decode(const uint8_t *code, size_t len)
{
	struct probe_place p;

	memset(&p, 0xa5, sizeof(p));	/* the decoder must set every field */
	probe_place_decode(code, len, &p);
	return p;
}

static void assert_moved(const uint8_t *code, size_t len, unsigned int offset,
			 const char *skipped, const char *landing)
{
	struct probe_place p = decode(code, len);

	assert_int_equal(p.offset, offset);
	assert_string_equal(p.skipped, skipped);
	assert_string_equal(p.landing, landing);
}

static void assert_kept(const uint8_t *code, size_t len)
{
	struct probe_place p = decode(code, len);

	assert_int_equal(p.offset, 0);
	assert_null(p.skipped);
	assert_null(p.landing);
}

#define MOVED(off, skipped, landing, ...)                                                   \
	do {                                                                                \
		const uint8_t code_[] = { __VA_ARGS__ };                                     \
		assert_moved(code_, sizeof(code_), off, skipped, landing);                  \
	} while (0)
#define KEPT(...)                                                                           \
	do {                                                                                \
		const uint8_t code_[] = { __VA_ARGS__ };                                     \
		assert_kept(code_, sizeof(code_));                                          \
	} while (0)

static void test_real_driver_stub_moves_past_cmpl_onto_je_rel8(void **state)
{
	(void)state;
	assert_moved(real_stub, sizeof(real_stub), 10, "cmpl", "je");
}

static void test_cmpl_imm32_then_je_rel32_moves_ten(void **state)
{
	(void)state;
	MOVED(10, "cmpl", "je", 0x81, 0x3d, 1, 2, 3, 4, 0x00, 0xba, 0x1c, 0x32,
	      0x0f, 0x84, 0x10, 0, 0, 0);
}

static void test_cmpl_imm8_then_jcc_moves_seven(void **state)
{
	(void)state;
	MOVED(7, "cmpl", "je", 0x83, 0x3d, 1, 2, 3, 4, 0x00, 0x74, 0x05);
	MOVED(7, "cmpl", "jne", 0x83, 0x3d, 1, 2, 3, 4, 0x00, 0x0f, 0x85, 1, 0, 0, 0);
}

static void test_other_flag_setters_and_emulated_landings(void **state)
{
	(void)state;
	/* cmpq $0,0x8(%rdi); jne */
	MOVED(5, "cmpq", "jne", 0x48, 0x83, 0x7f, 0x08, 0x00, 0x75, 0x02);
	/* cmpq $imm32,disp(%rip): the REX.W form of the stub */
	MOVED(11, "cmpq", "je", 0x48, 0x81, 0x3d, 1, 2, 3, 4, 5, 6, 7, 8, 0x74, 0x00);
	/* cmpl $0,0x8(%rsp) (SIB); jg */
	MOVED(5, "cmpl", "jg", 0x83, 0x7c, 0x24, 0x08, 0x00, 0x7f, 0x10);
	/* cmpl $0,0x10(%rax,%rbx,4); jmp rel32 */
	MOVED(5, "cmpl", "jmp", 0x83, 0x7c, 0x98, 0x10, 0x00, 0xe9, 1, 2, 3, 4);
	/* cmpl $0,0x11223344(,%rbx,8) (SIB, no base: disp32); jmp rel8 */
	MOVED(8, "cmpl", "jmp", 0x83, 0x3c, 0xdd, 0x44, 0x33, 0x22, 0x11, 0x00, 0xeb, 0x00);
	/* cmpb $0,(%rdi); je */
	MOVED(3, "cmpb", "je", 0x80, 0x3f, 0x00, 0x74, 0x01);
	/* test %edi,%edi; je */
	MOVED(2, "test", "je", 0x85, 0xff, 0x74, 0x01);
	/* test %rdi,%rdi; push %rbp */
	MOVED(3, "test", "push", 0x48, 0x85, 0xff, 0x55);
	/* cmp %rsi,%rdi; push %r12 */
	MOVED(3, "cmp", "push", 0x48, 0x39, 0xf7, 0x41, 0x54);
	/* cmp $0x5,%al; nop */
	MOVED(2, "cmp", "nop", 0x3c, 0x05, 0x90);
	/* cmp $imm32,%eax; call rel32 */
	MOVED(5, "cmp", "call", 0x3d, 1, 2, 3, 4, 0xe8, 1, 2, 3, 4);
	/* test $0x1,%al; jne */
	MOVED(2, "test", "jne", 0xa8, 0x01, 0x75, 0x00);
	/* testb $0x1,0x10(%rdi); jne */
	MOVED(4, "testb", "jne", 0xf6, 0x47, 0x10, 0x01, 0x75, 0x00);
	/* testl $imm32,disp32(%rip); je */
	MOVED(10, "testl", "je", 0xf7, 0x05, 1, 2, 3, 4, 5, 6, 7, 8, 0x74, 0x00);
}

static void test_push_rbp_first_keeps_the_symbol(void **state)
{
	(void)state;
	KEPT(0x55, 0x48, 0x89, 0xe5, 0x41, 0x57);	/* push %rbp; mov %rsp,%rbp: the runtime's */
	KEPT(0xf3, 0x0f, 0x1e, 0xfa, 0x55);		/* endbr64 */
}

static void test_register_and_memory_writes_keep_the_symbol(void **state)
{
	(void)state;
	KEPT(0x8b, 0x05, 1, 2, 3, 4, 0x3d, 0, 0xba, 0x1c, 0x32, 0x74, 0x0c);	/* mov x(%rip),%eax */
	KEPT(0x89, 0x05, 1, 2, 3, 4, 0x74, 0x00);	/* mov %eax,x(%rip): a memory write */
	KEPT(0x83, 0x05, 1, 2, 3, 4, 0x01, 0x74, 0x00);	/* addl $1,x(%rip): group 1 /0 */
	KEPT(0x80, 0x0d, 1, 2, 3, 4, 0x01, 0x74, 0x00);	/* orb: group 1 /1 */
	KEPT(0x83, 0x2f, 0x01, 0x74, 0x00);		/* subl $1,(%rdi) */
	KEPT(0xf7, 0x17, 0x74, 0x00);			/* notl (%rdi): group 3 /2 */
	KEPT(0xf6, 0x0f, 0x01, 0x74, 0x00);		/* group 3 /1: not the documented test */
	KEPT(0x48, 0x83, 0xec, 0x08, 0x74, 0x00);	/* sub $8,%rsp: moves the stack pointer */
	KEPT(0x31, 0xc0, 0x74, 0x00);			/* xor %eax,%eax: writes a register */
	KEPT(0x0f, 0xba, 0x27, 0x01, 0x72, 0x00);	/* bt: not taken, though flag-only */
}

static void test_flag_setter_before_a_single_stepped_instruction_keeps_the_symbol(void **state)
{
	(void)state;
	/* cmpl; jmp *x(%rip): the stub's third instruction is not emulated */
	KEPT(0x81, 0x3d, 1, 2, 3, 4, 0, 0, 0, 0, 0xff, 0x25, 1, 2, 3, 4);
	KEPT(0x85, 0xff, 0xc3);					/* test; ret */
	KEPT(0x85, 0xff, 0x48, 0x89, 0xe5);			/* test; mov */
	KEPT(0x85, 0xff, 0x41, 0x90);				/* test; xchg %eax,%r8d */
	KEPT(0x85, 0xff, 0x48, 0x55);				/* push with a REX the kernel refuses */
}

static void test_prefixes_the_kernel_refuses_keep_the_symbol(void **state)
{
	(void)state;
	KEPT(0x85, 0xff, 0x66, 0x0f, 0x84, 1, 0);		/* 66 on a jcc fails the attach */
	KEPT(0x85, 0xff, 0x66, 0xe8, 1, 0);			/* callw */
	KEPT(0x66, 0x81, 0x3d, 1, 2, 3, 4, 0, 0, 0x74, 0);	/* cmpw: 66 changes the length */
	KEPT(0xf0, 0x83, 0x3d, 1, 2, 3, 4, 0, 0x74, 0);		/* lock */
	KEPT(0x2e, 0x74, 0x00);					/* a prefix alone first */
	KEPT(0x48, 0x48, 0x85, 0xff, 0x74, 0x00);		/* two REX prefixes */
}

static void test_every_cut_of_the_real_stub_keeps_the_symbol_until_the_je_is_whole(void **state)
{
	(void)state;
	for (size_t len = 0; len < 12; len++) {
		uint8_t *copy = malloc(len ? len : 1);	/* exactly len: ASan sees a read past it */

		memcpy(copy, real_stub, len);
		assert_kept(copy, len);
		free(copy);
	}
	assert_moved(real_stub, 12, 10, "cmpl", "je");
	assert_kept(NULL, 16);
}

static void test_random_bytes_never_move_past_their_end(void **state)
{
	uint8_t code[PROBE_PLACE_BYTES];

	(void)state;
	srandom(13);
	for (int round = 0; round < 200000; round++) {
		size_t len = (size_t)random() % (sizeof(code) + 1);
		struct probe_place p;

		for (size_t i = 0; i < len; i++)
			code[i] = (uint8_t)random();
		if (round & 1)
			code[0] = 0x81 + (round & 2);	/* start in the cmp group often */
		probe_place_decode(code, len, &p);
		if (!p.offset) {
			assert_null(p.skipped);
			continue;
		}
		assert_true(p.offset < len);
		assert_non_null(p.skipped);
		assert_non_null(p.landing);
	}
}

static int memfd_with(const void *bytes, size_t len, off_t at)
{
	int fd = memfd_create("probe_place", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, bytes, len, at), (ssize_t)len);
	return fd;
}

static void test_read_is_bounded_by_the_symbol_size_and_the_file(void **state)
{
	int fd = memfd_with(real_stub, sizeof(real_stub), 100);
	struct probe_place p;

	(void)state;
	probe_place_read(fd, 100, 0x1e, &p);	/* the real symbol's size */
	assert_int_equal(p.offset, 10);
	assert_string_equal(p.landing, "je");
	probe_place_read(fd, 100, 12, &p);
	assert_int_equal(p.offset, 10);
	probe_place_read(fd, 100, 11, &p);	/* the je would end past the symbol */
	assert_int_equal(p.offset, 0);
	probe_place_read(fd, 100, 0, &p);	/* size unknown */
	assert_int_equal(p.offset, 0);
	probe_place_read(fd, 100 + sizeof(real_stub) - 4, 64, &p);	/* cut by the file's end */
	assert_int_equal(p.offset, 0);
	probe_place_read(fd, 1 << 20, 64, &p);	/* past the end */
	assert_int_equal(p.offset, 0);
	probe_place_read(fd, UINT64_MAX, 64, &p);
	assert_int_equal(p.offset, 0);
	probe_place_read(-1, 100, 64, &p);
	assert_int_equal(p.offset, 0);
	close(fd);
}

static void test_only_64_bit_x86_elf_files_are_decoded(void **state)
{
	uint8_t ehdr[64] = { 0x7f, 'E', 'L', 'F', 2, 1, 1 };
	int fd;

	(void)state;
	ehdr[18] = 62;	/* EM_X86_64 */
	fd = memfd_with(ehdr, sizeof(ehdr), 0);
#if defined(__x86_64__)
	assert_true(probe_place_file_ok(fd));
#else
	assert_false(probe_place_file_ok(fd));
#endif
	close(fd);
	ehdr[4] = 1;	/* ELFCLASS32: 0x40-0x4f are inc/dec there, not REX */
	fd = memfd_with(ehdr, sizeof(ehdr), 0);
	assert_false(probe_place_file_ok(fd));
	close(fd);
	ehdr[4] = 2;
	ehdr[18] = 183;	/* EM_AARCH64 */
	fd = memfd_with(ehdr, sizeof(ehdr), 0);
	assert_false(probe_place_file_ok(fd));
	close(fd);
	fd = memfd_with(ehdr, 10, 0);	/* shorter than the header */
	assert_false(probe_place_file_ok(fd));
	close(fd);
	assert_false(probe_place_file_ok(-1));
}

static void test_a_probe_never_moves_onto_another_symbol(void **state)
{
	/* 0: at 0x100, moved +10 onto 1's symbol at 0x10a, itself moved +10; 2: an alias of 3
	 * (both at 0x200, both moved); 4 and 5 moved onto one place (and 5's symbol lies in what
	 * 4 moved past): both stay at their symbols; 6 absent. */
	uint64_t symbol[7] = { 0x100, 0x10a, 0x200, 0x200, 0x300, 0x303, 0 };
	uint64_t placed[7] = { 0x10a, 0x114, 0x20a, 0x20a, 0x30a, 0x30a, 0 };
	struct probe_place where[7] = {
		{ 10, "cmpl", "je" }, { 10, "cmpl", "je" }, { 10, "cmpl", "je" },
		{ 10, "cmpl", "je" }, { 10, "cmpl", "je" }, { 7, "cmpl", "je" }, { 0, NULL, NULL },
	};
	static const uint64_t want[7] = { 0x100, 0x114, 0x20a, 0x20a, 0x300, 0x303, 0 };

	(void)state;
	probe_place_unshare(symbol, placed, where, 7);
	for (int i = 0; i < 7; i++) {
		assert_int_equal(placed[i], want[i]);
		assert_int_equal(where[i].offset, want[i] - symbol[i]);
		if (!where[i].offset)
			assert_null(where[i].skipped);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_driver_stub_moves_past_cmpl_onto_je_rel8),
		cmocka_unit_test(test_cmpl_imm32_then_je_rel32_moves_ten),
		cmocka_unit_test(test_cmpl_imm8_then_jcc_moves_seven),
		cmocka_unit_test(test_other_flag_setters_and_emulated_landings),
		cmocka_unit_test(test_push_rbp_first_keeps_the_symbol),
		cmocka_unit_test(test_register_and_memory_writes_keep_the_symbol),
		cmocka_unit_test(test_flag_setter_before_a_single_stepped_instruction_keeps_the_symbol),
		cmocka_unit_test(test_prefixes_the_kernel_refuses_keep_the_symbol),
		cmocka_unit_test(test_every_cut_of_the_real_stub_keeps_the_symbol_until_the_je_is_whole),
		cmocka_unit_test(test_random_bytes_never_move_past_their_end),
		cmocka_unit_test(test_read_is_bounded_by_the_symbol_size_and_the_file),
		cmocka_unit_test(test_only_64_bit_x86_elf_files_are_decoded),
		cmocka_unit_test(test_a_probe_never_moves_onto_another_symbol),
	};

	return cmocka_run_group_tests_name("probe_place", tests, NULL, NULL);
}
