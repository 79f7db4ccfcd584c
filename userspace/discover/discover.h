/* SPDX-License-Identifier: GPL-2.0 */
/* Finding CUDA code to attach to: running processes' maps and executables, the ld cache,
 * standard install directories, --lib files, and libraries that appear later. */
#ifndef GPUMEM_DISCOVER_H
#define GPUMEM_DISCOVER_H

#include <stdbool.h>
#include <stdint.h>
#include "gpumem.h"

struct discovery;

/* What discovery asks of whoever attaches probes (the loader), lent for the discovery's life:
 * discovery finds files and decides which to examine, never how they are attached. */
struct discovery_attacher {
	void *ctx;
	/* Attaches the probes of the file path (a /proc magic link to what was checked): 0 with
	 * *handle NULL when it defines no CUDA allocation API, or with *handle and *nprobes;
	 * -ENOEXEC when it is no ELF file; another -errno to be tried again later. */
	int (*attach)(void *ctx, const char *path, void **handle, unsigned int *nprobes);
	/* Whether probe-table row api is attached in the file of handle. */
	bool (*has_api)(const void *handle, unsigned int api);
	/* Lets the files' probes go with the run, all at once (an agent's stay pinned for the
	 * next one). */
	void (*detach_all)(void **handles, size_t n);
	/* Lets them go for good: no process maps the file any more (an agent's pins too), or it
	 * was written in place. now: gone before it returns (it waits out the kernel's grace
	 * periods), else soon. */
	void (*retire)(void *ctx, void *handle, bool now);
	/* Tells the BPF side a file was examined (kernel device, inode), as it was then (its
	 * ctime in ns: another, and its next open is reported again); 0 or -errno. */
	int (*mark_known)(void *ctx, uint64_t dev, uint64_t ino, uint64_t ctime_ns);
	/* Undoes mark_known: the next open of the file is reported (and held) again. */
	void (*forget)(void *ctx, uint64_t dev, uint64_t ino);
	/* Resumes a process held at its open of an unknown CUDA file. */
	void (*release)(void *ctx, int pid);
};

struct discovery_stats {
	unsigned int files;		/* distinct files attached */
	unsigned int probes;		/* uprobes and uretprobes attached */
	unsigned int late_attaches;	/* files attached after start-up */
	uint64_t late_attach_ns_max;	/* open or exec in the kernel -> probes attached */
	uint64_t late_attach_ns_last;
	uint64_t released;		/* files let go: no process mapped them any more */
	uint64_t not_attached;		/* CUDA files in use left without probes: --max-files
					 * were attached, or attaching failed (out of fds) */
	uint64_t unheld_late;		/* processes whose new CUDA file was attached while they
					 * ran on (not paused): their first calls may be missed */
};

/* A file with probes on it, as diagnostics show it: its device, inode and which probe-table
 * rows are attached there. */
struct discovery_file {
	unsigned int major, minor;
	uint64_t ino;
	unsigned int napis;
	unsigned int *apis;	/* probe-table rows, in the table's order */
};

/* At most max_files files attached at once (--max-files); the files it examined and found no
 * API in are remembered, DISCOVERY_EXAMINED_MAX at most, the oldest forgotten first. */
#define DISCOVERY_EXAMINED_MAX 4096
#define DISCOVERY_FILES_DEFAULT 512
struct discovery *discovery_new(const struct discovery_attacher *at, unsigned int max_files);
void discovery_free(struct discovery *d);
/* Lets go of the files that processes found it (not --lib, the ld cache or the install
 * directories) once no process maps them: their probes, pins and descriptors. Does the
 * work at most every DISCOVERY_SWEEP_S seconds; call it as often as convenient. */
#define DISCOVERY_SWEEP_S 30
void discovery_sweep(struct discovery *d);
/* A traced process ended: the files it mapped may be mapped by none now. The sweep comes
 * sooner: a second from now, DISCOVERY_SWEEP_MIN_S after the last one at the soonest. */
#define DISCOVERY_SWEEP_MIN_S 10
void discovery_sweep_soon(struct discovery *d);
/* A descriptor that polls readable when an attached file was written (cp over it keeps the
 * inode: the probes placed by its old code's offsets would fire in its new code), or -1;
 * discovery_on_writes then takes those files' probes out before it returns, and the files
 * are examined anew at their next open. */
int discovery_watch_fd(const struct discovery *d);
void discovery_on_writes(struct discovery *d);
/* Whether the file of kernel device kdev and inode ino is attached now. */
bool discovery_attached(const struct discovery *d, uint64_t kdev, uint64_t ino);
/* A file named by the user (--lib): it must exist and define CUDA allocation APIs. */
int discovery_add_required(struct discovery *d, const char *path);
/* Attaches path if it defines CUDA allocation APIs and is not attached yet; 0 or -errno.
 * Kept for the run: a file the user named, or one of the system's. */
int discovery_add(struct discovery *d, const char *path);
/* Everything present now: processes' maps and executables, ld cache, standard dirs. */
void discovery_scan_system(struct discovery *d);
void discovery_scan_process(struct discovery *d, int pid);
/* CUDA libraries in each directory of a ':'-separated list (LD_LIBRARY_PATH of -c CMD). */
void discovery_scan_dirs(struct discovery *d, const char *dirs);
void discovery_on_file_event(struct discovery *d, const struct gm_file_event *e);
void discovery_get_stats(const struct discovery *d, struct discovery_stats *out);
/* A copy of the attached files, in the order they were attached, in one block that one
 * free() releases. Returns how many. */
size_t discovery_get_files(const struct discovery *d, struct discovery_file **out);

#endif
