/* SPDX-License-Identifier: GPL-2.0 */
/* Separate debug info for libdwfl, looked for where dwfl_standard_find_debuginfo looks, but
 * opened as files a traced process controls are (base/untrusted.h). */
#ifndef GPUMEM_DEBUGINFO_H
#define GPUMEM_DEBUGINFO_H

#include <elfutils/libdwfl.h>

/*
 * A Dwfl_Callbacks.find_debuginfo. The places, in libdwfl's order, from the debug path a
 * module's userdata points at (a char *, as Dwfl_Callbacks.debuginfo_path: entries split by
 * ':'; "" the file's own directory, a relative one below it, an absolute one a debug root;
 * NULL: ":.debug:/usr/lib/debug"): under each root, .build-id/xx/rest.debug; then the file's
 * .gnu_debuglink name in the file's directory, below it, and under each root with the file's
 * directory, or any of its tails, appended.
 *
 * Those paths are the process's to choose (its library's directory, its root's
 * /usr/lib/debug): libdwfl's own open() of a FIFO found there would wait for ever, gpumem with
 * it. Each candidate is opened through open_untrusted (a FIFO or device is never opened) and
 * taken only where its build-id is the module's; a module with no build-id, by the
 * debuglink's CRC (files up to 1 GiB). Returns the descriptor (libdwfl takes it) and its
 * name in *debuginfo_file_name (malloc'd), or -1.
 */
int debuginfo_find(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		   const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		   char **debuginfo_file_name);

/* Points the module's userdata at *path (which must outlive it) for debuginfo_find. */
void debuginfo_set_path(Dwfl_Module *mod, char **path);

#endif
