// SPDX-License-Identifier: GPL-2.0
/* Stack addresses -> module, ELF offset, function, file:line and inlined calls. Three caches:
 * a mapping identity (maps device, inode, path) leads to its opened file without a syscall;
 * a file identity (device + inode) leads to its image; an image (one per build-id, so copies
 * of one library in many containers cost one parse) holds the ELF symbol table, the libdw
 * session for its debug info, and every address looked up in it so far. The three are let go
 * (a sweep) when no process kept maps them; the names frames point to are interned apart and
 * stay, SYM_NAMES_MAX_BYTES of them at most. */
#include <dlfcn.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/untrusted.h"
#include "base/bus_guard.h"
#include "base/util.h"
#include "symbols/debuginfo.h"
#include "symbols/elf_syms.h"
#include "symbols/symbolize.h"

#define INLINE_SCAN_MAX 64	/* scopes looked at for one address */

/* Every cached entry begins with this: a chain link and its full hash. */
struct hnode {
	struct hnode *next;
	uint64_t hash;
};

struct hash_table {
	struct hnode **buckets;
	size_t nbuckets;
	size_t count;
};

/* One function or inlined call that an address lies in. */
struct sym_frame {
	const char *name;
	const char *file;
	uint32_t line;
	bool inlined;
	bool have_offset;
	uint64_t offset;	/* from the function's entry */
};

/* One address of an image (ELF vaddr, the byte looked up), resolved. */
struct addr_entry {
	struct hnode node;
	uint64_t vaddr;
	unsigned int n;
	struct sym_frame frames[];
};

/* One ELF image: shared by every file that has its build-id. */
struct image {
	struct hnode node;
	struct image *all_next;
	uint32_t kept;			/* the sweep that last found it in use */
	char build_id[ELF_BUILD_ID_HEX_MAX];	/* "": none, or not shared */
	struct elf_symtab *tab;
	Dwfl *dwfl;			/* NULL when libdwfl would not take the file */
	Dwfl_Module *mod;
	Dwfl_Callbacks callbacks;	/* points at debuginfo_path; must outlive dwfl */
	char *debuginfo_path;
	struct debuginfo_use debuginfo;	/* mod's userdata: debuginfo_path, what was found */
	bool dwarf_tried;
	Dwarf *dwarf;			/* NULL: no debug info found */
	bool trusted;			/* its file only root can have written (shareable) */
	struct hash_table addrs;
};

/* One file as opened: its image, or the error that loading it gave. */
struct file_entry {
	struct hnode node;
	uint32_t kept;
	uint64_t dev, ino;
	struct image *img;	/* NULL when load failed */
	int err;
	/* The descriptor it was opened by, kept (up to SYM_KEPT_FDS_MAX of them) for the unwinder
	 * of a process that has ended since: its files, deleted or inside a container, may be
	 * opened no other way then (symbolizer_open_mapped). -1: none. */
	int fd;
};

/* One mapped file as a process's maps named it. */
struct map_entry {
	struct hnode node;
	uint32_t kept;
	uint64_t ino;
	uint32_t dev_major, dev_minor;
	bool deleted;
	const char *path;		/* the frame's module string (interned) */
	struct file_entry *file;	/* NULL while no way to open it was found */
	int failed_pid;			/* the pid whose open failed; another pid tries again */
};

/* A name frames point to, interned: it outlives the image it came from. */
struct name {
	struct hnode node;
	char s[];
};

struct demangled {
	struct hnode node;
	const char *raw;	/* interned */
	char *name;	/* NULL: not demangled, the raw name stands */
};

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

struct symbolizer {
	struct hash_table files;
	struct hash_table maps;
	struct hash_table images;	/* those with a build-id */
	struct image *all_images;
	struct hash_table demangled;
	struct hash_table names;
	size_t names_bytes, names_max;
	uint32_t sweep;			/* the sweep under way, or the last */
	size_t kept_fds;		/* file entries holding a descriptor */
	unsigned int cut_short;		/* libdw sessions dropped: a file cut short under them */
	int demangler_state;		/* 0 not tried, 1 loaded, -1 not there */
	void *libstdcxx;
	cxa_demangle_fn cxa_demangle;
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

static struct hnode *table_first(const struct hash_table *t, uint64_t hash)
{
	return t->buckets[hash & (t->nbuckets - 1)];
}

/* Doubles the bucket array when entries outnumber buckets; a failure keeps the old one. */
static void table_insert(struct hash_table *t, struct hnode *n, uint64_t hash)
{
	struct hnode **b, *e, *next;
	size_t nb = t->nbuckets * 2, i, at;

	n->hash = hash;
	at = hash & (t->nbuckets - 1);
	n->next = t->buckets[at];
	t->buckets[at] = n;
	if (++t->count <= t->nbuckets)
		return;
	b = calloc(nb, sizeof(*b));
	if (!b)
		return;
	for (i = 0; i < t->nbuckets; i++) {
		for (e = t->buckets[i]; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = nb;
}

/* Frees every entry with free() after calling release (may be NULL) on it. */
static void table_destroy(struct hash_table *t, void (*release)(struct hnode *))
{
	struct hnode *e, *next;
	size_t i;

	for (i = 0; t->buckets && i < t->nbuckets; i++) {
		for (e = t->buckets[i]; e; e = next) {
			next = e->next;
			if (release)
				release(e);
			free(e);
		}
	}
	free(t->buckets);
	t->buckets = NULL;
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

struct symbolizer *symbolizer_new(void)
{
	struct symbolizer *s;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (table_init(&s->files) || table_init(&s->maps) || table_init(&s->images) ||
	    table_init(&s->demangled) || table_init(&s->names)) {
		free(s->files.buckets);
		free(s->maps.buckets);
		free(s->images.buckets);
		free(s->demangled.buckets);
		free(s->names.buckets);
		free(s);
		return NULL;
	}
	s->names_max = SYM_NAMES_MAX_BYTES;
	return s;
}

/* name interned: the same string for every frame that has it, kept until symbolizer_free;
 * NULL (counted) past names_max bytes. */
static const char *intern_name(struct symbolizer *s, const char *str)
{
	uint64_t h;
	struct hnode *n;
	struct name *nm;
	size_t len;

	if (!str)
		return NULL;
	h = hash_str(0xcbf29ce484222325ULL, str);
	for (n = table_first(&s->names, h); n; n = n->next)
		if (n->hash == h && strcmp(((struct name *)n)->s, str) == 0)
			return ((struct name *)n)->s;
	len = strlen(str) + 1;
	if (s->names_bytes + len > s->names_max) {
		s->stats.names_dropped++;
		return NULL;
	}
	nm = malloc(sizeof(*nm) + len);
	if (!nm)
		return NULL;
	memcpy(nm->s, str, len);
	s->names_bytes += len;
	table_insert(&s->names, &nm->node, h);
	return nm->s;
}

void symbolizer_limit_names(struct symbolizer *s, size_t max_bytes)
{
	s->names_max = max_bytes;
}

static void demangled_release(struct hnode *n)
{
	free(((struct demangled *)n)->name);
}

static void image_free(struct image *img)
{
	table_destroy(&img->addrs, NULL);
	if (img->dwfl)
		dwfl_end(img->dwfl);
	debuginfo_release(&img->debuginfo);	/* the alternate, after the DWARF using it */
	free(img->debuginfo_path);
	elf_symtab_free(img->tab);
	free(img);
}

static void file_entry_release(struct hnode *n)
{
	struct file_entry *e = (struct file_entry *)n;

	if (e->fd >= 0)
		close(e->fd);
}

void symbolizer_free(struct symbolizer *s)
{
	struct image *img, *next;

	if (!s)
		return;
	table_destroy(&s->maps, NULL);
	table_destroy(&s->files, file_entry_release);
	table_destroy(&s->demangled, demangled_release);
	table_destroy(&s->names, NULL);
	/* images are owned by the all_images list, not by the build-id table */
	free(s->images.buckets);
	for (img = s->all_images; img; img = next) {
		next = img->all_next;
		image_free(img);
	}
	if (s->libstdcxx)
		dlclose(s->libstdcxx);
	free(s);
}

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *stats)
{
	if (!s) {
		*stats = (struct symbolizer_stats){ 0 };
		return;
	}
	*stats = s->stats;
	stats->names_bytes = s->names_bytes;
}


static struct map_entry *map_entry_find(struct symbolizer *s, const struct mapping *m)
{
	uint64_t h = map_hash(m);
	struct map_entry *e;
	struct hnode *n;

	for (n = table_first(&s->maps, h); n; n = n->next) {
		e = (struct map_entry *)n;
		if (n->hash == h && e->ino == m->ino && e->dev_major == m->dev_major &&
		    e->dev_minor == m->dev_minor && e->deleted == m->deleted &&
		    strcmp(e->path, m->path) == 0)
			return e;
	}
	return NULL;
}

static struct map_entry *map_entry_get(struct symbolizer *s, const struct mapping *m)
{
	struct map_entry *e = map_entry_find(s, m);
	const char *path;

	if (e)
		return e;
	path = intern_name(s, m->path);
	e = path ? calloc(1, sizeof(*e)) : NULL;
	if (!e)
		return NULL;	/* past the bound on names: the frame keeps its address */
	e->path = path;
	e->kept = s->sweep;
	e->ino = m->ino;
	e->dev_major = m->dev_major;
	e->dev_minor = m->dev_minor;
	e->deleted = m->deleted;
	table_insert(&s->maps, &e->node, map_hash(m));
	return e;
}

int symbolize_open_mapped(int pid, const struct mapping *m, char *name, size_t len)
{
	struct file_want ino_only = { .ino = m->ino };
	struct file_want exact = { .ino = m->ino, .dev = makedev(m->dev_major, m->dev_minor),
				   .check_dev = m->dev_major || m->dev_minor };
	char path[4096 + 64];
	int fd;

	snprintf(name, len, "%s", m->path);
	if (pid > 0) {
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid,
			 m->start, m->end);
		fd = open_untrusted(path, &ino_only);
		if (fd < 0)
			fd = open_in_root(pid, m->path, &ino_only);
		snprintf(name, len, "/proc/%d/root%s", pid, m->path);
		if (fd >= 0)
			return fd;
		snprintf(name, len, "%s", m->path);
	}
	return open_untrusted(m->path, &exact);
}

/* Where libdw looks for separate debug info: beside the file, GPUMEM_DEBUG_ROOT, the host's
 * /usr/lib/debug and the process's own. */
static char *debuginfo_path_for(int pid)
{
	const char *root = getenv("GPUMEM_DEBUG_ROOT");
	char *path = NULL;
	char proc_root[64] = "";

	if (pid > 0)
		snprintf(proc_root, sizeof(proc_root), ":/proc/%d/root/usr/lib/debug", pid);
	if (asprintf(&path, ":.debug%s%s:/usr/lib/debug%s", root && *root ? ":" : "",
		     root && *root ? root : "", proc_root) < 0)
		return NULL;
	return path;
}

/* A libdw session over the image's file; debug info itself is looked for on first use. */
static void image_report_dwfl(struct image *img, int fd, const char *name, int pid)
{
	int dwfl_fd;

	img->debuginfo_path = debuginfo_path_for(pid);
	if (!img->debuginfo_path)
		return;
	img->callbacks.find_elf = dwfl_build_id_find_elf;
	img->callbacks.find_debuginfo = debuginfo_find;
	img->callbacks.debuginfo_path = &img->debuginfo_path;
	img->dwfl = dwfl_begin(&img->callbacks);
	if (!img->dwfl)
		return;
	dwfl_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);	/* libdwfl closes the one it takes */
	if (dwfl_fd < 0)
		goto out_end;
	dwfl_report_begin(img->dwfl);
	/* base 0: dwfl addresses are the file's own ELF vaddrs, PIE or not */
	img->mod = dwfl_report_elf(img->dwfl, name, name, dwfl_fd, 0, true);
	dwfl_report_end(img->dwfl, NULL, NULL);
	img->debuginfo.path = img->debuginfo_path;
	debuginfo_use(img->mod, &img->debuginfo, fd);
	if (img->mod)
		return;
	close(dwfl_fd);	/* refused: not taken */
out_end:
	dwfl_end(img->dwfl);
	img->dwfl = NULL;
}

/* The libdw sessions dropped so far, process-wide: kept, never ended. Past the lot's size
 * (four symbolizers' bound) one is let go unreferenced, as it would be anyway. */
static struct Dwfl *dropped_sessions[4 * SYM_CUT_SHORT_MAX];
static unsigned int ndropped_sessions;

void symbolizer_note_cut_short(struct symbolizer *s, struct Dwfl *session)
{
	if (session && ndropped_sessions < ARRAY_SIZE(dropped_sessions))
		dropped_sessions[ndropped_sessions++] = session;
	if (!s)
		return;
	s->cut_short++;
	s->stats.open_failures++;
}

unsigned int symbolizer_cut_short_count(const struct symbolizer *s)
{
	return s ? s->cut_short : 0;
}

/* libdw's read of the image's file raised SIGBUS: the file was cut short under its mapping
 * (written in place: cp truncates first). Its libdw session is dropped, not ended: what was
 * being built when the read faulted is not to be walked (its memory and descriptors stay,
 * SYM_CUT_SHORT_MAX sessions at most). Its frames keep the names of its symbol table, which
 * was read without a mapping. */
static void image_cut_short(struct symbolizer *s, struct image *img)
{
	symbolizer_note_cut_short(s, img->dwfl);
	img->dwfl = NULL;
	img->mod = NULL;
	img->dwarf = NULL;
	img->dwarf_tried = true;
	if (img->debuginfo.alt)		/* its Dwarf dropped with the session's */
		close(img->debuginfo.alt_fd);
	img->debuginfo.alt = NULL;
	img->debuginfo.alt_fd = -1;
	p_debug("a file was cut short while its debug info was read (written in place): its "
		"frames are named by its symbols alone (modules_unread)");
}

/* image_report_dwfl under a guard: a file cut short meanwhile leaves the image without. */
static void image_report_guarded(struct symbolizer *s, struct image *img, int fd,
				 const char *name, int pid)
{
	struct bus_guard g;

	/* Past the bound, only files root wrote (which no user can cut short) get a session. */
	if (s->cut_short >= SYM_CUT_SHORT_MAX && !img->trusted)
		return;
	bus_guard_enter(&g);
	if (sigsetjmp(g.env, 1)) {
		bus_guard_leave(&g);
		image_cut_short(s, img);
		return;
	}
	image_report_dwfl(img, fd, name, pid);
	bus_guard_leave(&g);
}

static struct image *image_find(struct symbolizer *s, const char *build_id)
{
	uint64_t h = hash_str(0, build_id);
	struct hnode *n;

	for (n = table_first(&s->images, h); n; n = n->next) {
		struct image *img = (struct image *)n;

		if (n->hash == h && strcmp(img->build_id, build_id) == 0)
			return img;
	}
	return NULL;
}

/* Whether a file's image may be shared with every file of its build-id: one only root can
 * have written. A build-id is the file's own claim: a user's file that claims another's (a
 * linker flag) would otherwise name the other's frames, or strip them of names, for every
 * process that maps the other, whichever loaded first. */
static bool shareable(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* The image of an open file: the cached one with its build-id (files root wrote), else
 * parsed now. */
static int image_get(struct symbolizer *s, int fd, const char *name, int pid,
		     struct image **out)
{
	char build_id[ELF_BUILD_ID_HEX_MAX] = "";
	struct image *img;
	bool trusted;
	int err;


	err = elf_build_id_fd(fd, build_id, sizeof(build_id));
	if (err == -ENOEXEC)
		return err;
	trusted = shareable(fd);
	if (err || !trusted)
		build_id[0] = '\0';	/* an image of its own */
	if (build_id[0]) {
		img = image_find(s, build_id);
		if (img) {
			s->stats.build_id_hits++;
			*out = img;
			return 0;
		}
	}
	img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	if (table_init(&img->addrs)) {
		free(img);
		return -ENOMEM;
	}
	err = elf_symtab_load_fd(fd, &img->tab);
	if (err) {
		image_free(img);
		return err;
	}
	memcpy(img->build_id, build_id, sizeof(build_id));
	img->kept = s->sweep;
	img->trusted = trusted;
	image_report_guarded(s, img, fd, name, pid);
	img->all_next = s->all_images;
	s->all_images = img;
	if (build_id[0])
		table_insert(&s->images, &img->node, hash_str(0, build_id));
	*out = img;
	return 0;
}

/* The cached file for fd's device and inode, loading its image on a miss. */
static struct file_entry *file_entry_get(struct symbolizer *s, int fd, const char *name,
					 int pid)
{
	struct file_entry *e;
	struct hnode *n;
	struct stat st;
	uint64_t h;

	if (fstat(fd, &st))
		return NULL;
	h = file_hash(st.st_dev, st.st_ino);
	for (n = table_first(&s->files, h); n; n = n->next) {
		e = (struct file_entry *)n;
		if (e->dev == (uint64_t)st.st_dev && e->ino == (uint64_t)st.st_ino)
			return e;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->kept = s->sweep;
	e->fd = -1;
	e->err = image_get(s, fd, name, pid, &e->img);
	if (e->err)
		s->stats.files_failed++;
	else
		s->stats.files_loaded++;
	table_insert(&s->files, &e->node, h);
	return e;
}

static void map_entry_resolve(struct symbolizer *s, struct map_entry *e, int pid,
			      const struct mapping *m)
{
	char name[4096 + 64];
	int fd;

	if (e->file || (e->failed_pid && e->failed_pid == pid))
		return;
	fd = symbolize_open_mapped(pid, m, name, sizeof(name));
	if (fd < 0) {
		e->failed_pid = pid > 0 ? pid : -1;
		s->stats.open_failures++;
		p_debug("PID %d: cannot open %s to name its frames: %s (modules_unread)", pid,
			m->path, strerror(-fd));
		return;
	}
	e->file = file_entry_get(s, fd, name, pid);
	if (e->file && e->file->fd < 0 && !e->file->err && s->kept_fds < SYM_KEPT_FDS_MAX) {
		e->file->fd = fd;
		s->kept_fds++;
		return;
	}
	close(fd);
}

int symbolizer_open_mapped(struct symbolizer *s, int pid, const struct mapping *m, char *name,
			   size_t len)
{
	int fd = symbolize_open_mapped(pid, m, name, len), kept;
	struct map_entry *e = fd < 0 && s ? map_entry_find(s, m) : NULL;

	if (!e || !e->file || e->file->fd < 0)
		return fd;
	kept = fcntl(e->file->fd, F_DUPFD_CLOEXEC, 0);
	if (kept < 0)
		return fd;
	snprintf(name, len, "%s", m->path);
	return kept;
}

void symbolizer_prefetch(struct symbolizer *s, int pid, const struct module_map *mm)
{
	struct map_entry *e;

	if (!s || !mm)
		return;
	for (size_t i = 0; i < mm->count; i++) {
		if (!mm->maps[i].exec)
			continue;
		e = map_entry_get(s, &mm->maps[i]);
		if (e)
			map_entry_resolve(s, e, pid, &mm->maps[i]);
	}
}

static Dwarf *image_dwarf(struct symbolizer *s, struct image *img, Dwarf_Addr *bias)
{
	*bias = 0;
	if (!img->mod)
		return NULL;
	if (!img->dwarf_tried) {
		img->dwarf_tried = true;
		img->dwarf = dwfl_module_getdwarf(img->mod, bias);
		debuginfo_seal_alt(img->mod, &img->debuginfo, img->dwarf);
		if (img->dwarf)
			s->stats.dwarf_loaded++;
		return img->dwarf;
	}
	return img->dwarf ? dwfl_module_getdwarf(img->mod, bias) : NULL;
}

/* The name a function has in the binary: its linkage name when it has one (C++), else its
 * DWARF name; through abstract origins (inlined, cloned) and specifications (methods). */
static const char *die_function_name(Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *name;

	name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	if (!name)
		name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
	if (!name)
		name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
	return name;
}

static bool die_is_function(Dwarf_Die *die)
{
	int tag = dwarf_tag(die);

	return tag == DW_TAG_subprogram || tag == DW_TAG_entry_point;
}

/*
 * The functions and inlined calls that hold dwarf address pc, innermost first, into f[];
 * returns how many (0 when the debug info does not cover pc). file/line is the line table's
 * for pc; each inlined call passes its call site on to the frame outside it.
 */
static unsigned int dwarf_frames(Dwarf *dw, Dwarf_Die *cudie, Dwarf_Addr pc, const char *file,
				 uint32_t line, struct sym_frame *f, unsigned int max)
{
	Dwarf_Die *scopes = NULL, *chain = NULL, innermost;
	Dwarf_Files *files = NULL;
	Dwarf_Attribute attr;
	Dwarf_Word val;
	Dwarf_Addr entry;
	unsigned int n = 0;
	int nscopes, i;

	nscopes = dwarf_getscopes(cudie, pc, &scopes);
	if (nscopes <= 0 || !dwarf_offdie(dw, dwarf_dieoffset(&scopes[0]), &innermost))
		goto out;
	/* The concrete nesting of the innermost scope, not the abstract trees it refers to. */
	nscopes = dwarf_getscopes_die(&innermost, &chain);
	if (nscopes <= 0)
		goto out;
	if (dwarf_getsrcfiles(cudie, &files, NULL))
		files = NULL;
	for (i = 0; i < nscopes && i < INLINE_SCAN_MAX && n < max; i++) {
		Dwarf_Die *die = &chain[i];
		int tag = dwarf_tag(die);

		if (tag != DW_TAG_inlined_subroutine && !die_is_function(die))
			continue;
		f[n] = (struct sym_frame){ .name = die_function_name(die), .file = file,
					   .line = line };
		if (die_is_function(die)) {
			if (dwarf_entrypc(die, &entry) == 0 && pc >= entry) {
				f[n].have_offset = true;
				f[n].offset = pc - entry;
			}
			n++;
			break;
		}
		f[n++].inlined = true;
		/* the frame outside an inlined call is at that call's site */
		file = NULL;
		line = 0;
		if (files && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &val) == 0)
			file = dwarf_filesrc(files, val, NULL, NULL);
		if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &val) == 0)
			line = (uint32_t)val;
	}
	/* an inlined call with no function found around it: not a chain to trust */
	if (n && f[n - 1].inlined)
		n = 0;
out:
	free(chain);
	free(scopes);
	return n;
}

/* Resolves one ELF vaddr of an image into a new cache entry. */
static struct addr_entry *image_resolve(struct symbolizer *s, struct image *img,
					uint64_t vaddr)
{
	struct sym_frame f[SYM_MAX_INLINE];
	const char *elf_name, *file = NULL;
	uint64_t elf_off = 0;
	struct addr_entry *a;
	Dwarf_Addr bias, cbias, dwfl_addr;
	Dwarf_Die *cudie;
	unsigned int n = 0;
	Dwfl_Line *l;
	Dwarf *dw;
	int line = 0;

	elf_name = elf_symtab_lookup(img->tab, vaddr, &elf_off);
	dw = image_dwarf(s, img, &bias);
	if (dw) {
		dwfl_addr = vaddr + bias;
		l = dwfl_module_getsrc(img->mod, dwfl_addr);
		if (l)
			file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
		if (!file)
			line = 0;
		cudie = dwfl_module_addrdie(img->mod, dwfl_addr, &cbias);
		if (cudie)
			n = dwarf_frames(dw, cudie, dwfl_addr - cbias, file,
					 line > 0 ? (uint32_t)line : 0, f, SYM_MAX_INLINE);
	}
	if (n == 0) {
		f[0] = (struct sym_frame){ .name = elf_name, .file = file,
					   .line = line > 0 ? (uint32_t)line : 0 };
		if (!elf_name && img->mod) {
			GElf_Off off;
			GElf_Sym sym;

			/* symbols of a separate debug file, for a stripped one */
			f[0].name = dwfl_module_addrinfo(img->mod, vaddr + bias, &off, &sym,
							 NULL, NULL, NULL);
			if (f[0].name) {
				f[0].have_offset = true;
				f[0].offset = off;
			}
		}
		n = 1;
	}
	if (!f[n - 1].name)
		f[n - 1].name = elf_name;
	if (!f[n - 1].have_offset && elf_name) {
		f[n - 1].have_offset = true;
		f[n - 1].offset = elf_off;
	}
	for (unsigned int i = 0; i < n; i++) {	/* the image may go; its names stay */
		f[i].name = intern_name(s, f[i].name);
		f[i].file = intern_name(s, f[i].file);
	}
	a = malloc(sizeof(*a) + n * sizeof(a->frames[0]));
	if (!a)
		return NULL;
	a->vaddr = vaddr;
	a->n = n;
	memcpy(a->frames, f, n * sizeof(f[0]));
	table_insert(&img->addrs, &a->node, hash_mix(0, vaddr));
	return a;
}

/* image_resolve under a guard: a file cut short meanwhile is resolved again without libdw
 * (nothing of the faulted try was kept). */
static struct addr_entry *image_resolve_guarded(struct symbolizer *s, struct image *img,
						uint64_t vaddr)
{
	struct addr_entry *a;
	struct bus_guard g;

	bus_guard_enter(&g);
	if (sigsetjmp(g.env, 1)) {
		bus_guard_leave(&g);
		image_cut_short(s, img);
		return image_resolve(s, img, vaddr);
	}
	a = image_resolve(s, img, vaddr);
	bus_guard_leave(&g);
	return a;
}

static struct addr_entry *image_lookup(struct symbolizer *s, struct image *img, uint64_t vaddr)
{
	uint64_t h = hash_mix(0, vaddr);
	struct hnode *n;

	for (n = table_first(&img->addrs, h); n; n = n->next) {
		if (((struct addr_entry *)n)->vaddr == vaddr) {
			s->stats.addr_hits++;
			return (struct addr_entry *)n;
		}
	}
	s->stats.addr_misses++;
	return image_resolve_guarded(s, img, vaddr);
}

/* Where addr's code is: for a return address, its call's, the byte before. */
static uint64_t code_addr(uint64_t addr, bool is_return)
{
	return is_return && addr > 0 ? addr - 1 : addr;
}

const struct mapping *symbolize_mapping_of(const struct module_map *mm, uint64_t addr,
					   bool is_return)
{
	return module_map_find(mm, code_addr(addr, is_return));
}

int symbolize_frames(struct symbolizer *s, int pid, const struct module_map *mm, uint64_t addr,
		     bool is_return, struct frame *out, unsigned int max)
{
	uint64_t lookup, file_off, vaddr;
	const struct mapping *m;
	struct addr_entry *a;
	struct map_entry *e;
	unsigned int i, n, skip;

	if (!s || !mm || !out || max == 0)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->addr = addr;
	out->offset = addr;
	lookup = code_addr(addr, is_return);
	m = module_map_find(mm, lookup);
	if (!m)
		return 1;
	e = map_entry_get(s, m);
	if (!e)
		return 1;	/* its name past the bound (counted): the address stays */
	out->module = e->path;
	file_off = lookup - m->start + m->pgoff;
	out->offset = file_off + (addr - lookup);
	map_entry_resolve(s, e, pid, m);
	if (!e->file || !e->file->img)
		return 1;
	if (elf_symtab_file_off_to_vaddr(e->file->img->tab, file_off, &vaddr))
		return 1;
	out->offset = vaddr + (addr - lookup);
	a = image_lookup(s, e->file->img, vaddr);
	if (!a)
		return -ENOMEM;
	/* too deep: the innermost inlined calls and the function itself are kept */
	n = a->n <= max ? a->n : max;
	skip = a->n - n;
	for (i = 0; i < n; i++) {
		const struct sym_frame *sf = &a->frames[i < n - 1 ? i : i + skip];

		out[i] = out[0];
		out[i].symbol = sf->name;
		out[i].file = sf->file;
		out[i].line = sf->line;
		out[i].inlined = sf->inlined;
		out[i].symbol_offset = sf->have_offset ? sf->offset + (addr - lookup) : 0;
	}
	return (int)n;
}

int symbolize_addr(struct symbolizer *s, int pid, const struct module_map *mm, uint64_t addr,
		   bool is_return, struct frame *out)
{
	struct frame frames[SYM_MAX_INLINE];
	int n;

	if (!out)
		return -EINVAL;
	n = symbolize_frames(s, pid, mm, addr, is_return, frames, SYM_MAX_INLINE);
	if (n < 0)
		return n;
	*out = frames[n - 1];
	return 0;
}

static void demangler_load(struct symbolizer *s)
{
	s->demangler_state = -1;
	s->libstdcxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
	if (!s->libstdcxx)
		return;
	*(void **)&s->cxa_demangle = dlsym(s->libstdcxx, "__cxa_demangle");
	if (s->cxa_demangle)
		s->demangler_state = 1;
}

const char *symbolizer_demangle(struct symbolizer *s, const char *name)
{
	uint64_t h = hash_mix(0, (uint64_t)(uintptr_t)name);
	struct demangled *d;
	struct hnode *n;
	int status = -1;

	if (!s || !name || name[0] != '_' || name[1] != 'Z')
		return name;
	for (n = table_first(&s->demangled, h); n; n = n->next) {
		d = (struct demangled *)n;
		if (d->raw == name)
			return d->name ? d->name : name;
	}
	if (s->demangler_state == 0)
		demangler_load(s);
	d = calloc(1, sizeof(*d));
	if (!d)
		return name;
	d->raw = name;
	if (s->demangler_state == 1) {
		d->name = s->cxa_demangle(name, NULL, NULL, &status);
		if (status != 0) {
			free(d->name);
			d->name = NULL;
		}
	}
	table_insert(&s->demangled, &d->node, h);
	return d->name ? d->name : name;
}

/* ---- letting go ---- */

void symbolizer_sweep_begin(struct symbolizer *s)
{
	if (s)
		s->sweep++;
}

void symbolizer_keep(struct symbolizer *s, const struct module_map *mm)
{
	for (size_t i = 0; s && mm && i < mm->count; i++) {
		struct map_entry *e = mm->maps[i].exec ? map_entry_find(s, &mm->maps[i]) : NULL;

		if (!e)
			continue;
		e->kept = s->sweep;
		if (e->file) {
			e->file->kept = s->sweep;
			if (e->file->img)
				e->file->img->kept = s->sweep;
		}
	}
}

static bool map_stale(const struct hnode *n, uint32_t sweep)
{
	return ((const struct map_entry *)n)->kept != sweep;
}

static bool file_stale(const struct hnode *n, uint32_t sweep)
{
	return ((const struct file_entry *)n)->kept != sweep;
}

static bool image_stale(const struct hnode *n, uint32_t sweep)
{
	return ((const struct image *)n)->kept != sweep;
}

/* A file entry let go of at a sweep: its descriptor closed, and counted no more. */
static void file_entry_drop(struct symbolizer *s, struct hnode *n)
{
	if (((struct file_entry *)n)->fd >= 0)
		s->kept_fds--;
	file_entry_release(n);
}

/* Unlinks the entries of t that stale() says are not in use (freeing them when free_them). */
static void table_drop(struct symbolizer *s, struct hash_table *t,
		       bool (*stale)(const struct hnode *, uint32_t), bool free_them,
		       void (*release)(struct symbolizer *, struct hnode *))
{
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct hnode **at = &t->buckets[i];

		while (*at) {
			struct hnode *e = *at;

			if (!stale(e, s->sweep)) {
				at = &e->next;
				continue;
			}
			*at = e->next;
			t->count--;
			if (release)
				release(s, e);
			if (free_them)
				free(e);
		}
	}
}

void symbolizer_sweep_end(struct symbolizer *s)
{
	struct image **at;

	if (!s)
		return;
	at = &s->all_images;
	table_drop(s, &s->maps, map_stale, true, NULL);
	table_drop(s, &s->files, file_stale, true, file_entry_drop);
	table_drop(s, &s->images, image_stale, false, NULL);	/* all_images owns them */
	while (*at) {
		struct image *img = *at;

		if (!image_stale(&img->node, s->sweep)) {
			at = &img->all_next;
			continue;
		}
		*at = img->all_next;
		image_free(img);
		s->stats.images_released++;
	}
}
