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
#include <sys/inotify.h>
#include <sys/mman.h>
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
	unsigned int nprobes;
	bool keep;	/* the user's or the system's: never let go */
	/* In use, left without probes for want of room: counted once. A sweep forgets it when
	 * no process maps it, else lets its next open try it again (not counted again). */
	bool refused;
	/* As /proc/PID/maps shows the file (on overlayfs: the file under it, not fstat's). */
	unsigned int map_major, map_minor;
	uint64_t map_ino;
	/* Its ctime when examined, in ns (as the BPF side keeps it): any write since (cp over it)
	 * sets another, which no user can set back. 0: written while attached, its probes taken
	 * out; the file is examined anew at its next open. */
	uint64_t ctime_ns;
	int wd;		/* its inotify watch while attached (> 0), else 0 */
};

struct discovery {
	struct discovery_attacher at;	/* the loader's, lent */
	struct file_id *files;		/* in the order they were examined */
	size_t nfiles, cap;
	unsigned int max_files;
	struct discovery_stats stats;
	uint64_t attaches;		/* files attached so far, let go since or not */
	uint64_t last_sweep_ns, next_sweep_ns, forced_sweep_ns, warned_ns;
	int watch_fd;			/* inotify: writes to the attached files; -1 without */
};

/* A sweep the limit asks for runs at most this often; the refusal is logged at most once a
 * minute (the counter has every one). */
#define FORCED_SWEEP_NS 1000000000ull
#define REFUSAL_LOG_NS 60000000000ull

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

struct discovery *discovery_new(const struct discovery_attacher *at, unsigned int max_files)
{
	struct discovery *d = xcalloc(1, sizeof(*d));

	d->at = *at;
	d->max_files = max_files;
	d->next_sweep_ns = now_ns() + DISCOVERY_SWEEP_S * 1000000000ull;
	/* Without it (out of inotify instances), a written file is still caught at its next
	 * open, by its ctime. */
	d->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (d->watch_fd < 0)
		p_debug("cannot watch the attached files for writes: %s", strerror(errno));
	return d;
}

void discovery_free(struct discovery *d)
{
	void **handles;
	size_t n = 0;

	if (!d)
		return;
	handles = xcalloc(d->nfiles ? d->nfiles : 1, sizeof(*handles));
	for (size_t i = 0; i < d->nfiles; i++)
		if (d->files[i].attached)
			handles[n++] = d->files[i].attached;
	d->at.detach_all(handles, n);
	free(handles);
	free(d->files);
	if (d->watch_fd >= 0)
		close(d->watch_fd);
	free(d);
}

static struct file_id *find_file(struct discovery *d, dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < d->nfiles; i++)
		if (d->files[i].dev == dev && d->files[i].ino == ino)
			return &d->files[i];
	return NULL;
}

static uint64_t ctime_ns(const struct stat *st)
{
	return gm_ctime_ns(st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

/* Whether the file is as it was examined. A file written in place keeps its inode; probes
 * placed by its old code's offsets would fire in the middle of its new code. */
static bool unchanged(const struct file_id *id, const struct stat *st)
{
	return id->ctime_ns == ctime_ns(st);
}

static uint64_t kernel_dev(dev_t dev)
{
	return gm_kernel_dev(major(dev), minor(dev));
}

/* Tells the BPF side this file was examined as it is (ctime): opening it again unchanged need
 * not hold anyone. */
static void mark_known(struct discovery *d, dev_t dev, ino_t ino, uint64_t stamp)
{
	if (d->at.mark_known(d->at.ctx, kernel_dev(dev), ino, stamp))
		p_debug("known-file map full: later opens of this file are reported again");
}

/* Watches an attached file (path: a /proc magic link to it) for writes: cp over it keeps
 * the inode, and the probes placed by its old code's offsets must go before a process maps
 * the new code (an executable's run cannot be held in time: the kernel places its probes
 * as it maps it). A write since the fstat is caught at the next open, by the ctime. */
static void watch(struct discovery *d, struct file_id *id, const char *path)
{
	int wd = d->watch_fd >= 0 ? inotify_add_watch(d->watch_fd, path, IN_MODIFY) : -1;

	if (wd > 0)
		id->wd = wd;
	else if (d->watch_fd >= 0)
		p_debug("cannot watch %u:%u inode %llu for writes: %s", major(id->dev),
			minor(id->dev), (unsigned long long)id->ino, strerror(errno));
}

static void unwatch(struct discovery *d, struct file_id *id)
{
	if (id->wd > 0)
		inotify_rm_watch(d->watch_fd, id->wd);
	id->wd = 0;
}

/* Takes the file's probes out: for good (now: before this returns, else soon, off the
 * loop). */
static void retire(struct discovery *d, struct file_id *id, bool now)
{
	unwatch(d, id);
	if (!id->attached)
		return;
	d->at.retire(d->at.ctx, id->attached, now);
	id->attached = NULL;
	d->stats.files--;
	d->stats.probes -= id->nprobes;
	d->stats.released++;
	id->nprobes = 0;
}

/* Forgets files[i]: its probes go for good (now: before this returns, else soon, off the
 * loop), and its next open is reported again. */
static void forget(struct discovery *d, size_t i, bool now)
{
	struct file_id *id = &d->files[i];

	retire(d, id, now);
	d->at.forget(d->at.ctx, kernel_dev(id->dev), id->ino);
	memmove(id, id + 1, (d->nfiles - i - 1) * sizeof(*id));
	d->nfiles--;
}

static struct file_id *remember(struct discovery *d, const struct stat *st)
{
	if (d->nfiles - d->stats.files >= DISCOVERY_EXAMINED_MAX) {
		/* One found holding no CUDA API; never a refused one still mapped (counted). */
		for (size_t i = 0; i < d->nfiles; i++) {
			if (!d->files[i].attached && !d->files[i].keep && !d->files[i].refused) {
				forget(d, i, false);
				break;
			}
		}
	}
	mark_known(d, st->st_dev, st->st_ino, ctime_ns(st));
	if (d->nfiles == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 64;
		d->files = xrealloc(d->files, d->cap * sizeof(*d->files));
	}
	d->files[d->nfiles] = (struct file_id){ .dev = st->st_dev, .ino = st->st_ino,
						 .ctime_ns = ctime_ns(st) };
	return &d->files[d->nfiles++];
}

/* The file's identity as the maps of the processes that map it show it: mapped here for a
 * moment and looked up in our own maps. fstat's where it cannot be mapped. */
static void map_identity(int fd, const struct stat *st, struct file_id *id)
{
	char line[PATH_MAX + 256];
	unsigned long start;
	void *at;
	FILE *f;

	id->map_major = major(st->st_dev);
	id->map_minor = minor(st->st_dev);
	id->map_ino = st->st_ino;
	/* Writable and private, as no loader maps a library: the BPF side's watch for new
	 * libraries, and every gpumem's scans of the maps, let such a mapping be (another
	 * gpumem's would otherwise take ours for a process loading the file). */
	at = mmap(NULL, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (at == MAP_FAILED)
		return;
	f = fopen("/proc/self/maps", "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned int maj, min;
		unsigned long long ino;

		if (sscanf(line, "%lx-%*x %*s %*x %x:%x %llu", &start, &maj, &min, &ino) == 4 &&
		    start == (unsigned long)at) {
			id->map_major = maj;
			id->map_minor = min;
			id->map_ino = ino;
			break;
		}
	}
	if (f)
		fclose(f);
	munmap(at, 1);
}

static void map_identity(int fd, const struct stat *st, struct file_id *id);

/* A CUDA file in use that gets no probes: counted, and said (at most once a minute). One
 * refused for room is remembered (its opens hold no one, and count no more) while a process
 * maps it; one whose attach failed is tried again at its next open. */
static void refuse(struct discovery *d, int fd, const struct stat *st, const char *why,
		   bool for_room)
{
	uint64_t now = now_ns();

	d->stats.not_attached++;
	p_debug("CUDA file %u:%u inode %llu not attached: %s", major(st->st_dev),
		minor(st->st_dev), (unsigned long long)st->st_ino, why);
	if (!d->warned_ns || now - d->warned_ns >= REFUSAL_LOG_NS) {
		d->warned_ns = now;
		p_info("a CUDA file in use (device %u:%u, inode %llu) is left without probes: %s; "
		       "%llu so far (files_not_attached)", major(st->st_dev), minor(st->st_dev),
		       (unsigned long long)st->st_ino, why,
		       (unsigned long long)d->stats.not_attached);
	}
	if (for_room) {
		struct file_id *id = remember(d, st);

		id->refused = true;
		map_identity(fd, st, id);
	}
}

static void sweep(struct discovery *d);

/* Room for one more attached file: a sweep (at most once a second) may make it. */
static bool room_for_one(struct discovery *d)
{
	uint64_t now = now_ns();

	if (d->stats.files < d->max_files)
		return true;
	if (now - d->forced_sweep_ns >= FORCED_SWEEP_NS) {
		d->forced_sweep_ns = now;
		sweep(d);
	}
	return d->stats.files < d->max_files;
}

/* Examines an opened file: parsed and attached through its descriptor, so that what was
 * checked is what is attached. -ENOEXEC: no ELF file (examined: not tried again). keep: the
 * user's or the system's file, never let go. */
static int add_opened(struct discovery *d, int fd, bool keep, bool *attached)
{
	void *attached_file = NULL;
	unsigned int nprobes = 0;
	char path[64], why[128];
	struct file_id *id;
	struct stat st;
	int err;

	*attached = false;
	if (fstat(fd, &st))
		return -errno;
	id = find_file(d, st.st_dev, st.st_ino);
	if (id && !id->refused && !unchanged(id, &st)) {
		p_debug("%u:%u inode %llu was written since it was examined: examined again",
			major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino);
		keep |= id->keep;
		/* Gone before the process, held at its open, maps the new code. */
		forget(d, (size_t)(id - d->files), true);
		id = NULL;
	}
	if (id && !id->refused) {
		id->keep |= keep;
		*attached = id->attached != NULL;
		return 0;
	}
	if (!room_for_one(d)) {
		if (find_file(d, st.st_dev, st.st_ino)) {
			/* Refused before, still in use: counted then. */
			mark_known(d, st.st_dev, st.st_ino, ctime_ns(&st));
			return -ENOSPC;
		}
		snprintf(why, sizeof(why), "%u files are attached, as many as --max-files allows",
			 d->max_files);
		refuse(d, fd, &st, why, true);
		return -ENOSPC;
	}
	fd_path(fd, path, sizeof(path));
	err = d->at.attach(d->at.ctx, path, &attached_file, &nprobes);
	if (err && err != -ENOEXEC) {
		if (err == -EFBIG)	/* elf_syms.h: a sparse file's claim, or a huge one */
			snprintf(why, sizeof(why), "a symbol table over %llu MiB, more than gpumem "
				 "reads: its CUDA API was not looked for",
				 (unsigned long long)(ELF_TABLE_MAX_BYTES >> 20));
		else
			snprintf(why, sizeof(why), "attaching failed: %s", strerror(-err));
		if (!find_file(d, st.st_dev, st.st_ino))	/* refused before: counted then */
			refuse(d, fd, &st, why, false);
		return err;
	}
	/* The sweep room_for_one ran may have moved (or forgotten) the refused entry. */
	id = find_file(d, st.st_dev, st.st_ino);
	if (id) {
		id->refused = false;
		mark_known(d, st.st_dev, st.st_ino, ctime_ns(&st));
	} else {
		id = remember(d, &st);
	}
	id->keep = keep;
	id->ctime_ns = ctime_ns(&st);
	id->attached = attached_file;
	if (id->attached) {
		*attached = true;
		id->nprobes = nprobes;
		map_identity(fd, &st, id);
		watch(d, id, path);
		d->attaches++;
		d->stats.files++;
		d->stats.probes += nprobes;
	}
	return err;
}

/* path: absolute, or a /proc magic link; a regular file opened as untrusted.h says. */
static int add_file(struct discovery *d, const char *path, bool keep, bool *attached)
{
	int fd = open_untrusted(path, NULL), err;

	*attached = false;
	if (fd < 0)
		return fd;
	err = add_opened(d, fd, keep, attached);
	close(fd);
	return err;
}

/* A file a process maps or runs: let go when none does any more. */
static int add_found(struct discovery *d, const char *path)
{
	bool attached;
	int err = add_file(d, path, false, &attached);

	return err == -ENOEXEC ? 0 : err;
}

int discovery_add(struct discovery *d, const char *path)
{
	bool attached;
	int err = add_file(d, path, true, &attached);

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
	err = add_file(d, path, true, &attached);
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
		p_err("--lib %s defines none of the CUDA or HIP allocation functions gpumem probes", path);
		return -ENOENT;
	}
	return 0;
}

static void scan_dir(struct discovery *d, const char *pattern)
{
	static const char *const names[] = { "libcuda*.so*", "libamdhip64.so*" };
	char buf[PATH_MAX];
	glob_t g;

	for (size_t n = 0; n < ARRAY_SIZE(names); n++) {
		snprintf(buf, sizeof(buf), "%s/%s", pattern, names[n]);
		if (glob(buf, 0, NULL, &g))
			continue;
		for (size_t i = 0; i < g.gl_pathc; i++)
			if (is_gpu_library_path(g.gl_pathv[i]))
				discovery_add(d, g.gl_pathv[i]);
		globfree(&g);
	}
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
		if (is_gpu_library_path(path))
			discovery_add(d, path);
	}
	pclose(f);
}

/* The process's executable, if it carries the runtime statically (nvcc's default). */
static void scan_executable(struct discovery *d, int pid)
{
	char exe[64];

	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	add_found(d, exe);
}

/* Whether pid runs a program examined already and unchanged since: one stat, where examining
 * it again would open it (five calls) to find it known. */
static bool exe_examined(struct discovery *d, int pid)
{
	const struct file_id *id;
	struct stat st;
	char exe[64];

	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	if (stat(exe, &st))
		return false;
	id = find_file(d, st.st_dev, st.st_ino);
	return id && !id->refused && unchanged(id, &st);
}

/* Whether a line of /proc/PID/maps ("start-end perms ...") is a mapping that runs a library's
 * code, now or once the loader has placed it: its code (executable), or the loader's first,
 * read-only mapping. A private writable copy that cannot run is a reader's (libelf's: a
 * symbolizer, another gpumem) and keeps no library attached (nor does the BPF side's watch
 * stop for it). */
static bool maps_line_may_run(const char *line)
{
	const char *perms = strchr(line, ' ');

	return perms && strlen(perms) >= 5 && (perms[2] != 'w' || perms[3] == 'x');
}

/* A library as the process sees it in its root (symlinks resolved inside that root). */
static void add_in_root(struct discovery *d, int pid, const char *file)
{
	int fd = open_in_root(pid, file, NULL);
	bool attached;

	if (fd < 0)
		return;
	add_opened(d, fd, false, &attached);
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
		if ((!is_gpu_library_path(file) && !is_tensor_library_path(file)) ||
		    !maps_line_may_run(line) || sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		/* map_files reaches the very file mapped, in a container or deleted since. */
		snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, start, end);
		if (add_found(d, path) == 0)
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

/* ---- letting go ---- */

/* The files a sweep asks about, found by the identity maps show: an open-addressed set of
 * indices into files (plus one; 0 is an empty slot). */
struct sweep_set {
	size_t *slots, mask, left;
	bool *mapped;	/* by index into files */
};

static size_t identity_slot(const struct sweep_set *set, unsigned int maj, unsigned int min,
			    uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)maj << 20 | min)) & set->mask;
}

static void set_add(struct sweep_set *set, const struct file_id *id, size_t i)
{
	size_t at = identity_slot(set, id->map_major, id->map_minor, id->map_ino);

	while (set->slots[at])
		at = (at + 1) & set->mask;
	set->slots[at] = i + 1;
	set->left++;
}

/* Marks the file a maps line names as mapped, when it is one the sweep asks about. */
static void set_mark(struct sweep_set *set, const struct discovery *d, const char *line)
{
	const char *perms = strchr(line, ' ');
	unsigned long long ino;
	unsigned int maj, min;

	/* "start-end perms offset major:minor inode path": mapped at all, as the BPF side's
	 * watch sees a library's first mapping (readable only; its code comes later, in place) */
	if (!perms || strlen(perms) < 6 || !maps_line_may_run(line) ||
	    sscanf(perms + 6, "%*x %x:%x %llu", &maj, &min, &ino) != 3 || !ino)
		return;
	for (size_t at = identity_slot(set, maj, min, ino); set->slots[at];
	     at = (at + 1) & set->mask) {
		size_t i = set->slots[at] - 1;
		const struct file_id *id = &d->files[i];

		if (id->map_ino == ino && id->map_major == maj && id->map_minor == min) {
			if (!set->mapped[i]) {
				set->mapped[i] = true;
				set->left--;
			}
			return;
		}
	}
}

/* Reads every process's maps until each file asked about is found mapped; how many. */
static unsigned int scan_all_maps(struct sweep_set *set, const struct discovery *d)
{
	char path[64], line[PATH_MAX + 256];
	DIR *dir = opendir("/proc");
	unsigned int n = 0;
	struct dirent *de;

	while (dir && set->left && (de = readdir(dir))) {
		int pid = atoi(de->d_name);
		FILE *f;

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/maps", pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		n++;
		while (set->left && fgets(line, sizeof(line), f))
			set_mark(set, d, line);
		fclose(f);
	}
	if (dir)
		closedir(dir);
	return n;
}

/* A file a sweep asks about: one processes found, attached or refused for room. */
static bool asked(const struct file_id *id)
{
	return id->refused || (id->attached && !id->keep);
}

/* Lets go of every file processes found that none maps now, and forgets the refused ones
 * none maps; those still mapped are tried again at their next open. */
static void sweep(struct discovery *d)
{
	struct sweep_set set = { 0 };
	uint64_t start = now_ns(), released = d->stats.released, scan_ns;
	size_t want = 0, cap = 16;
	unsigned int scanned = 0;

	d->last_sweep_ns = start;
	d->next_sweep_ns = start + DISCOVERY_SWEEP_S * 1000000000ull;
	for (size_t i = 0; i < d->nfiles; i++)
		want += asked(&d->files[i]);
	while (cap < 2 * want)
		cap *= 2;
	set.slots = xcalloc(cap, sizeof(*set.slots));
	set.mask = cap - 1;
	set.mapped = xcalloc(d->nfiles + 1, sizeof(*set.mapped));
	/* Unknown to the BPF side while the maps are read: a process that maps one of them
	 * meanwhile is reported (and attached again if it is let go). */
	for (size_t i = 0; i < d->nfiles; i++) {
		if (asked(&d->files[i])) {
			set_add(&set, &d->files[i], i);
			d->at.forget(d->at.ctx, kernel_dev(d->files[i].dev), d->files[i].ino);
		}
	}
	if (set.left)
		scanned = scan_all_maps(&set, d);
	scan_ns = now_ns() - start;
	for (size_t i = d->nfiles; i-- > 0;) {
		const struct file_id *id = &d->files[i];

		if (asked(id) && !set.mapped[i])
			forget(d, i, false);
		else if (set.mapped[i] && !id->refused)
			mark_known(d, id->dev, id->ino, id->ctime_ns);
	}
	free(set.slots);
	free(set.mapped);
	if (want)
		p_debug("let go of %llu of %zu CUDA files no process maps in %.1f ms (read the maps "
			"of %u processes in %.1f ms)",
			(unsigned long long)(d->stats.released - released), want,
			(now_ns() - start) / 1e6, scanned, scan_ns / 1e6);
}

int discovery_watch_fd(const struct discovery *d)
{
	return d->watch_fd;
}

void discovery_on_writes(struct discovery *d)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t len;

	if (d->watch_fd < 0)
		return;
	while ((len = read(d->watch_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW)
				p_debug("writes to attached files overflowed their queue: those files "
					"are caught at their next open, by their ctime");
			for (size_t i = 0; ev->wd > 0 && i < d->nfiles; i++) {
				struct file_id *id = &d->files[i];

				if (id->wd != ev->wd)
					continue;
				if (ev->mask & IN_IGNORED) {	/* the file is gone */
					id->wd = 0;
					break;
				}
				p_debug("%u:%u inode %llu was written while attached: its probes are "
					"taken out, and it is examined anew at its next open",
					major(id->dev), minor(id->dev), (unsigned long long)id->ino);
				retire(d, id, true);
				id->ctime_ns = 0;	/* no file's: examined anew, keep or not */
				d->at.forget(d->at.ctx, kernel_dev(id->dev), id->ino);
				break;
			}
		}
	}
}

void discovery_sweep(struct discovery *d)
{
	if (now_ns() >= d->next_sweep_ns)
		sweep(d);
}

void discovery_sweep_soon(struct discovery *d)
{
	uint64_t soon = now_ns() + 1000000000ull,
		 earliest = d->last_sweep_ns + DISCOVERY_SWEEP_MIN_S * 1000000000ull;

	if (soon < earliest)
		soon = earliest;
	if (soon < d->next_sweep_ns)
		d->next_sweep_ns = soon;
}

static void note_late_attach(struct discovery *d, uint64_t attaches_before,
			     const struct gm_file_event *e)
{
	uint64_t took;

	if (d->attaches == attaches_before)
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

/* A late attach (or a file gone before it was examined) while the process ran on: counted
 * where the run traces the process (not a neighbour's, in a run of -p, -c or --container). */
static void count_unheld(struct discovery *d, const struct gm_file_event *e)
{
	if (!e->traced)
		return;
	d->stats.unheld_late++;
	/* The PID lets a test tell its own processes from the host's. */
	p_debug("PID %u ran on while %.*s was examined: its first calls may have gone unseen "
		"(late_attach_unheld)", e->pid, GM_PATH_LEN, e->path);
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
	uint64_t before = d->attaches;
	bool attached, missed = false;
	char path[PATH_MAX];
	int fd;

	if (e->type == GM_REC_EXEC) {
		if (exe_examined(d, (int)e->pid))
			return;
		scan_executable(d, (int)e->pid);
		note_late_attach(d, before, e);
		if (d->attaches != before)	/* an exec is never held */
			count_unheld(d, e);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%u/fd/%u", e->pid, e->fd);
	fd = open_untrusted(path, &want);
	if (fd >= 0) {
		add_opened(d, fd, false, &attached);
		close(fd);
	} else {
		/* Not held (not traced): the loader has closed it by now, but mapped it. */
		discovery_scan_process(d, (int)e->pid);
		if (!find_file(d, want.dev, want.ino)) {
			missed = true;	/* gone already: whatever it called went unseen */
			p_debug("cannot examine %.*s opened by PID %u", GM_PATH_LEN, e->path,
				e->pid);
		}
	}
	note_late_attach(d, before, e);
	if (e->held)
		d->at.release(d->at.ctx, (int)e->pid);
	else if (d->attaches != before || missed)
		count_unheld(d, e);
}

bool discovery_attached(const struct discovery *d, uint64_t kdev, uint64_t ino)
{
	for (size_t i = 0; i < d->nfiles; i++)
		if (d->files[i].attached && d->files[i].ino == ino &&
		    kernel_dev(d->files[i].dev) == kdev)
			return true;
	return false;
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
