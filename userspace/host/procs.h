/* SPDX-License-Identifier: GPL-2.0 */
/* What /proc says about a process: comm, cmdline, cgroup, start time, module map. Every
 * reader has a parser that takes text or a FILE *, so it is testable without a process. */
#ifndef GPUMEM_PROCS_H
#define GPUMEM_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Each returns 0 or -errno; buf is always NUL-terminated when len > 0. */
int proc_read_comm(int pid, char *buf, size_t len);
/* NUL-separated args joined by ' '; truncated to fit (still 0). Kernel threads give "". */
int proc_read_cmdline(int pid, char *buf, size_t len);
int proc_parse_cmdline(const char *data, size_t datalen, char *buf, size_t len);
/* The raw NUL-separated environment the process started with, at most len - 1 bytes (*n of
 * them; buf NUL-terminated). Untrusted: the caller parses it with a bound. */
int proc_read_environ(int pid, char *buf, size_t len, size_t *n);
/* The values of entry types[0..count) (AT_ENTRY, ...) of pid's auxiliary vector, one read of
 * it, into values: 0, -ENOENT when one is not there (its value 0), or -errno (every value 0). */
int proc_auxv_values(int pid, const uint64_t *types, uint64_t *values, size_t count);
/* len bytes of pid's memory at addr (process_vm_readv): 0, -EFAULT when fewer could be read,
 * or -errno. Untrusted: what a process's memory holds is its own to make up. */
int proc_read_mem(int pid, uint64_t addr, void *buf, size_t len);
/* The cgroup v2 path (the "0::" line), also on hybrid hosts. -ENOENT when there is no v2
 * line (v1-only host), -ENAMETOOLONG when the path does not fit (buf holds its start). */
int proc_read_cgroup(int pid, char *buf, size_t len);
int proc_parse_cgroup(const char *text, char *buf, size_t len);
/* Field 22 of /proc/PID/stat, in clock ticks since boot. */
int proc_start_time(int pid, uint64_t *ticks);
int proc_parse_stat_start_time(const char *stat_text, uint64_t *ticks);
/* Whether pid is still the process that started at start_ns (ns since boot, CLOCK_BOOTTIME, as
 * the BPF side records it): its start time, in clock ticks, is that one within a tick. False if
 * the pid is gone, or another process's since. */
bool proc_start_matches(int pid, uint64_t start_ns);
/* The CPU time (user and system) of pid, if it is still the process that started at start_ns
 * (ns since boot); -ESRCH when it is not. */
int proc_cpu_time(int pid, uint64_t start_ns, uint64_t *cpu_ns);
/* Field n (3 and up: after the command) of a /proc/PID/stat text, as a number. */
int proc_parse_stat_field(const char *stat_text, int n, uint64_t *value);
/* 1 when a /proc/PID/stat text is of a process that has begun to end (PF_EXITING set, or a
 * zombie, or dead), 0 when not, -EINVAL when the text is not a stat line. */
int proc_parse_stat_ending(const char *stat_text);
/* Whether pid has begun to end, or is gone (its stat unreadable). */
bool proc_is_ending(int pid);
bool proc_exists(int pid);

struct mapping {
	uint64_t start, end, pgoff, ino;
	uint32_t dev_major, dev_minor;
	bool exec;
	bool deleted;	/* the path ended in " (deleted)", which is stripped */
	char *path;
};

/* File-backed mappings (path begins with '/'), sorted by start. */
struct module_map {
	struct mapping *maps;
	size_t count;
};

/* pid's file-backed mappings, from /proc/PID/maps. -ESRCH when the process had begun to end
 * by the end of the read (a zombie too): the read may have been cut short, so none of it is
 * kept; -ENOENT when it is gone. */
int module_map_read(int pid, struct module_map *out);
/* The same, but a read of a process that had begun to end is kept, *whole false: each of its
 * mappings was there (their paths are right), but some may be missing. */
int module_map_read_ending(int pid, struct module_map *out, bool *whole);
int module_map_parse(FILE *f, struct module_map *out);
void module_map_free(struct module_map *m);
/* The mapping that holds addr, or NULL. */
const struct mapping *module_map_find(const struct module_map *m, uint64_t addr);

#endif
