// SPDX-License-Identifier: GPL-2.0
/* Fuzzes the ELF symbol reader (discover/elf_syms.c) with whole files: the function walk by
 * path, the address -> symbol table and the build-id, checking what elf_syms.h promises. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbols/elf_syms.h"
#include "fuzz.h"

/* The walk stops here, to exercise the early return; real files have fewer functions. */
#define WALK_STOP_AFTER 5000
#define WALK_STOPPED	77

struct seen_sym {
	uint64_t vaddr, size, file_off;
	char *name;
};

struct walk {
	struct seen_sym *syms;
	size_t count, cap;
};

static int memfd = -1;
static char memfd_path[64];

static int walk_cb(const char *name, uint64_t vaddr, uint64_t size, uint64_t file_off, void *ctx)
{
	struct walk *w = ctx;
	struct seen_sym *prev = w->count ? &w->syms[w->count - 1] : NULL;

	fuzz_check(name && name[0], "a symbol without a name");
	fuzz_check(!strchr(name, '@'), "version suffix kept in \"%s\"", name);
	fuzz_check(vaddr != 0, "symbol \"%s\" at address 0", name);
	fuzz_check(!prev || prev->vaddr <= vaddr,
		   "\"%s\" at %#llx after \"%s\" at %#llx: not in "
		   "address order",
		   name, (unsigned long long)vaddr, prev ? prev->name : "",
		   prev ? (unsigned long long)prev->vaddr : 0ULL);
	fuzz_check(!prev || prev->vaddr != vaddr || strcmp(prev->name, name) != 0,
		   "(\"%s\", %#llx) reported twice", name, (unsigned long long)vaddr);
	if (w->count == WALK_STOP_AFTER)
		return WALK_STOPPED;
	if (w->count == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 64;
		w->syms = realloc(w->syms, w->cap * sizeof(*w->syms));
		if (!w->syms)
			abort();
	}
	w->syms[w->count].vaddr = vaddr;
	w->syms[w->count].size = size;
	w->syms[w->count].file_off = file_off;
	w->syms[w->count].name = strdup(name);
	if (!w->syms[w->count].name)
		abort();
	w->count++;
	return 0;
}

static void walk_free(struct walk *w)
{
	size_t i;

	for (i = 0; i < w->count; i++)
		free(w->syms[i].name);
	free(w->syms);
}

/* Every walked symbol is found at its own address; other addresses need only not crash. */
static void check_symtab(const struct elf_symtab *t, const struct walk *w, const uint8_t *data,
			 size_t size)
{
	const char *name;
	uint64_t off, vaddr, probe;
	size_t i;

	fuzz_check(elf_symtab_count(t) >= w->count, "table has %zu symbols, walk saw %zu",
		   elf_symtab_count(t), w->count);
	for (i = 0; i < w->count; i++) {
		const struct seen_sym *s = &w->syms[i];

		off = UINT64_MAX;
		name = elf_symtab_lookup(t, s->vaddr, &off);
		fuzz_check(name != NULL, "no symbol at %#llx where \"%s\" starts",
			   (unsigned long long)s->vaddr, s->name);
		fuzz_check(off == 0, "lookup at the start of \"%s\" gave offset %llu", s->name,
			   (unsigned long long)off);
		if (s->size)
			elf_symtab_lookup(t, s->vaddr + s->size - 1, NULL);
		elf_symtab_lookup(t, s->vaddr - 1, &off);
		elf_symtab_file_off_to_vaddr(t, s->file_off, &vaddr);
	}
	/* addresses taken from the input itself, as a stack would give them */
	for (i = 0; i + 8 <= size && i < 64 * 8; i += 8) {
		memcpy(&probe, data + i, sizeof(probe));
		elf_symtab_lookup(t, probe, &off);
		elf_symtab_file_off_to_vaddr(t, probe, &vaddr);
	}
}

/* The build-id into a buffer of exactly len bytes: lowercase hex, even length, fits. */
static void check_build_id(size_t len)
{
	char *hex = malloc(len);
	size_t n, i;
	int err;

	if (!hex)
		abort();
	err = elf_build_id_fd(memfd, hex, len);
	fuzz_check(err == 0 || err == -ENOENT || err == -ENOSPC || err == -ENOEXEC ||
		   err == -EFBIG, "elf_build_id_fd: unexpected %d", err);
	if (err == 0) {
		n = strnlen(hex, len);
		fuzz_check(n < len && n > 0 && n % 2 == 0,
			   "build-id of %zu hex digits in %zu bytes", n, len);
		for (i = 0; i < n; i++)
			fuzz_check(isxdigit((unsigned char)hex[i]) &&
					   !isupper((unsigned char)hex[i]),
				   "build-id digit %#x", (unsigned char)hex[i]);
	}
	free(hex);
}

/* An exported object's value by name (the live environment's reader): only errors it
 * promises, and an offset of the file maps to an address only where it lies in the file. */
static void check_exported_object(size_t size)
{
	static const char *const names[] = { "__environ", "environ", NULL };
	uint64_t value = 0, vaddr = 0;
	int err;

	for (uint64_t off = 0; off <= size + 1; off += size / 3 + 1) {
		err = elf_exported_object_fd(memfd, names, off, off & 1, &value, &vaddr);
		fuzz_check(err == 0 || err == -ENOENT || err == -ENOEXEC || err == -ENOMEM ||
			   err == -EFBIG, "elf_exported_object_fd: unexpected %d", err);
		fuzz_check(err || off < size, "offset %llu past the file's %zu bytes loads",
			   (unsigned long long)off, size);
	}
}

/* The alternate debug file a debug file names (the debug info finder's): only errors it
 * promises; a name that fits, NUL-terminated, and an id in lowercase hex that fits. */
static void check_debugaltlink(size_t namelen, size_t hexlen)
{
	char *name = malloc(namelen), *hex = malloc(hexlen);
	int err;

	if (!name || !hex)
		abort();
	err = elf_debugaltlink_fd(memfd, name, namelen, hex, hexlen);
	fuzz_check(err == 0 || err == -ENOENT || err == -ENOSPC || err == -ENOEXEC ||
		   err == -EFBIG, "elf_debugaltlink_fd: unexpected %d", err);
	if (err == 0) {
		size_t n = strnlen(hex, hexlen);

		fuzz_check(strnlen(name, namelen) < namelen, "altlink name unterminated");
		fuzz_check(n < hexlen && n > 0 && n % 2 == 0, "altlink id of %zu hex digits", n);
		for (size_t i = 0; i < n; i++)
			fuzz_check(isxdigit((unsigned char)hex[i]) && !isupper((unsigned char)hex[i]),
				   "altlink id digit %#x", (unsigned char)hex[i]);
	}
	free(name);
	free(hex);
}

static void load_input(const uint8_t *data, size_t size)
{
	size_t done = 0;
	ssize_t n;

	if (memfd < 0) {
		memfd = memfd_create("fuzz-elf", MFD_CLOEXEC);
		if (memfd < 0)
			abort();
		snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
	}
	if (ftruncate(memfd, 0))
		abort();
	while (done < size) {
		n = pwrite(memfd, data + done, size - done, done);
		if (n <= 0)
			abort();
		done += n;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct elf_symtab *t = NULL;
	struct walk w = { 0 };
	int walk_err, tab_err;

	load_input(data, size);
	walk_err = elf_for_each_func(memfd_path, walk_cb, &w);
	fuzz_check(walk_err == 0 || walk_err == WALK_STOPPED || walk_err == -ENOEXEC ||
			   walk_err == -ENOMEM || walk_err == -EFBIG,
		   "elf_for_each_func: unexpected %d", walk_err);
	tab_err = elf_symtab_load_fd(memfd, &t);
	fuzz_check((tab_err == 0) == (walk_err == 0 || walk_err == WALK_STOPPED),
		   "the walk gave %d but the table %d on the same file", walk_err, tab_err);
	fuzz_check((tab_err == 0) == (t != NULL), "elf_symtab_load_fd gave %d and table %p",
		   tab_err, (void *)t);
	if (t)
		check_symtab(t, &w, data, size);
	elf_symtab_free(t);
	if (w.count)
		fuzz_check(elf_has_func(memfd_path, w.syms[0].name), "elf_has_func misses \"%s\"",
			   w.syms[0].name);
	check_build_id(41); /* a SHA-1 build-id exactly fits */
	check_build_id(8);
	check_exported_object(size);
	check_debugaltlink(size % 64 + 1, size % 130 + 1);
	check_debugaltlink(4096, 129);
	walk_free(&w);
	return 0;
}
