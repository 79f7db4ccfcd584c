// SPDX-License-Identifier: GPL-2.0
/* The one owner of the BPF skeleton and its fds: open, size maps from options, load, attach
 * the lifecycle programs, lend the uprobe programs to probes.c, hand the accounting maps to
 * the model (their only reader), and run the ring-buffer loop. An agent's tracer pins its
 * maps and links (pin.c) and adopts what an earlier agent pinned; a reader's tracer has no
 * skeleton at all, only a running agent's maps. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <limits.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "gpumem.skel.h"
#include "base/util.h"
#include "host/procs.h"
#include "loader/attach.h"
#include "loader/calibrate.h"
#include "loader/detacher.h"
#include "loader/features.h"
#include "loader/pin.h"
#include "loader/tracer.h"
#include "loader/uprobe_multi.h"
#include "probes/table.h"

struct record_handler {
	record_fn fn;
	void *ctx;
	struct tracer *tracer;
};

#define LIFECYCLE_PROGS 4

struct tracer {
	struct gpumem_bpf *skel;	/* NULL for a reader */
	struct ring_buffer *rb;
	struct record_handler handler;
	/* tracer_wake_on's: an epoll of the ring buffer's and the caller's descriptor. */
	bool wakes;
	int wake_epfd, wake_fd;
	bool woken;		/* the caller's descriptor polled readable since tracer_woken */
	bool watches_opens;
	bool multi;
	bool session;	/* session_alloc loaded, not enter_alloc */
	bool no_tensors;	/* --no-tensors: libc10_cuda's USDT probes are not attached */
	/* The agent's pins (tracer_opts.pin_dir), or the agent a reader reads. */
	const char *pin_dir;
	bool adopted;		/* the pinned state was an earlier agent's */
	struct gm_agent agent;
	uint64_t last_beat_ns;
	int adopted_links[LIFECYCLE_PROGS];	/* an earlier agent's lifecycle links */
	unsigned int nadopted;
	struct pin_maps reader_maps;	/* a reader's: the running agent's maps */
	struct detacher *detacher;	/* files let go are detached there (once one is) */
	uint64_t orphans_ns;		/* the last look for holds of gpumems that ended */
	/* The holds' watchdog (tracer_open, with holds): its thread, the flag that ends it, and
	 * the processes it resumed, so far and as said. */
	pthread_t watchdog;
	bool watchdog_running;
	int watchdog_wake;		/* an eventfd: written to end the watchdog */
	unsigned int watchdog_resumed, watchdog_said;
	unsigned int records_unbeaten;	/* records read since the last heartbeat */
	bool calibrated;	/* cal is known (tried once: a failure stays unknown) */
	bool calibration_failed;
	struct calibration cal;
};

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !verbose)
		return 0;
	if (level == LIBBPF_INFO && !verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* The slots of a table in open addressing (allocations, sites): twice its capacity, rounded up
 * to a power of two (its probes wrap by a mask). Half full at most, an entry lies a few slots
 * from its home, and the 64 an insert may look at were never seen all taken. */
static uint32_t table_slots(uint32_t capacity)
{
	uint64_t n = 1;

	while (n < 2 * (uint64_t)capacity && n < (1u << 31))
		n <<= 1;
	return (uint32_t)n;
}

static void size_maps(struct gpumem_bpf *skel, const struct tracer_opts *o)
{
	uint32_t slots = table_slots(o->max_allocs ? o->max_allocs : GM_DEFAULT_MAX_ALLOCS);
	uint32_t site_slots = table_slots(o->max_sites ? o->max_sites : GM_DEFAULT_MAX_SITES);
	uint32_t procs = o->max_procs ? o->max_procs : GM_DEFAULT_MAX_PROCS;

	bpf_map__set_max_entries(skel->maps.allocs, slots);
	skel->rodata->alloc_mask = slots - 1;
	bpf_map__set_max_entries(skel->maps.sites, site_slots);
	skel->rodata->site_mask = site_slots - 1;
	bpf_map__set_max_entries(skel->maps.procs, table_slots(procs));
	skel->rodata->proc_mask = table_slots(procs) - 1;
	bpf_map__set_max_entries(skel->maps.procs_made, procs);
	/* -c/-p: the processes followed, never fewer than the default (one without an entry
	 * of its own in procs is still traced, one not followed is not). */
	bpf_map__set_max_entries(skel->maps.targets, procs > GM_DEFAULT_MAX_PROCS ? procs
									  : GM_DEFAULT_MAX_PROCS);
	if (o->max_stacks) {
		bpf_map__set_max_entries(skel->maps.stacks, o->max_stacks);
		bpf_map__set_max_entries(skel->maps.py_stacks, o->max_stacks);
	}
	if (o->ringbuf_mb)
		bpf_map__set_max_entries(skel->maps.events, o->ringbuf_mb << 20);
}

/* Kernels since 6.6 attach all of a file's probes in one uprobe_multi link, which also
 * detaches in one RCU grace period instead of one per probe (seconds for a library). */

static void use_uprobe_multi(struct gpumem_bpf *skel, bool session)
{
	/* Since 6.13 the alloc shape's entry and return are one session program, whose entry
	 * spares a return with nothing to do its trap. */
	if (session) {
		bpf_program__set_expected_attach_type(skel->progs.session_alloc,
						      ATTACH_UPROBE_SESSION);
		bpf_program__set_autoload(skel->progs.enter_alloc, false);
	} else {
		bpf_program__set_autoload(skel->progs.session_alloc, false);
	}
	bpf_program__set_expected_attach_type(skel->progs.enter_alloc, ATTACH_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(skel->progs.enter_alloc_pitch, ATTACH_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(skel->progs.enter_free, ATTACH_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(skel->progs.enter_array, ATTACH_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(skel->progs.enter_ctx, ATTACH_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(skel->progs.call_return, ATTACH_UPROBE_MULTI);
}

/* The holds map is shared by every gpumem on the host through its pin (when /sys/fs/bpf is a
 * BPF file system): the next one to start finds what an ended one left paused. */
static bool is_bpffs(const char *dir)
{
	struct statfs st;

	return statfs(dir, &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

/* A pinned holds map this build can share: none yet, or one of the same layout. */
static bool pinned_holds_compatible(struct gpumem_bpf *skel)
{
	int fd = bpf_obj_get(GM_HOLDS_PIN);
	char why[160];
	bool same;

	if (fd < 0)
		return true;
	same = !pin_map_mismatch(fd, skel->maps.holds, why, sizeof(why));
	close(fd);
	return same;
}

static void share_holds(struct gpumem_bpf *skel)
{
	/* As bpftool does: mount the BPF file system where it belongs when nothing is there. */
	if (!is_bpffs("/sys/fs/bpf") && mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"))
		p_debug("cannot mount a BPF file system on /sys/fs/bpf: %s", strerror(errno));
	if (!is_bpffs("/sys/fs/bpf")) {
		p_debug("/sys/fs/bpf is no BPF file system: holds are not shared with other gpumems");
		return;
	}
	if (!pinned_holds_compatible(skel)) {
		p_err("warning: %s has another layout (an older gpumem?): holds are not shared; "
		      "remove it when no gpumem runs", GM_HOLDS_PIN);
		return;
	}
	bpf_map__set_pin_path(skel->maps.holds, GM_HOLDS_PIN);
}

/* What an agent's programs are loaded with, beside the pinned settings map. */
static struct gm_agent agent_settings(const struct tracer_opts *o, bool session)
{
	return (struct gm_agent){
		.stack_mode = o->stack_mode,
		.stack_bytes = o->stack_bytes ? o->stack_bytes : GM_STACK_COPY_DEFAULT,
		.python_frames = !o->no_python,
		.uprobe_sessions = session,
	};
}

/* Whether the alloc probes are uprobe sessions: where the kernel has them, unless
 * GPUMEM_UPROBE_SESSIONS=0 keeps the entry and return links of older kernels; an agent adopts
 * its pins' kind of links, whatever it would have made (a mix would leave one link unused, or
 * put a second return on a session's probes). */
static bool choose_sessions(const struct tracer_opts *o)
{
	const char *v = getenv("GPUMEM_UPROBE_SESSIONS");
	bool kernel = kernel_features()->uprobe_session, want = kernel && !(v && !strcmp(v, "0"));
	struct gm_agent pinned;

	if (o->pin_dir && !pin_read_agent(o->pin_dir, &pinned) &&
	    pinned.layout == GM_LAYOUT_VERSION && (bool)pinned.uprobe_sessions != want) {
		p_debug("the pinned probes are %suprobe sessions: adopted as they are",
			pinned.uprobe_sessions ? "" : "no ");
		return pinned.uprobe_sessions && kernel;
	}
	return want;
}

static struct gpumem_bpf *open_configured(const struct tracer_opts *o, bool multi, bool session,
					  bool with_open_watch, bool *adopting)
{
	struct gpumem_bpf *skel = gpumem_bpf__open();
	int err;

	if (!skel)
		return NULL;
	if (multi)
		use_uprobe_multi(skel, session);
	else
		bpf_program__set_autoload(skel->progs.session_alloc, false);
	skel->rodata->filter_pids = o->filter_pids;
	skel->rodata->hold_new_procs = o->hold_new_procs;
	skel->rodata->hold_new_libs = o->hold_new_libs;
	skel->rodata->hold_ttyless = o->hold_ttyless;
	skel->rodata->self_tgid = (__u32)getpid();
	skel->rodata->stack_mode = o->stack_mode;
	skel->rodata->python_frames = !o->no_python;
	skel->rodata->filter_cgroups = (__u32)o->ncgroup_dirs;
	if (o->stack_bytes)
		skel->rodata->stack_copy_bytes = o->stack_bytes;
	size_maps(skel, o);
	share_holds(skel);
	if (!with_open_watch)
		bpf_program__set_autoload(skel->progs.on_unmapped_area, false);
	if (o->pin_dir) {
		const struct gm_agent want = agent_settings(o, session);

		err = pin_prepare(skel->obj, o->pin_dir, &want, adopting);
		if (err) {
			gpumem_bpf__destroy(skel);
			errno = -err;
			return NULL;
		}
	}
	return skel;
}

static int fill_cgroup_filter(struct gpumem_bpf *skel, const struct tracer_opts *o)
{
	int map = bpf_map__fd(skel->maps.cgroup_filter);

	for (size_t i = 0; i < o->ncgroup_dirs; i++) {
		__u32 key = (__u32)i;
		int fd = open(o->cgroup_dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC), err;

		if (fd < 0 || bpf_map_update_elem(map, &key, &fd, BPF_ANY)) {
			err = -errno;
			p_err("cannot select cgroup %s: %s", o->cgroup_dirs[i], strerror(-err));
			if (fd >= 0)
				close(fd);
			return err;
		}
		close(fd);	/* the map holds the cgroup */
	}
	return 0;
}

/* A lifecycle program's link: an earlier agent's pinned one (1), else a new one (0), pinned
 * when this is an agent; -errno when it cannot be attached. */
static int attach_lifecycle_prog(struct tracer *t, struct bpf_program *prog, struct bpf_link **link)
{
	char name[PATH_MAX];
	int fd, err;

	if (t->pin_dir) {
		snprintf(name, sizeof(name), "%s/link-%s", t->pin_dir, bpf_program__name(prog));
		fd = t->adopted ? bpf_obj_get(name) : -1;
		if (fd >= 0) {
			t->adopted_links[t->nadopted++] = fd;
			return 1;
		}
	}
	*link = bpf_program__attach(prog);
	if (!*link)
		return -errno;
	if (t->pin_dir) {
		err = bpf_link__pin(*link, name);
		if (err) {
			p_err("cannot pin %s: %s", name, strerror(-err));
			return err;
		}
	}
	return 0;
}

static int attach_lifecycle(struct tracer *t)
{
	struct gpumem_bpf *skel = t->skel;
	int err;

	if ((err = attach_lifecycle_prog(t, skel->progs.on_exec, &skel->links.on_exec)) < 0 ||
	    (err = attach_lifecycle_prog(t, skel->progs.on_fork, &skel->links.on_fork)) < 0 ||
	    (err = attach_lifecycle_prog(t, skel->progs.on_exit, &skel->links.on_exit)) < 0)
		return err;
	if (!bpf_program__autoload(skel->progs.on_unmapped_area))
		err = -ENOENT;
	else
		err = attach_lifecycle_prog(t, skel->progs.on_unmapped_area,
					    &skel->links.on_unmapped_area);
	if (err >= 0) {
		t->watches_opens = true;
	} else {
		p_debug("the vm_unmapped_area tracepoint is unavailable: new libraries are found on exec "
			"and by rescans only");
	}
	return 0;
}

/* Takes pid's hold record out of the shared map at once (lookup and delete in one call): 0
 * with *h, or -errno (-ENOENT: none). Taken before the resume: a process resumed first could
 * take a new hold (its next new library) whose record a later delete would remove, leaving it
 * paused for good. Before Linux 5.14 (no lookup-and-delete of a hash map): a lookup, then a
 * delete. */
static int take_hold(int fd, __u32 pid, struct gm_hold *h)
{
	if (bpf_map_lookup_and_delete_elem(fd, &pid, h) == 0)
		return 0;
	if (errno == ENOENT)
		return -ENOENT;
	if (bpf_map_lookup_elem(fd, &pid, h))
		return -errno;
	bpf_map_delete_elem(fd, &pid);
	return 0;
}

/* Takes pid's hold record if it is still the one peeked at (want), and resumes pid: true.
 * Another (a hold taken since, or another gpumem's) is put back, and pid left as it is. */
static bool resume_hold(int fd, __u32 pid, const struct gm_hold *want)
{
	struct gm_hold h;

	if (take_hold(fd, pid, &h))
		return false;
	if (h.holder != want->holder || h.time_ns != want->time_ns) {
		bpf_map_update_elem(fd, &pid, &h, BPF_NOEXIST);
		return false;
	}
	kill((pid_t)pid, SIGCONT);
	return true;
}

/* Whether pid's process started after the hold taken at hold_ns (CLOCK_MONOTONIC, as the
 * BPF side takes it): its number was reused, and nothing paused this one. /proc gives a start
 * in whole ticks of CLOCK_BOOTTIME, rounded down: never later than the start itself. */
static bool started_after(int pid, uint64_t hold_ns)
{
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec mono, boot;
	uint64_t ticks, hold_boot_ns;

	if (hz <= 0 || proc_start_time(pid, &ticks) || clock_gettime(CLOCK_MONOTONIC, &mono) ||
	    clock_gettime(CLOCK_BOOTTIME, &boot))
		return false;
	hold_boot_ns = hold_ns + ((uint64_t)boot.tv_sec - (uint64_t)mono.tv_sec) * 1000000000ull +
		       (uint64_t)boot.tv_nsec - (uint64_t)mono.tv_nsec;
	return ticks * (1000000000ull / (uint64_t)hz) > hold_boot_ns;
}

/* Calls visit with each hold record of the shared map (the holds map's descriptor, the
 * paused PID, its record as read). */
static void for_each_hold(struct tracer *t,
			  void (*visit)(struct tracer *t, int fd, __u32 pid, const struct gm_hold *h))
{
	int fd = bpf_map__fd(t->skel->maps.holds);
	__u32 key, next, *prev = NULL;
	struct gm_hold h;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &h) == 0)
			visit(t, fd, key, &h);
	}
}

/* A hold of a gpumem that has ended (killed, or crashed, during the hold): its process is
 * resumed, unless one that has its PID started after the hold. */
static void resume_orphan(struct tracer *t, int fd, __u32 pid, const struct gm_hold *h)
{
	(void)t;
	if (h->holder == (__u32)getpid() || pid_is_gpumem(h->holder))
		return;
	if (started_after((int)pid, h->time_ns)) {
		bpf_map_delete_elem(fd, &pid);
		p_err("PID %u was paused by a gpumem that ended (PID %u), and is another process "
		      "now: left as it is", pid, h->holder);
	} else if (resume_hold(fd, pid, h)) {
		p_err("resumed PID %u, paused by a gpumem that ended (PID %u)", pid, h->holder);
	}
}

/* At the start, and now and then while running, as another instance may end at any time. */
static void resume_orphans(struct tracer *t)
{
	for_each_hold(t, resume_orphan);
}

#define ORPHANS_EVERY_NS 1000000000ull

void tracer_resume_orphans(struct tracer *t)
{
	uint64_t now = now_ns();

	if (!t->skel || now - t->orphans_ns < ORPHANS_EVERY_NS)
		return;
	t->orphans_ns = now;
	resume_orphans(t);
}

#define AGENT_BEAT_NS 500000000ull	/* the agent record's heartbeat: twice a second */

void tracer_heartbeat(struct tracer *t)
{
	uint64_t now = now_ns();

	t->records_unbeaten = 0;
	if (!t->skel)
		return;
	__atomic_store_n(&t->skel->bss->heartbeat_ns, now, __ATOMIC_RELAXED);
	/* The record once start_agent_record has made it: a beat before would write a blank one
	 * over the pins' (their layout and when they were made, which adoption reads). */
	if (t->pin_dir && t->agent.layout && now - t->last_beat_ns >= AGENT_BEAT_NS) {
		t->agent.heartbeat_ns = now;
		t->last_beat_ns = now;
		if (pin_write_agent(t->pin_dir, &t->agent))
			p_debug("cannot write the agent record in %s", t->pin_dir);
	}
}

/* A reader: the agent's measurement, read again while the agent has not made it yet. */
static double agent_trap_ns(struct tracer *t)
{
	struct gm_agent a;

	if (!t->agent.trap_ps && !pin_read_agent(t->pin_dir, &a) && a.pid == t->agent.pid)
		t->agent.trap_ps = a.trap_ps;
	return t->agent.trap_ps ? (double)t->agent.trap_ps / 1000 : -1;
}

double tracer_trap_ns(struct tracer *t)
{
	int err;

	if (!t->skel)
		return agent_trap_ns(t);
	if (t->calibrated || t->calibration_failed)
		return t->calibrated ? t->cal.trap_ns : -1;
	err = t->multi ? calibrate_trap(t->skel->progs.enter_ctx, &t->cal) : -EOPNOTSUPP;
	if (err) {
		p_debug("cannot measure a probe's cost: %s", strerror(-err));
		t->calibration_failed = true;
		return -1;
	}
	t->calibrated = true;
	p_debug("a probe hit costs %.0f ns here", t->cal.trap_ns);
	t->agent.trap_ps = (__u64)(t->cal.trap_ns * 1000);	/* the agent's record, at its beat */
	return t->cal.trap_ns;
}

double tracer_bpf_run_ns(const struct tracer *t)
{
	double ns;

	/* An agent that adopted pinned links runs an earlier agent's programs, not these. */
	if (!t->skel || t->adopted || !t->calibrated ||
	    bpf_extra_run_ns(t->skel->obj, &t->cal, &ns))
		return -1;
	return ns;
}

/* ---- the holds' watchdog ---- */

/* Holds are answered by the loop. A loop that does not come round (writing output no one
 * reads: `gpumem trace | less` left on its first page, a terminal stopped with Ctrl-S) would
 * leave its held processes stopped as long. A thread resumes them once the loop's heartbeat
 * is older than the BPF side takes holds with: the processes run on, their first calls on the
 * new file perhaps unseen (counted, late_attach_unheld). The loop beats at each turn, at each
 * file it attaches and every RECORDS_A_BEAT records it reads. */
#define WATCHDOG_EVERY_MS 250
#define RECORDS_A_BEAT 1024

static void resume_own_hold(struct tracer *t, int fd, __u32 pid, const struct gm_hold *h)
{
	if (h->holder == (__u32)getpid() && resume_hold(fd, pid, h))
		__atomic_add_fetch(&t->watchdog_resumed, 1, __ATOMIC_RELAXED);
}

static void *watchdog_run(void *arg)
{
	struct tracer *t = arg;
	struct pollfd stop = { .fd = t->watchdog_wake, .events = POLLIN };

	/* Until watchdog_end writes to the eventfd. */
	while (poll(&stop, 1, WATCHDOG_EVERY_MS) <= 0) {
		uint64_t beat = __atomic_load_n(&t->skel->bss->heartbeat_ns, __ATOMIC_RELAXED);

		if (now_ns() - beat > GM_HEARTBEAT_FRESH_NS + WATCHDOG_EVERY_MS * 1000000ull)
			for_each_hold(t, resume_own_hold);
	}
	return NULL;
}

static void watchdog_start(struct tracer *t)
{
	sigset_t all, old;

	t->watchdog_wake = eventfd(0, EFD_CLOEXEC);
	if (t->watchdog_wake < 0) {
		p_debug("no watchdog for holds: a blocked loop leaves its held processes paused");
		return;
	}
	/* Its signals are the loop's (SIGINT, SIGTERM): blocked here. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	t->watchdog_running = pthread_create(&t->watchdog, NULL, watchdog_run, t) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!t->watchdog_running) {
		close(t->watchdog_wake);
		p_debug("no watchdog for holds: a blocked loop leaves its held processes paused");
	}
}

static void watchdog_end(struct tracer *t)
{
	uint64_t one = 1;

	if (!t->watchdog_running)
		return;
	if (write(t->watchdog_wake, &one, sizeof(one)) != sizeof(one))
		p_debug("cannot wake the holds' watchdog: %s", strerror(errno));
	pthread_join(t->watchdog, NULL);
	close(t->watchdog_wake);
	t->watchdog_running = false;
}

unsigned int tracer_holds_let_go(struct tracer *t)
{
	unsigned int n = __atomic_load_n(&t->watchdog_resumed, __ATOMIC_RELAXED);

	if (n != t->watchdog_said) {
		p_err("resumed %u held processes that the loop did not answer within %.2f s (its "
		      "output not read, or a long turn): their first calls on a new file may have "
		      "gone unseen", n - t->watchdog_said,
		      (GM_HEARTBEAT_FRESH_NS + WATCHDOG_EVERY_MS * 1000000ull) / 1e9);
		t->watchdog_said = n;
	}
	return n;
}

void tracer_release(struct tracer *t, int pid)
{
	int fd;
	__u32 key = (__u32)pid;
	struct gm_hold h;

	if (!t->skel)
		return;
	fd = bpf_map__fd(t->skel->maps.holds);
	/* No record of ours: resumed already (by the watchdog, and perhaps stopped by someone
	 * since), or another gpumem's hold since ours, which that one answers. */
	if (bpf_map_lookup_elem(fd, &key, &h) || h.holder != (__u32)getpid())
		return;
	resume_hold(fd, key, &h);
}

/* About what the sized maps pin in the kernel (entries x (key + value + the kernel's
 * per-element overhead); the allocation table's slots, all made at the start), for -v: the
 * capacities are the user's to choose. */
static void report_kernel_memory(struct gpumem_bpf *skel)
{
	const struct bpf_map *maps[] = { skel->maps.allocs, skel->maps.stacks, skel->maps.sites,
					 skel->maps.procs, skel->maps.procs_made,
					 skel->maps.events };
	uint64_t total = 0;

	for (size_t i = 0; i < ARRAY_SIZE(maps); i++) {
		const struct bpf_map *m = maps[i];
		uint64_t n = bpf_map__max_entries(m), bytes;

		if (bpf_map__type(m) == BPF_MAP_TYPE_RINGBUF)
			bytes = n;
		else if (bpf_map__type(m) == BPF_MAP_TYPE_ARRAY)
			bytes = n * bpf_map__value_size(m);	/* all of it, from the start */
		else
			bytes = n * (bpf_map__key_size(m) + bpf_map__value_size(m) + 48);
		total += bytes;
		p_debug("map %s: %" PRIu64 " entries, about %.1f MiB of kernel memory",
			bpf_map__name(m), n, (double)bytes / (1 << 20));
	}
	p_debug("the sized maps pin about %.1f MiB of kernel memory (--max-allocs, --max-stacks, "
		"--max-sites, --max-procs, --ringbuf-mb)", (double)total / (1 << 20));
}

/* What the programs read at run time; an agent's are pinned: they rule the links it adopted
 * too. */
static int write_settings(struct tracer *t, const struct tracer_opts *o)
{
	struct gm_settings set = { .stream_calls = o->stream_calls };
	__u32 key = 0;

	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.settings), &key, &set, BPF_ANY)) {
		p_err("cannot write the settings map: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* Removes the pins a failed first start made: the maps libbpf pinned at load, the lifecycle
 * links pinned since. */
static void unpin_fresh(struct tracer *t)
{
	static const char *const links[] = { "on_exec", "on_fork", "on_exit",
					     "on_unmapped_area" };
	char name[PATH_MAX];

	if (t->skel)
		bpf_object__unpin_maps(t->skel->obj, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		snprintf(name, sizeof(name), "%s/link-%s", t->pin_dir, links[i]);
		unlink(name);
	}
}

/* The agent record of the pins: this agent's, with the pins' first start kept. */
static void start_agent_record(struct tracer *t, const struct tracer_opts *o)
{
	struct gm_agent old = { 0 };
	uint64_t now = now_ns();

	if (!t->adopted || pin_read_agent(t->pin_dir, &old))
		old.started_ns = now;
	t->agent = agent_settings(o, t->session);	/* as adoption checked: the programs' own */
	t->agent.layout = GM_LAYOUT_VERSION;
	t->agent.pid = (__u32)getpid();
	t->agent.heartbeat_ns = now;
	t->agent.started_ns = old.started_ns;
	t->last_beat_ns = now;
	if (pin_write_agent(t->pin_dir, &t->agent))
		p_err("warning: cannot write the agent record in %s: readers will not find it",
		      t->pin_dir);
}

static int ringbuf_cb(void *ctx, void *data, size_t size)
{
	struct record_handler *h = ctx;

	/* A long read of the ring is the loop at work: its holds are answered in it. */
	if (++h->tracer->records_unbeaten >= RECORDS_A_BEAT)
		tracer_heartbeat(h->tracer);
	return h->fn(h->ctx, data, size);
}

/* Opens the object with what the kernel offers (loader/features.h) and loads it: once, or a
 * second time without uprobe sessions where the verifier refused the session program. */
static int load_object(struct tracer *t, const struct tracer_opts *opts)
{
	const struct kernel_features *kf = kernel_features();
	bool sessions = kf->uprobe_multi && choose_sessions(opts), session = sessions;
	int err = -EINVAL;

	if (opts->pin_dir && !kf->uprobe_multi) {
		p_err("the agent pins its probes as uprobe_multi links, which this kernel lacks "
		      "(Linux 6.6 or later)");
		return -EOPNOTSUPP;
	}
	for (int attempt = 0; attempt < 2 && err; attempt++, session = false) {
		if (attempt && !sessions)
			break;
		gpumem_bpf__destroy(t->skel);
		t->skel = open_configured(opts, kf->uprobe_multi, session, kf->open_watch,
					  &t->adopted);
		if (!t->skel) {
			err = -errno;	/* pin_prepare said why; else, say it */
			if (!opts->pin_dir || (err != -EEXIST && err != -EBUSY && err != -ENOTSUP &&
					       err != -ENAMETOOLONG))
				p_err("cannot open the BPF object: %s", strerror(-err));
			return err;
		}
		err = gpumem_bpf__load(t->skel);
		t->multi = kf->uprobe_multi;
		t->session = session;
		if (err)
			p_debug("loading (uprobe_multi %d, sessions %d, open watch %d) failed: %s",
				kf->uprobe_multi, session, kf->open_watch, strerror(-err));
	}
	if (err == -EPERM || err == -EACCES)
		p_err("cannot load BPF programs: permission denied (run as root or grant "
		      "CAP_BPF, CAP_PERFMON and CAP_SYS_RESOURCE)");
	else if (err)
		p_err("cannot load BPF programs: %s (needs a kernel with BTF, uprobes and BPF ring "
		      "buffers; run with -v for the verifier's log)", strerror(-err));
	/* The kernel has them, but refused the program: every return probe fires, a trap more
	 * for each nested driver call. Said, since nothing else would show it. */
	else if (sessions && !t->session)
		p_err("warning: this kernel refused the uprobe session program (-v shows why): "
		      "the allocation probes use entry and return links, which cost more");
	return err;
}

/* Each attached file costs up to PIN_FILE_PROGS link descriptors: the soft limit of open
 * files goes up to the hard one, which the administrator set (what is refused past it is
 * counted, files_not_attached). */
static void raise_fd_limit(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

int tracer_open(const struct tracer_opts *opts, record_fn on_record, void *ctx,
		struct tracer **out)
{
	struct tracer *t = xcalloc(1, sizeof(*t));
	int err;

	libbpf_set_print(libbpf_print);
	raise_fd_limit();
	t->pin_dir = opts->pin_dir;
	t->no_tensors = opts->no_tensors;
	err = load_object(t, opts);
	if (err && !t->skel)
		goto out_free;
	if (err)
		goto out_destroy;
	err = fill_cgroup_filter(t->skel, opts);
	if (err)
		goto out_destroy;
	resume_orphans(t);
	tracer_heartbeat(t);
	t->skel->bss->holds_enabled = true;
	if (opts->hold_new_libs || opts->hold_new_procs)
		watchdog_start(t);
	err = attach_lifecycle(t);
	if (err) {
		p_err("cannot attach the process tracepoints: %s", strerror(-err));
		goto out_destroy;
	}
	report_kernel_memory(t->skel);
	err = write_settings(t, opts);
	if (err)
		goto out_destroy;
	if (t->pin_dir)
		start_agent_record(t, opts);
	t->handler.fn = on_record;
	t->handler.ctx = ctx;
	t->handler.tracer = t;
	t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.events), ringbuf_cb, &t->handler, NULL);
	if (!t->rb) {
		err = -errno;
		p_err("cannot open the ring buffer: %s", strerror(-err));
		goto out_destroy;
	}
	*out = t;
	return 0;

out_destroy:
	watchdog_end(t);
	if (t->pin_dir && !t->adopted)
		unpin_fresh(t);	/* a start that failed leaves nothing for the next to adopt */
	for (unsigned int i = 0; i < t->nadopted; i++)
		close(t->adopted_links[i]);
	gpumem_bpf__destroy(t->skel);
out_free:
	free(t);
	return err;
}

int tracer_reset_pins(const char *dir)
{
	struct gpumem_bpf *skel = gpumem_bpf__open();
	const char *names[64];
	struct bpf_map *m;
	size_t n = 0;
	int err;

	if (!skel) {
		p_err("cannot open the BPF object: %s", strerror(errno));
		return -errno;
	}
	bpf_object__for_each_map(m, skel->obj)
		if (pin_keeps_map(m) && n < ARRAY_SIZE(names))
			names[n++] = bpf_map__name(m);
	err = pin_reset(dir, names, n);
	gpumem_bpf__destroy(skel);
	return err;
}

void tracer_close(struct tracer *t)
{
	if (!t)
		return;
	if (t->pin_dir && t->skel) {	/* the pins stay: no agent reads them now */
		t->agent.pid = 0;
		pin_write_agent(t->pin_dir, &t->agent);
	}
	watchdog_end(t);
	for (unsigned int i = 0; i < t->nadopted; i++)
		close(t->adopted_links[i]);
	if (!t->skel)
		pin_close_maps(&t->reader_maps);
	detacher_free(t->detacher);
	if (t->wakes)
		close(t->wake_epfd);
	ring_buffer__free(t->rb);
	gpumem_bpf__destroy(t->skel);	/* pinned links stay attached */
	free(t);
}

struct model_maps tracer_model_maps(const struct tracer *t)
{
	if (!t->skel)
		return (struct model_maps){
			.procs = t->reader_maps.procs,
			.sites = t->reader_maps.sites,
			.allocs = t->reader_maps.allocs,
			.stacks = t->reader_maps.stacks,
			.counters = t->reader_maps.counters,
			.py_procs = t->reader_maps.py_procs,
			.py_stacks = t->reader_maps.py_stacks,
			.py_procs_gen = -1,
			.procs_made = -1,
		};
	return (struct model_maps){
		.procs = bpf_map__fd(t->skel->maps.procs),
		.sites = bpf_map__fd(t->skel->maps.sites),
		.allocs = bpf_map__fd(t->skel->maps.allocs),
		.stacks = bpf_map__fd(t->skel->maps.stacks),
		.counters = bpf_map__fd(t->skel->maps.counters),
		.py_procs = bpf_map__fd(t->skel->maps.py_procs),
		.py_stacks = bpf_map__fd(t->skel->maps.py_stacks),
		.py_procs_gen = bpf_map__fd(t->skel->maps.py_procs_gen),
		.procs_made = bpf_map__fd(t->skel->maps.procs_made),
	};
}

/* Whether the file is as it was when an earlier agent pinned its links: its ctime is the one
 * that agent's known_files (pinned, adopted with the rest) kept when it examined the file. */
static bool pinned_as_it_is(const struct tracer *t, const struct probe_programs *pp,
			    const struct stat *st)
{
	struct gm_file_key key = { .dev = pp->pin_kdev, .ino = pp->pin_ino };
	__u64 stamp;

	return bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.known_files), &key, &stamp) == 0 &&
	       stamp == gm_ctime_ns(st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

int tracer_attach_file(struct tracer *t, const char *path, struct attached_file **out)
{
	struct probe_programs pp;
	struct stat st;

	*out = NULL;
	if (!t->skel)
		return -EOPNOTSUPP;
	pp = (struct probe_programs){
		.enter_alloc = t->session ? t->skel->progs.session_alloc : t->skel->progs.enter_alloc,
		.enter_alloc_pitch = t->skel->progs.enter_alloc_pitch,
		.enter_free = t->skel->progs.enter_free,
		.enter_array = t->skel->progs.enter_array,
		.enter_ctx = t->skel->progs.enter_ctx,
		.call_return = t->skel->progs.call_return,
		.tensor_malloc = t->no_tensors ? NULL : t->skel->progs.tensor_malloc,
		.tensor_free = t->no_tensors ? NULL : t->skel->progs.tensor_free,
		.multi = t->multi,
		.session = t->session,
		.pin_dir = t->pin_dir,
	};
	if (t->pin_dir) {
		if (stat(path, &st))
			return -errno;
		pp.pin_kdev = gm_kernel_dev(major(st.st_dev), minor(st.st_dev));
		pp.pin_ino = st.st_ino;
		pp.adopt = pin_file_linked(t->pin_dir, pp.pin_kdev, pp.pin_ino);
		if (pp.adopt && !pinned_as_it_is(t, &pp, &st)) {
			/* Written in place since (cp keeps the inode): those links' probes sit at
			 * the old code's offsets, in the middle of the new code. */
			char name[PATH_MAX];
			ssize_t n = readlink(path, name, sizeof(name) - 1);

			name[n > 0 ? n : 0] = '\0';
			p_info("%s (%u:%u inode %llu) was written since its links were pinned: "
			       "attached anew", n > 0 ? name : path, major(st.st_dev), minor(st.st_dev),
			       (unsigned long long)st.st_ino);
			pin_drop_file_links(t->pin_dir, pp.pin_kdev, pp.pin_ino);
			pp.adopt = false;
		}
	}
	return attach_file(&pp, path, out);
}

int tracer_mark_known_file(struct tracer *t, uint64_t dev, uint64_t ino, uint64_t ctime_ns)
{
	struct gm_file_key key = { .dev = dev, .ino = ino };

	if (!t->skel)
		return 0;
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.known_files), &key, &ctime_ns,
				BPF_ANY))
		return -errno;
	return 0;
}

/* ---- discovery's attacher: the files it finds attached here ---- */

static int attach_found(void *ctx, const char *path, void **handle, unsigned int *nprobes)
{
	struct attached_file *f = NULL;
	int err = tracer_attach_file(ctx, path, &f);

	tracer_heartbeat(ctx);	/* the loop at work (a start's scan attaches many) */
	*handle = f;
	*nprobes = f ? attached_probe_count(f) : 0;
	return err;
}

static bool found_has_api(const void *handle, unsigned int api)
{
	return attached_has_api(handle, api);
}

static void detach_found(void **handles, size_t n)
{
	detach_files((struct attached_file **)handles, n);
}

static void retire_found(void *ctx, void *handle, bool now)
{
	struct tracer *t = ctx;

	attached_unpin(handle);
	if (now) {
		detach_file(handle);
		return;
	}
	if (!t->detacher)
		t->detacher = detacher_new();
	detacher_add(t->detacher, handle);
}

static int mark_found(void *ctx, uint64_t dev, uint64_t ino, uint64_t ctime_ns)
{
	return tracer_mark_known_file(ctx, dev, ino, ctime_ns);
}

static void forget_found(void *ctx, uint64_t dev, uint64_t ino)
{
	struct tracer *t = ctx;
	struct gm_file_key key = { .dev = dev, .ino = ino };

	if (t->skel)
		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.known_files), &key);
}

static void release_found(void *ctx, int pid)
{
	tracer_release(ctx, pid);
}

int tracer_unpin_stale_files(struct tracer *t, bool (*in_use)(void *ctx, uint64_t kdev,
							       uint64_t ino), void *ctx)
{
	if (!t->pin_dir || !t->skel)
		return 0;
	return pin_unlink_stale_files(t->pin_dir, in_use, ctx);
}

struct discovery_attacher tracer_attacher(struct tracer *t)
{
	return (struct discovery_attacher){
		.ctx = t, .attach = attach_found, .has_api = found_has_api, .detach_all = detach_found,
		.retire = retire_found, .mark_known = mark_found, .forget = forget_found,
		.release = release_found,
	};
}

int tracer_add_target(struct tracer *t, int pid)
{
	__u32 key = (__u32)pid;
	__u8 one = 1;

	if (!t->skel)
		return -EOPNOTSUPP;
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.targets), &key, &one, BPF_ANY))
		return -errno;
	return 0;
}

int tracer_remove_target(struct tracer *t, int pid)
{
	__u32 key = (__u32)pid;

	if (!t->skel)
		return 0;
	if (bpf_map_delete_elem(bpf_map__fd(t->skel->maps.targets), &key))
		return -errno;
	return 0;
}

int tracer_wake_on(struct tracer *t, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int epfd;

	if (!t->rb || t->wakes || fd < 0)
		return 0;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return -errno;
	ev.data.fd = ring_buffer__epoll_fd(t->rb);
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, ev.data.fd, &ev) ||
	    (ev.data.fd = fd, epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev))) {
		int err = -errno;

		close(epfd);
		return err;
	}
	t->wake_epfd = epfd;
	t->wake_fd = fd;
	t->wakes = true;
	return 0;
}

int tracer_poll(struct tracer *t, int timeout_ms)
{
	struct epoll_event evs[2];
	int n;

	if (!t->rb) {	/* a reader: the agent reads the events */
		usleep((useconds_t)timeout_ms * 1000);
		return 0;
	}
	if (t->wakes) {	/* the ring's records are all read below */
		n = epoll_wait(t->wake_epfd, evs, ARRAY_SIZE(evs), timeout_ms);
		for (int i = 0; i < n; i++)
			t->woken |= evs[i].data.fd == t->wake_fd;
		n = n < 0 && errno != EINTR ? -errno : 0;
	} else {
		n = ring_buffer__poll(t->rb, timeout_ms);
	}
	if (n == -EINTR)
		n = 0;
	/* Call records wake the reader only in batches (call_wakeup()): what came without a
	 * wakeup is read here, at the latest when the poll's time is up. */
	if (n >= 0) {
		int m = ring_buffer__consume(t->rb);

		n = m < 0 ? m : n + m;
	}
	return n;
}

bool tracer_woken(struct tracer *t)
{
	bool woken = t->woken;

	t->woken = false;
	return woken;
}

bool tracer_watches_opens(const struct tracer *t)
{
	return t->watches_opens;
}

void tracer_stop_watching(struct tracer *t)
{
	if (!t->skel)
		return;
	t->skel->bss->holds_enabled = false;
	usleep(20000);	/* a program that saw the flag set has submitted its event by now */
	bpf_link__destroy(t->skel->links.on_unmapped_area);
	t->skel->links.on_unmapped_area = NULL;
	t->watches_opens = false;
}

bool tracer_adopted(const struct tracer *t)
{
	return t->adopted;
}

uint64_t tracer_pins_id(const struct tracer *t)
{
	return t->skel && t->pin_dir ? t->agent.started_ns : 0;
}

bool tracer_is_reader(const struct tracer *t)
{
	return !t->skel;
}

int tracer_agent_pid(const struct tracer *t)
{
	return (int)t->agent.pid;
}

int tracer_open_reader(const char *pin_dir, struct tracer **out)
{
	struct tracer *t;
	struct gm_agent a;

	*out = NULL;
	if (pin_read_agent(pin_dir, &a) || !pin_agent_running(&a))
		return -ESRCH;
	if (a.layout != GM_LAYOUT_VERSION) {
		p_err("warning: the agent on %s (PID %u) has layout %u, this gpumem %u: using "
		      "probes of its own", pin_dir, a.pid, a.layout, GM_LAYOUT_VERSION);
		return -ESRCH;
	}
	t = xcalloc(1, sizeof(*t));
	if (pin_open_maps(pin_dir, &t->reader_maps)) {
		free(t);
		return -ENOENT;
	}
	t->pin_dir = pin_dir;
	t->agent = a;
	*out = t;
	return 0;
}
