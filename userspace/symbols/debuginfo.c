// SPDX-License-Identifier: GPL-2.0
/* Separate debug info, looked for as libdwfl's dwfl_standard_find_debuginfo does, each
 * candidate opened as an untrusted file and checked to be the module's. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <elfutils/libdwelf.h>

#include "base/untrusted.h"
#include "symbols/debuginfo.h"
#include "symbols/elf_syms.h"

#define DEBUG_PATH_DEFAULT ":.debug:/usr/lib/debug"
#define CRC_FILE_MAX (1ull << 30)

struct wanted {
	char build_id[ELF_BUILD_ID_HEX_MAX];	/* "" where the module has none */
	const char *debuglink;
	GElf_Word crc;
	dev_t dev;	/* the module's own file: never taken (0, 0: none known) */
	ino_t ino;
};

/* The CRC of the whole file (the .gnu_debuglink kind: zlib's crc32); false past CRC_FILE_MAX
 * or where it cannot be read. */
static bool file_crc(int fd, uLong *crc)
{
	unsigned char buf[65536];
	struct stat st;
	off_t at = 0;
	ssize_t n;

	if (fstat(fd, &st) || (uint64_t)st.st_size > CRC_FILE_MAX)
		return false;
	*crc = crc32(0, Z_NULL, 0);
	while ((n = pread(fd, buf, sizeof(buf), at)) > 0) {
		*crc = crc32(*crc, buf, (uInt)n);
		at += n;
	}
	return n == 0;
}

/* The candidate at path, opened as untrusted.h says, if it is the module's debug file: not
 * the module's own file; its build-id the module's, or, the module having none, the
 * debuglink's CRC its own (none to check: 0, as libdwfl takes it). */
static int try_candidate(const char *path, const struct wanted *w, char **name)
{
	char id[ELF_BUILD_ID_HEX_MAX];
	struct stat st;
	bool ok = false;
	uLong crc;
	int fd = open_untrusted(path, NULL);

	if (fd < 0)
		return -1;
	if ((w->dev || w->ino) && !fstat(fd, &st) && st.st_dev == w->dev && st.st_ino == w->ino)
		ok = false;
	else if (w->build_id[0])
		ok = !elf_build_id_fd(fd, id, sizeof(id)) && !strcmp(id, w->build_id);
	else if (w->debuglink)
		ok = !w->crc || (file_crc(fd, &crc) && crc == w->crc);
	if (ok && (*name = strdup(path)))
		return fd;
	close(fd);
	return -1;
}

/* Under root: .build-id/xx/rest.debug. */
static int try_build_id(const char *root, size_t rootlen, const struct wanted *w, char **name)
{
	char path[PATH_MAX];

	if (!w->build_id[0] || !w->build_id[1] || !w->build_id[2])
		return -1;
	if (snprintf(path, sizeof(path), "%.*s/.build-id/%.2s/%s.debug", (int)rootlen, root,
		     w->build_id, w->build_id + 2) >= (int)sizeof(path))
		return -1;
	return try_candidate(path, w, name);
}

/* The path entry after e (entries split by ':'), or NULL. */
static const char *next_entry(const char *e)
{
	const char *colon = strchr(e, ':');

	return colon ? colon + 1 : NULL;
}

/* By build-id under each root (each absolute entry of paths). */
static int try_build_id_roots(const char *paths, const struct wanted *w, char **name)
{
	int fd = -1;

	for (const char *e = paths; fd < 0 && e; e = next_entry(e)) {
		size_t len = strcspn(e, ":");

		if (len && e[0] == '/')
			fd = try_build_id(e, len, w, name);
	}
	return fd;
}

/* The debuglink name in the place a path entry names, for the file in dir: the file's own
 * directory (""), one below it (relative), or a root (absolute) with dir, or a tail of it
 * (each from a '/' on), appended, as libdwfl tries them. */
static int try_debuglink(const char *entry, size_t len, const char *dir, const struct wanted *w,
			 char **name)
{
	char path[PATH_MAX];
	int fd;

	if (!len || entry[0] != '/') {
		if (snprintf(path, sizeof(path), "%s%s%.*s/%s", dir, len ? "/" : "", (int)len,
			     entry, w->debuglink) >= (int)sizeof(path))
			return -1;
		return try_candidate(path, w, name);
	}
	for (const char *tail = dir; tail; tail = strchr(tail + 1, '/')) {
		if (snprintf(path, sizeof(path), "%.*s%s/%s", (int)len, entry, tail,
			     w->debuglink) < (int)sizeof(path) &&
		    (fd = try_candidate(path, w, name)) >= 0)
			return fd;
	}
	/* The root itself, flat: GPUMEM_DEBUG_ROOT/NAME.debug. */
	if (snprintf(path, sizeof(path), "%.*s/%s", (int)len, entry, w->debuglink) >=
	    (int)sizeof(path))
		return -1;
	return try_candidate(path, w, name);
}

/* Whether libdwfl asks for the alternate file (dwz's) of the debug info in file_name: its
 * .gnu_debugaltlink names altname. */
static bool alternate_query(const char *file_name, const char *altname)
{
	char linked[PATH_MAX], id[ELF_BUILD_ID_HEX_MAX];
	int fd = open_untrusted(file_name, NULL);
	bool asked;

	if (fd < 0)
		return false;
	asked = !elf_debugaltlink_fd(fd, linked, sizeof(linked), id, sizeof(id)) &&
		!strcmp(linked, altname);
	close(fd);
	return asked;
}

/* The alternate file altname, of build-id w->build_id, that the debug info in file_name
 * names: by that build-id under each root, then at altname (beside file_name where
 * relative). Its descriptor, or -1. */
static int find_alternate(const char *paths, const char *file_name, const char *altname,
			  const struct wanted *w)
{
	char path[PATH_MAX], *name = NULL;
	int fd = -1;

	fd = try_build_id_roots(paths, w, &name);
	if (fd < 0 && altname[0] == '/') {
		fd = try_candidate(altname, w, &name);
	} else if (fd < 0 && file_name && file_name[0] == '/') {
		snprintf(path, sizeof(path), "%s", file_name);
		*strrchr(path, '/') = 0;
		if (strlen(path) + 1 + strlen(altname) < sizeof(path))
			fd = try_candidate(strcat(strcat(path, "/"), altname), w, &name);
	}
	free(name);
	return fd;
}

int debuginfo_find(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		   const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		   char **debuginfo_file_name)
{
	struct debuginfo_use *use = userdata ? *userdata : NULL;
	const char *paths = use && use->path ? use->path : DEBUG_PATH_DEFAULT;
	struct wanted w = { .debuglink = debuglink_file, .crc = debuglink_crc };
	const unsigned char *bits;
	GElf_Addr vaddr;
	char dir[PATH_MAX] = "", own[NAME_MAX + 8];
	int nbits, fd = -1;

	(void)modname;
	(void)base;
	/* The debug info found asks for its alternate file (no CRC): the seal's to find, never
	 * the module's own debug file instead. */
	if (!debuglink_crc && debuglink_file && file_name && file_name[0] == '/' &&
	    alternate_query(file_name, debuglink_file))
		return -1;
	if (use) {
		w.dev = use->dev;
		w.ino = use->ino;
	}
	nbits = dwfl_module_build_id(mod, &bits, &vaddr);
	for (int i = 0; i < nbits && i < (ELF_BUILD_ID_HEX_MAX - 1) / 2; i++)
		snprintf(w.build_id + 2 * i, 3, "%02x", bits[i]);
	/* By build-id under each root; then by debuglink. */
	fd = try_build_id_roots(paths, &w, debuginfo_file_name);
	if (fd >= 0 || !file_name || file_name[0] != '/')
		return fd;
	snprintf(dir, sizeof(dir), "%s", file_name);
	*strrchr(dir, '/') = 0;
	/* No debuglink: the file's own name with .debug, as libdwfl takes it (and only by
	 * build-id, there being no CRC). */
	if (!debuglink_file) {
		if (!w.build_id[0] ||
		    snprintf(own, sizeof(own), "%s.debug", strrchr(file_name, '/') + 1) >=
			    (int)sizeof(own))
			return -1;
		w.debuglink = own;
	}
	if (strchr(w.debuglink, '/'))
		return -1;
	for (const char *e = paths; fd < 0 && e; e = next_entry(e))
		fd = try_debuglink(e, strcspn(e, ":"), dir, &w, debuginfo_file_name);
	return fd;
}

void debuginfo_use(Dwfl_Module *mod, struct debuginfo_use *use, int file)
{
	struct stat st;
	void **slot = NULL;

	use->alt = NULL;
	use->alt_fd = -1;
	if (file >= 0 && !fstat(file, &st)) {
		use->dev = st.st_dev;
		use->ino = st.st_ino;
	}
	if (mod && dwfl_module_info(mod, &slot, NULL, NULL, NULL, NULL, NULL, NULL) && slot)
		*slot = use;
}

void debuginfo_seal_alt(Dwfl_Module *mod, struct debuginfo_use *use, Dwarf *dw)
{
	const char *altname, *mainfile = NULL, *debugfile = NULL;
	const unsigned char *id;
	struct wanted w = { .debuglink = NULL };
	ssize_t n;

	if (!dw || use->alt || (n = dwelf_dwarf_gnu_debugaltlink(dw, &altname,
								  (const void **)&id)) <= 0)
		return;
	for (ssize_t i = 0; i < n && i < (ELF_BUILD_ID_HEX_MAX - 1) / 2; i++)
		snprintf(w.build_id + 2 * i, 3, "%02x", id[i]);
	dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &mainfile, &debugfile);
	use->alt_fd = find_alternate(use->path ? use->path : DEBUG_PATH_DEFAULT,
				     debugfile ? debugfile : mainfile, altname, &w);
	if (use->alt_fd >= 0 && !(use->alt = dwarf_begin(use->alt_fd, DWARF_C_READ))) {
		close(use->alt_fd);
		use->alt_fd = -1;
	}
	/* None: (Dwarf *)-1, libdw's own mark of an alternate looked for and not found, which
	 * its dwarf_getalt answers with NULL (names from there: none) and dwarf_end lets be. */
	dwarf_setalt(dw, use->alt ? use->alt : (Dwarf *)-1);
}

void debuginfo_release(struct debuginfo_use *use)
{
	if (use->alt) {		/* alt_fd is open only beside it */
		dwarf_end(use->alt);
		close(use->alt_fd);
	}
	use->alt = NULL;
	use->alt_fd = -1;
}
