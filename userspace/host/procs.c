// SPDX-License-Identifier: GPL-2.0
/* pid -> comm, cmdline, cgroup, start time and module map, read from /proc. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "host/procs.h"

/* Reads up to len - 1 bytes of /proc/PID/<name> into buf, NUL-terminated; *n gets the count. */
static int proc_read_file(int pid, const char *name, char *buf, size_t len, size_t *n)
{
	char path[64];
	size_t got = 0;
	ssize_t r;
	int fd, err = 0;

	if (pid <= 0 || len == 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got + 1 < len) {
		r = read(fd, buf + got, len - 1 - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		if (r == 0)
			break;
		got += r;
	}
	close(fd);
	buf[got] = '\0';
	*n = got;
	return err;
}

int proc_read_comm(int pid, char *buf, size_t len)
{
	size_t n;
	int err;

	err = proc_read_file(pid, "comm", buf, len, &n);
	if (err)
		return err;
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	return 0;
}

int proc_parse_cmdline(const char *data, size_t datalen, char *buf, size_t len)
{
	size_t i, n;

	if (len == 0)
		return -EINVAL;
	n = datalen < len - 1 ? datalen : len - 1;
	for (i = 0; i < n; i++)
		buf[i] = data[i] ? data[i] : ' ';
	/* the terminating NUL of the last argument, or truncation mid-separator */
	while (n > 0 && buf[n - 1] == ' ' && data[n - 1] == '\0')
		n--;
	buf[n] = '\0';
	return 0;
}

int proc_read_cmdline(int pid, char *buf, size_t len)
{
	size_t n;
	char *raw;
	int err;

	if (len == 0)
		return -EINVAL;
	raw = malloc(len);
	if (!raw)
		return -ENOMEM;
	err = proc_read_file(pid, "cmdline", raw, len, &n);
	if (!err)
		err = proc_parse_cmdline(raw, n, buf, len);
	else
		buf[0] = '\0';
	free(raw);
	return err;
}

int proc_read_environ(int pid, char *buf, size_t len, size_t *n)
{
	*n = 0;
	return proc_read_file(pid, "environ", buf, len, n);
}

int proc_auxv_values(int pid, const uint64_t *types, uint64_t *values, size_t count)
{
	uint64_t auxv[128 + 1];	/* pairs; the kernel's vector has under 40 */
	size_t n = 0, found = 0;
	int err = proc_read_file(pid, "auxv", (char *)auxv, sizeof(auxv), &n);

	for (size_t t = 0; t < count; t++) {
		values[t] = 0;
		for (size_t i = 0; !err && i + 1 < n / 8; i += 2)
			if (auxv[i] == types[t]) {
				values[t] = auxv[i + 1];
				found++;
				break;
			}
	}
	return err ? err : found == count ? 0 : -ENOENT;
}

int proc_read_mem(int pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int proc_parse_cgroup(const char *text, char *buf, size_t len)
{
	const char *line = text, *end;
	size_t n;

	if (len == 0)
		return -EINVAL;
	buf[0] = '\0';
	while (line && *line) {
		end = strchr(line, '\n');
		if (!end)
			end = line + strlen(line);
		if (strncmp(line, "0::", 3) == 0) {
			line += 3;
			n = end - line;
			if (n >= len) {
				memcpy(buf, line, len - 1);
				buf[len - 1] = '\0';
				return -ENAMETOOLONG;
			}
			memcpy(buf, line, n);
			buf[n] = '\0';
			return 0;
		}
		line = *end ? end + 1 : NULL;
	}
	return -ENOENT;
}

int proc_read_cgroup(int pid, char *buf, size_t len)
{
	char text[8192];
	size_t n;
	int err;

	if (len == 0)
		return -EINVAL;
	err = proc_read_file(pid, "cgroup", text, sizeof(text), &n);
	if (err) {
		buf[0] = '\0';
		return err;
	}
	return proc_parse_cgroup(text, buf, len);
}

int proc_parse_stat_field(const char *stat_text, int n, uint64_t *value)
{
	const char *p;
	char *end;
	int field;

	/* comm (field 2) may hold spaces and ')': it ends at the last ')' */
	p = strrchr(stat_text, ')');
	if (!p || n < 3)
		return -EINVAL;
	p++;
	/* the fields before it to skip, each preceded by one space */
	for (field = 3; field < n; field++) {
		if (*p != ' ')
			return -EINVAL;
		p++;
		p += strcspn(p, " ");
	}
	if (*p != ' ')
		return -EINVAL;
	p++;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	errno = 0;
	*value = strtoull(p, &end, 10);
	if (errno || (*end != ' ' && *end != '\n' && *end != '\0'))
		return -EINVAL;
	return 0;
}

/* The kernel's flag for a task that has begun to exit (linux/sched.h). */
#define PF_EXITING 0x00000004u

int proc_parse_stat_ending(const char *stat_text)
{
	const char *p = strrchr(stat_text, ')');
	uint64_t flags;

	/* field 3, the state, a letter: Z a zombie, X (or x) dead */
	if (!p || p[1] != ' ' || !p[2] || p[3] != ' ' ||
	    proc_parse_stat_field(stat_text, 9, &flags))
		return -EINVAL;
	return p[2] == 'Z' || p[2] == 'X' || p[2] == 'x' || (flags & PF_EXITING);
}

/* 1 when pid has begun to end, 0 when not, -errno when its stat cannot be read (gone). */
static int proc_ending(int pid)
{
	char text[1024];
	size_t n;
	int err = proc_read_file(pid, "stat", text, sizeof(text), &n);

	return err ? err : proc_parse_stat_ending(text);
}

bool proc_is_ending(int pid)
{
	return proc_ending(pid) != 0;
}

int proc_parse_stat_start_time(const char *stat_text, uint64_t *ticks)
{
	return proc_parse_stat_field(stat_text, 22, ticks);
}

int proc_start_time(int pid, uint64_t *ticks)
{
	char text[1024];
	size_t n;
	int err;

	err = proc_read_file(pid, "stat", text, sizeof(text), &n);
	if (err)
		return err;
	return proc_parse_stat_start_time(text, ticks);
}

bool proc_start_matches(int pid, uint64_t start_ns)
{
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t ticks, ours;

	if (hz <= 0 || proc_start_time(pid, &ticks))
		return false;
	/* As the kernel converts for /proc: whole ticks, rounded down. */
	ours = start_ns / (1000000000ull / (uint64_t)hz);
	return ticks + 1 >= ours && ours + 1 >= ticks;
}

int proc_cpu_time(int pid, uint64_t start_ns, uint64_t *cpu_ns)
{
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t start, utime, stime, ours;
	char text[1024];
	size_t n;
	int err;

	if (hz <= 0)
		return -EINVAL;
	err = proc_read_file(pid, "stat", text, sizeof(text), &n);
	if (err)
		return err;
	if (proc_parse_stat_field(text, 22, &start) || proc_parse_stat_field(text, 14, &utime) ||
	    proc_parse_stat_field(text, 15, &stime))
		return -EINVAL;
	ours = start_ns / (1000000000ull / (uint64_t)hz);
	if (start + 1 < ours || ours + 1 < start)
		return -ESRCH;	/* the pid is another process's now */
	*cpu_ns = (utime + stime) * (1000000000ull / (uint64_t)hz);
	return 0;
}

bool proc_exists(int pid)
{
	if (pid <= 0)
		return false;
	return kill(pid, 0) == 0 || errno == EPERM;
}

static int mapping_cmp(const void *a, const void *b)
{
	const struct mapping *ma = a, *mb = b;

	if (ma->start != mb->start)
		return ma->start < mb->start ? -1 : 1;
	return 0;
}

/* The kernel writes a newline in a mapped file's path as "\012" (its one escape there, so
 * that each mapping stays a line): the path as the file has it, as the exit walk and
 * /proc/PID/cmdline give it, in place. A name that holds "\012" itself reads as one with a
 * newline: /proc cannot tell them apart. */
static void unescape_newlines(char *path)
{
	char *w = path;

	for (const char *r = path; *r; r++) {
		if (!strncmp(r, "\\012", 4)) {
			*w++ = '\n';
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* Parses one maps line; 0 with m->path set for a file-backed mapping, 1 to skip the line. */
static int parse_maps_line(char *line, struct mapping *m)
{
	static const char deleted[] = " (deleted)";
	unsigned long long start, end, pgoff, ino;
	unsigned int major, minor;
	char perms[8];
	size_t n, dl = sizeof(deleted) - 1;
	int path_at = -1;
	char *path;

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &pgoff,
		   &major, &minor, &ino, &path_at) < 7 || path_at < 0)
		return -EINVAL;
	path = line + path_at;
	n = strlen(path);
	if (n > 0 && path[n - 1] == '\n')
		path[--n] = '\0';
	if (path[0] != '/')
		return 1;
	memset(m, 0, sizeof(*m));
	if (n > dl && strcmp(path + n - dl, deleted) == 0) {
		m->deleted = true;
		path[n - dl] = '\0';
	}
	unescape_newlines(path);
	m->path = strdup(path);
	if (!m->path)
		return -ENOMEM;
	m->start = start;
	m->end = end;
	m->pgoff = pgoff;
	m->ino = ino;
	m->dev_major = major;
	m->dev_minor = minor;
	m->exec = strlen(perms) >= 3 && perms[2] == 'x';
	return 0;
}

int module_map_parse(FILE *f, struct module_map *out)
{
	struct mapping *maps = NULL, *grown;
	size_t count = 0, cap = 0, linecap = 0;
	char *line = NULL;
	int err = 0;

	out->maps = NULL;
	out->count = 0;
	while (getline(&line, &linecap, f) > 0) {
		if (count == cap) {
			cap = cap ? cap * 2 : 64;
			grown = realloc(maps, cap * sizeof(*maps));
			if (!grown) {
				err = -ENOMEM;
				break;
			}
			maps = grown;
		}
		err = parse_maps_line(line, &maps[count]);
		if (err == 1) {
			err = 0;
			continue;
		}
		if (err)
			break;
		count++;
	}
	if (!err && ferror(f))	/* a read cut short is no whole map */
		err = -EIO;
	free(line);
	out->maps = maps;
	out->count = count;
	if (err) {
		module_map_free(out);
		return err;
	}
	if (count > 1)
		qsort(maps, count, sizeof(*maps), mapping_cmp);
	return 0;
}

#define MAPS_READ_BYTES (64u << 10)

int module_map_read_ending(int pid, struct module_map *out, bool *whole)
{
	char path[64], *buf;
	FILE *f;
	int err;

	*whole = false;
	out->maps = NULL;
	out->count = 0;
	if (pid <= 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	/* The kernel gives up to a page a read; stdio would ask for /proc's 1 KiB block, four
	 * reads (each a take of the process's map lock) for every page. */
	buf = malloc(MAPS_READ_BYTES);
	if (buf)	/* else stdio's own */
		setvbuf(f, buf, _IOFBF, MAPS_READ_BYTES);
	err = module_map_parse(f, out);
	fclose(f);
	free(buf);
	if (err)
		return err;
	/* Asked after the read: not ending then, it was whole throughout. The kernel gives the
	 * maps a chunk at a time and ends the read, as at their end, once the process has let
	 * go of its memory, which it does after it is marked PF_EXITING. Seen on Linux 6.18: a
	 * read beside the exit of a process that had just loaded a library gave its lower 17
	 * mappings of 25, the older libraries above them missing. (An exec replaces the maps
	 * with no such mark: the model tells an image by its first call's map, same_image.) */
	err = proc_ending(pid);
	if (err < 0) {
		module_map_free(out);
		return err;
	}
	*whole = !err;
	return 0;
}

int module_map_read(int pid, struct module_map *out)
{
	bool whole;
	int err = module_map_read_ending(pid, out, &whole);

	if (!err && !whole) {
		module_map_free(out);
		return -ESRCH;
	}
	return err;
}

void module_map_free(struct module_map *m)
{
	size_t i;

	for (i = 0; i < m->count; i++)
		free(m->maps[i].path);
	free(m->maps);
	m->maps = NULL;
	m->count = 0;
}

const struct mapping *module_map_find(const struct module_map *m, uint64_t addr)
{
	size_t lo = 0, hi = m->count, mid;

	/* first mapping whose start is above addr; the one before it may hold addr */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (m->maps[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	if (addr < m->maps[lo - 1].end)
		return &m->maps[lo - 1];
	return NULL;
}
