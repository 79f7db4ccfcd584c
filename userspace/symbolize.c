// SPDX-License-Identifier: GPL-2.0
/* Stack addresses -> module, ELF offset and function. Symbol tables are cached per file
 * identity (device + inode of the opened file), so many processes of one program cost one
 * load; a mapping identity (maps device, inode, path) leads to its file without any syscall. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_syms.h"
#include "symbolize.h"

/* One file as opened: its symbol table, or the error that loading it gave. */
struct file_entry {
	struct file_entry *next;
	uint64_t dev, ino;
	struct elf_symtab *tab;	/* NULL when load failed */
	int err;
};

/* One mapped file as a process's maps named it. */
struct map_entry {
	struct map_entry *next;
	uint64_t hash;
	uint64_t ino;
	uint32_t dev_major, dev_minor;
	bool deleted;
	char *path;			/* the frame's module string */
	struct file_entry *file;	/* NULL while no way to open it was found */
	int failed_pid;			/* the pid whose open failed; another pid tries again */
};

struct hash_table {
	void **buckets;
	size_t nbuckets;
	size_t count;
};

struct symbolizer {
	struct hash_table files;
	struct hash_table maps;
	struct symbolizer_stats stats;
};

static uint64_t hash_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ULL;
	return h;
}

static int table_init(struct hash_table *t)
{
	t->nbuckets = 64;
	t->count = 0;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	return t->buckets ? 0 : -ENOMEM;
}

static uint64_t file_hash(uint64_t dev, uint64_t ino)
{
	return hash_mix(hash_mix(0, dev), ino);
}

static uint64_t map_hash(const struct mapping *m)
{
	uint64_t h = hash_mix(0, m->ino);

	h = hash_mix(h, ((uint64_t)m->dev_major << 32) | m->dev_minor);
	h = hash_mix(h, m->deleted);
	return hash_str(h, m->path);
}

/* Doubles the bucket array when entries outnumber buckets; a failure keeps the old one. */
static void maps_grow(struct hash_table *t)
{
	size_t n = t->nbuckets * 2, i;
	struct map_entry *e, *next;
	void **b;

	if (t->count <= t->nbuckets)
		return;
	b = calloc(n, sizeof(*b));
	if (!b)
		return;
	for (i = 0; i < t->nbuckets; i++) {
		for (e = t->buckets[i]; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = n;
}

static void files_grow(struct hash_table *t)
{
	size_t n = t->nbuckets * 2, i, at;
	struct file_entry *e, *next;
	void **b;

	if (t->count <= t->nbuckets)
		return;
	b = calloc(n, sizeof(*b));
	if (!b)
		return;
	for (i = 0; i < t->nbuckets; i++) {
		for (e = t->buckets[i]; e; e = next) {
			next = e->next;
			at = file_hash(e->dev, e->ino) & (n - 1);
			e->next = b[at];
			b[at] = e;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = n;
}

struct symbolizer *symbolizer_new(void)
{
	struct symbolizer *s;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (table_init(&s->files) || table_init(&s->maps)) {
		free(s->files.buckets);
		free(s);
		return NULL;
	}
	return s;
}

void symbolizer_free(struct symbolizer *s)
{
	struct file_entry *f, *fnext;
	struct map_entry *m, *mnext;
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->maps.nbuckets; i++) {
		for (m = s->maps.buckets[i]; m; m = mnext) {
			mnext = m->next;
			free(m->path);
			free(m);
		}
	}
	for (i = 0; i < s->files.nbuckets; i++) {
		for (f = s->files.buckets[i]; f; f = fnext) {
			fnext = f->next;
			elf_symtab_free(f->tab);
			free(f);
		}
	}
	free(s->maps.buckets);
	free(s->files.buckets);
	free(s);
}

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *stats)
{
	*stats = s->stats;
}

static struct map_entry *map_entry_get(struct symbolizer *s, const struct mapping *m)
{
	uint64_t h = map_hash(m);
	struct map_entry *e;
	size_t at;

	for (e = s->maps.buckets[h & (s->maps.nbuckets - 1)]; e; e = e->next) {
		if (e->hash == h && e->ino == m->ino && e->dev_major == m->dev_major &&
		    e->dev_minor == m->dev_minor && e->deleted == m->deleted &&
		    strcmp(e->path, m->path) == 0)
			return e;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->path = strdup(m->path);
	if (!e->path) {
		free(e);
		return NULL;
	}
	e->hash = h;
	e->ino = m->ino;
	e->dev_major = m->dev_major;
	e->dev_minor = m->dev_minor;
	e->deleted = m->deleted;
	at = h & (s->maps.nbuckets - 1);
	e->next = s->maps.buckets[at];
	s->maps.buckets[at] = e;
	s->maps.count++;
	maps_grow(&s->maps);
	return e;
}

/* Opens path; with want_ino, only when it is the file the process mapped. */
static int open_checked(const char *path, uint64_t want_ino)
{
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (want_ino && (fstat(fd, &st) || (uint64_t)st.st_ino != want_ino)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* The mapped file as the process saw it: its map_files link, its root, then the host path. */
static int open_mapped_file(int pid, const struct mapping *m)
{
	char path[4096 + 64];
	int fd;

	if (pid > 0) {
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid,
			 m->start, m->end);
		fd = open_checked(path, 0);
		if (fd >= 0)
			return fd;
		snprintf(path, sizeof(path), "/proc/%d/root%s", pid, m->path);
		fd = open_checked(path, m->ino);
		if (fd >= 0)
			return fd;
	}
	return open_checked(m->path, m->ino);
}

/* The cached file for fd's device and inode, loading its symbol table on a miss. */
static struct file_entry *file_entry_get(struct symbolizer *s, int fd)
{
	struct file_entry *e;
	struct stat st;
	uint64_t h;
	size_t at;

	if (fstat(fd, &st))
		return NULL;
	h = file_hash(st.st_dev, st.st_ino);
	for (e = s->files.buckets[h & (s->files.nbuckets - 1)]; e; e = e->next) {
		if (e->dev == (uint64_t)st.st_dev && e->ino == (uint64_t)st.st_ino)
			return e;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->err = elf_symtab_load_fd(fd, &e->tab);
	if (e->err)
		s->stats.files_failed++;
	else
		s->stats.files_loaded++;
	at = h & (s->files.nbuckets - 1);
	e->next = s->files.buckets[at];
	s->files.buckets[at] = e;
	s->files.count++;
	files_grow(&s->files);
	return e;
}

static void map_entry_resolve(struct symbolizer *s, struct map_entry *e, int pid,
			      const struct mapping *m)
{
	int fd;

	if (e->file || (e->failed_pid && e->failed_pid == pid))
		return;
	fd = open_mapped_file(pid, m);
	if (fd < 0) {
		e->failed_pid = pid > 0 ? pid : -1;
		s->stats.open_failures++;
		return;
	}
	e->file = file_entry_get(s, fd);
	close(fd);
}

int symbolize_addr(struct symbolizer *s, int pid, const struct module_map *mm, uint64_t addr,
		   bool is_return, struct frame *out)
{
	uint64_t lookup, file_off, vaddr, sym_off;
	const struct mapping *m;
	struct map_entry *e;
	const char *name;

	if (!s || !mm || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->addr = addr;
	out->offset = addr;
	lookup = is_return && addr > 0 ? addr - 1 : addr;
	m = module_map_find(mm, lookup);
	if (!m)
		return 0;
	e = map_entry_get(s, m);
	if (!e)
		return -ENOMEM;
	out->module = e->path;
	file_off = lookup - m->start + m->pgoff;
	out->offset = file_off + (addr - lookup);
	map_entry_resolve(s, e, pid, m);
	if (!e->file || !e->file->tab)
		return 0;
	if (elf_symtab_file_off_to_vaddr(e->file->tab, file_off, &vaddr))
		return 0;
	out->offset = vaddr + (addr - lookup);
	name = elf_symtab_lookup(e->file->tab, vaddr, &sym_off);
	if (name) {
		out->symbol = name;
		out->symbol_offset = sym_off + (addr - lookup);
	}
	return 0;
}
