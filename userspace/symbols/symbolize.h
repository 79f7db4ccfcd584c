/* SPDX-License-Identifier: GPL-2.0 */
/* Stack addresses -> module, ELF offset, function, source file and line (libdw, with the ELF
 * symbol tables as fallback), inlined calls as frames of their own; cached per build-id among
 * the files only root can have written (any other file's image is its own). */
#ifndef GPUMEM_SYMBOLIZE_H
#define GPUMEM_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "host/procs.h"

/* The most frames one address expands to: its function and the calls inlined into it. */
#define SYM_MAX_INLINE 16

struct frame {
	uint64_t addr;
	const char *module;	/* path as the process saw it, or NULL */
	uint64_t offset;	/* ELF vaddr within the module: what addr2line takes; for
				 * unresolvable frames the raw address (no module) or the file
				 * offset (module whose segments are unknown) */
	const char *symbol;	/* as the binary names it (mangled), or NULL */
	uint64_t symbol_offset;	/* from the function's entry; 0 for inlined frames */
	const char *file;	/* source file, or NULL */
	uint32_t line;		/* 0 when unknown */
	bool inlined;		/* a call inlined into the function of the next frame */
};

struct symbolizer;

struct symbolizer *symbolizer_new(void);
void symbolizer_free(struct symbolizer *s);

/*
 * addr is a return address when is_return: the lookup uses addr - 1, but offset and
 * symbol_offset report addr's own. mm is the process's module map captured while it lived;
 * the file is opened as the process saw it: /proc/PID/map_files/<start>-<end> first, then
 * /proc/PID/root/<path>, then <path> (those two only when their inode is the mapped one).
 * Separate debug info is found by build-id and .gnu_debuglink under $GPUMEM_DEBUG_ROOT
 * (colon-separated directories), /usr/lib/debug and the process's own /usr/lib/debug.
 *
 * symbolize_frames fills out[0..n) innermost first: the calls inlined at addr (inlined =
 * true, each with the line inside it), then the function that holds addr (with the line of
 * the outermost inlined call, or addr's own); returns n >= 1, or -EINVAL / -ENOMEM.
 * symbolize_addr fills only that last, real frame and returns 0.
 * Strings stay owned by the symbolizer until symbolizer_free (a sweep keeps them). An address
 * that no mapping or symbol covers still fills a frame.
 */
int symbolize_frames(struct symbolizer *s, int pid, const struct module_map *mm, uint64_t addr,
		     bool is_return, struct frame *out, unsigned int max);
int symbolize_addr(struct symbolizer *s, int pid, const struct module_map *mm, uint64_t addr,
		   bool is_return, struct frame *out);
/* The mapping of mm that holds addr's code (for a return address, the call's: addr - 1), or
 * NULL: where symbolize_frames looks. */
const struct mapping *symbolize_mapping_of(const struct module_map *mm, uint64_t addr,
					   bool is_return);

/* Opens and loads every executable mapping now, while the process lives: its files stay
 * resolvable after it ends even when deleted or inside a container. */
/*
 * The mapped file as the process saw it: its map_files link (the very file mapped), then the
 * path inside its root, then the host path (device and inode checked: a file of that name on
 * the host is not the process's; it is how a process that ended before gpumem looked is still
 * read). Untrusted: see untrusted.h. name gets the path libdw looks beside for .gnu_debuglink
 * files. A descriptor, or -errno.
 */
int symbolize_open_mapped(int pid, const struct mapping *m, char *name, size_t len);
/* The same, and where that fails (the process has ended: a file deleted or inside its
 * container), a descriptor of the file that s opened for this mapping while the process had
 * it, if it kept one (SYM_KEPT_FDS_MAX at most). */
int symbolizer_open_mapped(struct symbolizer *s, int pid, const struct mapping *m, char *name,
			   size_t len);
void symbolizer_prefetch(struct symbolizer *s, int pid, const struct module_map *mm);

/* A C++ name demangled (libstdc++'s __cxa_demangle, loaded at run time), cached; the name
 * itself when it is not mangled or no demangler is there. */
const char *symbolizer_demangle(struct symbolizer *s, const char *name);

/* Letting go of what no process in use maps: between sweep_begin and sweep_end, keep() each
 * module map still in use; the files, images (their descriptors, symbol tables, debug info)
 * and address caches of every other mapping are freed. Names handed out in frames stay. */
void symbolizer_sweep_begin(struct symbolizer *s);
void symbolizer_keep(struct symbolizer *s, const struct module_map *mm);
void symbolizer_sweep_end(struct symbolizer *s);

/* The names frames point to (functions, source files, modules), interned: past this many
 * bytes a new one is dropped (the frame shows its address) and counted. Another bound for
 * this symbolizer: symbolizer_limit_names (a test's, a smaller one). */
#define SYM_NAMES_MAX_BYTES (64u << 20)
/* Files whose descriptor the symbolizer keeps for unwinding after their process ends. */
#define SYM_KEPT_FDS_MAX 512
/* libdw sessions dropped when their file was cut short under them (written in place while
 * read): their memory and descriptors are not given back. Past this many, files that a user
 * could have written are named by their symbol tables alone, and stacks unwind through files
 * root wrote only. */
#define SYM_CUT_SHORT_MAX 16
/* One more libdw session dropped so (counted as a module unread; kept, never ended), and how
 * many so far. */
struct Dwfl;
void symbolizer_note_cut_short(struct symbolizer *s, struct Dwfl *session);
unsigned int symbolizer_cut_short_count(const struct symbolizer *s);
void symbolizer_limit_names(struct symbolizer *s, size_t max_bytes);

/* Work done so far: for tests and statistics. */
struct symbolizer_stats {
	uint64_t files_loaded;		/* files opened and usable (build-id hits included) */
	uint64_t files_failed;		/* files that are no usable ELF */
	uint64_t open_failures;		/* mapped files not opened: their frames unnamed */
	uint64_t build_id_hits;		/* of those, whose build-id was parsed already */
	uint64_t dwarf_loaded;		/* images with debug info found */
	uint64_t addr_hits;		/* lookups answered from the address cache */
	uint64_t addr_misses;
	uint64_t images_released;	/* images no process in use mapped, let go */
	uint64_t names_dropped;		/* names past SYM_NAMES_MAX_BYTES */
	uint64_t names_bytes;		/* interned now */
};
void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *stats);

#endif
