// SPDX-License-Identifier: GPL-2.0
/* The model built from real BPF maps filled by hand: per-process numbers and call sites,
 * allocation ages, map entry counts, and the cleanup of a process that ended (its final
 * numbers kept, its entries deleted, other processes' left alone). Needs root for the maps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <cmocka.h>

#include "gpumem.h"
#include "host/oci.h"
#include "model/purge.h"
#include "model/state.h"

/* Pids above any real one on a default system: /proc reads about them fail harmlessly. */
#define PID_A 4000001
#define PID_B 4000002
/* Generations: GEN_A2 is a later process on PID_A. */
#define GEN_A 0x1111
#define GEN_B 0x2222
#define GEN_A2 0x3333

#define MIB (1ULL << 20)
#define API_CUDA_MALLOC 0
#define API_CU_MEM_ALLOC 13

struct fixture {
	struct model_maps fds;
	struct state *s;
};

/* Why the maps could not be made; the tests skip when set. */
static char skip_reason[160];

static int create_map(enum bpf_map_type type, const char *name, __u32 ksz, __u32 vsz)
{
	/* The allocation and site tables are mapped: arrays made so. */
	LIBBPF_OPTS(bpf_map_create_opts, opts,
		    .map_flags = type == BPF_MAP_TYPE_ARRAY ? BPF_F_MMAPABLE : 0);
	int fd = bpf_map_create(type, name, ksz, vsz, 1024, &opts);

	if (fd < 0 && !skip_reason[0])
		snprintf(skip_reason, sizeof(skip_reason), "cannot create BPF map %s: %s%s", name,
			 strerror(errno),
			 errno == EPERM ? " (run as root or with CAP_BPF)" : "");
	return fd;
}

static void close_fds(struct model_maps *f)
{
	int fds[] = { f->procs, f->sites, f->allocs, f->stacks, f->counters };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static int setup(void **state)
{
	static struct fixture fx;

	memset(&fx, 0, sizeof(fx));
	fx.fds.procs = create_map(BPF_MAP_TYPE_ARRAY, "gm_procs", sizeof(__u32),
				  sizeof(struct gm_proc_slot));
	fx.fds.sites = create_map(BPF_MAP_TYPE_ARRAY, "gm_sites", sizeof(__u32),
				  sizeof(struct gm_site_slot));
	fx.fds.allocs = create_map(BPF_MAP_TYPE_ARRAY, "gm_allocs", sizeof(__u32),
				   sizeof(struct gm_alloc_slot));
	fx.fds.stacks = create_map(BPF_MAP_TYPE_STACK_TRACE, "gm_stacks", sizeof(__u32),
				   GM_MAX_STACK_DEPTH * sizeof(__u64));
	fx.fds.counters = create_map(BPF_MAP_TYPE_PERCPU_ARRAY, "gm_counters", sizeof(__u32),
				     sizeof(__u64));
	if (fx.fds.procs < 0 || fx.fds.sites < 0 || fx.fds.allocs < 0 || fx.fds.stacks < 0 ||
	    fx.fds.counters < 0) {
		close_fds(&fx.fds);
		*state = NULL;
		return 0;
	}
	fx.fds.procs_made = -1;	/* the BPF side's: nothing makes entries here */
	fx.s = state_new(&fx.fds, NULL);
	fx.s->exit_wants = SNAP_AGES;	/* as snapshot: ages at the end (the purge tests clear it) */
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	if (!fx)
		return 0;
	state_free(fx->s);
	close_fds(&fx->fds);
	return 0;
}

static struct fixture *fixture_or_skip(void **state)
{
	if (!*state) {
		print_message("skipped: %s\n", skip_reason);
		skip();
	}
	return *state;
}

/* The known contents: process A has three sites (two holding live allocations, one all
 * freed) and three live allocations; process B has one site and one live allocation at the
 * same stack id as A's first site, and a VMM handle numerically equal to one of A's
 * addresses. */
static const struct gm_proc_stats stats_a = {
	.current_bytes = 3 * MIB, .current_allocs = 3, .peak_bytes = 5 * MIB,
	.alloc_count = 5, .free_count = 2, .alloc_bytes_total = 6 * MIB, .failed_count = 1,
	.by_kind = { [GM_KIND_DEVICE] = 3 * MIB }, .first_seen_ns = 1000,
};
static const struct gm_proc_stats stats_b = {
	.current_bytes = 4096 + 2 * MIB, .current_allocs = 2, .peak_bytes = 4096 + 2 * MIB,
	.alloc_count = 2, .alloc_bytes_total = 4096 + 2 * MIB,
	.by_kind = { [GM_KIND_DEVICE] = 4096, [GM_KIND_VMM] = 2 * MIB }, .first_seen_ns = 1500,
};

static const struct {
	struct gm_site_key k;
	struct gm_site_stats v;
} sites[] = {
	/* A, sorted as the model sorts them: stack id, api, kind. */
	{ { PID_A, GEN_A, 7, API_CUDA_MALLOC, GM_KIND_DEVICE, -1, 0 },
	  { .current_bytes = 2 * MIB, .current_allocs = 2, .alloc_count = 3, .free_count = 1,
	    .alloc_bytes_total = 3 * MIB } },
	{ { PID_A, GEN_A, 9, API_CU_MEM_ALLOC, GM_KIND_DEVICE, -1, 0 },
	  { .current_bytes = MIB, .current_allocs = 1, .alloc_count = 1,
	    .alloc_bytes_total = MIB, .failed_count = 1 } },
	{ { PID_A, GEN_A, 11, API_CUDA_MALLOC, GM_KIND_DEVICE, -1, 0 },
	  { .alloc_count = 1, .free_count = 1, .alloc_bytes_total = 2 * MIB } },
	/* B */
	{ { PID_B, GEN_B, 7, API_CUDA_MALLOC, GM_KIND_DEVICE, -1, 0 },
	  { .current_bytes = 4096, .current_allocs = 1, .alloc_count = 1,
	    .alloc_bytes_total = 4096 } },
	{ { PID_B, GEN_B, 12, 26, GM_KIND_VMM, -1, 0 },
	  { .current_bytes = 2 * MIB, .current_allocs = 1, .alloc_count = 1,
	    .alloc_bytes_total = 2 * MIB } },
};
#define NSITES_A 3
#define NSITES_B 2

/* Each counted in the site of row `site` above (its slot is known once the site is made). */
static const struct {
	struct gm_alloc_key k;
	struct gm_alloc_info v;	/* device -1 (not known): the sites above have gpu 0 */
	size_t site;
} allocs[] = {
	{ { PID_A, GEN_A, GM_SPACE_ADDR, 0, 0x7f0000000000 },
	  { .size = MIB, .time_ns = 5000, .api = API_CUDA_MALLOC, .kind = GM_KIND_DEVICE,
	    .layer = GM_LAYER_RUNTIME, .device = -1 }, 0 },
	{ { PID_A, GEN_A, GM_SPACE_ADDR, 0, 0x7f0000200000 },
	  { .size = MIB, .time_ns = 3000, .api = API_CUDA_MALLOC, .kind = GM_KIND_DEVICE,
	    .layer = GM_LAYER_RUNTIME, .device = -1 }, 0 },
	{ { PID_A, GEN_A, GM_SPACE_ADDR, 0, 0x7f0000400000 },
	  { .size = MIB, .time_ns = 8000, .api = API_CU_MEM_ALLOC, .kind = GM_KIND_DEVICE,
	    .layer = GM_LAYER_DRIVER, .device = -1 }, 1 },
	{ { PID_B, GEN_B, GM_SPACE_ADDR, 0, 0x7f0000600000 },
	  { .size = 4096, .time_ns = 2000, .api = API_CUDA_MALLOC, .kind = GM_KIND_DEVICE,
	    .layer = GM_LAYER_RUNTIME, .device = -1 }, 3 },
	{ { PID_B, GEN_B, GM_SPACE_VMM_HANDLE, 0, 0x7f0000000000 },
	  { .size = 2 * MIB, .time_ns = 2500, .api = 26, .kind = GM_KIND_VMM,
	    .layer = GM_LAYER_DRIVER, .device = -1 }, 4 },
};
#define NALLOCS_A 3

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The slot each row of sites[] was made in (fill_maps). */
static uint32_t site_slot[COUNT(sites)];

/* allocs[i]'s info, counted in its site's slot. */
static struct gm_alloc_info alloc_info(size_t i)
{
	struct gm_alloc_info v = allocs[i].v;

	v.site = site_slot[allocs[i].site];
	return v;
}

static uint32_t make_site(const struct fixture *fx, const struct gm_site_key *k,
			  const struct gm_site_stats *v)
{
	int slot = slot_table_insert(&fx->s->sites, k, v);

	assert_true(slot >= 0);
	return (uint32_t)slot;
}

static void make_proc(const struct fixture *fx, uint32_t pid, uint32_t gen,
		      const struct gm_proc_stats *v)
{
	struct gm_proc_key key = { pid, gen };

	assert_true(slot_table_insert(&fx->s->proc_table, &key, v) >= 0);
}

/* The numbers of process (pid, gen) in the process table: 0, or -ENOENT when it has none. */
static int find_proc(const struct fixture *fx, const struct gm_proc_key *key,
		     struct gm_proc_stats *v)
{
	int slot = slot_table_find(&fx->s->proc_table, key, v, NULL);

	return slot < 0 ? slot : 0;
}

/* The numbers of site k in the site table: 0, or -ENOENT when it has none. */
static int find_site(const struct fixture *fx, const struct gm_site_key *k,
		     struct gm_site_stats *v)
{
	int slot = slot_table_find(&fx->s->sites, k, v, NULL);

	return slot < 0 ? slot : 0;
}

static void fill_maps(const struct fixture *fx)
{
	make_proc(fx, PID_A, GEN_A, &stats_a);
	make_proc(fx, PID_B, GEN_B, &stats_b);
	for (size_t i = 0; i < COUNT(sites); i++)
		site_slot[i] = make_site(fx, &sites[i].k, &sites[i].v);
	for (size_t i = 0; i < COUNT(allocs); i++) {
		struct gm_alloc_info v = alloc_info(i);

		assert_int_equal(alloc_table_insert(&fx->s->allocs, &allocs[i].k, &v), 0);
	}
}

static void assert_site(const struct site_rec *ss, size_t row, uint64_t oldest_ns)
{
	assert_memory_equal(&ss->key, &sites[row].k, sizeof(ss->key));
	assert_memory_equal(&ss->st, &sites[row].v, sizeof(ss->st));
	assert_int_equal(ss->oldest_ns, oldest_ns);
}

static void assert_a_numbers(const struct proc_rec *a)
{
	assert_true(a->have_stats);
	assert_memory_equal(&a->st, &stats_a, sizeof(stats_a));
	assert_int_equal(a->nsites, NSITES_A);
	assert_site(&a->sites[0], 0, 3000);	/* the older of its two live allocations */
	assert_site(&a->sites[1], 1, 8000);
	assert_site(&a->sites[2], 2, 0);	/* nothing live: no age */
}

/* A's numbers and sites, with no age asked for at its end. */
static void assert_a_numbers_but_ages(const struct proc_rec *a)
{
	assert_true(a->have_stats);
	assert_memory_equal(&a->st, &stats_a, sizeof(stats_a));
	assert_int_equal(a->nsites, NSITES_A);
	for (size_t i = 0; i < NSITES_A; i++)
		assert_memory_equal(&a->sites[i].st, &sites[i].v, sizeof(a->sites[i].st));
}

static void assert_b_numbers(const struct proc_rec *b)
{
	assert_true(b->alive);
	assert_true(b->have_stats);
	assert_memory_equal(&b->st, &stats_b, sizeof(stats_b));
	assert_int_equal(b->nsites, NSITES_B);
	assert_site(&b->sites[0], 3, 2000);
	assert_site(&b->sites[1], 4, 2500);
}

static void assert_b_entries_untouched(const struct fixture *fx)
{
	struct gm_proc_stats ps;
	struct gm_site_stats ss;
	struct gm_alloc_info ai;
	struct gm_proc_key key = { PID_B, GEN_B };

	assert_int_equal(find_proc(fx, &key, &ps), 0);
	assert_memory_equal(&ps, &stats_b, sizeof(ps));
	for (size_t i = NSITES_A; i < COUNT(sites); i++) {
		assert_int_equal(find_site(fx, &sites[i].k, &ss), 0);
		assert_memory_equal(&ss, &sites[i].v, sizeof(ss));
	}
	for (size_t i = NALLOCS_A; i < COUNT(allocs); i++) {
		struct gm_alloc_info want = alloc_info(i);

		assert_int_equal(alloc_table_find(&fx->s->allocs, &allocs[i].k, &ai, NULL), 0);
		assert_memory_equal(&ai, &want, sizeof(ai));
	}
}

static void end_process(struct state *s, int pid, uint32_t gen, uint64_t time_ns, int exit_code)
{
	struct gm_call_event e = {
		.type = GM_REC_PROCESS_EXIT, .pid = (__u32)pid, .tid = (__u32)pid, .gen = gen,
		.time_ns = time_ns, .error = exit_code,
	};

	state_on_process_exit(s, &e);
}

static void test_refresh_gives_each_process_its_stats_and_sites(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct proc_rec *a, *b;

	fill_maps(fx);
	state_refresh(fx->s, SNAP_AGES);
	assert_int_equal(fx->s->nprocs, 2);
	a = state_find(fx->s, PID_A);
	b = state_find(fx->s, PID_B);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->pid, PID_A);
	assert_true(a->alive);
	assert_a_numbers(a);
	assert_b_numbers(b);
	assert_true(a->end_ns > 0);	/* alive: the time of the refresh */
}

static void test_refresh_counts_map_entries(void **state)
{
	struct fixture *fx = fixture_or_skip(state);

	fill_maps(fx);
	state_refresh(fx->s, SNAP_AGES);
	assert_int_equal(fx->s->map_procs, 2);
	assert_int_equal(fx->s->map_sites, 5);
	assert_int_equal(fx->s->map_allocs, 5);
}

static void test_refresh_twice_does_not_repeat_sites(void **state)
{
	struct fixture *fx = fixture_or_skip(state);

	fill_maps(fx);
	state_refresh(fx->s, SNAP_AGES);
	state_refresh(fx->s, SNAP_AGES);
	assert_int_equal(fx->s->nprocs, 2);
	assert_a_numbers(state_find(fx->s, PID_A));
	assert_b_numbers(state_find(fx->s, PID_B));
	assert_int_equal(fx->s->map_sites, 5);
}

static void test_reap_keeps_final_numbers_of_ended_process(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct proc_rec *a;

	fill_maps(fx);
	state_refresh(fx->s, SNAP_AGES);
	end_process(fx->s, PID_A, GEN_A, 9000, 3);
	assert_int_equal(state_reap(fx->s), 1);
	a = state_find(fx->s, PID_A);
	assert_non_null(a);
	assert_false(a->alive);
	assert_int_equal(a->exit_code, 3);
	assert_int_equal(a->end_ns, 9000);
	assert_a_numbers(a);
	assert_b_numbers(state_find(fx->s, PID_B));
	assert_int_equal(fx->s->nprocs, 2);
	assert_int_equal(state_reap(fx->s), 0);	/* nothing left queued */
}

static void test_reap_deletes_exactly_the_ended_pids_entries(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_proc_stats ps;
	struct gm_site_stats ss;
	struct gm_alloc_info ai;
	struct gm_proc_key key = { PID_A, GEN_A };

	fill_maps(fx);
	state_refresh(fx->s, SNAP_AGES);
	end_process(fx->s, PID_A, GEN_A, 9000, 0);
	assert_int_equal(state_reap(fx->s), 1);

	assert_int_equal(find_proc(fx, &key, &ps), -ENOENT);
	for (size_t i = 0; i < NSITES_A; i++)
		assert_int_equal(find_site(fx, &sites[i].k, &ss), -ENOENT);
	for (size_t i = 0; i < NALLOCS_A; i++)
		assert_int_equal(alloc_table_find(&fx->s->allocs, &allocs[i].k, &ai, NULL), -ENOENT);
	assert_b_entries_untouched(fx);

	/* A later refresh sees only B's entries and leaves A's final record as it was. */
	state_refresh(fx->s, SNAP_AGES);
	assert_int_equal(fx->s->map_procs, 1);
	assert_int_equal(fx->s->map_sites, NSITES_B);
	assert_int_equal(fx->s->map_allocs, 2);
	assert_false(state_find(fx->s, PID_A)->alive);
	assert_a_numbers(state_find(fx->s, PID_A));
	assert_b_numbers(state_find(fx->s, PID_B));
}

/* A view that needs no ages at the end (serve, trace): the ended process's allocation entries
 * wait for a purge, which deletes exactly them, in one walk for every process waiting. */
static void test_an_end_without_ages_leaves_its_entries_to_one_later_purge(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_alloc_info ai;
	struct gm_proc_key key = { PID_A, GEN_A };
	struct gm_proc_stats ps;

	fx->s->exit_wants = 0;
	fill_maps(fx);
	state_refresh(fx->s, 0);
	end_process(fx->s, PID_A, GEN_A, 9000, 0);
	assert_int_equal(state_reap(fx->s), 1);
	assert_int_equal(find_proc(fx, &key, &ps), -ENOENT);
	assert_int_equal(alloc_table_find(&fx->s->allocs, &allocs[0].k, &ai, NULL), 0);
	assert_a_numbers_but_ages(state_find(fx->s, PID_A));
	assert_int_equal(purge_pending(fx->s->purge), 1);
	assert_int_equal(state_purge(fx->s, false), 0);	/* not due: recent, and few */
	assert_int_equal(state_purge(fx->s, true), NALLOCS_A);
	for (size_t i = 0; i < NALLOCS_A; i++)
		assert_int_equal(alloc_table_find(&fx->s->allocs, &allocs[i].k, &ai, NULL), -ENOENT);
	assert_b_entries_untouched(fx);
	assert_int_equal(purge_pending(fx->s->purge), 0);
}

/* Entries whose process the model holds as ended or never knew (an earlier agent's): gone. */
static void test_orphan_purge_deletes_what_no_living_process_owns(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_alloc_info ai;
	struct gm_proc_key key = { PID_A, GEN_A };
	struct slot_ref ref;

	fill_maps(fx);
	assert_true(slot_table_find(&fx->s->proc_table, &key, NULL, &ref) >= 0);
	assert_true(slot_table_take(&fx->s->proc_table, ref));	/* A's record is gone */
	for (size_t i = 0; i < NSITES_A; i++) {
		assert_true(slot_table_find(&fx->s->sites, &sites[i].k, NULL, &ref) >= 0);
		assert_true(slot_table_take(&fx->s->sites, ref));
	}
	state_refresh(fx->s, 0);
	assert_int_equal(state_purge_orphans(fx->s), NALLOCS_A);
	for (size_t i = 0; i < NALLOCS_A; i++)
		assert_int_equal(alloc_table_find(&fx->s->allocs, &allocs[i].k, &ai, NULL), -ENOENT);
	assert_b_entries_untouched(fx);
}

static void test_reap_counts_the_entries_left_in_the_maps(void **state)
{
	struct fixture *fx = fixture_or_skip(state);

	fill_maps(fx);
	state_refresh(fx->s, SNAP_AGES);
	end_process(fx->s, PID_A, GEN_A, 9000, 0);
	assert_int_equal(state_reap(fx->s), 1);
	assert_int_equal(fx->s->map_procs, 1);
	assert_int_equal(fx->s->map_sites, NSITES_B);
	assert_int_equal(fx->s->map_allocs, 2);
}

/* A later process on PID_A (GEN_A2): 4 MiB in one site, and a live allocation at the very
 * address the ended one still holds in the map. */
static const struct gm_proc_stats stats_new = {
	.current_bytes = 4 * MIB, .current_allocs = 1, .peak_bytes = 4 * MIB,
	.alloc_count = 1, .alloc_bytes_total = 4 * MIB,
	.by_kind = { [GM_KIND_DEVICE] = 4 * MIB }, .first_seen_ns = 20000, .start_ns = 19000,
};
static const struct gm_site_key site_new = { .tgid = PID_A, .gen = GEN_A2, .stack_id = 7,
					      .api = API_CUDA_MALLOC, .kind = GM_KIND_DEVICE,
					      .py_stack_id = -1 };
static const struct gm_site_stats site_new_stats = {
	.current_bytes = 4 * MIB, .current_allocs = 1, .alloc_count = 1,
	.alloc_bytes_total = 4 * MIB,
};
static const struct gm_alloc_key alloc_new = { PID_A, GEN_A2, GM_SPACE_ADDR, 0,
					       0x7f0000000000 };
static const struct gm_alloc_info alloc_new_info = { .size = 4 * MIB, .time_ns = 19500,
						     .api = API_CUDA_MALLOC,
						     .kind = GM_KIND_DEVICE,
						     .layer = GM_LAYER_RUNTIME, .device = -1 };

static void fill_new_process(const struct fixture *fx)
{
	struct gm_proc_key key = { PID_A, GEN_A2 };
	struct gm_alloc_info info = alloc_new_info;

	assert_true(slot_table_insert(&fx->s->proc_table, &key, &stats_new) >= 0);
	info.site = make_site(fx, &site_new, &site_new_stats);
	assert_int_equal(alloc_table_insert(&fx->s->allocs, &alloc_new, &info), 0);
}

static void assert_new_numbers(const struct proc_rec *p)
{
	assert_true(p->alive);
	assert_int_equal(p->gen, GEN_A2);
	assert_int_equal(p->start_ns, stats_new.start_ns);
	assert_memory_equal(&p->st, &stats_new, sizeof(stats_new));
	assert_int_equal(p->nsites, 1);
	assert_memory_equal(&p->sites[0].key, &site_new, sizeof(site_new));
	assert_int_equal(p->sites[0].oldest_ns, 19500);
}

static void test_reused_pid_gets_a_new_record(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct proc_rec *old, *now;

	fill_maps(fx);
	state_refresh(fx->s, SNAP_AGES);
	end_process(fx->s, PID_A, GEN_A, 9000, 3);
	assert_int_equal(state_reap(fx->s), 1);
	old = state_find(fx->s, PID_A);

	now = state_proc(fx->s, PID_A, GEN_A2, 0);
	assert_ptr_not_equal(now, old);
	assert_true(now->alive);
	assert_false(now->have_stats);
	assert_int_equal(now->nsites, 0);
	assert_ptr_equal(state_find(fx->s, PID_A), now);
	assert_ptr_equal(state_proc(fx->s, PID_A, GEN_A2, 0), now);	/* found, not made again */
	assert_ptr_equal(state_proc(fx->s, PID_A, GEN_A, 0), old);	/* the ended one's own */
	assert_ptr_equal(state_find_gen(fx->s, PID_A, GEN_A), old);
	assert_int_equal(fx->s->nprocs, 3);

	/* The new process's numbers go to the new record; the ended one keeps its own. */
	fill_new_process(fx);
	state_refresh(fx->s, SNAP_AGES);
	assert_int_equal(fx->s->nprocs, 3);
	assert_new_numbers(now);
	assert_false(old->alive);
	assert_int_equal(old->exit_code, 3);
	assert_int_equal(old->end_ns, 9000);
	assert_a_numbers(old);
}

/* The BPF side saw the new process on PID_A before userspace reaped the one that ended: both
 * processes' entries are in the maps at once, even an allocation at the same address. Each
 * gets its own record, and the reap of the ended one deletes its entries only. */
static void test_reused_pid_before_the_reap_keeps_both_processes_apart(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_proc_key old_key = { PID_A, GEN_A }, new_key = { PID_A, GEN_A2 };
	struct gm_proc_stats ps;
	struct gm_site_stats ss;
	struct gm_alloc_info ai;
	struct proc_rec *old, *now;

	fill_maps(fx);
	state_refresh(fx->s, SNAP_AGES);
	old = state_find(fx->s, PID_A);
	end_process(fx->s, PID_A, GEN_A, 9000, 3);
	fill_new_process(fx);
	state_refresh(fx->s, SNAP_AGES);
	now = state_find(fx->s, PID_A);
	assert_ptr_not_equal(now, old);
	assert_int_equal(fx->s->nprocs, 3);
	assert_a_numbers(old);
	assert_new_numbers(now);

	assert_int_equal(state_reap(fx->s), 1);
	assert_false(old->alive);
	assert_int_equal(old->exit_code, 3);
	assert_a_numbers(old);
	assert_new_numbers(now);
	assert_int_equal(find_proc(fx, &old_key, &ps), -ENOENT);
	assert_int_equal(find_proc(fx, &new_key, &ps), 0);
	assert_int_equal(find_site(fx, &site_new, &ss), 0);
	assert_int_equal(alloc_table_find(&fx->s->allocs, &alloc_new, &ai, NULL), 0);
	for (size_t i = 0; i < NALLOCS_A; i++)
		assert_int_equal(alloc_table_find(&fx->s->allocs, &allocs[i].k, &ai, NULL), -ENOENT);
	assert_b_entries_untouched(fx);

	state_refresh(fx->s, SNAP_AGES);
	assert_int_equal(fx->s->map_procs, 2);
	assert_int_equal(fx->s->map_sites, NSITES_B + 1);
	assert_int_equal(fx->s->map_allocs, 3);
	assert_new_numbers(now);
	assert_a_numbers(old);
}

/* An adopting agent reads the entries of a pid's ended process and of its newer one in no
 * particular order: the newer one is the pid's, whichever record was made first. */
static void test_a_pids_newest_process_is_the_one_that_started_last(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct proc_rec *now = state_proc(fx->s, PID_A, GEN_A2, 19000);
	struct proc_rec *old = state_proc(fx->s, PID_A, GEN_A, 1000);

	assert_ptr_equal(state_find(fx->s, PID_A), now);
	assert_ptr_equal(state_find_gen(fx->s, PID_A, GEN_A), old);
	state_reindex(fx->s);
	assert_ptr_equal(state_find(fx->s, PID_A), now);
	assert_ptr_equal(state_find_gen(fx->s, PID_A, GEN_A), old);
}

/* Its end was never delivered (the ring buffer was full), but a newer process has its pid:
 * the older one has ended, and is reaped with its entries. */
static void test_a_process_whose_pid_a_newer_one_has_is_reaped(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_proc_key old_key = { PID_A, GEN_A };
	struct gm_proc_stats ps;
	struct proc_rec *old;

	fill_maps(fx);
	state_refresh(fx->s, SNAP_AGES);
	old = state_find(fx->s, PID_A);
	fill_new_process(fx);
	state_refresh(fx->s, SNAP_AGES);
	assert_int_equal(state_reap(fx->s), 1);
	assert_false(old->alive);
	assert_false(old->exit_known);
	assert_a_numbers(old);
	assert_int_equal(find_proc(fx, &old_key, &ps), -ENOENT);
	assert_new_numbers(state_find(fx->s, PID_A));
	assert_true(state_find(fx->s, PID_B)->alive);
}

/* What /proc says about a process is its own only until it ends: read after its end (the pid
 * may be the next process's by then) it is let go, and the kernel's word at exit stands. */
static void read_self_then_end(struct fixture *fx, uint64_t exit_ns, struct proc_rec **out)
{
	struct gm_call_event e = { .type = GM_REC_PROCESS_NEW, .pid = (__u32)getpid(),
				   .gen = GEN_A, .comm = "at_first_call" };

	state_on_process_new(fx->s, &e);
	*out = state_find(fx->s, getpid());
	assert_non_null((*out)->cmdline);	/* read from /proc: this process */
	e.type = GM_REC_PROCESS_EXIT;
	e.time_ns = exit_ns;
	memcpy(e.comm, "at_exit", sizeof("at_exit"));
	state_on_process_exit(fx->s, &e);
}

static void test_proc_reads_after_the_end_are_let_go(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct proc_rec *p;

	read_self_then_end(fx, 1, &p);	/* it "ended" long before /proc was read */
	assert_string_equal(p->comm, "at_exit");
	assert_null(p->cmdline);
	assert_null(p->cgroup);
	assert_null(p->user);
	assert_false(p->have_mm);
}

/* One executable mapping of PID_A's image, as the kernel's walk sends it (at its first call, or
 * at its end). */
static void capture_mapping(struct state *s, bool at_start, uint64_t start)
{
	struct gm_vma_event e = {
		.type = GM_REC_EXIT_VMA, .pid = PID_A, .gen = GEN_A, .at_start = at_start,
		.start = start, .end = start + 0x1000, .ino = 42, .dev = gm_kernel_dev(8, 1),
		.path_len = sizeof("workload"), .path = "workload",
	};

	state_on_exit_vma(s, &e);
}

/* The path of the one mapping the exit walk sends for file (dev, ino), its path's components
 * as the walk writes them (the file's own name first, each NUL-terminated), len bytes. */
static const char *exit_walk_path(struct state *s, uint64_t dev, uint64_t ino,
				  const char *parts, size_t len, bool whole)
{
	int pid = PID_A + (int)ino;	/* a process of its own for each file */
	struct gm_vma_event e = {
		.type = GM_REC_EXIT_VMA, .pid = (__u32)pid, .gen = GEN_A, .start = 0x400000,
		.end = 0x401000, .ino = ino, .dev = dev, .path_len = len, .path_whole = whole,
	};

	memcpy(e.path, parts, len < sizeof(e.path) ? len : sizeof(e.path));
	state_on_exit_vma(s, &e);
	end_process(s, pid, GEN_A, 10, 0);
	assert_true(state_find(s, pid)->have_mm);
	return state_find(s, pid)->mm.maps[0].path;
}

#define PARTS(lit) lit, sizeof(lit)

static void test_the_exit_walk_names_a_file_by_its_path(void **state)
{
	struct fixture *fx = fixture_or_skip(state);

	assert_string_equal(exit_walk_path(fx->s, gm_kernel_dev(8, 1), 42,
					   PARTS("libnvinfer.so.10\0lib\0opt"), true),
			    "/opt/lib/libnvinfer.so.10");
}

/* A walk cut short (a component past the record, a mount not read, the scratch busy) gives
 * the file's name, the first component, alone: never a path that is half of one. */
static void test_a_walk_cut_short_gives_the_files_name_alone(void **state)
{
	struct fixture *fx = fixture_or_skip(state);

	assert_string_equal(exit_walk_path(fx->s, gm_kernel_dev(8, 1), 42,
					   PARTS("libnvinfer.so.10\0lib\0opt"), false),
			    "libnvinfer.so.10");
}

/* What a record of a newer or broken BPF side could hold: a component with no end within the
 * record or its length, an empty one, a length past the record. */
static void test_a_malformed_walk_gives_the_files_name_alone(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	char full[GM_VMA_PATH_LEN];

	assert_string_equal(exit_walk_path(fx->s, 1, 42, "lib.so\0usr\0lib", 14, true),
			    "lib.so");	/* "lib" has no NUL within path_len */
	assert_string_equal(exit_walk_path(fx->s, 1, 43, PARTS("lib.so\0\0usr"), true),
			    "lib.so");
	memset(full, 'a', sizeof(full));	/* a name with no end: the record's bytes */
	assert_int_equal(strlen(exit_walk_path(fx->s, 1, 44, full, 100000, true)), sizeof(full));
	memcpy(full, "x.so", 5);
	assert_string_equal(exit_walk_path(fx->s, 1, 45, full, 100000, true), "x.so");
}

/* A path read from /proc (or an exec's, checked) names the file rather than the walk's: the
 * walk's is in the process's mount namespace, which the reader's may not share. */
static void test_a_path_known_from_proc_names_the_file_over_the_walks(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_file_event exec = { .type = GM_REC_EXEC, .pid = 999999999 };
	char self[GM_PATH_LEN];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct stat st;

	assert_true(n > 0);
	self[n] = 0;
	assert_int_equal(stat(self, &st), 0);
	exec.ino = st.st_ino;
	exec.dev = gm_kernel_dev(major(st.st_dev), minor(st.st_dev));
	memcpy(exec.path, self, (size_t)n + 1);
	state_on_exec(fx->s, &exec);	/* gone: the path it was run by, checked */
	assert_string_equal(exit_walk_path(fx->s, exec.dev, exec.ino,
					   PARTS("test_state\0elsewhere"), true),
			    self);
}

/* A process that ended before /proc was read is named from the kernel's walk at its exit,
 * complete; when that walk was refused (its mmap_lock held), from its first call's walk; with
 * neither, it has no map. A frame found in no module of a process whose end walk was refused
 * is a loss, counted once for the process. */
static struct proc_rec *ended_with_map_at(struct state *s, uint64_t start)
{
	struct proc_rec *p;

	end_process(s, PID_A, GEN_A, 10, 0);
	p = state_find(s, PID_A);
	assert_true(p->have_mm);
	assert_int_equal(p->mm.count, 1);
	assert_int_equal(p->mm.maps[0].start, start);
	return p;
}

static void test_an_unread_process_takes_the_exit_walk_over_the_first_calls(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct proc_rec *p;

	capture_mapping(fx->s, true, 0x400000);
	capture_mapping(fx->s, false, 0x800000);
	p = ended_with_map_at(fx->s, 0x800000);
	state_frame_unmapped(fx->s, p);	/* code in no file: the map was whole */
	assert_int_equal(fx->s->lost[SNAP_LOST_MODULE_MAPS_MISSED], 0);
}

static void test_a_refused_exit_walk_falls_back_to_the_first_calls_and_counts(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct proc_rec *p;

	capture_mapping(fx->s, true, 0x400000);
	p = ended_with_map_at(fx->s, 0x400000);
	assert_int_equal(fx->s->lost[SNAP_LOST_MODULE_MAPS_MISSED], 0);
	state_frame_unmapped(fx->s, p);	/* in a library loaded after the first call */
	state_frame_unmapped(fx->s, p);
	assert_int_equal(fx->s->lost[SNAP_LOST_MODULE_MAPS_MISSED], 1);
}

/* Naming a stack of such a process: a frame in the map is named, one in no module (a library
 * loaded after the first call) shows its address and counts the loss, once for the process. */
static void test_naming_a_frame_past_a_refused_walks_map_counts_it(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct dwarf_stack ds = { .stack_id = 7, .nips = 2, .ips = { 0x400100, 0x900100 } };
	struct snap_stack *st;
	struct proc_rec *p;

	capture_mapping(fx->s, true, 0x400000);
	p = ended_with_map_at(fx->s, 0x400000);
	p->dwarf_stacks = malloc(sizeof(ds));
	assert_non_null(p->dwarf_stacks);
	p->dwarf_stacks[0] = ds;
	p->ndwarf_stacks = 1;
	st = state_named_stack(fx->s, p, 7, -1);
	assert_int_equal(st->nframes, 2);
	assert_string_equal(st->frames[0].module, "workload");
	assert_null(st->frames[1].module);
	assert_int_equal(st->frames[1].addr, 0x900100);
	assert_int_equal(fx->s->lost[SNAP_LOST_MODULE_MAPS_MISSED], 1);
	snap_stack_put(st);
}

static void test_two_refused_walks_leave_no_map_and_count(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_call_event first = { .type = GM_REC_PROCESS_NEW, .pid = PID_A, .gen = GEN_A };
	struct proc_rec *p;

	state_on_process_new(fx->s, &first);
	end_process(fx->s, PID_A, GEN_A, 10, 0);
	p = state_find(fx->s, PID_A);
	assert_false(p->have_mm);
	state_frame_unmapped(fx->s, p);
	assert_int_equal(fx->s->lost[SNAP_LOST_MODULE_MAPS_MISSED], 1);
}

static void test_proc_reads_before_the_end_are_kept(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	char comm[GM_COMM_LEN + 1];
	struct proc_rec *p;

	assert_int_equal(proc_read_comm(getpid(), comm, sizeof(comm)), 0);
	read_self_then_end(fx, UINT64_MAX, &p);
	assert_string_equal(p->comm, comm);
	assert_non_null(p->cmdline);
	assert_true(p->have_mm);
}

static void test_reap_of_a_process_with_many_sites_deletes_them_all(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_proc_stats ps = stats_a;
	struct gm_proc_key key = { PID_A, GEN_A };
	struct gm_site_stats v = { .alloc_count = 1, .free_count = 1 };

	assert_true(slot_table_insert(&fx->s->proc_table, &key, &ps) >= 0);
	for (int i = 0; i < 100; i++) {
		struct gm_site_key k = { PID_A, GEN_A, 100 + i, 0, 0, -1, 0 };

		make_site(fx, &k, &v);
	}
	state_refresh(fx->s, SNAP_AGES);
	assert_int_equal(state_find(fx->s, PID_A)->nsites, 100);
	end_process(fx->s, PID_A, GEN_A, 9000, 0);
	assert_int_equal(state_reap(fx->s), 1);
	assert_int_equal(fx->s->map_sites, 0);
}

/* Two CPUs that made one new site at once made two entries of its key (gpumem.h): one site,
 * their numbers added up, and an allocation counted in the second is aged in it. */
static void test_two_entries_of_one_site_are_one_site(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct gm_site_key other = sites[0].k;
	struct gm_site_stats extra = { .current_bytes = MIB, .current_allocs = 1, .alloc_count = 1,
				       .alloc_bytes_total = MIB };
	struct gm_alloc_key ak = { PID_A, GEN_A, GM_SPACE_ADDR, 0, 0x7f0000800000 };
	struct gm_alloc_info ai = allocs[0].v;
	const struct site_rec *first;
	struct proc_rec *a;
	int slot;

	fill_maps(fx);
	other.gpu = 5;	/* made apart, then given the same key, as the race leaves them */
	slot = slot_table_insert(&fx->s->sites, &other, &extra);
	assert_true(slot >= 0);
	((struct gm_site_slot *)(void *)fx->s->sites.slots)[slot].key = sites[0].k;
	ai.time_ns = 1000;
	ai.site = (uint32_t)slot;
	assert_int_equal(alloc_table_insert(&fx->s->allocs, &ak, &ai), 0);
	state_refresh(fx->s, SNAP_AGES);
	a = state_find(fx->s, PID_A);
	assert_int_equal(a->nsites, NSITES_A);
	first = &a->sites[0];
	assert_memory_equal(&first->key, &sites[0].k, sizeof(first->key));
	assert_int_equal(first->st.current_bytes, sites[0].v.current_bytes + MIB);
	assert_int_equal(first->st.current_allocs, sites[0].v.current_allocs + 1);
	assert_int_equal(first->st.alloc_count, sites[0].v.alloc_count + 1);
	assert_int_equal(first->st.free_count, sites[0].v.free_count);
	assert_int_equal(first->st.alloc_bytes_total, sites[0].v.alloc_bytes_total + MIB);
	assert_int_equal(first->oldest_ns, 1000);
	assert_site(&a->sites[1], 1, 8000);
}

static void test_exit_seen_before_any_record_keeps_code_and_time(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct proc_rec *a;

	fill_maps(fx);
	end_process(fx->s, PID_A, GEN_A, 9000, 3);
	assert_int_equal(state_reap(fx->s), 1);
	a = state_find(fx->s, PID_A);
	assert_non_null(a);
	assert_false(a->alive);
	assert_int_equal(a->nsites, 3);
	assert_int_equal(a->exit_code, 3);
	assert_int_equal(a->end_ns, 9000);
}

/* A process gpumem could not ask /proc about: what it does not know is not valid, never "" or
 * 0, and the snapshot keeps the final numbers of the ended one. */
static void test_snapshot_marks_what_was_never_read_unknown(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	const struct snap_proc *a, *b;
	struct snapshot *snap;

	fill_maps(fx);
	end_process(fx->s, PID_A, GEN_A, 9000, 3);
	assert_int_equal(state_reap(fx->s), 1);
	snap = state_publish(fx->s, SNAP_AGES);
	assert_int_equal(snap->error, 0);
	a = snapshot_find(snap, PID_A);
	b = snapshot_find(snap, PID_B);
	assert_non_null(a);
	assert_non_null(b);
	assert_false(a->valid & (SP_CMDLINE | SP_CGROUP | SP_NS_PID | SP_USER | SP_COMM));
	assert_null(a->cmdline);
	assert_null(a->cgroup);
	assert_true(a->valid & SP_EXIT_CODE);
	assert_true(a->valid & SP_STATS);
	assert_false(a->alive);
	assert_int_equal(a->st.current_bytes, stats_a.current_bytes);
	assert_int_equal(a->nsites, NSITES_A);
	assert_true(b->alive);
	assert_false(b->valid & SP_EXIT_CODE);
	/* Sites come sorted by bytes held, each with its stack named (none recorded here). */
	for (size_t i = 1; i < b->nsites; i++)
		assert_true(b->sites[i - 1].st.current_bytes >= b->sites[i].st.current_bytes);
	assert_non_null(b->sites[0].stack);
	snapshot_put(snap);
}

/* Past --keep-ended, the oldest ended processes go and are counted. */
static void test_ended_processes_beyond_the_bound_are_let_go_and_counted(void **state)
{
	struct fixture *fx = fixture_or_skip(state);

	fx->s->opt.keep_ended = 1;
	fill_maps(fx);
	end_process(fx->s, PID_A, GEN_A, 9000, 0);
	assert_int_equal(state_reap(fx->s), 1);
	end_process(fx->s, PID_B, GEN_B, 9500, 0);
	assert_int_equal(state_reap(fx->s), 1);
	assert_null(state_find(fx->s, PID_A));	/* ended first: let go */
	assert_non_null(state_find(fx->s, PID_B));
	assert_int_equal(fx->s->lost[SNAP_LOST_ENDED_DROPPED], 1);
}

/* Over the bound, an ended process that made no call (a script's `true`) goes first and is no
 * loss: the process that held memory and ended before it stays. */
static void test_ended_processes_that_made_no_call_go_first_uncounted(void **state)
{
	struct fixture *fx = fixture_or_skip(state);

	fx->s->opt.keep_ended = 1;
	fill_maps(fx);
	end_process(fx->s, PID_A, GEN_A, 9000, 0);
	assert_int_equal(state_reap(fx->s), 1);
	end_process(fx->s, PID_A + 10, GEN_B, 9500, 0);	/* never called: no entry */
	state_reap(fx->s);
	assert_non_null(state_find(fx->s, PID_A));
	assert_null(state_find(fx->s, PID_A + 10));
	assert_int_equal(fx->s->lost[SNAP_LOST_ENDED_DROPPED], 0);
}

/* Ends at one time (those reaped in one sweep share it): the bound still holds, one of the
 * two let go (the older record). */
static void test_ended_processes_of_one_end_time_still_keep_the_bound(void **state)
{
	struct fixture *fx = fixture_or_skip(state);

	fx->s->opt.keep_ended = 1;
	fill_maps(fx);
	end_process(fx->s, PID_A, GEN_A, 9000, 0);
	end_process(fx->s, PID_B, GEN_B, 9000, 0);
	state_reap(fx->s);
	assert_true(!state_find(fx->s, PID_A) != !state_find(fx->s, PID_B));
	assert_int_equal(fx->s->lost[SNAP_LOST_ENDED_DROPPED], 1);
}

/* A failure storm: the first and the most recent records are kept, those between counted. */
static void test_failure_records_keep_the_first_and_the_last(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	struct snapshot *snap;

	fx->s->opt.keep_failures = 3;
	for (uint32_t i = 0; i < 10; i++) {
		struct gm_call_event e = { .type = GM_REC_ALLOC_FAILED, .pid = PID_A,
					   .tid = PID_A, .gen = GEN_A, .stack_id = -1,
					   .size = 100 + i, .error = 2 };

		state_on_failure(fx->s, &e);
	}
	snap = state_publish(fx->s, SNAP_FAILURES);
	assert_int_equal(snap->nfailures, 6);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(snap->failures[i].ev.size, 100 + i);
		assert_int_equal(snap->failures[3 + i].ev.size, 107 + i);
	}
	assert_int_equal(snap->lost[SNAP_LOST_FAILURES_DROPPED], 4);
	snapshot_put(snap);
}

static void put_in_container(struct proc_rec *p, char digit)
{
	memset(p->container.id, digit, CONTAINER_ID_LEN);
	p->container.id[CONTAINER_ID_LEN] = '\0';
	p->container.has_id = true;
}

static void write_bundle(const char *root, char digit, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%.*s", root, CONTAINER_ID_LEN,
		 "0000000000000000000000000000000000000000000000000000000000000000");
	memset(path + strlen(root) + 1, digit, CONTAINER_ID_LEN);
	assert_int_equal(mkdir(path, 0755), 0);
	strcat(path, "/config.json");
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The names of a process's OCI bundle reach its snapshot and its failures, even when the bundle
 * was found after the process was first seen; a refused bundle is counted in the snapshot. */
static void test_snapshots_carry_the_bundle_names_and_count_refusals(void **state)
{
	struct fixture *fx = fixture_or_skip(state);
	char root[] = "/tmp/gpumem-state-oci-XXXXXX", cmd[64];
	const char *roots[1] = { root };
	const struct snap_proc *a, *b;
	struct gm_call_event e = { .type = GM_REC_ALLOC_FAILED, .pid = PID_A, .gen = GEN_A,
				   .tid = PID_A, .stack_id = -1, .size = 100, .error = 2 };
	struct snapshot *snap;

	assert_non_null(mkdtemp(root));
	fx->s->oci = oci_cache_new(roots, 1, 0);
	put_in_container(state_proc(fx->s, PID_A, GEN_A, 0), 'a');
	put_in_container(state_proc(fx->s, PID_B, GEN_B, 0), 'b');
	state_on_failure(fx->s, &e);
	write_bundle(root, 'a', "{\"annotations\":{\"io.kubernetes.pod.name\":\"web-0\","
				"\"io.kubernetes.pod.namespace\":\"shop\","
				"\"io.kubernetes.container.name\":\"api\"}}");
	write_bundle(root, 'b', "{\"annotations\":{\"io.kubernetes.pod.name\":\"evil\\n\"}}");
	snap = state_publish(fx->s, SNAP_FAILURES);
	a = snapshot_find(snap, PID_A);
	b = snapshot_find(snap, PID_B);
	assert_non_null(a);
	assert_non_null(b);
	assert_string_equal(a->container.pod_name, "web-0");
	assert_string_equal(a->container.pod_namespace, "shop");
	assert_string_equal(a->container.container_name, "api");
	assert_int_equal(snap->nfailures, 1);
	assert_string_equal(snap->failures[0].container.pod_name, "web-0");
	assert_string_equal(b->container.pod_name, "");
	assert_int_equal(snap->lost[SNAP_LOST_OCI_REJECTED], 1);
	snapshot_put(snap);
	oci_cache_free(fx->s->oci);
	fx->s->oci = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_snapshots_carry_the_bundle_names_and_count_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failure_records_keep_the_first_and_the_last,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_marks_what_was_never_read_unknown,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_ended_processes_beyond_the_bound_are_let_go_and_counted, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_ended_processes_that_made_no_call_go_first_uncounted, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_ended_processes_of_one_end_time_still_keep_the_bound, setup, teardown),

		cmocka_unit_test_setup_teardown(test_exit_seen_before_any_record_keeps_code_and_time,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_entries_of_one_site_are_one_site, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reap_of_a_process_with_many_sites_deletes_them_all,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_refresh_gives_each_process_its_stats_and_sites,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_refresh_counts_map_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refresh_twice_does_not_repeat_sites, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reap_keeps_final_numbers_of_ended_process,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_reap_deletes_exactly_the_ended_pids_entries,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_an_end_without_ages_leaves_its_entries_to_one_later_purge, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_orphan_purge_deletes_what_no_living_process_owns,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_reap_counts_the_entries_left_in_the_maps,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_reused_pid_gets_a_new_record, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_reused_pid_before_the_reap_keeps_both_processes_apart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_process_whose_pid_a_newer_one_has_is_reaped,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_a_pids_newest_process_is_the_one_that_started_last, setup, teardown),
		cmocka_unit_test_setup_teardown(test_proc_reads_after_the_end_are_let_go, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_proc_reads_before_the_end_are_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_the_exit_walk_names_a_file_by_its_path, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_a_walk_cut_short_gives_the_files_name_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_a_malformed_walk_gives_the_files_name_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_a_path_known_from_proc_names_the_file_over_the_walks, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_an_unread_process_takes_the_exit_walk_over_the_first_calls, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_a_refused_exit_walk_falls_back_to_the_first_calls_and_counts, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_naming_a_frame_past_a_refused_walks_map_counts_it, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_refused_walks_leave_no_map_and_count,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
