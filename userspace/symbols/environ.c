// SPDX-License-Identifier: GPL-2.0
/* A process's environment read from its memory: the __environ its program or C library keeps,
 * the array of pointers it holds, and the strings they point to, each read a page at a time. */
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "symbols/elf_syms.h"
#include "symbols/environ.h"
#include "symbols/symbolize.h"

#define ENV_PAGE 4096u		/* no read crosses one: a string may end a mapping */
#define ENV_NAME_PEEK 32	/* the bytes a string's name is looked at in */
#define ENV_NAMES_MAX 32	/* names asked for at most (a bit each) */

/* glibc's libc.so.6 (libc-2.X.so before 2.34), or musl's dynamic loader, which is its libc. */
static bool is_libc(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t len;

	base = base ? base + 1 : path;
	len = strlen(base);
	return !strcmp(base, "libc.so.6") ||
	       (!strncmp(base, "libc-2.", 7) && len > 3 && !strcmp(base + len - 3, ".so")) ||
	       !strncmp(base, "ld-musl-", 8);
}

/* Where the file mapped at m has __environ (or environ, its alias) in pid, or 0 where it
 * defines neither. Its load bias comes from m itself: m's start, less the address its file
 * offset loads at. */
static uint64_t environ_in(int pid, const struct mapping *m)
{
	static const char *const names[] = { "__environ", "environ", NULL };
	uint64_t value = 0, vaddr = 0;
	char name[4200];
	int fd, err;

	fd = symbolize_open_mapped(pid, m, name, sizeof(name));
	if (fd < 0)
		return 0;
	err = elf_exported_object_fd(fd, names, m->pgoff, m->exec, &value, &vaddr);
	close(fd);
	return err ? 0 : m->start - vaddr + value;
}

/* Where pid's __environ is: in its program where that
 * defines it (a program that refers to environ has it copied in, R_X86_64_COPY, and the C
 * library uses that copy: Debian's python3 does), else in its C library; 0 where neither is
 * mapped. The program is the mapping of its entry point, entry (AT_ENTRY; 0 where unknown). */
static uint64_t environ_addr(int pid, const struct module_map *mm, uint64_t entry)
{
	const struct mapping *exe = NULL;
	uint64_t at = 0;

	for (size_t i = 0; i < mm->count && !exe; i++)
		if (mm->maps[i].exec && mm->maps[i].path && entry >= mm->maps[i].start &&
		    entry < mm->maps[i].end)
			exe = &mm->maps[i];
	if (exe && (at = environ_in(pid, exe)))
		return at;
	for (size_t i = 0; i < mm->count && !at; i++)
		if (mm->maps[i].exec && mm->maps[i].path && &mm->maps[i] != exe &&
		    is_libc(mm->maps[i].path))
			at = environ_in(pid, &mm->maps[i]);
	return at;
}

/* Read from the auxiliary vector: where the kernel put the 16 random bytes of the image's
 * stack, AT_RANDOM; then where the image's program starts, AT_ENTRY. Each 0 where the vector
 * has none or cannot be read. */
static const uint64_t image_types[] = { AT_RANDOM, AT_ENTRY };

/* What tells one image of pid from the next: AT_RANDOM and the bytes there (the address alone
 * is the same across an exec where the process runs without ASLR). */
struct image_mark {
	uint64_t at;
	uint8_t bytes[16];
};

/* The mark of the image whose AT_RANDOM is at; false where there is none, or unreadable. */
static bool image_mark_read(int pid, uint64_t at, struct image_mark *mark)
{
	mark->at = at;
	return at && !proc_read_mem(pid, at, mark->bytes, sizeof(mark->bytes));
}

/* Whether pid is still the image mark was read of. */
static bool same_image(int pid, const struct image_mark *mark)
{
	struct image_mark now;
	uint64_t at;

	proc_auxv_values(pid, image_types, &at, 1);
	return image_mark_read(pid, at, &now) && !memcmp(&now, mark, sizeof(now));
}

/* The C string at addr, max - 1 bytes at most, into out (NUL-terminated): its length, or
 * -errno; -E2BIG when no NUL came within max - 1 bytes. */
static long read_string(int pid, uint64_t addr, char *out, size_t max)
{
	size_t got = 0;

	while (got < max - 1) {
		size_t want = ENV_PAGE - ((addr + got) & (ENV_PAGE - 1));
		const char *nul;
		int err;

		if (want > max - 1 - got)
			want = max - 1 - got;
		err = proc_read_mem(pid, addr + got, out + got, want);
		if (err)
			return err;
		nul = memchr(out + got, 0, want);
		if (nul)
			return nul - out;
		got += want;
	}
	out[got] = 0;
	return -E2BIG;
}

/* The index in names of the name string (its first bytes) gives a value to, or -1. */
static int named(const char *string, const char *const *names)
{
	for (int i = 0; names[i]; i++) {
		size_t len = strlen(names[i]);

		if (!strncmp(string, names[i], len) && string[len] == '=')
			return i;
	}
	return -1;
}

int environ_read_live(int pid, const struct module_map *mm, const char *const *names,
		      char *buf, size_t cap, size_t *n)
{
	uint64_t at, envp, image[2], ptrs[ENV_PAGE / 8];
	char head[ENV_NAME_PEEK], value[ENVIRON_VALUE_MAX];
	struct image_mark mark;
	uint32_t seen_names = 0;
	size_t seen = 0;
	int err;

	*n = 0;
	for (int i = 0; names[i]; i++)
		if (i >= ENV_NAMES_MAX || strlen(names[i]) + 2 > sizeof(head))
			return -EINVAL;	/* a name the peek could not tell */
	proc_auxv_values(pid, image_types, image, 2);
	if (!image_mark_read(pid, image[0], &mark))
		return -ENOENT;
	at = environ_addr(pid, mm, image[1]);
	if (!at)
		return -ENOENT;
	err = proc_read_mem(pid, at, &envp, sizeof(envp));
	if (err)
		return err;
	if (!envp || envp & 7)
		return -ENOENT;	/* no environment, or not an array of pointers */
	/* The array a page at a time, up to its NULL: ENVIRON_MAX_VARS entries and the NULL at
	 * most; a variable past them, -E2BIG. */
	while (seen <= ENVIRON_MAX_VARS) {
		uint64_t addr = envp + seen * 8;
		size_t count = (ENV_PAGE - (addr & (ENV_PAGE - 1))) / 8;

		if (count > ENVIRON_MAX_VARS + 1 - seen)
			count = ENVIRON_MAX_VARS + 1 - seen;
		err = proc_read_mem(pid, addr, ptrs, count * 8);
		if (err)
			return err;
		for (size_t i = 0; i < count; i++, seen++) {
			long len;
			int which;

			if (!ptrs[i])	/* read whole: of the image mm was read from? */
				return same_image(pid, &mark) ? 0 : -ESTALE;
			if (seen == ENVIRON_MAX_VARS)
				return -E2BIG;
			/* A wanted name's first string only, as getenv takes it. */
			len = read_string(pid, ptrs[i], head, sizeof(head));
			if (len < 0 && len != -E2BIG)
				continue;
			which = named(head, names);
			if (which < 0 || (seen_names & (1u << which)))
				continue;
			seen_names |= 1u << which;
			/* Whole, with room for it, and still of the name just seen (the process
			 * may write it meanwhile): else not known. */
			len = read_string(pid, ptrs[i], value, sizeof(value));
			if (len == -E2BIG || (len >= 0 && (size_t)len + 1 > cap - *n))
				return -E2BIG;
			if (len < 0)
				return (int)len;
			if (named(value, names) != which)
				return -ESTALE;
			memcpy(buf + *n, value, (size_t)len + 1);
			*n += (size_t)len + 1;
		}
	}
	return -E2BIG;
}
