/* SPDX-License-Identifier: GPL-2.0 */
/* Separate debug info for libdwfl, looked for where dwfl_standard_find_debuginfo looks, but
 * opened as files a traced process controls are (base/untrusted.h). */
#ifndef GPUMEM_DEBUGINFO_H
#define GPUMEM_DEBUGINFO_H

#include <sys/types.h>

#include <elfutils/libdwfl.h>

/* What a module looks for its debug info with, and what was found: its userdata
 * (debuginfo_use), kept as long as the module. */
struct debuginfo_use {
	const char *path;	/* as Dwfl_Callbacks.debuginfo_path; NULL: the default */
	dev_t dev;		/* the module's own file, never its debug file (libdwfl's */
	ino_t ino;		/* rule: a dir/.debug/NAME that is NAME itself); 0: stat'd */
	Dwarf *alt;		/* its DWARF's alternate file (dwz's), found by the seal */
	int alt_fd;		/* ... and its descriptor, open while alt is set */
};

/*
 * A Dwfl_Callbacks.find_debuginfo. The places, in libdwfl's order, from the module's
 * debuginfo_use's path (entries split by ':'; "" the file's own directory, a relative one
 * below it, an absolute one a debug root; NULL: ":.debug:/usr/lib/debug"): under each root,
 * .build-id/xx/rest.debug; then the file's .gnu_debuglink name in the file's directory,
 * below it, and under each root with the file's directory, or any of its tails, appended.
 * Asked for the alternate file of the debug info found (.gnu_debugaltlink), it answers -1:
 * debuginfo_seal_alt looks for that one.
 *
 * Those paths are the process's to choose (its library's directory, its root's
 * /usr/lib/debug): libdwfl's own open() of a FIFO found there would wait for ever, gpumem with
 * it. Each candidate is opened through open_untrusted (a FIFO or device is never opened) and
 * taken only where its build-id is the one wanted; a module with no build-id, by the
 * debuglink's CRC (files up to 1 GiB). Returns the descriptor (libdwfl takes it) and its
 * name in *debuginfo_file_name (malloc'd), or -1.
 */
int debuginfo_find(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		   const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		   char **debuginfo_file_name);

/* Points the module's userdata at use (which must outlive it) for debuginfo_find; file is
 * the module's own (its device and inode), -1 where none. */
void debuginfo_use(Dwfl_Module *mod, struct debuginfo_use *use, int file);

/* Once the module's DWARF (dw) is loaded: the alternate file it names (dwz's), looked for as
 * debuginfo_find looks for debug files, by the link's build-id under each root then at the
 * link's path, and given to libdw (use->alt, until debuginfo_release); not found, libdw is
 * told there is none. libdwfl's own look, and libdw's at the first name it needs from there
 * (dwarf_getalt), would open the link's path with a plain open(). */
void debuginfo_seal_alt(Dwfl_Module *mod, struct debuginfo_use *use, Dwarf *dw);
/* Ends what the seal found: after the Dwarf that uses it has ended (dwfl_end). */
void debuginfo_release(struct debuginfo_use *use);

#endif
