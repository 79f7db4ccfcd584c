// SPDX-License-Identifier: GPL-2.0
/* analysis/ on synthetic snapshots, with no BPF: growth fits and rates, leak verdicts and the
 * loop's step, the context of a failure, and the history letting go of ended processes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/analysis.h"

#define SEC 1000000000ull
#define KIB 1024ull
#define MIB (1024 * KIB)

/* A snapshot of one process with sites; each site's numbers set by the test. */
struct fake {
	struct snapshot snap;
	struct snap_proc proc[2];
	struct snap_site sites[2][4];
};

static void fake_init(struct fake *f, size_t nprocs, size_t nsites)
{
	memset(f, 0, sizeof(*f));
	f->snap.refs = 1;
	f->snap.procs = f->proc;
	f->snap.nprocs = nprocs;
	for (size_t i = 0; i < nprocs; i++) {
		f->proc[i].serial = 100 + i;
		f->proc[i].pid = 4000 + (int)i;
		f->proc[i].alive = true;
		f->proc[i].valid = SP_STATS | SP_COMM;
		f->proc[i].sites = f->sites[i];
		f->proc[i].nsites = nsites;
		for (size_t j = 0; j < nsites; j++)
			f->sites[i][j].stack_id = (int32_t)j + 1;
	}
}

/* Sets the time, and each process's totals from its sites. */
static void fake_at(struct fake *f, uint64_t t)
{
	f->snap.time_ns = t;
	for (size_t i = 0; i < f->snap.nprocs; i++) {
		struct snap_proc *p = &f->proc[i];

		p->end_ns = t;
		memset(&p->st, 0, sizeof(p->st));
		for (size_t j = 0; j < p->nsites; j++) {
			p->st.current_bytes += p->sites[j].st.current_bytes;
			p->st.alloc_count += p->sites[j].st.alloc_count;
			p->st.free_count += p->sites[j].st.free_count;
		}
	}
}

/* A site that allocates size once per step and frees nothing (steps 0..n-1, period_s). */
static void leak_step(struct snap_site *ss, uint64_t step, uint64_t size)
{
	ss->st.current_bytes = (step + 1) * size;
	ss->st.current_allocs = step + 1;
	ss->st.alloc_count = step + 1;
	ss->st.alloc_bytes_total = (step + 1) * size;
}

/* A site that allocates and frees k scratch buffers a step: flat. */
static void scratch_step(struct snap_site *ss, uint64_t step, uint64_t k, uint64_t size)
{
	ss->st.current_bytes = size;
	ss->st.current_allocs = 1;
	ss->st.alloc_count = (step + 1) * k;
	ss->st.free_count = (step + 1) * k - 1;
}

static void test_trend_of_a_line_is_its_slope_and_rates(void **state)
{
	struct history *h = history_new();
	struct fake f;
	struct hist_key k;
	struct trend t;

	(void)state;
	fake_init(&f, 1, 1);
	for (uint64_t i = 0; i < 20; i++) {
		leak_step(&f.sites[0][0], i, 4 * KIB);	/* +4 KiB and one allocation a second */
		fake_at(&f, (i + 1) * SEC);
		history_observe(h, &f.snap);
	}
	k = hist_key_site(&f.proc[0], &f.sites[0][0]);
	t = trend_of(h, &k, 20 * SEC, 5.0, 60.0);
	assert_true(fabs(t.growth_per_s - 4096.0) < 1e-6);
	assert_true(fabs(t.alloc_rate - 1.0) < 1e-9);
	assert_true(fabs(t.free_rate) < 1e-9);
	history_free(h);
}

static void test_leak_grows_per_step_scratch_is_steady(void **state)
{
	struct history *h = history_new();
	struct leak_report r;
	struct fake f;

	(void)state;
	fake_init(&f, 1, 2);
	/* A step every 0.5 s: the leak keeps 8 KiB a step, the scratch site allocates 3 a step. */
	for (uint64_t i = 0; i < 40; i++) {
		leak_step(&f.sites[0][0], i, 8 * KIB);
		scratch_step(&f.sites[0][1], i, 3, 64 * KIB);
		fake_at(&f, i * SEC / 2 + SEC);
		history_observe(h, &f.snap);
	}
	leaks_judge(&f.snap, h, &r);
	assert_int_equal(r.nprocs, 1);
	assert_int_equal(r.procs[0].growing, 1);
	assert_true(fabs(r.procs[0].step_rate - 2.0) < 0.05);	/* two steps a second */
	/* Suspects first: the leak, growing by 16 KiB/s, 8 KiB a step, a perfect fit. */
	assert_ptr_equal(r.procs[0].sites[0].ss, &f.sites[0][0]);
	assert_int_equal(r.procs[0].sites[0].verdict, LEAK_GROWING);
	assert_false(r.procs[0].sites[0].lifetime);
	assert_true(fabs(r.procs[0].sites[0].rate - 16384.0) < 1.0);
	assert_true(fabs(r.procs[0].sites[0].per_step - 8192.0) < 200.0);
	assert_true(r.procs[0].sites[0].fit.r2 > 0.999);
	assert_int_equal(r.procs[0].sites[1].verdict, LEAK_STEADY);
	leak_report_free(&r);
	history_free(h);
}

static void test_a_segment_taken_every_16_steps_does_not_set_the_step(void **state)
{
	struct history *h = history_new();
	struct leak_report r;
	struct fake f;

	(void)state;
	fake_init(&f, 1, 3);
	/* Ten steps a second: 512 B kept and a scratch buffer a step, and a 4 MiB segment
	 * taken every 16 steps (its own clock, 16 times slower). */
	for (uint64_t i = 0; i < 100; i++) {
		leak_step(&f.sites[0][0], i, 512);
		scratch_step(&f.sites[0][1], i, 1, 8 * KIB);
		leak_step(&f.sites[0][2], i / 16, 4 * MIB);
		fake_at(&f, i * SEC / 10 + SEC);
		history_observe(h, &f.snap);
	}
	leaks_judge(&f.snap, h, &r);
	assert_true(fabs(r.procs[0].step_rate - 10.0) < 0.5);
	for (size_t i = 0; i < r.procs[0].nsites; i++) {
		const struct site_verdict *sv = &r.procs[0].sites[i];

		if (sv->ss == &f.sites[0][0])	/* its own growth a step: 512 B, not 16 x that */
			assert_true(fabs(sv->per_step - 512.0) < 30.0);
	}
	leak_report_free(&r);
	history_free(h);

	/* A layer's scratch 6 times a step (a loop over 6 layers) and a leak once a step: the
	 * leak is no rare site, the step is its. */
	h = history_new();
	fake_init(&f, 1, 2);
	for (uint64_t i = 0; i < 100; i++) {
		leak_step(&f.sites[0][0], i, 512);
		scratch_step(&f.sites[0][1], i, 6, 8 * KIB);
		fake_at(&f, i * SEC / 10 + SEC);
		history_observe(h, &f.snap);
	}
	leaks_judge(&f.snap, h, &r);
	assert_true(fabs(r.procs[0].step_rate - 10.0) < 0.5);
	leak_report_free(&r);
	history_free(h);
}

static void test_site_that_freed_everything_is_freed(void **state)
{
	struct history *h = history_new();
	struct leak_report r;
	struct fake f;

	(void)state;
	fake_init(&f, 1, 1);
	for (uint64_t i = 0; i < 10; i++) {
		f.sites[0][0].st.alloc_count = i + 1;
		f.sites[0][0].st.free_count = i + 1;
		fake_at(&f, (i + 1) * SEC);
		history_observe(h, &f.snap);
	}
	leaks_judge(&f.snap, h, &r);
	assert_int_equal(r.procs[0].sites[0].verdict, LEAK_FREED);
	assert_int_equal(r.procs[0].growing, 0);
	leak_report_free(&r);
	history_free(h);
}

static void test_short_run_is_judged_on_lifetime_totals(void **state)
{
	struct history *h = history_new();
	struct leak_report r;
	struct fake f;

	(void)state;
	fake_init(&f, 1, 1);
	leak_step(&f.sites[0][0], 4, KIB);	/* 5 allocations of 1 KiB, none freed, in 2 s */
	f.proc[0].st.first_seen_ns = SEC;
	fake_at(&f, 3 * SEC);
	f.proc[0].st.first_seen_ns = SEC;
	history_observe(h, &f.snap);
	leaks_judge(&f.snap, h, &r);
	assert_true(r.procs[0].sites[0].lifetime);
	assert_int_equal(r.procs[0].sites[0].verdict, LEAK_GROWING);
	assert_true(fabs(r.procs[0].sites[0].rate - 2560.0) < 1e-6);	/* 5 KiB in 2 s */
	leak_report_free(&r);
	history_free(h);
}

static void test_step_rate_is_the_common_frequency_of_recurring_sites(void **state)
{
	const double rates[] = { 10.0, 20.0, 30.3 };
	const double none[] = { 0.0, 0.0 };

	(void)state;
	assert_true(fabs(history_step_rate(rates, 3) - 10.0) < 1e-9);
	assert_true(history_step_rate(none, 2) == 0.0);
}

static void test_oom_context_lists_largest_holders_first(void **state)
{
	struct oom_context c;
	struct fake f;

	(void)state;
	fake_init(&f, 2, 4);
	f.sites[1][0].st.current_bytes = 1 * KIB;
	f.sites[1][1].st.current_bytes = 0;	/* holds nothing: not listed */
	f.sites[1][2].st.current_bytes = 9 * KIB;
	f.sites[1][3].st.current_bytes = 3 * KIB;
	fake_at(&f, SEC);
	oom_context_of(&f.snap, f.proc[1].pid, 0, &c);
	assert_ptr_equal(c.p, &f.proc[1]);
	assert_int_equal(c.ntop, 3);
	assert_ptr_equal(c.top[0], &f.sites[1][2]);
	assert_ptr_equal(c.top[1], &f.sites[1][3]);
	assert_ptr_equal(c.top[2], &f.sites[1][0]);
	oom_context_of(&f.snap, 12345, 0, &c);	/* not in the snapshot */
	assert_null(c.p);
	assert_int_equal(c.ntop, 0);
}

static void test_oom_context_takes_the_sites_of_the_device_that_failed(void **state)
{
	struct oom_context c;
	struct fake f;

	(void)state;
	fake_init(&f, 1, 3);
	f.sites[0][0].st.current_bytes = 9 * KIB;	/* GPU 0: not where it ran out */
	f.sites[0][0].gpu = 1;
	f.sites[0][1].st.current_bytes = 1 * KIB;
	f.sites[0][1].gpu = 2;
	f.sites[0][2].st.current_bytes = 3 * KIB;
	f.sites[0][2].gpu = 2;
	fake_at(&f, SEC);
	oom_context_of(&f.snap, f.proc[0].pid, 2, &c);	/* failed on GPU 1 */
	assert_int_equal(c.ntop, 2);
	assert_ptr_equal(c.top[0], &f.sites[0][2]);
	assert_ptr_equal(c.top[1], &f.sites[0][1]);
	oom_context_of(&f.snap, f.proc[0].pid, 0, &c);	/* its device not known: every site */
	assert_int_equal(c.ntop, 3);
	assert_ptr_equal(c.top[0], &f.sites[0][0]);
}

static void test_history_forgets_a_process_that_left_the_snapshots(void **state)
{
	struct history *h = history_new();
	struct fake f;

	(void)state;
	fake_init(&f, 2, 2);
	fake_at(&f, SEC);
	history_observe(h, &f.snap);
	assert_int_equal(history_count(h), 6);	/* per process: its totals and two sites */
	f.snap.nprocs = 1;			/* the second one was let go */
	fake_at(&f, 2 * SEC);
	history_observe(h, &f.snap);
	assert_int_equal(history_count(h), 3);
	f.proc[0].serial = 999;		/* the pid's new owner: another process, another series */
	fake_at(&f, 3 * SEC);
	history_observe(h, &f.snap);
	assert_int_equal(history_count(h), 3);
	assert_non_null(history_find(h, &(struct hist_key){ .serial = 999,
							      .stack_id = HIST_PROCESS }));
	history_free(h);
}

/* A process on one device growing 1 MiB a step at 10 steps a second, beside a site that
 * shrinks: the forecast takes the net growth of the sites whose fit is good. */
static void test_the_oom_forecast_is_free_memory_over_the_net_growth(void **state)
{
	struct snap_site ss[3] = {
		{ .kind = GM_KIND_DEVICE, .gpu = 1, .st = { .current_bytes = 64 << 20 } },
		{ .kind = GM_KIND_DEVICE, .gpu = 1, .st = { .current_bytes = 8 << 20 } },
		{ .kind = GM_KIND_DEVICE, .gpu = 1, .st = { .current_bytes = 1 << 20 } },
	};
	struct snap_proc p = { .alive = true, .sites = ss, .nsites = 3 };
	struct site_verdict sv[3] = {
		{ .ss = &ss[0], .verdict = LEAK_GROWING, .fit = { .slope = 12 << 20, .r2 = 0.99 } },
		{ .ss = &ss[1], .verdict = LEAK_STEADY, .fit = { .slope = -(2 << 20), .r2 = 0.95 } },
		/* a poor fit counts for nothing */
		{ .ss = &ss[2], .verdict = LEAK_STEADY, .fit = { .slope = 50 << 20, .r2 = 0.3 } },
	};
	struct proc_verdict pv = { .p = &p, .sites = sv, .nsites = 3, .step_rate = 10 };
	struct snapshot snap = { .devices_valid = true, .ndevices = 1,
				 .devices = { { .index = 0, .total = 1ull << 30,
						.free = 500ull << 20 } } };
	struct snap_forecast f;

	(void)state;
	oom_forecast_of(&snap, &pv, &f);
	assert_true(f.valid);
	assert_int_equal(f.gpu, 0);
	assert_int_equal(f.device_free, 500ull << 20);
	assert_true(fabs(f.growth_per_s - (10 << 20)) < 1);
	assert_true(fabs(f.growth_per_step - (1 << 20)) < 1);
	assert_true(fabs(f.steps - 500) < 1e-6 && fabs(f.seconds - 50) < 1e-6);
	/* no step: seconds only */
	pv.step_rate = 0;
	oom_forecast_of(&snap, &pv, &f);
	assert_true(f.valid && isnan(f.steps) && isnan(f.growth_per_step));
	/* nothing grows on a good fit, the free memory is unknown, or the process ended: none */
	sv[0].fit.r2 = 0.5;
	oom_forecast_of(&snap, &pv, &f);
	assert_false(f.valid);
	sv[0].fit.r2 = 0.99;
	sv[0].lifetime = true;
	oom_forecast_of(&snap, &pv, &f);
	assert_false(f.valid);
	sv[0].lifetime = false;
	snap.devices_valid = false;
	oom_forecast_of(&snap, &pv, &f);
	assert_false(f.valid);
	snap.devices_valid = true;
	p.alive = false;
	oom_forecast_of(&snap, &pv, &f);
	assert_false(f.valid);
	/* growth that shrinking sites outweigh is no way to an out-of-memory */
	p.alive = true;
	sv[1].fit.slope = -(13 << 20);
	oom_forecast_of(&snap, &pv, &f);
	assert_false(f.valid);
}

/* gpumem's share of a process's CPU: hits x a hit's cost over its CPU time, at most the whole
 * (an estimate a few percent past it, for a process of little but probed calls, was shown as
 * 101.6%). */
static void test_gpumems_share_of_a_process_is_its_estimate_at_most_the_whole(void **state)
{
	struct snapshot snap = { .trap_known = true, .trap_ns = 700, .bpf_run_known = true,
				 .bpf_run_ns = 300 };
	struct snap_proc p = { .valid = SP_HITS | SP_CPU, .cpu_ns = 4000000 };
	struct proc_cost c;

	(void)state;
	p.st.probe_hits = 1000;		/* 1 ms of 4 */
	proc_cost_of(&snap, &p, &c);
	assert_true(c.hits_known && c.seconds_known && c.share_known);
	assert_true(fabs(c.seconds - 0.001) < 1e-12 && fabs(c.share - 0.25) < 1e-12);
	p.st.probe_hits = 4100;		/* 4.1 ms of 4: the seconds as estimated, the share whole */
	proc_cost_of(&snap, &p, &c);
	assert_true(fabs(c.seconds - 0.0041) < 1e-12 && c.share == 1.0);
	p.valid = SP_HITS;		/* no CPU time read: no share */
	proc_cost_of(&snap, &p, &c);
	assert_true(c.seconds_known && !c.share_known);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trend_of_a_line_is_its_slope_and_rates),
		cmocka_unit_test(test_leak_grows_per_step_scratch_is_steady),
		cmocka_unit_test(test_a_segment_taken_every_16_steps_does_not_set_the_step),
		cmocka_unit_test(test_site_that_freed_everything_is_freed),
		cmocka_unit_test(test_short_run_is_judged_on_lifetime_totals),
		cmocka_unit_test(test_step_rate_is_the_common_frequency_of_recurring_sites),
		cmocka_unit_test(test_oom_context_lists_largest_holders_first),
		cmocka_unit_test(test_oom_context_takes_the_sites_of_the_device_that_failed),
		cmocka_unit_test(test_history_forgets_a_process_that_left_the_snapshots),
		cmocka_unit_test(test_the_oom_forecast_is_free_memory_over_the_net_growth),
		cmocka_unit_test(test_gpumems_share_of_a_process_is_its_estimate_at_most_the_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
