// SPDX-License-Identifier: GPL-2.0
/* A process's environment read from its memory: the C library's __environ, the array of
 * pointers it holds, and the strings they point to, each read a page at a time. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "symbols/elf_syms.h"
#include "symbols/environ.h"
#include "symbols/symbolize.h"

#define ENV_PAGE 4096u		/* no read crosses one: a string may end a mapping */
#define ENV_NAME_PEEK 32	/* the bytes a string's name is looked at in */

/* glibc's libc.so.6 (libc-2.X.so before 2.34) or musl's dynamic loader, which is its libc. */
static bool is_libc(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "libc.so", 7) || (!strncmp(base, "libc-", 5) && strstr(base, ".so")) ||
	       !strncmp(base, "ld-musl-", 8);
}

/* Where file m (as mm maps it) has __environ (or environ, its alias) in pid, or 0 where it
 * defines neither. */
static uint64_t environ_in(int pid, const struct module_map *mm, const struct mapping *m)
{
	uint64_t value = 0, first_load = 0, lowest = UINT64_MAX;
	char name[4200];
	int fd, err;

	fd = symbolize_open_mapped(pid, m, name, sizeof(name));
	if (fd < 0)
		return 0;
	err = elf_symbol_value_fd(fd, "__environ", &value, &first_load);
	if (err == -ENOENT)
		err = elf_symbol_value_fd(fd, "environ", &value, &first_load);
	close(fd);
	/* Its load bias: where its first segment was mapped, less that segment's address. */
	for (size_t i = 0; !err && i < mm->count; i++)
		if (mm->maps[i].path && !strcmp(mm->maps[i].path, m->path) && !mm->maps[i].pgoff &&
		    mm->maps[i].start < lowest)
			lowest = mm->maps[i].start;
	return err || lowest == UINT64_MAX ? 0 : lowest - first_load + value;
}

/* Where pid's __environ is: in its executable where that defines it (a program that refers
 * to environ has it copied there, R_X86_64_COPY, and the C library uses that copy: Debian's
 * python3 does), else in its C library; 0 where neither is mapped. */
static uint64_t environ_addr(int pid, const struct module_map *mm)
{
	const struct mapping *exe = NULL, *libc = NULL;
	char link[64];
	struct stat st;
	uint64_t at;

	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	if (stat(link, &st))
		st.st_ino = 0;
	for (size_t i = 0; i < mm->count; i++) {
		const struct mapping *m = &mm->maps[i];

		if (!m->exec || !m->path)
			continue;
		if (!exe && st.st_ino && m->ino == st.st_ino &&
		    makedev(m->dev_major, m->dev_minor) == st.st_dev)
			exe = m;
		else if (!libc && is_libc(m->path))
			libc = m;
	}
	at = exe ? environ_in(pid, mm, exe) : 0;
	return at || !libc ? at : environ_in(pid, mm, libc);
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

/* The name of names that string (its first bytes) gives a value to, or NULL. */
static const char *named(const char *string, const char *const *names)
{
	for (; *names; names++) {
		size_t len = strlen(*names);

		if (!strncmp(string, *names, len) && string[len] == '=')
			return *names;
	}
	return NULL;
}

int environ_read_live(int pid, const struct module_map *mm, const char *const *names,
		      char *buf, size_t cap, size_t *n)
{
	uint64_t at = environ_addr(pid, mm), envp, ptrs[ENV_PAGE / 8];
	char head[ENV_NAME_PEEK], value[ENVIRON_VALUE_MAX];
	size_t seen = 0;
	int err;

	*n = 0;
	if (!at)
		return -ENOENT;
	err = proc_read_mem(pid, at, &envp, sizeof(envp));
	if (err)
		return err;
	if (!envp || envp & 7)
		return -ENOENT;	/* no environment, or not an array of pointers */
	/* The array a page at a time, up to its NULL or ENVIRON_MAX_VARS entries. */
	while (seen < ENVIRON_MAX_VARS) {
		uint64_t addr = envp + seen * 8;
		size_t count = (ENV_PAGE - (addr & (ENV_PAGE - 1))) / 8;

		if (count > ENVIRON_MAX_VARS - seen)
			count = ENVIRON_MAX_VARS - seen;
		err = proc_read_mem(pid, addr, ptrs, count * 8);
		if (err)
			return err;
		for (size_t i = 0; i < count; i++, seen++) {
			long len;

			if (!ptrs[i])
				return 0;
			/* A string named as wanted, whole, and room for it: else left out. */
			len = read_string(pid, ptrs[i], head, sizeof(head));
			if ((len < 0 && len != -E2BIG) || !named(head, names))
				continue;
			len = read_string(pid, ptrs[i], value, sizeof(value));
			if (len > 0 && (size_t)len + 1 <= cap - *n) {
				memcpy(buf + *n, value, (size_t)len + 1);
				*n += (size_t)len + 1;
			}
		}
	}
	return 0;
}
