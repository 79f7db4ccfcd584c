// SPDX-License-Identifier: GPL-2.0
/* The symbolizer on this very process: its own functions through /proc/self/maps, with
 * file:line and inlined calls from DWARF, a dlopen'ed library whose text addresses differ from
 * its file offsets, the per-file, per-build-id and per-address caches, demangling, frames that
 * cannot be fully resolved, and truncated or corrupt files (skipped, never a crash). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdbool.h>
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

#include "open_fds.h"
#include <gelf.h>
#include <libelf.h>

#include "symbols/elf_syms.h"

#include "symbols/symbolize.h"
#include "symbols/unwind.h"

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

static void test_symbolize_names_past_the_bound_are_dropped_and_counted(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct module_map mm = self_map();
	struct symbolizer_stats st;
	struct frame f;

	(void)state;
	/* Room for no name at all: what a process's endless distinct names come to. */
	symbolizer_limit_names(s, 1);
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr_of(gm_symbolize_target) + 2,
					false, &f), 0);
	assert_null(f.symbol);
	assert_null(f.module);
	assert_int_equal(f.addr, addr_of(gm_symbolize_target) + 2);	/* the address stays */
	symbolizer_get_stats(s, &st);
	assert_int_equal(st.names_dropped, 1);	/* the module's: nothing past it was looked at */
	assert_int_equal(st.names_bytes, 0);
	symbolizer_free(s);

	/* Room for the module's name only: the frame names its module, not its function. */
	s = symbolizer_new();
	symbolizer_limit_names(s, strlen(module_map_find(&mm, addr_of(gm_symbolize_target))->path)
				  + 1);
	assert_int_equal(symbolize_addr(s, getpid(), &mm, addr_of(gm_symbolize_target) + 2,
					false, &f), 0);
	assert_non_null(strstr(f.module, "test_symbolize"));
	assert_null(f.symbol);
	symbolizer_get_stats(s, &st);
	assert_true(st.names_dropped >= 1);
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


/* The caller's return address: what a stack taken at a call's return holds. */
__attribute__((noinline)) uint64_t gm_return_address(void)
{
	uint64_t ra = (uint64_t)(uintptr_t)__builtin_return_address(0);

	__asm__ volatile("" : : "r"(ra) : "memory");
	return ra;
}

static int line_of_plain_call, line_of_inlined_call, line_in_inlined;

__attribute__((noinline)) uint64_t gm_plain_caller(void)
{
	uint64_t ra = gm_return_address(); line_of_plain_call = __LINE__;

	__asm__ volatile("" : : "r"(ra) : "memory");
	return ra;
}

static inline __attribute__((always_inline)) uint64_t gm_inlined_helper(void)
{
	uint64_t ra = gm_return_address(); line_in_inlined = __LINE__;

	__asm__ volatile("" : : "r"(ra) : "memory");
	return ra;
}

__attribute__((noinline)) uint64_t gm_inlining_caller(void)
{
	uint64_t ra = gm_inlined_helper(); line_of_inlined_call = __LINE__;

	__asm__ volatile("" : : "r"(ra) : "memory");
	return ra;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void test_symbolize_return_address_has_file_and_call_line(void **state)
{
	struct symbolizer *s = symbolizer_new();
	uint64_t ra = gm_plain_caller();
	struct module_map mm = self_map();
	struct frame f[SYM_MAX_INLINE];
	int n;

	(void)state;
	n = symbolize_frames(s, getpid(), &mm, ra, true, f, SYM_MAX_INLINE);
	assert_int_equal(n, 1);
	assert_string_equal(f[0].symbol, "gm_plain_caller");
	assert_false(f[0].inlined);
	assert_non_null(f[0].file);
	assert_true(ends_with(f[0].file, "test_symbolize.c"));
	assert_int_equal(f[0].line, line_of_plain_call);
	assert_int_equal(f[0].symbol_offset, ra - (uint64_t)(uintptr_t)gm_plain_caller);
	symbolizer_free(s);
	module_map_free(&mm);
}

static void test_symbolize_inlined_call_is_a_frame_of_its_own(void **state)
{
	struct symbolizer *s = symbolizer_new();
	uint64_t ra = gm_inlining_caller();
	struct module_map mm = self_map();
	struct frame f[SYM_MAX_INLINE], real;
	int n;

	(void)state;
	n = symbolize_frames(s, getpid(), &mm, ra, true, f, SYM_MAX_INLINE);
	assert_int_equal(n, 2);
	assert_string_equal(f[0].symbol, "gm_inlined_helper");
	assert_true(f[0].inlined);
	assert_int_equal(f[0].line, line_in_inlined);
	assert_string_equal(f[1].symbol, "gm_inlining_caller");
	assert_false(f[1].inlined);
	assert_int_equal(f[1].line, line_of_inlined_call);
	assert_true(ends_with(f[1].file, "test_symbolize.c"));
	assert_int_equal(f[0].addr, f[1].addr);
	assert_int_equal(f[0].offset, f[1].offset);
	/* one frame asked for: the function itself, inlined calls dropped */
	assert_int_equal(symbolize_frames(s, getpid(), &mm, ra, true, f, 1), 1);
	assert_string_equal(f[0].symbol, "gm_inlining_caller");
	assert_int_equal(symbolize_addr(s, getpid(), &mm, ra, true, &real), 0);
	assert_string_equal(real.symbol, "gm_inlining_caller");
	assert_int_equal(real.line, line_of_inlined_call);
	symbolizer_free(s);
	module_map_free(&mm);
}

static void test_symbolize_second_lookup_of_an_address_is_cached(void **state)
{
	struct symbolizer *s = symbolizer_new();
	uint64_t ra = gm_plain_caller();
	struct module_map mm = self_map();
	struct symbolizer_stats st;
	struct frame a, b;

	(void)state;
	assert_int_equal(symbolize_addr(s, getpid(), &mm, ra, true, &a), 0);
	symbolizer_get_stats(s, &st);
	assert_int_equal(st.addr_misses, 1);
	assert_int_equal(st.addr_hits, 0);
	assert_int_equal(symbolize_addr(s, getpid(), &mm, ra, true, &b), 0);
	symbolizer_get_stats(s, &st);
	assert_int_equal(st.addr_misses, 1);
	assert_int_equal(st.addr_hits, 1);
	assert_int_equal(st.dwarf_loaded, 1);
	assert_ptr_equal(a.symbol, b.symbol);
	assert_ptr_equal(a.file, b.file);
	assert_int_equal(a.line, b.line);
	symbolizer_free(s);
	module_map_free(&mm);
}

static int copy_file(const char *from, const char *to)
{
	char buf[65536];
	ssize_t n;
	int in, out, err = 0;

	in = open(from, O_RDONLY);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (in < 0 || out < 0)
		err = -1;
	while (!err && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			err = -1;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return err;
}

static int find_func_cb(const char *name, uint64_t vaddr, uint64_t size, uint64_t file_off,
			void *ctx)
{
	(void)vaddr;
	(void)size;
	if (strcmp(name, "syms_mul") != 0)
		return 0;
	*(uint64_t *)ctx = file_off;
	return 1;
}

/* A mapping of path at 0x100000 (16 MiB, however long the file is now), as a process that
 * mapped it would show it. */
static struct mapping whole_file_mapping(const char *path)
{
	struct mapping m = { 0 };
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	m.start = 0x100000;
	m.end = m.start + (16 << 20);
	m.ino = st.st_ino;
	m.exec = true;
	m.path = (char *)path;
	return m;
}

static void test_symbolize_copies_with_one_build_id_are_parsed_once(void **state)
{
	char dir[] = "/tmp/gm-test-buildid-XXXXXX", a[128], b[128];
	struct symbolizer *s = symbolizer_new();
	struct mapping ma, mb;
	struct module_map one_a = { &ma, 1 }, one_b = { &mb, 1 };
	struct symbolizer_stats st;
	uint64_t file_off = 0;
	struct frame fa, fb;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(a, sizeof(a), "%s/liba.so", dir);
	snprintf(b, sizeof(b), "%s/libb.so", dir);
	assert_int_equal(copy_file(libsyms_path, a), 0);
	assert_int_equal(copy_file(libsyms_path, b), 0);
	assert_int_equal(elf_for_each_func(a, find_func_cb, &file_off), 1);
	ma = whole_file_mapping(a);
	mb = whole_file_mapping(b);
	assert_true(ma.ino != mb.ino);
	assert_int_equal(symbolize_addr(s, 0, &one_a, ma.start + file_off + 4, false, &fa), 0);
	assert_int_equal(symbolize_addr(s, 0, &one_b, mb.start + file_off + 4, false, &fb), 0);
	assert_string_equal(fa.symbol, "syms_mul");
	assert_ptr_equal(fa.symbol, fb.symbol);	/* one image, shared */
	assert_string_equal(fa.module, a);
	assert_string_equal(fb.module, b);
	assert_non_null(fa.file);
	assert_true(ends_with(fa.file, "libsyms.c"));
	assert_true(fa.line > 0);
	symbolizer_get_stats(s, &st);
	assert_int_equal(st.files_loaded, 2);	/* two files ... */
	assert_int_equal(st.build_id_hits, 1);	/* ... one parse */
	assert_int_equal(st.addr_hits, 1);
	unlink(a);
	unlink(b);
	rmdir(dir);
	symbolizer_free(s);
}

/* Every "syms_mul" in the file at path (its symbol tables and its DWARF's strings) made
 * "evil_mul": another function of the same build-id, as a linker flag can make one. */
static void rename_syms_mul(const char *path)
{
	char *buf, *at;
	size_t len, n = 0;
	FILE *f = fopen(path, "r+");

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = (size_t)ftell(f);
	buf = malloc(len);
	assert_non_null(buf);
	rewind(f);
	assert_int_equal(fread(buf, 1, len, f), len);
	for (at = buf; (at = memmem(at, len - (size_t)(at - buf), "syms_mul", 8)); at += 8, n++)
		memcpy(at, "evil", 4);
	assert_true(n > 0);
	rewind(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	fclose(f);
	free(buf);
}

/* A file a user (not root) owns, or one others may write, claiming a root file's build-id,
 * loaded first: its names are its own, never the root file's, and the root file's are its
 * own, whichever came first. */
static void test_symbolize_a_users_file_never_shares_a_root_files_image(void **state)
{
	char dir[] = "/tmp/gm-test-spoof-XXXXXX", victim[128], spoof[128];
	struct mapping mv, ms;
	struct module_map one_v = { &mv, 1 }, one_s = { &ms, 1 };
	struct symbolizer_stats st;
	uint64_t file_off = 0;
	struct frame fv, fs;

	(void)state;
	if (geteuid() != 0)
		skip();		/* chown: root's */
	assert_non_null(mkdtemp(dir));
	snprintf(victim, sizeof(victim), "%s/libvictim.so", dir);
	snprintf(spoof, sizeof(spoof), "%s/libspoof.so", dir);
	assert_int_equal(copy_file(libsyms_path, victim), 0);
	assert_int_equal(elf_for_each_func(victim, find_func_cb, &file_off), 1);
	for (int owner = 0; owner < 2; owner++) {
		struct symbolizer *s = symbolizer_new();

		assert_int_equal(copy_file(libsyms_path, spoof), 0);
		rename_syms_mul(spoof);
		if (owner == 0)
			assert_int_equal(chown(spoof, 65534, 65534), 0);
		else
			assert_int_equal(chmod(spoof, 0666), 0);	/* root's, anyone's to write */
		ms = whole_file_mapping(spoof);
		mv = whole_file_mapping(victim);
		assert_int_equal(symbolize_addr(s, 0, &one_s, ms.start + file_off + 4, false, &fs),
				 0);
		assert_int_equal(symbolize_addr(s, 0, &one_v, mv.start + file_off + 4, false, &fv),
				 0);
		assert_string_equal(fs.symbol, "evil_mul");
		assert_string_equal(fv.symbol, "syms_mul");
		symbolizer_get_stats(s, &st);
		assert_int_equal(st.build_id_hits, 0);
		symbolizer_free(s);
		unlink(spoof);
	}
	unlink(victim);
	rmdir(dir);
}

/* A copy of the fixture at path (a mkstemp template), mapped whole into one (*m) and
 * prefetched by s: *file_off is syms_mul's offset in it. */
static void prefetched_copy(struct symbolizer *s, char *path, struct mapping *m,
			    struct module_map *one, uint64_t *file_off)
{
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(copy_file(libsyms_path, path), 0);
	assert_int_equal(elf_for_each_func(path, find_func_cb, file_off), 1);
	*m = whole_file_mapping(path);
	symbolizer_prefetch(s, 0, one);
}

static void test_symbolize_deleted_file_resolves_after_prefetch(void **state)
{
	char path[] = "/tmp/gm-test-deleted-XXXXXX";
	struct symbolizer *s = symbolizer_new();
	struct mapping m;
	struct module_map one = { &m, 1 };
	uint64_t file_off = 0;
	struct frame f;

	(void)state;
	prefetched_copy(s, path, &m, &one, &file_off);
	unlink(path);
	m.deleted = true;
	/* the same mapping identity as prefetched: a path that no longer opens still resolves */
	symbolizer_prefetch(s, 0, &one);
	assert_int_equal(symbolize_addr(s, 0, &one, m.start + file_off + 4, false, &f), 0);
	m.deleted = false;
	assert_int_equal(symbolize_addr(s, 0, &one, m.start + file_off + 4, false, &f), 0);
	assert_string_equal(f.symbol, "syms_mul");
	assert_non_null(f.file);
	symbolizer_free(s);
}

/* A file cut short (cp over it truncates first) while libdw has it mapped: libdw's next read
 * past the new end raises SIGBUS, which would end gpumem. The read is given up: the frame keeps
 * the name of the symbol table read before (no line), counted as a module unread; the
 * unwinder of a process mapping it unwinds nothing more. */
static void test_a_file_cut_short_under_libdw_is_named_by_its_symbols(void **state)
{
	char path[] = "/tmp/gm-test-cut-XXXXXX";
	struct symbolizer *s = symbolizer_new();
	struct symbolizer_stats st;
	struct gm_stack_event ev = { 0 };
	struct mapping m;
	struct module_map one = { &m, 1 };
	struct unwinder *u;
	uint64_t file_off = 0, ip;
	bool cut;
	struct frame f;

	(void)state;
	prefetched_copy(s, path, &m, &one, &file_off);	/* symbols read; debug info mapped */
	u = unwinder_new(s, getpid(), &one);
	assert_non_null(u);
	assert_int_equal(truncate(path, 0), 0);
	ip = m.start + file_off + 4;
	assert_int_equal(symbolize_addr(s, 0, &one, ip, false, &f), 0);
	assert_string_equal(f.symbol, "syms_mul");
	assert_null(f.file);
	symbolizer_get_stats(s, &st);
	assert_int_equal(st.open_failures, 1);
	assert_int_equal(symbolizer_cut_short_count(s), 1);
	ev.pid = ev.tid = (__u32)getpid();
	ev.regs[GM_REG_IP] = ip;
	ev.regs[GM_REG_SP] = 0x7fff0000;
	ev.len = 64;
	assert_int_equal(unwind_stack(u, &ev, (uint64_t[4]){ 0 }, 4, &cut), 0);
	assert_int_equal(symbolizer_cut_short_count(s), 2);
	assert_int_equal(unwind_stack(u, &ev, (uint64_t[4]){ 0 }, 4, &cut), 0);
	unwinder_free(u);
	symbolizer_free(s);
	unlink(path);
}

/* A file libdwfl refuses (not ELF) is reported to the unwinder and refused: its descriptor,
 * which libdwfl did not take, is closed, not left open for the agent's life. */
static void test_unwinder_leaves_no_descriptor_of_a_refused_file(void **state)
{
	char path[] = "/tmp/gm-test-unwind-XXXXXX";
	struct mapping m = { .start = 0x10000, .end = 0x11000, .exec = true, .path = path };
	struct module_map mm = { &m, 1 };
	struct unwinder *u;
	struct stat sb;
	int fd, before;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not ELF", 7), 7);
	assert_int_equal(fstat(fd, &sb), 0);
	close(fd);
	m.ino = sb.st_ino;
	before = open_fds();
	u = unwinder_new(NULL, 0, &mm);
	assert_non_null(u);
	assert_int_equal(open_fds(), before);
	unwinder_free(u);
	unlink(path);
}

/* The unwinder of a process that has ended opens its files as the symbolizer does: a file
 * removed since (or inside a container) by the descriptor the symbolizer kept from when it
 * opened it; once no process maps the file (a sweep), that descriptor is closed. */
static void test_symbolize_open_mapped_falls_back_to_the_kept_descriptor(void **state)
{
	char path[] = "/tmp/gm-test-kept-XXXXXX", name[4200];
	struct symbolizer *s = symbolizer_new();
	struct mapping m;
	struct module_map one = { &m, 1 };
	struct stat st, kept;
	int fd, fds;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(copy_file(libsyms_path, path), 0);
	assert_int_equal(stat(path, &st), 0);
	m = whole_file_mapping(path);
	symbolizer_prefetch(s, 0, &one);
	unlink(path);
	assert_int_equal(symbolize_open_mapped(0, &m, name, sizeof(name)), -ENOENT);
	fd = symbolizer_open_mapped(s, 0, &m, name, sizeof(name));
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &kept), 0);
	assert_int_equal(kept.st_ino, st.st_ino);
	assert_string_equal(name, path);
	close(fd);
	assert_int_equal(symbolizer_open_mapped(NULL, 0, &m, name, sizeof(name)), -ENOENT);
	fds = open_fds();
	symbolizer_sweep_begin(s);	/* nothing kept: the file's entry goes, its descriptors */
	symbolizer_sweep_end(s);	/* closed (the kept one, and libdwfl's of its image) */
	assert_int_equal(open_fds(), fds - 2);
	assert_int_equal(symbolizer_open_mapped(s, 0, &m, name, sizeof(name)), -ENOENT);
	symbolizer_free(s);
}

static void test_symbolize_demangles_cxx_names_once(void **state)
{
	static const char mangled[] = "_ZN5gmsym4Pool4grabEm";
	struct symbolizer *s = symbolizer_new();
	const char *a, *b;

	(void)state;
	a = symbolizer_demangle(s, mangled);
	assert_string_equal(a, "gmsym::Pool::grab(unsigned long)");
	b = symbolizer_demangle(s, mangled);
	assert_ptr_equal(a, b);
	assert_string_equal(symbolizer_demangle(s, "main"), "main");
	/* not a valid mangling: kept as it is */
	assert_string_equal(symbolizer_demangle(s, "_Z!!garbage"), "_Z!!garbage");
	assert_null(symbolizer_demangle(s, NULL));
	symbolizer_free(s);
}

/* A DWARF section's place in the file, or 0 when the file has no such section. */
static uint64_t section_range(const char *path, const char *want, uint64_t *size)
{
	uint64_t off = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	size_t shstrndx;
	Elf *elf;
	int fd;

	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		const char *name;

		if (!gelf_getshdr(scn, &shdr))
			continue;
		name = elf_strptr(elf, shstrndx, shdr.sh_name);
		if (name && strcmp(name, want) == 0) {
			off = shdr.sh_offset;
			*size = shdr.sh_size;
		}
	}
	elf_end(elf);
	close(fd);
	return off;
}

/* Looks up every function of a (damaged) copy: frames always come back, never a crash. */
static void symbolize_damaged(const char *path, uint64_t file_off, int *resolved)
{
	struct symbolizer *s = symbolizer_new();
	struct mapping m = whole_file_mapping(path);
	struct module_map one = { &m, 1 };
	struct frame f[SYM_MAX_INLINE];

	for (uint64_t d = 0; d < 64; d += 3) {
		int n = symbolize_frames(s, 0, &one, m.start + file_off + d, true, f,
					 SYM_MAX_INLINE);

		assert_true(n >= 1);
		assert_string_equal(f[n - 1].module, path);
		if (f[n - 1].symbol)
			(*resolved)++;
	}
	symbolizer_free(s);
}

static void test_symbolize_truncated_and_corrupt_debug_info_never_crash(void **state)
{
	static const char *const sections[] = { ".debug_info", ".debug_abbrev", ".debug_line",
						 ".debug_str", ".debug_line_str",
						 ".debug_rnglists", ".debug_aranges" };
	char path[] = "/tmp/gm-test-dwarf-XXXXXX";
	uint64_t file_off = 0, size, off, sec_size = 0;
	unsigned int seed = 1;
	int fd, resolved = 0;
	struct stat st;
	char *orig;

	(void)state;
	assert_int_equal(stat(libsyms_path, &st), 0);
	size = st.st_size;
	orig = malloc(size);
	fd = open(libsyms_path, O_RDONLY);
	assert_int_equal(read(fd, orig, size), (ssize_t)size);
	close(fd);
	assert_int_equal(elf_for_each_func(libsyms_path, find_func_cb, &file_off), 1);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	/* cut anywhere: the ELF checks reject the file, or its DWARF is cut short */
	for (uint64_t len = 0; len < size; len += size / 37 + 1) {
		fd = open(path, O_WRONLY | O_TRUNC);
		assert_int_equal(write(fd, orig, len), (ssize_t)len);
		close(fd);
		symbolize_damaged(path, file_off, &resolved);
	}
	/* random bytes inside each DWARF section, headers intact */
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		off = section_range(libsyms_path, sections[i], &sec_size);
		if (!off || !sec_size)
			continue;
		for (int round = 0; round < 12; round++) {
			char *copy = malloc(size);

			memcpy(copy, orig, size);
			for (int k = 0; k < 1 + round * 4; k++)
				copy[off + rand_r(&seed) % sec_size] = (char)rand_r(&seed);
			fd = open(path, O_WRONLY | O_TRUNC);
			assert_int_equal(write(fd, copy, size), (ssize_t)size);
			close(fd);
			free(copy);
			symbolize_damaged(path, file_off, &resolved);
		}
	}
	assert_true(resolved > 0);	/* the ELF symbols still name what they can */
	unlink(path);
	free(orig);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symbolize_own_function_by_name),
		cmocka_unit_test(test_symbolize_names_past_the_bound_are_dropped_and_counted),
		cmocka_unit_test(test_symbolize_return_address_looks_up_previous_byte),
		cmocka_unit_test(test_symbolize_cache_hit_returns_same_pointers),
		cmocka_unit_test(test_symbolize_strings_outlive_module_map),
		cmocka_unit_test(test_symbolize_library_offset_is_elf_vaddr),
		cmocka_unit_test(test_symbolize_unknown_address_keeps_module_and_offset),
		cmocka_unit_test(test_symbolize_address_outside_modules_keeps_raw_address),
		cmocka_unit_test(test_symbolize_unloadable_file_is_remembered_as_failed),
		cmocka_unit_test(test_symbolize_replaced_file_is_not_trusted),
		cmocka_unit_test(test_symbolize_return_address_has_file_and_call_line),
		cmocka_unit_test(test_symbolize_inlined_call_is_a_frame_of_its_own),
		cmocka_unit_test(test_symbolize_second_lookup_of_an_address_is_cached),
		cmocka_unit_test(test_symbolize_copies_with_one_build_id_are_parsed_once),
		cmocka_unit_test(test_symbolize_a_users_file_never_shares_a_root_files_image),
		cmocka_unit_test(test_symbolize_deleted_file_resolves_after_prefetch),
		cmocka_unit_test(test_symbolize_open_mapped_falls_back_to_the_kept_descriptor),
		cmocka_unit_test(test_unwinder_leaves_no_descriptor_of_a_refused_file),
		cmocka_unit_test(test_a_file_cut_short_under_libdw_is_named_by_its_symbols),
		cmocka_unit_test(test_symbolize_demangles_cxx_names_once),
		cmocka_unit_test(test_symbolize_truncated_and_corrupt_debug_info_never_crash),
	};

	if (argc > 1)
		libsyms_path = argv[1];
	return cmocka_run_group_tests_name("symbolize", tests, NULL, NULL);
}
