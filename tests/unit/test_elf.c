// SPDX-License-Identifier: GPL-2.0
/* ELF helpers on the libsyms.so fixture (versioned symbols, text vaddr != file offset):
 * enumeration, file offsets checked against nm and against the bytes the dynamic loader
 * mapped, address lookup, build-id, and corrupt files that must fail cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "symbols/elf_syms.h"

static const char *libsyms_path = "build/unit/libsyms.so";

#define MAX_FUNCS 64

struct func {
	char name[64];
	uint64_t vaddr, size, file_off;
};

struct func_list {
	struct func funcs[MAX_FUNCS];
	int count;
};

static int collect_cb(const char *name, uint64_t vaddr, uint64_t size, uint64_t file_off,
		      void *ctx)
{
	struct func_list *l = ctx;
	struct func *f;

	if (l->count == MAX_FUNCS)
		return -E2BIG;
	f = &l->funcs[l->count++];
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->vaddr = vaddr;
	f->size = size;
	f->file_off = file_off;
	return 0;
}

static const struct func *find_func(const struct func_list *l, const char *name, uint64_t vaddr)
{
	int i;

	for (i = 0; i < l->count; i++) {
		if (strcmp(l->funcs[i].name, name) == 0 && (!vaddr || l->funcs[i].vaddr == vaddr))
			return &l->funcs[i];
	}
	return NULL;
}

static int count_named(const struct func_list *l, const char *name)
{
	int i, n = 0;

	for (i = 0; i < l->count; i++)
		n += strcmp(l->funcs[i].name, name) == 0;
	return n;
}

static struct func_list *collect(void)
{
	struct func_list *l = calloc(1, sizeof(*l));

	assert_non_null(l);
	assert_int_equal(elf_for_each_func(libsyms_path, collect_cb, l), 0);
	return l;
}

static void test_elf_reports_defined_functions_once_without_version(void **state)
{
	struct func_list *l = collect();
	int i;

	(void)state;
	for (i = 0; i < l->count; i++)
		assert_null(strchr(l->funcs[i].name, '@'));
	assert_int_equal(count_named(l, "syms_add"), 1);	/* in .symtab and .dynsym */
	assert_int_equal(count_named(l, "syms_mul"), 1);
	assert_non_null(find_func(l, "syms_local_helper", 0));	/* .symtab local */
	assert_non_null(find_func(l, "syms_ifunc", 0));		/* STT_GNU_IFUNC */
	assert_null(find_func(l, "syms_data_object", 0));	/* STT_OBJECT */
	assert_null(find_func(l, "__cxa_finalize", 0));		/* undefined */
	for (i = 1; i < l->count; i++)
		assert_true(l->funcs[i - 1].vaddr <= l->funcs[i].vaddr);
	free(l);
}

static void test_elf_versioned_symbol_has_both_versions_stripped(void **state)
{
	struct func_list *l = collect();
	const struct func *v1, *v2;

	(void)state;
	/* syms_compat@LIBSYMS_1.0 and syms_compat@@LIBSYMS_2.0: two addresses, one name */
	assert_int_equal(count_named(l, "syms_compat"), 2);
	v1 = find_func(l, "syms_compat_v1", 0);
	v2 = find_func(l, "syms_compat_v2", 0);
	assert_non_null(v1);
	assert_non_null(v2);
	assert_non_null(find_func(l, "syms_compat", v1->vaddr));
	assert_non_null(find_func(l, "syms_compat", v2->vaddr));
	assert_true(elf_has_func(libsyms_path, "syms_compat"));
	assert_false(elf_has_func(libsyms_path, "syms_compat@@LIBSYMS_2.0"));
	assert_false(elf_has_func(libsyms_path, "syms_missing"));
	assert_false(elf_has_func("/nonexistent/lib.so", "syms_add"));
	free(l);
}

/* nm's address for name (versioned names stripped), or 0. */
static uint64_t nm_vaddr(const char *name)
{
	char cmd[512], line[512], sym[256];
	unsigned long long addr;
	uint64_t found = 0;
	char type;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm --defined-only '%s' 2>/dev/null", libsyms_path);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	while (fgets(line, sizeof(line), p)) {
		if (sscanf(line, "%llx %c %255s", &addr, &type, sym) != 3)
			continue;
		sym[strcspn(sym, "@")] = '\0';
		if (strcmp(sym, name) == 0)
			found = addr;
	}
	pclose(p);
	return found;
}

static void test_elf_vaddr_matches_nm(void **state)
{
	static const char *const names[] = { "syms_add", "syms_mul", "syms_local_helper" };
	struct func_list *l = collect();
	const struct func *f;
	uint64_t expect;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		expect = nm_vaddr(names[i]);
		if (!expect) {
			free(l);
			skip();	/* no binutils */
		}
		f = find_func(l, names[i], 0);
		assert_non_null(f);
		assert_int_equal(f->vaddr, expect);
		/* the fixture's text segment is linked at 0x400000 over file offset 0 */
		assert_int_equal(f->file_off, f->vaddr - 0x400000);
		assert_true(f->size > 0);
	}
	free(l);
}

/* The file bytes at file_off are the bytes the loader mapped at the function's address:
 * exactly what a uprobe at that offset would patch. */
static void test_elf_file_off_points_at_mapped_code(void **state)
{
	static const char *const names[] = { "syms_add", "syms_mul" };
	struct func_list *l = collect();
	unsigned char file_bytes[16];
	const struct func *f;
	void *h, *code;
	size_t i;
	int fd;

	(void)state;
	h = dlopen(libsyms_path, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	fd = open(libsyms_path, O_RDONLY);
	assert_true(fd >= 0);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		f = find_func(l, names[i], 0);
		assert_non_null(f);
		code = dlsym(h, names[i]);
		assert_non_null(code);
		assert_int_equal(pread(fd, file_bytes, sizeof(file_bytes), f->file_off),
				 sizeof(file_bytes));
		assert_memory_equal(file_bytes, code, sizeof(file_bytes));
	}
	close(fd);
	dlclose(h);
	free(l);
}

static int stop_at_second_cb(const char *name, uint64_t vaddr, uint64_t size,
			     uint64_t file_off, void *ctx)
{
	int *calls = ctx;

	(void)name;
	(void)vaddr;
	(void)size;
	(void)file_off;
	return ++*calls == 2 ? 77 : 0;
}

static void test_elf_callback_return_stops_walk(void **state)
{
	int calls = 0;

	(void)state;
	assert_int_equal(elf_for_each_func(libsyms_path, stop_at_second_cb, &calls), 77);
	assert_int_equal(calls, 2);
}

static void test_elf_symtab_lookup_by_address(void **state)
{
	struct func_list *l = collect();
	const struct func *add, *mul;
	struct elf_symtab *t;
	uint64_t off = 99, vaddr;
	const char *name;

	(void)state;
	add = find_func(l, "syms_add", 0);
	mul = find_func(l, "syms_mul", 0);
	assert_non_null(add);
	assert_non_null(mul);
	assert_int_equal(elf_symtab_load(libsyms_path, &t), 0);
	assert_true(elf_symtab_count(t) >= 8);

	name = elf_symtab_lookup(t, add->vaddr, &off);
	assert_string_equal(name, "syms_add");
	assert_int_equal(off, 0);
	name = elf_symtab_lookup(t, add->vaddr + add->size - 1, &off);
	assert_string_equal(name, "syms_add");
	assert_int_equal(off, add->size - 1);
	name = elf_symtab_lookup(t, mul->vaddr + 3, &off);
	assert_string_equal(name, "syms_mul");
	assert_int_equal(off, 3);
	assert_null(elf_symtab_lookup(t, 0x400000, &off));	/* ELF header */
	assert_null(elf_symtab_lookup(t, 0x10, NULL));

	assert_int_equal(elf_symtab_file_off_to_vaddr(t, add->file_off, &vaddr), 0);
	assert_int_equal(vaddr, add->vaddr);
	assert_int_equal(elf_symtab_file_off_to_vaddr(t, 1ULL << 40, &vaddr), -ENOENT);
	elf_symtab_free(t);
	free(l);
}

static void test_elf_symtab_lookup_prefers_global_alias(void **state)
{
	struct func_list *l = collect();
	const struct func *v2;
	struct elf_symtab *t;
	const char *name;

	(void)state;
	/* syms_compat_v2 (local) and syms_compat (global) share one address */
	v2 = find_func(l, "syms_compat_v2", 0);
	assert_non_null(v2);
	assert_int_equal(elf_symtab_load(libsyms_path, &t), 0);
	name = elf_symtab_lookup(t, v2->vaddr, NULL);
	assert_string_equal(name, "syms_compat");
	elf_symtab_free(t);
	free(l);
}

static void test_elf_build_id_is_sha1_hex(void **state)
{
	char hex[64], small[8];
	size_t i;

	(void)state;
	assert_int_equal(elf_build_id(libsyms_path, hex, sizeof(hex)), 0);
	assert_int_equal(strlen(hex), 40);
	for (i = 0; i < 40; i++)
		assert_non_null(strchr("0123456789abcdef", hex[i]));
	assert_int_equal(elf_build_id(libsyms_path, small, sizeof(small)), -ENOSPC);
}

/* A temporary file holding len bytes: a prefix of the fixture, or data when given. */
static void write_temp(char *path, size_t pathlen, const void *data, size_t len)
{
	int fd;

	snprintf(path, pathlen, "/tmp/gm-test-elf-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void *read_fixture(size_t *len)
{
	struct stat st;
	void *buf;
	int fd;

	fd = open(libsyms_path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc(st.st_size);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, st.st_size), st.st_size);
	close(fd);
	*len = st.st_size;
	return buf;
}

static int count_cb(const char *name, uint64_t vaddr, uint64_t size, uint64_t file_off,
		    void *ctx)
{
	(void)name;
	(void)vaddr;
	(void)size;
	(void)file_off;
	++*(int *)ctx;
	return 0;
}

static void expect_noexec(const char *path)
{
	struct elf_symtab *t = (void *)1;
	char hex[64];
	int n = 0;

	assert_int_equal(elf_for_each_func(path, count_cb, &n), -ENOEXEC);
	assert_int_equal(n, 0);
	assert_int_equal(elf_symtab_load(path, &t), -ENOEXEC);
	assert_null(t);
	assert_int_equal(elf_build_id(path, hex, sizeof(hex)), -ENOEXEC);
	assert_false(elf_has_func(path, "syms_add"));
}

static void test_elf_truncated_copy_is_enoexec(void **state)
{
	static const size_t cuts[] = { 0, 4, 63, 64, 1000, 4096 };
	char path[64];
	size_t len, i;
	void *buf;

	(void)state;
	buf = read_fixture(&len);
	for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		write_temp(path, sizeof(path), buf, cuts[i]);
		expect_noexec(path);
		unlink(path);
	}
	write_temp(path, sizeof(path), buf, len / 2);
	expect_noexec(path);
	unlink(path);
	write_temp(path, sizeof(path), buf, len - 1);	/* section headers cut */
	expect_noexec(path);
	unlink(path);
	free(buf);
}

/* A table that claims more than is read whole: the fixture's .symtab pointed at a sparse
 * tail of 1 GiB past its end (a few KiB on disk). Refused at once, -EFBIG, before anything of
 * it is read: it used to cost a gigabyte of memory and seconds of reading zeros. */
static void test_elf_table_over_the_bound_is_efbig_at_once(void **state)
{
	const uint64_t claim = 1ull << 30;
	struct elf_symtab *t = (void *)1;
	Elf64_Ehdr *eh;
	char path[64];
	size_t len;
	int n = 0, patched = 0;
	void *buf;

	(void)state;
	buf = read_fixture(&len);
	eh = buf;
	for (unsigned int i = 0; i < eh->e_shnum; i++) {
		Elf64_Shdr *sh = (Elf64_Shdr *)((char *)buf + eh->e_shoff + i * eh->e_shentsize);

		if (sh->sh_type == SHT_SYMTAB) {
			sh->sh_offset = len;
			sh->sh_size = claim;
			patched++;
		}
	}
	assert_int_equal(patched, 1);
	write_temp(path, sizeof(path), buf, len);
	assert_int_equal(truncate(path, (off_t)(len + claim)), 0);
	assert_true(claim > ELF_TABLE_MAX_BYTES);
	assert_int_equal(elf_for_each_func(path, count_cb, &n), -EFBIG);
	assert_int_equal(n, 0);
	assert_int_equal(elf_symtab_load(path, &t), -EFBIG);
	assert_null(t);
	unlink(path);
	free(buf);
}

static void test_elf_random_garbage_is_enoexec(void **state)
{
	unsigned char garbage[8192];
	char path[64];
	size_t i;

	(void)state;
	srand(1234);
	for (i = 0; i < sizeof(garbage); i++)
		garbage[i] = rand();
	write_temp(path, sizeof(path), garbage, sizeof(garbage));
	expect_noexec(path);
	unlink(path);
	/* ELF magic over garbage */
	memcpy(garbage, "\177ELF\2\1\1", 7);
	write_temp(path, sizeof(path), garbage, sizeof(garbage));
	expect_noexec(path);
	unlink(path);
}

static void test_elf_not_a_regular_file_or_missing(void **state)
{
	struct elf_symtab *t;
	int n = 0;

	(void)state;
	assert_int_equal(elf_for_each_func("/nonexistent/x.so", count_cb, &n), -ENOENT);
	assert_int_equal(elf_for_each_func("/tmp", count_cb, &n), -ENOEXEC);
	assert_int_equal(elf_symtab_load("/nonexistent/x.so", &t), -ENOENT);
}

/* Flipping random bytes anywhere in the file may or may not break it; it must never crash
 * and must answer 0 or -ENOEXEC. */
static void test_elf_corrupted_bytes_never_crash(void **state)
{
	unsigned char *buf, *copy;
	struct elf_symtab *t;
	char path[64], hex[64];
	size_t len, j;
	int round, n, err;

	(void)state;
	buf = read_fixture(&len);
	copy = malloc(len);
	assert_non_null(copy);
	srand(42);
	for (round = 0; round < 300; round++) {
		memcpy(copy, buf, len);
		for (j = 0; j < 16; j++) {
			/* mostly the headers, where the pointers are */
			size_t at = (round & 1) ? (size_t)rand() % 64 : (size_t)rand() % len;

			copy[at] = rand();
		}
		write_temp(path, sizeof(path), copy, len);
		n = 0;
		err = elf_for_each_func(path, count_cb, &n);
		assert_true(err == 0 || err == -ENOEXEC);
		err = elf_symtab_load(path, &t);
		assert_true(err == 0 || err == -ENOEXEC);
		if (!err) {
			elf_symtab_lookup(t, 0x401100, NULL);
			elf_symtab_free(t);
		}
		err = elf_build_id(path, hex, sizeof(hex));
		assert_true(err == 0 || err == -ENOEXEC || err == -ENOENT || err == -ENOSPC);
		unlink(path);
	}
	free(copy);
	free(buf);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_elf_reports_defined_functions_once_without_version),
		cmocka_unit_test(test_elf_versioned_symbol_has_both_versions_stripped),
		cmocka_unit_test(test_elf_vaddr_matches_nm),
		cmocka_unit_test(test_elf_file_off_points_at_mapped_code),
		cmocka_unit_test(test_elf_callback_return_stops_walk),
		cmocka_unit_test(test_elf_symtab_lookup_by_address),
		cmocka_unit_test(test_elf_symtab_lookup_prefers_global_alias),
		cmocka_unit_test(test_elf_build_id_is_sha1_hex),
		cmocka_unit_test(test_elf_truncated_copy_is_enoexec),
		cmocka_unit_test(test_elf_table_over_the_bound_is_efbig_at_once),
		cmocka_unit_test(test_elf_random_garbage_is_enoexec),
		cmocka_unit_test(test_elf_not_a_regular_file_or_missing),
		cmocka_unit_test(test_elf_corrupted_bytes_never_crash),
	};

	if (argc > 1)
		libsyms_path = argv[1];
	return cmocka_run_group_tests_name("elf", tests, NULL, NULL);
}
