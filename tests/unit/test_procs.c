// SPDX-License-Identifier: GPL-2.0
/* /proc parsing from fixture text: maps (spaces, deleted, anonymous, sorted lookup), stat
 * with ") " inside comm, cgroup v2 and hybrid, cmdline joining; and the live readers on
 * this process and a child (start times in ns since boot against /proc's clock ticks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/procs.h"

static const char maps_fixture[] =
	"7f0000200000-7f0000300000 r-xp 00001000 fd:01 1234          /opt/My Models/lib cuda.so\n"
	"55d000000000-55d000001000 r--p 00000000 08:02 99          /usr/bin/python3.11\n"
	"55d000001000-55d000005000 r-xp 00001000 08:02 99          /usr/bin/python3.11\n"
	"55d000800000-55d000900000 rw-p 00000000 00:00 0          [heap]\n"
	"7f0000100000-7f0000180000 rw-p 00000000 00:00 0 \n"
	"7f0000400000-7f0000500000 r-xp 00002000 00:1a 777          /tmp/libold.so (deleted)\n"
	"7f0000600000-7f0000601000 rw-s 00000000 00:01 4242          /memfd:cuda-ipc (deleted)\n"
	"7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0          [stack]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0          [vsyscall]\n";

static void parse_fixture(struct module_map *mm, const char *text)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	assert_non_null(f);
	assert_int_equal(module_map_parse(f, mm), 0);
	fclose(f);
}

static void test_maps_keeps_only_file_backed_sorted(void **state)
{
	struct module_map mm;
	size_t i;

	(void)state;
	parse_fixture(&mm, maps_fixture);
	assert_int_equal(mm.count, 5);
	for (i = 1; i < mm.count; i++)
		assert_true(mm.maps[i - 1].start < mm.maps[i].start);
	assert_string_equal(mm.maps[0].path, "/usr/bin/python3.11");
	assert_false(mm.maps[0].exec);
	assert_true(mm.maps[1].exec);
	assert_int_equal(mm.maps[1].pgoff, 0x1000);
	assert_int_equal(mm.maps[1].dev_major, 8);
	assert_int_equal(mm.maps[1].dev_minor, 2);
	assert_int_equal(mm.maps[1].ino, 99);
	module_map_free(&mm);
	assert_null(mm.maps);
	assert_int_equal(mm.count, 0);
}

static void test_maps_path_with_spaces_kept_whole(void **state)
{
	const struct mapping *m;
	struct module_map mm;

	(void)state;
	parse_fixture(&mm, maps_fixture);
	m = module_map_find(&mm, 0x7f0000200000ULL);
	assert_non_null(m);
	assert_string_equal(m->path, "/opt/My Models/lib cuda.so");
	assert_int_equal(m->dev_major, 0xfd);
	assert_int_equal(m->dev_minor, 1);
	assert_int_equal(m->ino, 1234);
	assert_true(m->exec);
	assert_false(m->deleted);
	module_map_free(&mm);
}

/* The kernel's one escape in a maps path, a newline as \012: the path as the file has it. */
static void test_maps_newline_escape_is_the_newline(void **state)
{
	static const char text[] =
		"7f0000200000-7f0000300000 r-xp 00001000 fd:01 77 /tmp/a\\012b/lib\\012.so\n"
		"7f0000400000-7f0000500000 r-xp 00001000 fd:01 78 /tmp/x\\012 (deleted)\n";
	struct module_map mm;

	(void)state;
	parse_fixture(&mm, text);
	assert_int_equal(mm.count, 2);
	assert_string_equal(module_map_find(&mm, 0x7f0000200000ULL)->path, "/tmp/a\nb/lib\n.so");
	assert_string_equal(module_map_find(&mm, 0x7f0000400000ULL)->path, "/tmp/x\n");
	assert_true(module_map_find(&mm, 0x7f0000400000ULL)->deleted);
	module_map_free(&mm);
}

static void test_maps_deleted_suffix_sets_flag_and_is_stripped(void **state)
{
	const struct mapping *m;
	struct module_map mm;

	(void)state;
	parse_fixture(&mm, maps_fixture);
	m = module_map_find(&mm, 0x7f0000400123ULL);
	assert_non_null(m);
	assert_string_equal(m->path, "/tmp/libold.so");
	assert_true(m->deleted);
	assert_int_equal(m->pgoff, 0x2000);
	m = module_map_find(&mm, 0x7f0000600000ULL);
	assert_non_null(m);
	assert_string_equal(m->path, "/memfd:cuda-ipc");
	assert_true(m->deleted);
	assert_false(m->exec);
	module_map_free(&mm);
}

static void test_maps_find_uses_half_open_ranges(void **state)
{
	struct module_map mm;

	(void)state;
	parse_fixture(&mm, maps_fixture);
	assert_ptr_equal(module_map_find(&mm, 0x55d000000000ULL), &mm.maps[0]);
	assert_ptr_equal(module_map_find(&mm, 0x55d000000fffULL), &mm.maps[0]);
	assert_ptr_equal(module_map_find(&mm, 0x55d000001000ULL), &mm.maps[1]);
	assert_ptr_equal(module_map_find(&mm, 0x55d000004fffULL), &mm.maps[1]);
	assert_null(module_map_find(&mm, 0x55d000005000ULL));	/* gap */
	assert_null(module_map_find(&mm, 0x55d000800010ULL));	/* heap: anonymous */
	assert_null(module_map_find(&mm, 0x1000));		/* below all */
	assert_null(module_map_find(&mm, 0x7ffc00000100ULL));	/* stack */
	assert_null(module_map_find(&mm, UINT64_MAX));		/* above all */
	module_map_free(&mm);
}

static void test_maps_find_on_empty_map_is_null(void **state)
{
	struct module_map mm;

	(void)state;
	parse_fixture(&mm, "");
	assert_int_equal(mm.count, 0);
	assert_null(module_map_find(&mm, 0x1000));
	module_map_free(&mm);
}

static void test_maps_malformed_line_is_an_error(void **state)
{
	static const char bad[] = "55d000000000-55d000001000 r--p zz\n";
	struct module_map mm;
	FILE *f;

	(void)state;
	f = fmemopen((void *)bad, strlen(bad), "r");
	assert_non_null(f);
	assert_int_equal(module_map_parse(f, &mm), -EINVAL);
	assert_null(mm.maps);
	assert_int_equal(mm.count, 0);
	fclose(f);
}

static void test_maps_read_self_finds_own_code(void **state)
{
	const struct mapping *m;
	struct module_map mm;

	(void)state;
	assert_int_equal(module_map_read(getpid(), &mm), 0);
	m = module_map_find(&mm, (uint64_t)(uintptr_t)&test_maps_read_self_finds_own_code);
	assert_non_null(m);
	assert_true(m->exec);
	assert_non_null(strstr(m->path, "test_procs"));
	module_map_free(&mm);
	assert_int_equal(module_map_read(-1, &mm), -EINVAL);
}

static void test_stat_start_time_with_paren_space_in_comm(void **state)
{
	/* comm "a) b (c) 1 2" tries to fake the field layout */
	static const char stat[] =
		"1234 (a) b (c) 1 2) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 3 0 "
		"987654321 12345678 1000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0\n";
	uint64_t ticks = 0;

	(void)state;
	assert_int_equal(proc_parse_stat_start_time(stat, &ticks), 0);
	assert_int_equal(ticks, 987654321ULL);
}

static void test_stat_start_time_plain_and_truncated(void **state)
{
	static const char plain[] = "1 (systemd) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42";
	static const char short_stat[] = "1 (systemd) S 0 1 1 0 -1";
	static const char no_paren[] = "1 systemd S 0 1";
	uint64_t ticks = 0;

	(void)state;
	assert_int_equal(proc_parse_stat_start_time(plain, &ticks), 0);
	assert_int_equal(ticks, 42);
	assert_int_equal(proc_parse_stat_start_time(short_stat, &ticks), -EINVAL);
	assert_int_equal(proc_parse_stat_start_time(no_paren, &ticks), -EINVAL);
}

static void test_stat_ending_by_state_and_exiting_flag(void **state)
{
	/* flags 4194560 (0x400100) and 4194564, the same with PF_EXITING (0x4); the live one's
	 * command, "a) Z", fakes a zombie's state: the state follows the last ')' */
	static const char live[] = "1 (a) Z) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42";
	static const char exiting[] = "1 (a) S 0 1 1 0 -1 4194564 1 2 3 4 5 6 7 8 20 0 1 0 42";
	static const char zombie[] = "1 (a) Z 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42";
	static const char dead[] = "1 (a) X 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42";
	static const char short_stat[] = "1 (a) S 0 1 1 0 -1";
	static const char no_state[] = "1 (a)";

	(void)state;
	assert_int_equal(proc_parse_stat_ending(live), 0);
	assert_int_equal(proc_parse_stat_ending(exiting), 1);
	assert_int_equal(proc_parse_stat_ending(zombie), 1);
	assert_int_equal(proc_parse_stat_ending(dead), 1);
	assert_int_equal(proc_parse_stat_ending(short_stat), -EINVAL);
	assert_int_equal(proc_parse_stat_ending(no_state), -EINVAL);
}

/* A zombie's maps read as none, and as an error, not as an empty map of a live process; a
 * reaped one's as gone. */
static void test_maps_read_of_an_ended_process_is_esrch(void **state)
{
	struct module_map mm;
	char path[64], stat[1024] = "";
	int status;
	pid_t child;
	FILE *f;

	(void)state;
	child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	/* not reaped yet: a zombie once its exit is done */
	for (int i = 0; i < 1000 && module_map_read(child, &mm) == 0; i++) {
		module_map_free(&mm);
		usleep(1000);
	}
	assert_int_equal(module_map_read(child, &mm), -ESRCH);	/* exiting, or a zombie */
	assert_null(mm.maps);
	assert_int_equal(mm.count, 0);
	/* A zombie (its exit done) within a second: the read of one is refused too. */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)child);
	for (int i = 0; i < 1000 && !strstr(stat, ") Z "); i++) {
		f = fopen(path, "r");
		assert_non_null(f);
		assert_non_null(fgets(stat, sizeof(stat), f));
		fclose(f);
		if (!strstr(stat, ") Z "))
			usleep(1000);
	}
	assert_non_null(strstr(stat, ") Z "));
	assert_int_equal(module_map_read(child, &mm), -ESRCH);
	assert_int_equal(proc_parse_stat_ending(stat), 1);
	assert_true(proc_is_ending(child));
	assert_false(proc_is_ending(getpid()));
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_int_equal(module_map_read(child, &mm), -ENOENT);
	assert_true(proc_is_ending(child));
}

static void test_stat_start_time_of_self_is_stable(void **state)
{
	uint64_t a = 0, b = 0;

	(void)state;
	assert_int_equal(proc_start_time(getpid(), &a), 0);
	assert_int_equal(proc_start_time(getpid(), &b), 0);
	assert_true(a > 0);
	assert_int_equal(a, b);
}

static uint64_t tick_ns(void)
{
	return 1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK);
}

static uint64_t boottime_ns(void)
{
	struct timespec ts;

	assert_int_equal(clock_gettime(CLOCK_BOOTTIME, &ts), 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Within one tick of /proc's start time either way, and not two ticks off. */
static void test_start_matches_own_start_within_one_tick(void **state)
{
	uint64_t ticks, t = tick_ns();

	(void)state;
	assert_int_equal(proc_start_time(getpid(), &ticks), 0);
	assert_true(ticks >= 2);
	assert_true(proc_start_matches(getpid(), ticks * t));
	assert_true(proc_start_matches(getpid(), ticks * t + t / 2));
	assert_true(proc_start_matches(getpid(), (ticks + 1) * t + t - 1));
	assert_true(proc_start_matches(getpid(), (ticks - 1) * t));
	assert_false(proc_start_matches(getpid(), (ticks + 2) * t));
	assert_false(proc_start_matches(getpid(), (ticks - 2) * t + t - 1));
	assert_false(proc_start_matches(getpid(), 0));
}

/* A child's start, in the kernel's ns since boot, lies between CLOCK_BOOTTIME before and after
 * the fork; once the child is gone its pid matches nothing. */
static void test_start_matches_a_child_until_it_is_gone(void **state)
{
	uint64_t before, after, ticks, t = tick_ns();
	int go[2], status;
	pid_t child;
	char c;

	(void)state;
	assert_int_equal(pipe(go), 0);
	before = boottime_ns();
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(go[1]);
		_exit(read(go[0], &c, 1) == 1 ? 0 : 1);
	}
	after = boottime_ns();
	close(go[0]);
	assert_int_equal(proc_start_time(child, &ticks), 0);
	assert_true(before / t <= ticks && ticks <= after / t);
	assert_true(proc_start_matches(child, ticks * t));
	assert_true(proc_start_matches(child, after));
	assert_false(proc_start_matches(child, after + 3 * t));
	assert_int_equal(write(go[1], "g", 1), 1);
	close(go[1]);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_false(proc_start_matches(child, ticks * t));
	assert_false(proc_start_matches(-1, ticks * t));
}

static void test_cgroup_v2_only(void **state)
{
	char buf[256];

	(void)state;
	assert_int_equal(proc_parse_cgroup("0::/kubepods.slice/pod1/cri-containerd-ab.scope\n",
					   buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/kubepods.slice/pod1/cri-containerd-ab.scope");
	assert_int_equal(proc_parse_cgroup("0::/\n", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/");
}

static void test_cgroup_hybrid_picks_v2_line(void **state)
{
	static const char hybrid[] =
		"12:cpuset:/docker/abc\n"
		"11:memory:/docker/abc\n"
		"1:name=systemd:/docker/abc\n"
		"0::/system.slice/docker-abc.scope\n";
	char buf[256];

	(void)state;
	assert_int_equal(proc_parse_cgroup(hybrid, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/system.slice/docker-abc.scope");
}

static void test_cgroup_v1_only_is_enoent(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(proc_parse_cgroup("4:memory:/user.slice\n10::/odd\n", buf, sizeof(buf)),
			 -ENOENT);
	assert_string_equal(buf, "");
	assert_int_equal(proc_parse_cgroup("", buf, sizeof(buf)), -ENOENT);
}

static void test_cgroup_too_long_is_enametoolong(void **state)
{
	char buf[8];

	(void)state;
	assert_int_equal(proc_parse_cgroup("0::/abcdefghij\n", buf, sizeof(buf)), -ENAMETOOLONG);
	assert_string_equal(buf, "/abcdef");
}

static void test_cgroup_of_self_reads(void **state)
{
	char buf[4096];
	int err;

	(void)state;
	err = proc_read_cgroup(getpid(), buf, sizeof(buf));
	/* v1-only hosts have no v2 line */
	assert_true(err == 0 || err == -ENOENT);
	if (err == 0)
		assert_int_equal(buf[0], '/');
}

static void test_cmdline_args_joined_by_space(void **state)
{
	static const char raw[] = "python3\0train.py\0--lr\0" "0.1\0";
	char buf[64];

	(void)state;
	assert_int_equal(proc_parse_cmdline(raw, sizeof(raw) - 1, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "python3 train.py --lr 0.1");
}

static void test_cmdline_truncated_and_empty(void **state)
{
	static const char raw[] = "python3\0train.py\0";
	char buf[9];

	(void)state;
	assert_int_equal(proc_parse_cmdline(raw, sizeof(raw) - 1, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "python3");	/* cut at the separator: no trailing space */
	assert_int_equal(proc_parse_cmdline(raw, sizeof(raw) - 1, buf, 5), 0);
	assert_string_equal(buf, "pyth");
	assert_int_equal(proc_parse_cmdline("", 0, buf, sizeof(buf)), 0);	/* kernel thread */
	assert_string_equal(buf, "");
	assert_int_equal(proc_parse_cmdline(raw, sizeof(raw) - 1, buf, 0), -EINVAL);
}

static void test_cmdline_setproctitle_padding_dropped(void **state)
{
	static const char raw[] = "worker: idle\0\0\0\0";
	char buf[64];

	(void)state;
	assert_int_equal(proc_parse_cmdline(raw, sizeof(raw) - 1, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "worker: idle");
}

static void test_comm_and_cmdline_of_self(void **state)
{
	char buf[256];

	(void)state;
	assert_int_equal(prctl(PR_SET_NAME, "gm unit\ttest"), 0);
	assert_int_equal(proc_read_comm(getpid(), buf, sizeof(buf)), 0);
	assert_string_equal(buf, "gm unit\ttest");
	assert_int_equal(proc_read_cmdline(getpid(), buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "test_procs"));
	assert_int_equal(proc_read_comm(0, buf, sizeof(buf)), -EINVAL);
}

/* Several entries of one read of this process's vector, as the C library has them; one it
 * does not have is 0 and makes the whole -ENOENT, the others still read. */
static void test_auxv_values_of_self(void **state)
{
	const uint64_t types[] = { AT_RANDOM, AT_ENTRY }, with_missing[] = { AT_PAGESZ, 0xfff0 };
	uint64_t v[2] = { 1, 1 };

	(void)state;
	assert_int_equal(proc_auxv_values(getpid(), types, v, 2), 0);
	assert_int_equal(v[0], getauxval(AT_RANDOM));
	assert_int_equal(v[1], getauxval(AT_ENTRY));
	assert_int_equal(proc_auxv_values(getpid(), with_missing, v, 2), -ENOENT);
	assert_int_equal(v[0], getauxval(AT_PAGESZ));
	assert_int_equal(v[1], 0);
	v[0] = 1;
	assert_int_equal(proc_auxv_values(-1, types, v, 1), -EINVAL);
	assert_int_equal(v[0], 0);
}

static void test_proc_exists(void **state)
{
	(void)state;
	assert_true(proc_exists(getpid()));
	assert_true(proc_exists(1));
	assert_false(proc_exists(0));
	assert_false(proc_exists(-5));
	assert_false(proc_exists(0x3fffffff));	/* above pid_max's ceiling */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_maps_keeps_only_file_backed_sorted),
		cmocka_unit_test(test_maps_path_with_spaces_kept_whole),
		cmocka_unit_test(test_maps_newline_escape_is_the_newline),
		cmocka_unit_test(test_maps_deleted_suffix_sets_flag_and_is_stripped),
		cmocka_unit_test(test_maps_find_uses_half_open_ranges),
		cmocka_unit_test(test_maps_find_on_empty_map_is_null),
		cmocka_unit_test(test_maps_malformed_line_is_an_error),
		cmocka_unit_test(test_maps_read_self_finds_own_code),
		cmocka_unit_test(test_stat_start_time_with_paren_space_in_comm),
		cmocka_unit_test(test_stat_start_time_plain_and_truncated),
		cmocka_unit_test(test_stat_start_time_of_self_is_stable),
		cmocka_unit_test(test_stat_ending_by_state_and_exiting_flag),
		cmocka_unit_test(test_maps_read_of_an_ended_process_is_esrch),
		cmocka_unit_test(test_start_matches_own_start_within_one_tick),
		cmocka_unit_test(test_start_matches_a_child_until_it_is_gone),
		cmocka_unit_test(test_cgroup_v2_only),
		cmocka_unit_test(test_cgroup_hybrid_picks_v2_line),
		cmocka_unit_test(test_cgroup_v1_only_is_enoent),
		cmocka_unit_test(test_cgroup_too_long_is_enametoolong),
		cmocka_unit_test(test_cgroup_of_self_reads),
		cmocka_unit_test(test_cmdline_args_joined_by_space),
		cmocka_unit_test(test_cmdline_truncated_and_empty),
		cmocka_unit_test(test_cmdline_setproctitle_padding_dropped),
		cmocka_unit_test(test_comm_and_cmdline_of_self),
		cmocka_unit_test(test_auxv_values_of_self),
		cmocka_unit_test(test_proc_exists),
	};

	return cmocka_run_group_tests_name("procs", tests, NULL, NULL);
}
