// SPDX-License-Identifier: GPL-2.0
/* The symbolizer on this very process: its own functions through /proc/self/maps, a
 * dlopen'ed library whose text addresses differ from its file offsets, the per-file cache,
 * and frames that cannot be fully resolved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "symbolize.h"

static const char *libsyms_path = "build/unit/libsyms.so";

__attribute__((noinline)) int gm_symbolize_target(int x)
{
	__asm__ volatile("");
	return x * 7 + 3;
}

static struct module_map self_map(void)
{
	struct module_map mm;

	assert_int_equal(module_map_read(getpid(), &mm), 0);
	return mm;
}

static uint64_t addr_of(int (*fn)(int))
{
	return (uint64_t)(uintptr_t)fn;
}

static void test_symbolize_own_function_by_name(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct module_map mm = self_map();
	uint64_t addr = addr_of(gm_symbolize_target);
	struct frame f;

	(void)state;
	assert_non_null(s);
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr + 2, false, &f), 0);
	assert_int_equal(f.addr, addr + 2);
	assert_non_null(f.module);
	assert_non_null(strstr(f.module, "test_symbolize"));
	assert_non_null(f.symbol);
	assert_string_equal(f.symbol, "gm_symbolize_target");
	assert_int_equal(f.symbol_offset, 2);
	symbolizer_free(s);
	module_map_free(&mm);
}

static void test_symbolize_return_address_looks_up_previous_byte(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct module_map mm = self_map();
	uint64_t addr = addr_of(gm_symbolize_target);
	struct frame at, ret;

	(void)state;
	/* a return address just past a function's last byte still belongs to the caller */
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr + 1, true, &ret), 0);
	assert_string_equal(ret.symbol, "gm_symbolize_target");
	assert_int_equal(ret.symbol_offset, 1);
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr + 1, false, &at), 0);
	assert_int_equal(ret.offset, at.offset);	/* addr's own offset, not addr - 1 */
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr, true, &ret), 0);
	assert_true(ret.symbol == NULL || strcmp(ret.symbol, "gm_symbolize_target") != 0);
	symbolizer_free(s);
	module_map_free(&mm);
}

static void test_symbolize_cache_hit_returns_same_pointers(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct module_map mm = self_map();
	uint64_t addr = addr_of(gm_symbolize_target);
	struct symbolizer_stats st;
	struct frame a, b, c;

	(void)state;
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr, false, &a), 0);
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr, false, &b), 0);
	/* pid 0: no /proc entry to go through, the host path is the same file */
	assert_int_equal(symbolize_addr(s, 0, &mm, addr + 1, false, &c), 0);
	assert_non_null(a.symbol);
	assert_ptr_equal(a.symbol, b.symbol);
	assert_ptr_equal(a.module, b.module);
	assert_ptr_equal(a.symbol, c.symbol);
	symbolizer_get_stats(s, &st);
	assert_int_equal(st.files_loaded, 1);
	assert_int_equal(st.files_failed, 0);
	symbolizer_free(s);
	module_map_free(&mm);
}

static void test_symbolize_strings_outlive_module_map(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct module_map mm = self_map();
	struct frame f;

	(void)state;
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr_of(gm_symbolize_target), false,
				       &f), 0);
	module_map_free(&mm);
	assert_non_null(strstr(f.module, "test_symbolize"));	/* ASan checks the read */
	assert_string_equal(f.symbol, "gm_symbolize_target");
	symbolizer_free(s);
}

static void test_symbolize_library_offset_is_elf_vaddr(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct module_map mm;
	struct frame f;
	uint64_t addr;
	void *h, *fn;

	(void)state;
	h = dlopen(libsyms_path, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	fn = dlsym(h, "syms_mul");
	assert_non_null(fn);
	addr = (uint64_t)(uintptr_t)fn;
	mm = self_map();
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr + 4, false, &f), 0);
	assert_non_null(strstr(f.module, "libsyms.so"));
	assert_string_equal(f.symbol, "syms_mul");
	assert_int_equal(f.symbol_offset, 4);
	/* linked at 0x400000: the offset is what addr2line takes, not the file offset */
	assert_true(f.offset > 0x400000);
	assert_int_equal((f.offset - 4) & 0xfff, addr & 0xfff);
	symbolizer_free(s);
	module_map_free(&mm);
	dlclose(h);
}

static void test_symbolize_unknown_address_keeps_module_and_offset(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct module_map mm = self_map();
	const struct mapping *m;
	struct frame f;

	(void)state;
	m = module_map_find(&mm, addr_of(gm_symbolize_target));
	assert_non_null(m);
	/* the ELF header of the first mapping: inside the module, in no function */
	assert_int_equal(symbolize_addr(s, getpid(), &mm, mm.maps[0].start + 8, false, &f), 0);
	assert_non_null(f.module);
	assert_string_equal(f.module, mm.maps[0].path);
	assert_null(f.symbol);
	assert_int_equal(f.offset, mm.maps[0].pgoff + 8);
	symbolizer_free(s);
	module_map_free(&mm);
}

static void test_symbolize_address_outside_modules_keeps_raw_address(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct module_map mm = self_map();
	int on_stack = 0;
	uint64_t addr = (uint64_t)(uintptr_t)&on_stack;
	struct frame f;

	(void)state;
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr, true, &f), 0);
	assert_null(f.module);
	assert_null(f.symbol);
	assert_int_equal(f.offset, addr);
	assert_int_equal(f.addr, addr);
	assert_int_equal(symbolize_addr(s, getpid(), NULL, addr, true, &f), -EINVAL);
	symbolizer_free(s);
	module_map_free(&mm);
}

static void test_symbolize_unloadable_file_is_remembered_as_failed(void **state)
{
	static const char garbage[] = "this is not an ELF file at all, only text";
	struct symbolizer *s = symbolizer_new();
	char path[] = "/tmp/gm-test-sym-XXXXXX";
	struct symbolizer_stats st;
	struct mapping m = { 0 };
	struct module_map mm = { &m, 1 };
	struct stat sb;
	struct frame f;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, garbage, sizeof(garbage)), sizeof(garbage));
	assert_int_equal(fstat(fd, &sb), 0);
	close(fd);
	m.start = 0x10000;
	m.end = 0x11000;
	m.pgoff = 0x2000;
	m.ino = sb.st_ino;
	m.exec = true;
	m.path = path;
	/* a pid that has no /proc entry: the host path is used */
	assert_int_equal(symbolize_addr(s, 0x3fffffff, &mm, 0x10010, false, &f), 0);
	assert_string_equal(f.module, path);
	assert_null(f.symbol);
	assert_int_equal(f.offset, 0x2010);
	assert_int_equal(symbolize_addr(s, 0x3fffffff, &mm, 0x10020, false, &f), 0);
	assert_int_equal(f.offset, 0x2020);
	symbolizer_get_stats(s, &st);
	assert_int_equal(st.files_failed, 1);
	assert_int_equal(st.files_loaded, 0);
	unlink(path);
	symbolizer_free(s);
}

static void test_symbolize_replaced_file_is_not_trusted(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct module_map mm = self_map();
	struct symbolizer_stats st;
	struct mapping m;
	struct module_map one = { &m, 1 };
	struct frame f;

	(void)state;
	/* same path, but the inode the process mapped is not the file there now */
	m = mm.maps[0];
	m.ino ^= 0x5a5a5a;
	assert_int_equal(symbolize_addr(s, 0x3fffffff, &one, m.start + 0x10, false, &f), 0);
	assert_string_equal(f.module, m.path);
	assert_null(f.symbol);
	symbolizer_get_stats(s, &st);
	assert_int_equal(st.files_loaded, 0);
	assert_int_equal(st.open_failures, 1);
	symbolizer_free(s);
	module_map_free(&mm);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symbolize_own_function_by_name),
		cmocka_unit_test(test_symbolize_return_address_looks_up_previous_byte),
		cmocka_unit_test(test_symbolize_cache_hit_returns_same_pointers),
		cmocka_unit_test(test_symbolize_strings_outlive_module_map),
		cmocka_unit_test(test_symbolize_library_offset_is_elf_vaddr),
		cmocka_unit_test(test_symbolize_unknown_address_keeps_module_and_offset),
		cmocka_unit_test(test_symbolize_address_outside_modules_keeps_raw_address),
		cmocka_unit_test(test_symbolize_unloadable_file_is_remembered_as_failed),
		cmocka_unit_test(test_symbolize_replaced_file_is_not_trusted),
	};

	if (argc > 1)
		libsyms_path = argv[1];
	return cmocka_run_group_tests_name("symbolize", tests, NULL, NULL);
}
