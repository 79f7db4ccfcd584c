// SPDX-License-Identifier: GPL-2.0
/* The model's records from the BPF maps and ring-buffer records: living processes' numbers,
 * sites and allocation ages; the final numbers of processes that ended, captured before their
 * map entries are dropped (the only code that deletes them); failures as they were reported. */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "base/untrusted.h"
#include "base/util.h"
#include "host/cgroups.h"
#include "host/oci.h"
#include "model/alloc_table.h"
#include "model/purge.h"
#include "model/python.h"
#include "model/state.h"
#include "probes/table.h"
#include "symbols/environ.h"
#include "symbols/symbolize.h"
#include "symbols/unwind.h"

/* Owners' names by uid: looked up once each (getpwuid reads /etc/passwd), bounded. */
#define USER_CACHE_MAX 256
struct user_cache {
	struct {
		uid_t uid;
		char name[32];
	} v[USER_CACHE_MAX];
	size_t n;
};

static const char *user_name(struct user_cache *c, uid_t uid)
{
	struct passwd *pw;
	size_t i;

	for (i = 0; i < c->n; i++)
		if (c->v[i].uid == uid)
			return c->v[i].name;
	i = c->n < USER_CACHE_MAX ? c->n++ : uid % USER_CACHE_MAX;
	c->v[i].uid = uid;
	pw = getpwuid(uid);
	if (pw)
		snprintf(c->v[i].name, sizeof(c->v[i].name), "%s", pw->pw_name);
	else
		snprintf(c->v[i].name, sizeof(c->v[i].name), "%u", (unsigned int)uid);
	return c->v[i].name;
}

static uint64_t map_capacity(int fd)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);

	return fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.max_entries : 0;
}

struct state *state_new(const struct model_maps *maps, const struct state_opts *opt)
{
	struct state *s = xcalloc(1, sizeof(*s));

	s->fd = *maps;
	if (opt)
		s->opt = *opt;
	if (!s->opt.keep_ended)
		s->opt.keep_ended = STATE_KEEP_ENDED_DEFAULT;
	if (!(s->opt.keep_ended_s > 0))
		s->opt.keep_ended_s = STATE_KEEP_ENDED_S_DEFAULT;
	if (!s->opt.keep_failures)
		s->opt.keep_failures = STATE_KEEP_FAILURES_DEFAULT;
	s->mono_to_real_ns = realtime_ns() - now_ns();
	s->sym = symbolizer_new();
	s->purge = purge_new();
	/* The allocations it holds (--max-allocs): half its slots. */
	s->alloc_capacity = map_capacity(s->fd.allocs) / 2;
	if (s->fd.allocs >= 0 && alloc_table_open(&s->allocs, s->fd.allocs, !s->opt.read_only))
		p_err("cannot map the allocation table: no ages, and the entries of ended processes "
		      "are not taken out (it fills: alloc_map_full)");
	if (s->fd.sites >= 0 &&
	    slot_table_open(&s->sites, s->fd.sites, !s->opt.read_only, &site_slots))
		p_err("cannot map the site table: no call sites are shown, and the entries of ended "
		      "processes are not taken out (it fills: site_map_full)");
	if (s->fd.procs >= 0 &&
	    slot_table_open(&s->proc_table, s->fd.procs, !s->opt.read_only, &proc_slots))
		p_err("cannot map the process table: no process totals are shown, and the entries "
		      "of ended processes are not taken out (it fills: proc_map_full)");
	s->cgroups = cgroup_cache_new();
	s->users = xcalloc(1, sizeof(*s->users));
	if (!s->opt.no_python)
		s->py = python_new(s->fd.py_procs, s->fd.py_stacks, s->fd.py_procs_gen,
				   &s->lost[SNAP_LOST_PY_REFUSED], s->opt.read_only);
	return s;
}

void proc_rec_free(struct proc_rec *p)
{
	free(p->cmdline);
	free(p->cgroup);
	free(p->user);
	module_map_free(&p->mm);
	module_map_free(&p->exit_mm);
	module_map_free(&p->start_mm);
	unwinder_free(p->unwinder);
	free(p->dwarf_stacks);
	free(p->pending_copies);
	for (size_t i = 0; i < p->nnamed; i++)
		snap_stack_put(p->named[i].stack);
	free(p->named);
	site_chains_free(p);
	free(p->sites);
	owner_peaks_free(&p->lib_peaks);
	free(p);
}

void state_set_exit_wants(struct state *s, unsigned int wants)
{
	s->exit_wants = wants;
}

void state_set_oci(struct state *s, struct oci_cache *oci)
{
	s->oci = oci;
}

void state_free(struct state *s)
{
	if (!s)
		return;
	python_free(s->py);
	alloc_table_close(&s->allocs);
	slot_table_close(&s->sites);
	slot_table_close(&s->proc_table);
	for (size_t i = 0; i < s->nprocs; i++)
		proc_rec_free(s->procs[i]);
	free(s->procs);
	free(s->by_pid);
	for (size_t i = 0; i < s->nfailures; i++)
		snap_stack_put(s->failures[i].stack);
	for (size_t i = 0; i < s->nrecent; i++)
		snap_stack_put(s->recent[i].stack);
	free(s->failures);
	free(s->recent);
	cgroup_cache_free(s->cgroups);
	free(s->users);
	free(s->pending_exits);
	for (size_t i = 0; i < s->npaths; i++)
		free(s->paths[i].path);
	free(s->paths);
	free(s->ages);
	symbolizer_free(s->sym);
	purge_free(s->purge);
	free(s);
}

/* Every ring-buffer record looks its process up: a hash, not a walk over every process
 * seen (ended ones stay for the report), which grows without bound system-wide. */
static size_t pid_slot(struct proc_rec *const *table, size_t cap, int pid)
{
	size_t i = ((size_t)(unsigned int)pid * 2654435761u) & (cap - 1);

	while (table[i] && table[i]->pid != pid)
		i = (i + 1) & (cap - 1);
	return i;
}

/* Makes p the record that state_find(p->pid) returns, the pid's earlier records hanging from
 * it: a reused pid finds its newest one first (by start time, where both are known). */
static void index_proc(struct state *s, struct proc_rec *p)
{
	struct proc_rec **at;
	size_t i;

	if (2 * (s->by_pid_used + 1) > s->by_pid_cap) {
		size_t cap = s->by_pid_cap ? 2 * s->by_pid_cap : 256;
		struct proc_rec **table = xcalloc(cap, sizeof(*table));

		for (size_t j = 0; j < s->by_pid_cap; j++)
			if (s->by_pid[j])
				table[pid_slot(table, cap, s->by_pid[j]->pid)] = s->by_pid[j];
		free(s->by_pid);
		s->by_pid = table;
		s->by_pid_cap = cap;
	}
	i = pid_slot(s->by_pid, s->by_pid_cap, p->pid);
	if (!s->by_pid[i])
		s->by_pid_used++;
	/* Behind the records of processes that started later: an agent that adopts pins reads
	 * the entries of a pid's ended process and of its newer one in no particular order. */
	at = &s->by_pid[i];
	while (*at && (*at)->start_ns && p->start_ns && (*at)->start_ns > p->start_ns)
		at = &(*at)->older;
	p->older = *at;
	*at = p;
}

/* procs is in the order the records were made: a later record of a pid is a later process. */
void state_reindex(struct state *s)
{
	memset(s->by_pid, 0, s->by_pid_cap * sizeof(*s->by_pid));
	s->by_pid_used = 0;
	for (size_t i = 0; i < s->nprocs; i++)
		index_proc(s, s->procs[i]);
}

struct proc_rec *state_find(struct state *s, int pid)
{
	if (!s->by_pid_cap)
		return NULL;
	return s->by_pid[pid_slot(s->by_pid, s->by_pid_cap, pid)];
}

struct proc_rec *state_find_gen(struct state *s, int pid, uint32_t gen)
{
	struct proc_rec *p = state_find(s, pid);

	while (p && p->gen != gen)
		p = p->older;
	return p;
}

/* Whether /proc/PID still speaks of p: not if the pid has gone to another process since. */
static bool pid_is_still_its(const struct proc_rec *p)
{
	return !p->start_ns || proc_start_matches(p->pid, p->start_ns);
}

static const char *known_path_of(struct state *s, uint64_t dev, uint64_t ino)
{
	for (size_t i = s->npaths; i-- > 0;)
		if (s->paths[i].dev == dev && s->paths[i].ino == ino)
			return s->paths[i].path;
	return NULL;
}

static void remember_path(struct state *s, uint64_t dev, uint64_t ino, const char *path)
{
	if (!ino || known_path_of(s, dev, ino))
		return;
	if (s->npaths == STATE_MAX_KNOWN_PATHS) {
		/* The oldest half goes: a file seen long ago is rarely the one an exit names. */
		size_t half = STATE_MAX_KNOWN_PATHS / 2;

		for (size_t i = 0; i < half; i++)
			free(s->paths[i].path);
		memmove(s->paths, s->paths + half, (s->npaths - half) * sizeof(*s->paths));
		s->npaths -= half;
	}
	if (s->npaths == s->paths_cap) {
		s->paths_cap = s->paths_cap ? 2 * s->paths_cap : 64;
		s->paths = xrealloc(s->paths, s->paths_cap * sizeof(*s->paths));
	}
	s->paths[s->npaths++] = (struct known_path){ .dev = dev, .ino = ino,
						     .path = xstrdup(path) };
}

static void remember_paths(struct state *s, const struct module_map *mm)
{
	for (size_t i = 0; i < mm->count; i++)
		if (mm->maps[i].exec)
			remember_path(s, gm_kernel_dev(mm->maps[i].dev_major, mm->maps[i].dev_minor),
				      mm->maps[i].ino, mm->maps[i].path);
}

/* The path an exec event names, remembered for the exec'd file when it is absolute and the
 * file found there is the one the kernel ran (device and inode): never a guess. */
static void exec_name_path(struct state *s, const struct gm_file_event *e)
{
	char path[GM_PATH_LEN + 1];
	struct file_want want = {
		.ino = e->ino,
		.dev = makedev(e->dev >> GM_DEV_MINOR_BITS, e->dev & GM_DEV_MINOR_MASK),
		.check_dev = true,
	};
	int fd;

	snprintf(path, sizeof(path), "%.*s", GM_PATH_LEN, e->path);
	if (path[0] != '/' || !e->ino || known_path_of(s, e->dev, e->ino))
		return;
	fd = open_untrusted(path, &want);
	if (fd < 0)
		return;
	close(fd);
	remember_path(s, e->dev, e->ino, path);
}

void state_on_exec(struct state *s, const struct gm_file_event *e)
{
	char link[64], path[4096];
	struct stat st;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%u/exe", e->pid);
	n = readlink(link, path, sizeof(path) - 1);
	path[n > 0 ? n : 0] = 0;
	if (s->py)
		python_on_exec(s->py, (int)e->pid, n > 0 ? path : NULL);
	if (e->ino && known_path_of(s, e->dev, e->ino))
		return;		/* a program run before: its path is known */
	if (n > 0 && stat(link, &st) == 0) {
		remember_path(s, gm_kernel_dev(major(st.st_dev), minor(st.st_dev)), st.st_ino,
			      path);
		return;
	}
	/* Gone already: the name it was run by, if absolute and still that very file. */
	exec_name_path(s, e);
}

void state_on_lib_open_python(struct state *s, const struct gm_file_event *e)
{
	if (s->py)
		python_examine_pid(s->py, (int)e->pid);
}

void state_on_py_stack(struct state *s, const struct gm_py_stack_event *e)
{
	if (s->py)
		python_on_stack(s->py, e);
}

/* The path the kernel's walk found for e's file, its components the file's own name first:
 * malloc'd, absolute where the walk was whole, else the name alone (the walk cut short, a
 * component not ended within the record). The file at that path is that file only if its
 * device and inode say so when it is opened (symbolize_open_mapped). */
static char *kernel_walk_path(const struct gm_vma_event *e)
{
	size_t len = e->path_len < sizeof(e->path) ? e->path_len : sizeof(e->path);
	size_t name = strnlen(e->path, len), at = name + 1, n = 1;
	size_t ends[GM_VMA_PATH_LEN / 2];
	char *path, *w;

	if (!e->path_whole || name == len || !name)
		return strndup(e->path, name);
	/* Each component's end, the name's first. */
	ends[0] = name;
	for (; at < len && n < GM_VMA_PATH_LEN / 2; n++) {
		size_t c = strnlen(e->path + at, len - at);

		if (!c || at + c == len)
			return strndup(e->path, name);	/* empty, or no NUL: not whole */
		ends[n] = at + c;
		at += c + 1;
	}
	path = w = xcalloc(1, len + 2);
	while (n--) {
		size_t start = n ? ends[n - 1] + 1 : 0;

		*w++ = '/';
		memcpy(w, e->path + start, ends[n] - start);
		w += ends[n] - start;
	}
	*w = 0;
	return path;
}

void state_on_exit_vma(struct state *s, const struct gm_vma_event *e)
{
	struct proc_rec *p = state_proc(s, (int)e->pid, e->gen, 0);
	struct module_map *m = e->at_start ? &p->start_mm : &p->exit_mm;
	struct mapping *mp;

	m->maps = xrealloc(m->maps, (m->count + 1) * sizeof(*m->maps));
	mp = &m->maps[m->count++];
	memset(mp, 0, sizeof(*mp));
	mp->start = e->start;
	mp->end = e->end;
	mp->pgoff = e->pgoff * (uint64_t)sysconf(_SC_PAGESIZE);
	mp->ino = e->ino;
	mp->dev_major = (uint32_t)(e->dev >> GM_DEV_MINOR_BITS);
	mp->dev_minor = (uint32_t)(e->dev & GM_DEV_MINOR_MASK);
	mp->exec = true;
	/* The kernel walk's, or a path read from /proc where one is known (adopt_kernel_map). */
	mp->path = kernel_walk_path(e);
}

static int mapping_cmp(const void *a, const void *b)
{
	const struct mapping *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The kernel's view at exit is complete (libraries loaded after we read the maps included):
 * it replaces the earlier capture, taking paths from it and from the known-path cache. */
static const struct mapping *same_file_in(const struct module_map *mm, const struct mapping *m)
{
	for (size_t i = 0; i < mm->count; i++)
		if (mm->maps[i].ino == m->ino && mm->maps[i].dev_major == m->dev_major &&
		    mm->maps[i].dev_minor == m->dev_minor)
			return &mm->maps[i];
	return NULL;
}

/* Whether the maps read from /proc are of the image whose first-call map is start: each of
 * its mappings is there, at the same address (an exec'd image is laid out anew). */
static bool same_image(const struct module_map *start, const struct module_map *read)
{
	for (size_t i = 0, j = 0; i < start->count; i++) {
		while (j < read->count && read->maps[j].start < start->maps[i].start)
			j++;
		if (j == read->count || read->maps[j].start != start->maps[i].start ||
		    read->maps[j].ino != start->maps[i].ino)
			return false;
	}
	return true;
}

/* The kernel's capture m (at exit, or at the first call of an image an exec ended) becomes the
 * process's module map. */
static void adopt_kernel_map(struct state *s, struct proc_rec *p, struct module_map *m)
{
	struct gm_stack_event *copies;
	size_t ncopies;

	if (!m->count)
		return;
	for (size_t i = 0; i < m->count; i++) {
		struct mapping *mp = &m->maps[i];
		const struct mapping *seen = same_file_in(&p->mm, mp);
		const char *path = known_path_of(s, gm_kernel_dev(mp->dev_major, mp->dev_minor),
						 mp->ino);

		if (seen) {
			/* As the live capture named it (deleted too): the symbolizer finds the
			 * file it opened while the process lived. */
			free(mp->path);
			mp->path = xstrdup(seen->path);
			mp->deleted = seen->deleted;
		} else if (path) {
			free(mp->path);
			mp->path = xstrdup(path);
		}
	}
	qsort(m->maps, m->count, sizeof(*m->maps), mapping_cmp);
	module_map_free(&p->mm);
	p->mm = *m;
	p->have_mm = true;
	p->maps_gen++;
	unwinder_free(p->unwinder);	/* made again, over this map, when next needed */
	p->unwinder = NULL;
	m->maps = NULL;
	m->count = 0;
	/* Taken off p first: a copy that waits again goes on a list of its own. */
	copies = p->pending_copies;
	ncopies = p->npending_copies;
	p->pending_copies = NULL;
	p->npending_copies = 0;
	for (size_t i = 0; i < ncopies; i++)
		state_on_stack_copy(s, &copies[i]);
	free(copies);
}

static void read_owner(struct state *s, struct proc_rec *p)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", p->pid);
	if (!p->user && stat(path, &st) == 0)
		p->user = xstrdup(user_name(s->users, st.st_uid));
}

/* The cgroup BPF recorded at the process's calls: followed when it changes (a process moved
 * into a container's cgroup after gpumem first saw it). */
static void follow_cgroup(struct state *s, struct proc_rec *p)
{
	const char *path;

	if (!p->st.cgroup_id || p->st.cgroup_id == p->cgroup_id)
		return;
	p->cgroup_id = p->st.cgroup_id;
	path = cgroup_cache_path(s->cgroups, p->cgroup_id, p->alive ? p->pid : 0);
	if (!path)
		return;
	free(p->cgroup);
	p->cgroup = xstrdup(path);
	container_parse_cgroup(p->cgroup, &p->container);
	oci_fill(s->oci, &p->container, now_ns());
}

void state_follow_event_cgroup(struct state *s, struct proc_rec *p, uint64_t cgroup_id)
{
	if (!cgroup_id || cgroup_id == p->cgroup_id)
		return;
	p->st.cgroup_id = cgroup_id;	/* the next walk of the maps says the same or newer */
	follow_cgroup(s, p);
}

/* p's maps from /proc into *mm; false where there are none to keep. A read of a process that
 * had begun to end may have been cut short, so it is no map of it; but each path it shows is
 * right: they are remembered, and the files opened while the process still has them, for the
 * map of its exit, whose paths are the process's own (in its mount namespace; an overlay's
 * file by its name alone). */
static bool read_whole_maps(struct state *s, struct proc_rec *p, struct module_map *mm)
{
	bool whole;

	if (module_map_read_ending(p->pid, mm, &whole))
		return false;
	if (whole && mm->count)
		return true;
	remember_paths(s, mm);
	symbolizer_prefetch(s->sym, p->pid, mm);
	module_map_free(mm);
	return false;
}

/* Room for each of gpu_visible_vars at its longest read. */
#define GPU_VISIBLE_LIVE_MAX (5 * ENVIRON_VALUE_MAX)

/* p's GPU list variables as they are at its first call, read after CUDA's (or HIP's) start
 * has read them: from its memory, where it may have set them itself (os.environ in Python),
 * else from the environment it started with (a static program, its maps not read). */
static void read_visible(struct proc_rec *p)
{
	char *buf;
	size_t n;
	int err = -ENOENT;

	if (p->visible_tried || p->visible.known)
		return;
	p->visible_tried = true;	/* once: a second try would be later still */
	buf = p->have_mm ? malloc(GPU_VISIBLE_LIVE_MAX) : NULL;
	if (buf)
		err = environ_read_live(p->pid, &p->mm, gpu_visible_vars, buf,
					GPU_VISIBLE_LIVE_MAX, &n);
	if (!err)
		gpu_visible_parse_environ(buf, n, &p->visible);
	else if (err != -ESTALE)	/* exec'd: /proc has the next image's; unknown */
		gpu_visible_read(p->pid, &p->visible);
	free(buf);
}

static void read_identity(struct state *s, struct proc_rec *p)
{
	/* When the reads began: one begun before the process ended read it, however long the
	 * rest (the symbolizer's opens) took, while an exec may land meanwhile. */
	uint64_t read_ns = now_ns();
	char buf[4096];

	/* Ended, or its pid another's: what the kernel sent is all there is. */
	if (p->exit_known || !pid_is_still_its(p))
		return;
	read_owner(s, p);
	if (!p->comm[0] && proc_read_comm(p->pid, buf, sizeof(buf)) == 0)
		snprintf(p->comm, sizeof(p->comm), "%.*s", GM_COMM_LEN, buf);
	if (!p->cmdline && proc_read_cmdline(p->pid, buf, sizeof(buf)) == 0)
		p->cmdline = xstrdup(buf);
	if (!p->cgroup && proc_read_cgroup(p->pid, buf, sizeof(buf)) == 0) {
		p->cgroup = xstrdup(buf);
		container_parse_cgroup(p->cgroup, &p->container);
		oci_fill(s->oci, &p->container, now_ns());
	}
	if (!p->ns_pid && proc_ns_pid(p->pid, &p->ns_pid))
		p->ns_pid = 0;
	/* A process that has begun to end has no maps to keep: its exit map will come. */
	if (!p->have_mm && read_whole_maps(s, p, &p->mm)) {
		p->have_mm = true;
		p->maps_gen++;
		read_visible(p);	/* at once: the addresses are this image's */
		if (same_image(&p->start_mm, &p->mm))
			module_map_free(&p->start_mm);
		remember_paths(s, &p->mm);
		/* Open its files now: deleted or in a container, they stay nameable after it ends. */
		symbolizer_prefetch(s->sym, p->pid, &p->mm);
		if (s->py)
			python_examine(s->py, p->pid, &p->mm);
	}
	read_visible(p);	/* no maps: from /proc, if not tried above */
	p->identity_ns = p->maps_ns = read_ns;
}

/* What /proc said about p once it had ended (by the kernel's clock, which stamps its exit) was
 * its zombie's word or, the pid taken again at once, the next process's: a start time in /proc
 * has a clock tick's resolution, too coarse to tell two such processes apart. Let go of it;
 * the kernel's own records stand in (comm at exit, cgroup and namespace pid from the maps,
 * the exit-time module map). */
static void forget_late_reads(struct proc_rec *p, uint64_t exit_ns)
{
	if (p->maps_ns && p->maps_ns >= exit_ns && p->have_mm) {
		module_map_free(&p->mm);
		p->have_mm = false;
		p->maps_gen++;
		unwinder_free(p->unwinder);
		p->unwinder = NULL;
	}
	p->maps_ns = 0;
	if (!p->identity_ns || p->identity_ns < exit_ns)
		return;
	p->identity_ns = 0;
	p->comm[0] = 0;
	free(p->cmdline);
	p->cmdline = NULL;
	free(p->cgroup);
	p->cgroup = NULL;
	p->cgroup_id = 0;
	memset(&p->container, 0, sizeof(p->container));
	free(p->user);
	p->user = NULL;
	memset(&p->visible, 0, sizeof(p->visible));
	p->ns_pid = (int)p->st.ns_pid;
}

struct proc_rec *state_proc(struct state *s, int pid, uint32_t gen, uint64_t start_ns)
{
	struct proc_rec *p = state_find_gen(s, pid, gen);

	if (p) {
		if (!p->start_ns)
			p->start_ns = start_ns;
		return p;
	}
	if (s->nprocs == s->procs_cap) {
		s->procs_cap = s->procs_cap ? 2 * s->procs_cap : 64;
		s->procs = xrealloc(s->procs, s->procs_cap * sizeof(*s->procs));
	}
	p = xcalloc(1, sizeof(*p));
	p->serial = ++s->next_serial;
	p->pid = pid;
	p->gen = gen;
	p->start_ns = start_ns;
	p->alive = true;
	s->procs[s->nprocs++] = p;
	index_proc(s, p);
	read_identity(s, p);
	return p;
}

void state_on_process_new(struct state *s, const struct gm_call_event *e)
{
	struct proc_rec *p = state_find_gen(s, (int)e->pid, e->gen);

	if (!p) {
		p = state_proc(s, (int)e->pid, e->gen, e->start_ns);
	} else if (p->alive && !p->have_mm) {
		if (!p->start_ns)
			p->start_ns = e->start_ns;
		read_identity(s, p);
	}
	if (!p->comm[0])
		snprintf(p->comm, sizeof(p->comm), "%.*s", GM_COMM_LEN, e->comm);
	/* Its first-call map came just before: a read of this image's maps needs it no more. */
	if (p->have_mm && same_image(&p->start_mm, &p->mm))
		module_map_free(&p->start_mm);
	if (s->py && p->alive)
		python_examine_final(s->py, p->pid);
	if (s->py)
		python_on_traced(s->py, p->pid);
}

static const struct dwarf_stack *dwarf_stack_of(const struct proc_rec *p, int32_t stack_id)
{
	for (size_t i = 0; p && i < p->ndwarf_stacks; i++)
		if (p->dwarf_stacks[i].stack_id == stack_id)
			return &p->dwarf_stacks[i];
	return NULL;
}

bool state_reread_maps(struct state *s, struct proc_rec *p)
{
	struct module_map fresh = { 0 };
	uint64_t read_ns = now_ns();

	if (!p->alive || p->exit_known || !pid_is_still_its(p))
		return false;
	/* Never a capture traded for a read that may have been cut short. */
	if (!read_whole_maps(s, p, &fresh))
		return false;
	module_map_free(&p->mm);
	p->mm = fresh;
	p->have_mm = true;
	p->maps_gen++;
	p->maps_ns = read_ns;
	remember_paths(s, &p->mm);
	symbolizer_prefetch(s->sym, p->pid, &p->mm);
	unwinder_free(p->unwinder);	/* made again, over the new map, when next needed */
	p->unwinder = NULL;
	return true;
}

/* A stack copy that was not unwound: a loss where its frame-pointer stack, shown instead, is
 * short (under 3 frames: every allocation has a caller, main and the C library's start below
 * it), as a build without frame pointers gives; a complete one loses nothing. */
static void not_unwound(struct state *s, const struct proc_rec *p, int32_t stack_id)
{
	uint64_t ips[GM_MAX_STACK_DEPTH];

	if (state_stack_ips(s, p, stack_id, ips) < 3)
		s->lost[SNAP_LOST_NOT_UNWOUND]++;
}

/* A stack copy kept to unwind once the module map of the process's exit (or exec) arrives;
 * past the bound, its frame-pointer stack stands. */
static void defer_copy(struct state *s, struct proc_rec *p, const struct gm_stack_event *e)
{
	if (p->npending_copies < STATE_MAX_PENDING_COPIES) {
		p->pending_copies = xrealloc(p->pending_copies,
					     (p->npending_copies + 1) * sizeof(*e));
		p->pending_copies[p->npending_copies++] = *e;
	} else {
		not_unwound(s, p, e->stack_id);
	}
}

void state_on_stack_copy(struct state *s, const struct gm_stack_event *e)
{
	struct proc_rec *p = state_proc(s, (int)e->pid, e->gen, 0);
	struct dwarf_stack ds = { .stack_id = e->stack_id };
	bool cut;

	if (dwarf_stack_of(p, e->stack_id))
		return;
	if (!p->have_mm) {
		/* It ended before its maps were read: unwind once its exit map arrives. */
		defer_copy(s, p, e);
		return;
	}
	if (!p->unwinder)
		p->unwinder = unwinder_new(s->sym, p->pid, &p->mm);
	ds.nips = unwind_stack(p->unwinder, e, ds.ips, GM_MAX_STACK_DEPTH, &cut);
	if (ds.nips < 2 && p->alive) {
		/* Perhaps code loaded since the map was read: read it again, once. */
		if (state_reread_maps(s, p)) {
			p->unwinder = unwinder_new(s->sym, p->pid, &p->mm);
			ds.nips = unwind_stack(p->unwinder, e, ds.ips, GM_MAX_STACK_DEPTH, &cut);
		} else if (!p->exit_known && proc_is_ending(p->pid)) {
			/* Ending (its maps no longer read whole), or gone: the map of its
			 * exit has that code. */
			defer_copy(s, p, e);
			return;
		}
	}
	if (ds.nips < 2) {	/* the frame-pointer stack is shown */
		not_unwound(s, p, e->stack_id);
		return;
	}
	if (cut)
		s->lost[SNAP_LOST_STACKS_CUT]++;
	p->dwarf_stacks = xrealloc(p->dwarf_stacks, (p->ndwarf_stacks + 1) * sizeof(ds));
	p->dwarf_stacks[p->ndwarf_stacks++] = ds;
}

uint32_t state_stack_ips(struct state *s, const struct proc_rec *p, int32_t stack_id,
			 uint64_t *ips)
{
	const struct dwarf_stack *ds;
	uint32_t n = 0;

	if (stack_id < 0)
		return 0;
	ds = dwarf_stack_of(p, stack_id);
	if (ds) {
		memcpy(ips, ds->ips, ds->nips * sizeof(*ips));
		return ds->nips;
	}
	if (bpf_map_lookup_elem(s->fd.stacks, &stack_id, ips))
		return 0;
	while (n < GM_MAX_STACK_DEPTH && ips[n])
		n++;
	return n;
}

/* Where the next failure record goes: among the first ones, or over the oldest recent one. */
static struct failure_rec *failure_slot(struct state *s)
{
	size_t keep = s->opt.keep_failures;
	struct failure_rec *f;

	if (!s->failures) {
		s->failures = xcalloc(keep, sizeof(*s->failures));
		s->recent = xcalloc(keep, sizeof(*s->recent));
	}
	if (s->nfailures < keep)
		return &s->failures[s->nfailures++];
	if (s->nrecent < keep)
		return &s->recent[(s->recent_head + s->nrecent++) % keep];
	f = &s->recent[s->recent_head];
	s->recent_head = (s->recent_head + 1) % keep;
	snap_stack_put(f->stack);
	s->lost[SNAP_LOST_FAILURES_DROPPED]++;
	return f;
}

void state_on_failure(struct state *s, const struct gm_call_event *e)
{
	struct proc_rec *p = state_proc(s, (int)e->pid, e->gen, e->start_ns);
	struct failure_rec *f = failure_slot(s);

	f->ev = *e;
	f->serial = p->serial;
	/* Named now: the process may be gone, and let go, before anyone prints it. */
	f->stack = state_named_stack(s, p, e->stack_id, e->py_stack_id);
	f->container = p->container;
	f->has_container = true;
}

void state_on_bad_record(struct state *s)
{
	s->lost[SNAP_LOST_BAD_RECORDS]++;
}

/* One kernel counter, summed over the CPUs. */
static uint64_t counter_sum(struct state *s, __u32 which, __u64 *vals, int ncpu)
{
	uint64_t sum = 0;

	if (bpf_map_lookup_elem(s->fd.counters, &which, vals))
		return 0;
	for (int c = 0; c < ncpu; c++)
		sum += vals[c];
	return sum;
}

static __u64 *counter_buffer(int *ncpu)
{
	*ncpu = libbpf_num_possible_cpus();
	if (*ncpu <= 0)
		*ncpu = 1;
	return xcalloc((size_t)*ncpu, sizeof(__u64));
}

void state_counters(struct state *s, uint64_t out[GM_CNT_COUNT])
{
	int ncpu;
	__u64 *vals = counter_buffer(&ncpu);

	for (__u32 i = 0; i < GM_CNT_COUNT; i++)
		out[i] = counter_sum(s, i, vals, ncpu);
	free(vals);
}

/* Records wait here until state_reap; they stay alive (and kept) until then. */
static void queue_exit(struct state *s, struct proc_rec *p)
{
	if (p->exit_queued || !p->alive)
		return;
	if (s->npending == s->pending_cap) {
		s->pending_cap = s->pending_cap ? 2 * s->pending_cap : 16;
		s->pending_exits = xrealloc(s->pending_exits,
					    s->pending_cap * sizeof(*s->pending_exits));
	}
	s->pending_exits[s->npending++] = p;
	p->exit_queued = true;
}

void state_on_process_exit(struct state *s, const struct gm_call_event *e)
{
	/* Even if its start was missed; only this process's record, never the pid's next. */
	struct proc_rec *p = state_proc(s, (int)e->pid, e->gen, e->start_ns);

	queue_exit(s, p);
	forget_late_reads(p, e->time_ns);
	p->end_ns = e->time_ns;
	p->exit_code = e->error;
	p->exit_known = true;
	/* Its CPU time, as the kernel had it at its end: two threads ending at once can both be
	 * its last (each saw no other live), each record a sum of every thread: the larger. */
	if (e->size > p->exit_cpu_ns)
		p->exit_cpu_ns = e->size;
	if (!p->comm[0])	/* gone before /proc told: the kernel's word at its exit */
		snprintf(p->comm, sizeof(p->comm), "%.*s", GM_COMM_LEN, e->comm);
	if (p->exit_mm.count) {
		adopt_kernel_map(s, p, &p->exit_mm);
	} else {
		/* A process always has its executable mapped: the kernel's walk was refused
		 * (another task held its mmap_lock). The map read from /proc, or else its first
		 * call's capture, stands in, without the libraries loaded since: a frame in one
		 * of those is a loss (state_frame_unmapped). */
		p->end_map_refused = true;
		if (!p->have_mm)
			adopt_kernel_map(s, p, &p->start_mm);
	}
	module_map_free(&p->start_mm);
}

void state_frame_unmapped(struct state *s, struct proc_rec *p)
{
	if (p->end_map_refused && !p->end_map_loss_counted) {
		p->end_map_loss_counted = true;
		s->lost[SNAP_LOST_MODULE_MAPS_MISSED]++;
	}
}

void state_on_process_exec(struct state *s, const struct gm_call_event *e)
{
	struct proc_rec *p = state_proc(s, (int)e->pid, e->gen, e->start_ns);

	queue_exit(s, p);
	forget_late_reads(p, e->time_ns);
	p->end_ns = e->time_ns;
	p->exit_known = true;	/* /proc shows the next image now: nothing is read for this one */
	p->execed = true;
	/* Its maps were read too late, not at all, or as the exec replaced them (the next
	 * image's, laid out elsewhere): its first call's capture is this image's. */
	if (!p->have_mm || (p->start_mm.count && !same_image(&p->start_mm, &p->mm))) {
		unwinder_free(p->unwinder);
		p->unwinder = NULL;
		adopt_kernel_map(s, p, &p->start_mm);
	}
	if (!p->have_mm)	/* and its first call's walk was refused */
		p->end_map_refused = true;
	module_map_free(&p->start_mm);
}


static struct site_rec *add_site(struct proc_rec *p, const struct gm_site_key *k,
				  const struct gm_site_stats *v)
{
	struct site_rec *ss;

	p->sites = xrealloc(p->sites, (p->nsites + 1) * sizeof(*p->sites));
	ss = &p->sites[p->nsites++];
	ss->key = *k;
	ss->st = *v;
	ss->oldest_ns = 0;
	ss->median_ns = 0;
	ss->group = p->nsites - 1;	/* state_group_sites says which */
	ss->group_st = *v;
	ss->site_stack_id = k->stack_id;
	ss->site_py_stack_id = k->py_stack_id;
	return ss;
}

static int site_cmp(const void *a, const void *b)
{
	const struct gm_site_key *x = a, *y = b;

	if (x->stack_id != y->stack_id)
		return x->stack_id < y->stack_id ? -1 : 1;
	if (x->py_stack_id != y->py_stack_id)
		return x->py_stack_id < y->py_stack_id ? -1 : 1;
	if (x->api != y->api)
		return x->api < y->api ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->gpu != y->gpu)
		return x->gpu < y->gpu ? -1 : 1;
	return 0;
}

struct age_note {
	struct site_rec *site;
	uint64_t time_ns;
};

static void note_age(struct state *s, struct proc_rec *p, const struct gm_alloc_info *a,
		     bool median)
{
	struct gm_site_key k;
	struct site_rec *ss;

	/* Its site, by the slot it was counted in (none: the site table was full). */
	if (!slot_table_key(&s->sites, a->site, &k) || k.tgid != (uint32_t)p->pid ||
	    k.gen != p->gen)
		return;
	ss = bsearch(&k, p->sites, p->nsites, sizeof(*p->sites), site_cmp);
	if (!ss)
		return;
	ss = &p->sites[ss->group];	/* its ages are its group's */
	if (!ss->oldest_ns || a->time_ns < ss->oldest_ns)
		ss->oldest_ns = a->time_ns;
	if (!median)
		return;
	if (s->nages == s->ages_cap) {
		s->ages_cap = s->ages_cap ? 2 * s->ages_cap : 1024;
		s->ages = xrealloc(s->ages, s->ages_cap * sizeof(*s->ages));
	}
	s->ages[s->nages++] = (struct age_note){ .site = ss, .time_ns = a->time_ns };
}

static int age_note_cmp(const void *a, const void *b)
{
	const struct age_note *x = a, *y = b;

	if (x->site != y->site)
		return x->site < y->site ? -1 : 1;
	return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

/* Each site's median allocation time, from the (site, time) pairs one walk collected. */
static void assign_median_ages(struct state *s)
{
	size_t i = 0, j;

	if (s->nages > 1)
		qsort(s->ages, s->nages, sizeof(*s->ages), age_note_cmp);
	while (i < s->nages) {
		for (j = i; j < s->nages && s->ages[j].site == s->ages[i].site; j++)
			;
		s->ages[i].site->median_ns = s->ages[i + (j - i) / 2].time_ns;
		i = j;
	}
	s->nages = 0;
}

/* Pass context: which processes a walk is for, and what it collects. */
struct walk {
	struct state *s;
	bool median;		/* collect (site, time) pairs for median ages */
	bool reap;		/* only the records marked reaping; else every living process */
	void *del_keys;		/* keys to delete after the walk */
	size_t ndel, del_cap, ksz;
	uint64_t seen;		/* entries of the map walked */
};

/* The record an entry of (tgid, gen) belongs to, if this walk is for it. An entry of a record
 * already reaped is not: the refresh walk makes no new record of it either. */
static struct proc_rec *walk_owner(struct walk *w, uint32_t tgid, uint32_t gen, bool *unknown)
{
	struct proc_rec *p = state_find_gen(w->s, (int)tgid, gen);

	*unknown = !p;
	if (w->reap)
		return p && p->reaping ? p : NULL;
	return p && p->alive ? p : NULL;
}

static void queue_delete(struct walk *w, const void *key)
{
	if (!w->reap)
		return;
	if (w->ndel == w->del_cap) {
		w->del_cap = w->del_cap ? 2 * w->del_cap : 256;
		w->del_keys = xrealloc(w->del_keys, w->del_cap * w->ksz);
	}
	memcpy((char *)w->del_keys + w->ndel * w->ksz, key, w->ksz);
	w->ndel++;
}

static void clear_queue(struct walk *w)
{
	free(w->del_keys);
	w->del_keys = NULL;
	w->ndel = w->del_cap = 0;
}

static void walk_proc(void *ctx, struct slot_ref ref, const void *key, const void *value)
{
	struct walk *w = ctx;
	const struct gm_proc_key *k = key;
	const struct gm_proc_stats *v = value;
	struct proc_rec *p;
	bool unknown;

	(void)ref;	/* taken out at the end of a reap, by its key (take_proc) */
	w->seen++;
	p = walk_owner(w, k->tgid, k->gen, &unknown);
	if (!p && unknown && !w->reap)
		p = state_proc(w->s, (int)k->tgid, k->gen, v->start_ns);
	if (!p)
		return;
	if (!p->start_ns)
		p->start_ns = v->start_ns;
	p->st = *v;
	p->have_stats = true;
	p->no_proc_entry = false;
	p->nsites = 0;
	follow_cgroup(w->s, p);
	if (!p->ns_pid && p->st.ns_pid)
		p->ns_pid = (int)p->st.ns_pid;
}

/* The record of sites whose process has no process entry (the map was full: --max-procs):
 * shown with totals from its sites, and let go when the process is gone, since the kernel
 * reports no end for it. */
static struct proc_rec *owner_without_entry(struct walk *w, uint32_t tgid, uint32_t gen)
{
	struct proc_rec *p = state_proc(w->s, (int)tgid, gen, 0);

	if (!p->have_stats) {
		p->have_stats = true;
		p->no_proc_entry = true;
		p->nsites = 0;
	}
	return p;
}

static void walk_site(void *ctx, struct slot_ref ref, const void *key, const void *value)
{
	const struct gm_site_key *k = key;
	struct walk *w = ctx;
	struct proc_rec *p;
	bool unknown;

	w->seen++;
	p = walk_owner(w, k->tgid, k->gen, &unknown);
	if (w->reap) {
		if (!p)
			return;
		if (!p->have_stats) {
			p->have_stats = true;	/* an ending process that had no entry */
			p->no_proc_entry = true;
			p->nsites = 0;
		}
	} else {
		if (!p && !unknown)
			return;	/* a leftover of a process already reaped */
		if (!p || !p->have_stats)
			p = owner_without_entry(w, k->tgid, k->gen);
	}
	add_site(p, k, value);
	queue_delete(w, &ref);
}

static void walk_alloc(void *ctx, struct alloc_ref ref, const struct gm_alloc_key *k,
		       const struct gm_alloc_info *info)
{
	struct walk *w = ctx;
	struct proc_rec *p;
	bool unknown;

	w->seen++;
	p = walk_owner(w, k->tgid, k->gen, &unknown);
	if (!p)
		return;
	note_age(w->s, p, info, w->median);
	queue_delete(w, &ref);
}

/* Takes out the allocation entries a walk queued (struct alloc_ref each). */
static void take_queued(struct state *s, struct walk *w)
{
	const struct alloc_ref *refs = w->del_keys;

	for (size_t i = 0; i < w->ndel && !s->opt.read_only; i++)
		alloc_table_take(&s->allocs, refs[i]);
	clear_queue(w);
}

/* Takes out the site entries a walk queued (struct slot_ref each): after the allocations'
 * walk, which finds an allocation's site by its slot. */
static void take_queued_sites(struct state *s, const struct slot_ref *refs, size_t n)
{
	for (size_t i = 0; i < n && !s->opt.read_only; i++)
		slot_table_take(&s->sites, refs[i]);
}

/* Sorted by key, one record a key: two CPUs that made one new site at once made two entries
 * (gpumem.h), whose numbers add up. */
static void sort_sites(struct proc_rec *p)
{
	size_t kept = 0;

	if (p->nsites < 2)
		return;
	qsort(p->sites, p->nsites, sizeof(struct site_rec), site_cmp);
	for (size_t i = 1; i < p->nsites; i++) {
		struct site_rec *a = &p->sites[kept], *b = &p->sites[i];

		if (site_cmp(&a->key, &b->key)) {
			p->sites[++kept] = *b;
			continue;
		}
		a->st.current_bytes += b->st.current_bytes;
		a->st.current_allocs += b->st.current_allocs;
		a->st.alloc_count += b->st.alloc_count;
		a->st.free_count += b->st.free_count;
		a->st.alloc_bytes_total += b->st.alloc_bytes_total;
		a->st.failed_count += b->st.failed_count;
	}
	p->nsites = kept + 1;
}

/* A process's counts and per-kind bytes are the sums of its sites (the BPF side keeps only
 * the running totals: current and peak GPU bytes, failures). */
static void sum_sites(struct proc_rec *p)
{
	struct gm_proc_stats *st = &p->st;
	uint64_t gpu_bytes = 0;

	st->current_allocs = st->alloc_count = st->free_count = st->alloc_bytes_total = 0;
	memset(st->by_kind, 0, sizeof(st->by_kind));
	memset(&p->tensor, 0, sizeof(p->tensor));
	p->other_allocs = p->imported_allocs = 0;
	for (size_t i = 0; i < p->nsites; i++) {
		const struct site_rec *ss = &p->sites[i];

		if (probe_is_tensor(ss->key.api)) {
			/* Inside segments other sites hold: summed apart, never twice. */
			p->tensor.current_bytes += ss->st.current_bytes;
			p->tensor.current_allocs += ss->st.current_allocs;
			p->tensor.alloc_count += ss->st.alloc_count;
			p->tensor.free_count += ss->st.free_count;
			p->tensor.alloc_bytes_total += ss->st.alloc_bytes_total;
			continue;
		}

		st->alloc_count += ss->st.alloc_count;
		st->free_count += ss->st.free_count;
		st->alloc_bytes_total += ss->st.alloc_bytes_total;
		if (ss->key.kind < GM_KIND_COUNT)
			st->by_kind[ss->key.kind] += ss->st.current_bytes;
		if (gm_kind_is_gpu(ss->key.kind)) {
			st->current_allocs += ss->st.current_allocs;
			gpu_bytes += ss->st.current_bytes;
		} else {
			p->other_allocs += ss->st.current_allocs;
			if (ss->key.kind == GM_KIND_IPC_IMPORTED)
				p->imported_allocs += ss->st.current_allocs;
		}
	}
	if (p->no_proc_entry) {
		/* No running totals in the kernel: the sites' sums, and the peak seen so far. */
		st->current_bytes = gpu_bytes;
		if (gpu_bytes > st->peak_bytes)
			st->peak_bytes = gpu_bytes;
		st->tensor_bytes = p->tensor.current_bytes;
		if (st->tensor_bytes > st->tensor_peak_bytes)
			st->tensor_peak_bytes = st->tensor_bytes;
	}
}

/* Whether any of these ended processes still had live allocations: if none did, their
 * cleanup needs no pass over the live-allocation map. */
static bool holds_allocations(struct proc_rec *const *ending, size_t nending)
{
	for (size_t i = 0; i < nending; i++) {
		const struct proc_rec *p = ending[i];

		if (!p->reaping || !p->have_stats)
			continue;
		if (p->st.current_allocs || p->other_allocs || p->tensor.current_allocs)
			return true;
	}
	return false;
}

/* The allocation entries of these ending processes are deleted later, with others'. */
/* Whether a call was ever accounted without its site (the site map was full): then a process
 * may hold entries its sites do not count. */
static bool sites_were_lost(struct state *s)
{
	int ncpu;
	__u64 *vals = counter_buffer(&ncpu);
	bool lost = counter_sum(s, GM_CNT_SITE_MAP_FULL, vals, ncpu) != 0;

	free(vals);
	return lost;
}

static void defer_purge(struct state *s, struct proc_rec *const *ending, size_t nending,
			bool sites_lost)
{
	uint64_t now = now_ns();

	for (size_t i = 0; i < nending; i++) {
		const struct proc_rec *p = ending[i];
		uint64_t entries = 0;

		if (!p->reaping || !p->have_stats)
			continue;
		for (size_t j = 0; j < p->nsites; j++)
			entries += p->sites[j].st.current_allocs;
		if (entries || sites_lost)
			purge_add(s->purge, (uint32_t)p->pid, p->gen, entries, now);
	}
}

/* Whether a pass (reap: only the records marked reaping) is for p. */
static bool pass_is_for(const struct proc_rec *p, bool reap)
{
	return p->alive && (!reap || p->reaping);
}

/* Which records a walk was for: their ages are now as known as the walk made them. */
static void mark_ages(struct state *s, bool reap, bool walked, bool median)
{
	for (size_t i = 0; i < s->nprocs; i++) {
		struct proc_rec *p = s->procs[i];

		if (!pass_is_for(p, reap))
			continue;
		/* An ending process that held nothing has no ages to find: they are known. */
		p->ages_known = walked || reap;
		p->medians_known = (walked && median) || (reap && !walked);
	}
}

/* Takes out an ended process's entry, and what named its slot: true when there was one. */
static bool take_proc(struct state *s, const struct proc_rec *p)
{
	struct gm_proc_key key = { .tgid = (__u32)p->pid, .gen = p->gen };
	struct slot_ref ref;
	bool taken;

	taken = slot_table_find(&s->proc_table, &key, NULL, &ref) >= 0 &&
		slot_table_take(&s->proc_table, ref);
	if (s->fd.procs_made >= 0)
		bpf_map_delete_elem(s->fd.procs_made, &key);
	return taken;
}

/* One pass over procs, sites and allocs for the given ending processes (NULL: all living). */
static void read_maps(struct state *s, struct proc_rec *const *ending, size_t nending,
		      unsigned int wants)
{
	struct walk w = { .s = s, .reap = ending != NULL, .median = wants & SNAP_MEDIAN_AGES };
	bool need_ages = wants & (SNAP_AGES | SNAP_MEDIAN_AGES);
	struct slot_ref *site_refs = NULL;	/* the sites to take out at the end */
	size_t nsite_refs = 0;

	for (size_t i = 0; i < nending; i++)
		ending[i]->reaping = ending[i]->alive;
	slot_table_walk(&s->proc_table, walk_proc, &w);
	s->map_procs = w.seen;
	for (size_t i = 0; i < s->nprocs; i++) {
		struct proc_rec *p = s->procs[i];

		/* Sites are read again: walk_proc cleared those of processes with an entry. */
		if (pass_is_for(p, w.reap) && p->no_proc_entry)
			p->nsites = 0;
	}
	w.seen = 0;
	w.ksz = sizeof(struct slot_ref);
	slot_table_walk(&s->sites, walk_site, &w);
	s->map_sites = w.seen - w.ndel;
	site_refs = w.del_keys;
	nsite_refs = w.ndel;
	w.del_keys = NULL;
	w.ndel = w.del_cap = 0;
	for (size_t i = 0; i < s->nprocs; i++) {
		struct proc_rec *p = s->procs[i];

		if (pass_is_for(p, w.reap)) {
			sort_sites(p);
			sum_sites(p);
			state_group_sites(s, p);
		}
	}
	if (w.reap) {
		bool holds = holds_allocations(ending, nending);
		bool sites_lost = sites_were_lost(s);

		/* Ages at the end need the walk now; else the entries wait for a purge. */
		need_ages = (holds || sites_lost) && need_ages;
		if ((holds || sites_lost) && !need_ages)
			defer_purge(s, ending, nending, sites_lost);
	}
	if (need_ages) {
		w.seen = 0;
		w.ksz = sizeof(struct alloc_ref);
		alloc_table_walk(&s->allocs, walk_alloc, &w);
		s->map_allocs = w.seen - w.ndel;
		s->map_allocs_valid = s->allocs.slots != NULL;
		assign_median_ages(s);
		take_queued(s, &w);
	}
	take_queued_sites(s, site_refs, nsite_refs);
	mark_ages(s, w.reap, need_ages, w.median);
	for (size_t i = 0; i < nending && !s->opt.read_only; i++)
		if (ending[i]->reaping && take_proc(s, ending[i]))
			s->map_procs--;
	free(site_refs);
	for (size_t i = 0; i < nending; i++)
		ending[i]->reaping = false;
}

void state_refresh(struct state *s, unsigned int wants)
{
	uint64_t now = now_ns();

	read_maps(s, NULL, 0, wants);
	if (s->py)
		python_refresh(s->py);
	for (size_t i = 0; i < s->nprocs; i++) {
		struct proc_rec *p = s->procs[i];

		if (!p->alive)
			continue;
		p->end_ns = now;
		/* Reaped at the next state_reap: a process the kernel reports no end for (it had
		 * no entry: --max-procs) once its pid is gone or another's, and one whose pid a
		 * newer process has (its end was not delivered: the ring buffer was full). */
		if (p->no_proc_entry && (p->start_ns ? !pid_is_still_its(p) : !proc_exists(p->pid)))
			queue_exit(s, p);
		else if (state_find(s, p->pid) != p)
			queue_exit(s, p);
	}
}

/* An ended process's sites are final: named now, they are all it needs of its module map,
 * unwinder and stack copies, which go (an ended process kept costs a few KiB, not its maps). */
static void compact_ended(struct state *s, struct proc_rec *p)
{
	for (size_t i = 0; i < p->nsites; i++)
		snap_stack_put(state_named_stack(s, p, p->sites[i].key.stack_id,
						 p->sites[i].key.py_stack_id));
	unwinder_free(p->unwinder);
	p->unwinder = NULL;
	for (size_t i = 0; i < p->npending_copies; i++)	/* its exit map never came */
		not_unwound(s, p, p->pending_copies[i].stack_id);
	free(p->pending_copies);
	p->pending_copies = NULL;
	p->npending_copies = 0;
	free(p->dwarf_stacks);
	p->dwarf_stacks = NULL;
	p->ndwarf_stacks = 0;
	module_map_free(&p->mm);
	module_map_free(&p->exit_mm);
	module_map_free(&p->start_mm);
	p->have_mm = false;
}

size_t state_reap(struct state *s)
{
	size_t n = s->npending;
	uint64_t now = now_ns();

	if (!n)
		return 0;
	read_maps(s, s->pending_exits, n, s->exit_wants);
	for (size_t i = 0; i < n; i++) {
		struct proc_rec *p = s->pending_exits[i];

		p->exit_queued = false;
		if (p->alive) {
			p->alive = false;
			p->reaped = true;
			p->reaped_ns = now;
			if (!p->end_ns)
				p->end_ns = now;
			compact_ended(s, p);
		}
	}
	s->npending = 0;
	state_retain(s, now);
	return n;
}

size_t state_sweep_vanished(struct state *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nprocs; i++) {
		struct proc_rec *p = s->procs[i];

		if (p->alive && p->have_stats &&
		    (p->start_ns ? !pid_is_still_its(p) : !proc_exists(p->pid))) {
			queue_exit(s, p);
			n++;
		}
	}
	return n;
}

void state_count(const struct state *s, size_t *living, size_t *ended)
{
	*living = *ended = 0;
	for (size_t i = 0; i < s->nprocs; i++) {
		const struct proc_rec *p = s->procs[i];

		if (!p->have_stats)
			continue;
		if (p->alive)
			(*living)++;
		else
			(*ended)++;
	}
}

/* A purge walk: keys to delete, chosen by a rule. */
struct purge_walk {
	struct state *s;
	bool orphans;		/* every entry no living record owns; else the purge set's */
	struct walk del;
};

static void walk_purge(void *ctx, struct alloc_ref ref, const struct gm_alloc_key *k,
		       const struct gm_alloc_info *info)
{
	struct purge_walk *pw = ctx;
	bool stale;

	(void)info;
	if (pw->orphans) {
		const struct proc_rec *p = state_find_gen(pw->s, (int)k->tgid, k->gen);

		/* No record: stale once its pid is gone (a process that began after the maps
		 * were read has its pid). */
		stale = p ? !p->alive : !proc_exists((int)k->tgid);
	} else {
		stale = purge_has(pw->s->purge, k->tgid, k->gen);
	}
	if (stale)
		queue_delete(&pw->del, &ref);
}

/* Deletes what the rule chooses; *complete: the walk reached every entry. */
static uint64_t purge_walk(struct state *s, bool orphans, bool *complete)
{
	struct purge_walk pw = { .s = s, .orphans = orphans,
				 .del = { .s = s, .reap = true, .ksz = sizeof(struct alloc_ref) } };
	uint64_t n;

	*complete = false;
	if (s->opt.read_only)
		return 0;
	*complete = s->allocs.slots != NULL;
	alloc_table_walk(&s->allocs, walk_purge, &pw);
	n = pw.del.ndel;
	take_queued(s, &pw.del);
	return n;
}

uint64_t state_purge(struct state *s, bool now)
{
	size_t procs = purge_pending(s->purge);
	bool complete;
	uint64_t n;

	if (!procs || (!now && !purge_due(s->purge, now_ns(), s->alloc_capacity)))
		return 0;
	n = purge_walk(s, false, &complete);
	p_debug("deleted %" PRIu64 " allocation entries of %zu ended processes", n, procs);
	if (complete)
		purge_clear(s->purge);
	return n;
}

uint64_t state_purge_orphans(struct state *s)
{
	bool complete;
	uint64_t n = purge_walk(s, true, &complete);

	if (complete)
		purge_clear(s->purge);
	return n;
}
