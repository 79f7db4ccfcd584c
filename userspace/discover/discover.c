// SPDX-License-Identifier: GPL-2.0
/* Finding CUDA code: running processes' maps and executables, the ld cache, standard
 * install directories, files inside containers through /proc/PID/root, and libraries that
 * are opened or exec'd later. Every file is attached once per (device, inode). */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "base/untrusted.h"
#include "base/util.h"
#include "discover/discover.h"
#include "probes/table.h"
#include "symbols/elf_syms.h"

struct file_id {
	dev_t dev;
	ino_t ino;
	void *attached;	/* the attacher's handle; NULL: examined, holds no CUDA allocation API */
};

struct discovery {
	struct discovery_attacher at;	/* the loader's, lent */
	struct file_id *files;
	size_t nfiles, cap;
	struct discovery_stats stats;
};

static const char *const std_dirs[] = {
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/*/lib",
	"/usr/local/cuda-*/lib64",
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
	"/usr/lib",
	"/usr/lib/wsl/lib",
};

struct discovery *discovery_new(const struct discovery_attacher *at)
{
	struct discovery *d = xcalloc(1, sizeof(*d));

	d->at = *at;
	return d;
}

void discovery_free(struct discovery *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->nfiles; i++)
		if (d->files[i].attached)
			d->at.detach(d->files[i].attached);
	free(d->files);
	free(d);
}

static struct file_id *find_file(struct discovery *d, dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < d->nfiles; i++)
		if (d->files[i].dev == dev && d->files[i].ino == ino)
			return &d->files[i];
	return NULL;
}

/* Tells the BPF side this file was examined: opening it again need not hold anyone. */
static void mark_known(struct discovery *d, dev_t dev, ino_t ino)
{
	if (d->at.mark_known(d->at.ctx, gm_kernel_dev(major(dev), minor(dev)), ino))
		p_debug("known-file map full: later opens of this file are reported again");
}

static struct file_id *remember(struct discovery *d, dev_t dev, ino_t ino)
{
	mark_known(d, dev, ino);
	if (d->nfiles == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 64;
		d->files = xrealloc(d->files, d->cap * sizeof(*d->files));
	}
	d->files[d->nfiles] = (struct file_id){ .dev = dev, .ino = ino };
	return &d->files[d->nfiles++];
}

/* Examines an opened file: parsed and attached through its descriptor, so that what was
 * checked is what is attached. -ENOEXEC: no ELF file (examined: not tried again). */
static int add_opened(struct discovery *d, int fd, bool *attached)
{
	void *attached_file = NULL;
	unsigned int nprobes = 0;
	char path[64];
	struct file_id *id;
	struct stat st;
	int err;

	*attached = false;
	if (fstat(fd, &st))
		return -errno;
	id = find_file(d, st.st_dev, st.st_ino);
	if (id) {
		*attached = id->attached != NULL;
		return 0;
	}
	fd_path(fd, path, sizeof(path));
	err = d->at.attach(d->at.ctx, path, &attached_file, &nprobes);
	if (err && err != -ENOEXEC)
		return err;	/* not examined (the attach failed): tried again later */
	id = remember(d, st.st_dev, st.st_ino);
	id->attached = attached_file;
	if (id->attached) {
		*attached = true;
		d->stats.files++;
		d->stats.probes += nprobes;
	}
	return err;
}

/* path: absolute, or a /proc magic link; a regular file opened as untrusted.h says. */
static int add_file_wanted(struct discovery *d, const char *path, const struct file_want *want,
			   bool *attached)
{
	int fd = open_untrusted(path, want), err;

	*attached = false;
	if (fd < 0)
		return fd;
	err = add_opened(d, fd, attached);
	close(fd);
	return err;
}

static int add_file(struct discovery *d, const char *path, bool *attached)
{
	return add_file_wanted(d, path, NULL, attached);
}

int discovery_add(struct discovery *d, const char *path)
{
	bool attached;
	int err = add_file(d, path, &attached);

	return err == -ENOEXEC ? 0 : err;
}

int discovery_add_required(struct discovery *d, const char *path)
{
	bool attached;
	int err;

	if (access(path, R_OK)) {
		err = -errno;
		p_err("cannot read --lib %s: %s", path, strerror(errno));
		return err;
	}
	err = add_file(d, path, &attached);
	if (err == -ENOEXEC) {
		p_err("--lib %s is not an ELF file gpumem can read (corrupt or truncated?)", path);
		return err;
	}
	if (err == -EINVAL) {
		p_err("--lib %s is not a regular file", path);
		return err;
	}
	if (err) {
		p_err("cannot attach to %s: %s", path, strerror(-err));
		return err;
	}
	if (!attached) {
		p_err("--lib %s defines none of the CUDA allocation functions gpumem probes", path);
		return -ENOENT;
	}
	return 0;
}

static void scan_dir(struct discovery *d, const char *pattern)
{
	char buf[PATH_MAX];
	glob_t g;

	snprintf(buf, sizeof(buf), "%s/libcuda*.so*", pattern);
	if (glob(buf, 0, NULL, &g))
		return;
	for (size_t i = 0; i < g.gl_pathc; i++)
		if (is_cuda_library_path(g.gl_pathv[i]))
			discovery_add(d, g.gl_pathv[i]);
	globfree(&g);
}

void discovery_scan_dirs(struct discovery *d, const char *dirs)
{
	char *copy, *dir, *save = NULL;

	if (!dirs)
		return;
	copy = xstrdup(dirs);
	for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
		if (*dir)
			scan_dir(d, dir);
	free(copy);
}

static void scan_ld_cache(struct discovery *d)
{
	char line[PATH_MAX + 128];
	FILE *f = popen("/sbin/ldconfig -p 2>/dev/null", "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *path = strstr(line, "=> ");

		if (!path)
			continue;
		path += 3;
		path[strcspn(path, "\n")] = 0;
		if (is_cuda_library_path(path))
			discovery_add(d, path);
	}
	pclose(f);
}

/* The process's executable, if it carries the runtime statically (nvcc's default). */
static void scan_executable(struct discovery *d, int pid)
{
	char exe[64];

	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	discovery_add(d, exe);
}

/* A library as the process sees it in its root (symlinks resolved inside that root). */
static void add_in_root(struct discovery *d, int pid, const char *file)
{
	int fd = open_in_root(pid, file, NULL);
	bool attached;

	if (fd < 0)
		return;
	add_opened(d, fd, &attached);
	close(fd);
}

void discovery_scan_process(struct discovery *d, int pid)
{
	char path[PATH_MAX], line[PATH_MAX + 256];
	FILE *f;

	scan_executable(d, pid);
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *file = strchr(line, '/');
		unsigned long start, end;

		if (!file)
			continue;
		file[strcspn(file, "\n")] = 0;
		if ((!is_cuda_library_path(file) && !is_tensor_library_path(file)) ||
		    sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		/* map_files reaches the very file mapped, in a container or deleted since. */
		snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, start, end);
		if (discovery_add(d, path) == 0)
			continue;
		add_in_root(d, pid, file);
	}
	fclose(f);
}

static void scan_processes(struct discovery *d)
{
	DIR *dir = opendir("/proc");
	struct dirent *de;
	uint64_t start = now_ns();
	unsigned int n = 0;

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		int pid = atoi(de->d_name);

		if (pid > 0 && pid != getpid()) {
			discovery_scan_process(d, pid);
			n++;
		}
	}
	closedir(dir);
	/* What start-up spends on a busy host (bench/discovery.sh reads it). */
	p_debug("scanned the maps of %u processes in %.1f ms", n, (now_ns() - start) / 1e6);
}

void discovery_scan_system(struct discovery *d)
{
	for (size_t i = 0; i < ARRAY_SIZE(std_dirs); i++) {
		glob_t g;

		if (glob(std_dirs[i], GLOB_ONLYDIR, NULL, &g))
			continue;
		for (size_t j = 0; j < g.gl_pathc; j++)
			scan_dir(d, g.gl_pathv[j]);
		globfree(&g);
	}
	scan_ld_cache(d);
	scan_processes(d);
}

static void note_late_attach(struct discovery *d, unsigned int files_before,
			     const struct gm_file_event *e)
{
	uint64_t took;

	if (d->stats.files == files_before)
		return;
	took = now_ns() - e->time_ns;
	d->stats.late_attaches++;
	d->stats.late_attach_ns_last = took;
	if (took > d->stats.late_attach_ns_max)
		d->stats.late_attach_ns_max = took;
	/* PID and path let a benchmark tell its own files from other processes'. */
	p_debug("attached a new CUDA file %.3f ms after the kernel saw it (PID %u: %.*s)",
		took / 1e6, e->pid, GM_PATH_LEN, e->path);
}

void discovery_on_file_event(struct discovery *d, const struct gm_file_event *e)
{
	/* The very file opened: its descriptor is still open while the process is held. Not
	 * held, the number may be another file's by now: only the event's (device, inode) will
	 * do, else the process's mappings are looked at. */
	const struct file_want want = {
		.ino = e->ino,
		.dev = makedev(e->dev >> GM_DEV_MINOR_BITS, e->dev & GM_DEV_MINOR_MASK),
		.check_dev = true,
	};
	unsigned int before = d->stats.files;
	char path[PATH_MAX];
	bool attached;
	int err;

	if (e->type == GM_REC_EXEC) {
		scan_executable(d, (int)e->pid);
		note_late_attach(d, before, e);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%u/fd/%u", e->pid, e->fd);
	err = add_file_wanted(d, path, &want, &attached);
	if (err && err != -ENOEXEC) {
		/* Not held (not traced): the loader has closed it by now, but mapped it. */
		discovery_scan_process(d, (int)e->pid);
		if (d->stats.files == before)
			p_debug("cannot examine %.*s opened by PID %u", GM_PATH_LEN, e->path,
				e->pid);
	}
	note_late_attach(d, before, e);
	if (e->held)
		d->at.release(d->at.ctx, (int)e->pid);
}

void discovery_get_stats(const struct discovery *d, struct discovery_stats *out)
{
	*out = d->stats;
}

size_t discovery_get_files(const struct discovery *d, struct discovery_file **out)
{
	struct discovery_file *files = NULL;
	unsigned int *apis;
	size_t n = 0;

	*out = NULL;
	if (!d->stats.files)
		return 0;
	/* One block, the rows after the files: one free() lets it go. */
	files = xcalloc(1, d->stats.files * (sizeof(*files) + probe_count * sizeof(*apis)));
	apis = (unsigned int *)(files + d->stats.files);
	for (size_t i = 0; i < d->nfiles && n < d->stats.files; i++) {
		const struct file_id *id = &d->files[i];
		struct discovery_file *f = &files[n];

		if (!id->attached)
			continue;
		f->major = major(id->dev);
		f->minor = minor(id->dev);
		f->ino = id->ino;
		f->apis = apis + n * probe_count;
		for (unsigned int api = 0; api < probe_count; api++)
			if (d->at.has_api(id->attached, api))
				f->apis[f->napis++] = api;
		n++;
	}
	*out = files;
	return n;
}
