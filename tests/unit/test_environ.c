// SPDX-License-Identifier: GPL-2.0
/* A process's environment read from its memory (this very process): what it set since it
 * started, which /proc/PID/environ does not show; variables not asked for, or too long, left
 * out; a map with no C library refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/wait.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "symbols/environ.h"

static const char *const wanted[] = { "GM_TEST_LIST", "GM_TEST_LONG", "GM_TEST_UNSET", NULL };

/* Referred to here, so the linker copies it into this program (R_X86_64_COPY), where the C
 * library then keeps the environment, as in Debian's python3: read there. */
extern char **environ;

/* This process's variables of wanted, read as gpumem reads a traced process's: its error. */
static int read_self_err(char *buf, size_t cap, size_t *n)
{
	struct module_map mm;
	int err;

	assert_int_equal(module_map_read(getpid(), &mm), 0);
	err = environ_read_live(getpid(), &mm, wanted, buf, cap, n);
	module_map_free(&mm);
	return err;
}

/* The same, read whole: the bytes used. */
static size_t read_self(char *buf, size_t cap)
{
	size_t n = 0;

	assert_int_equal(read_self_err(buf, cap, &n), 0);
	return n;
}

/* Whether addr lies in a mapping of this program's own file. */
static bool in_program(uint64_t addr)
{
	char exe[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct module_map mm;
	bool in = false;

	assert_true(len > 0);
	exe[len] = 0;
	assert_int_equal(module_map_read(getpid(), &mm), 0);
	for (size_t i = 0; i < mm.count; i++)
		in = in || (addr >= mm.maps[i].start && addr < mm.maps[i].end &&
			    !strcmp(mm.maps[i].path, exe));
	module_map_free(&mm);
	return in;
}

/* Whether data (n bytes of "NAME=value" strings) holds string. */
static bool holds(const char *data, size_t n, const char *string)
{
	for (size_t at = 0; at < n; at += strlen(data + at) + 1)
		if (!strcmp(data + at, string))
			return true;
	return false;
}

static void test_a_variable_set_since_the_start_is_read(void **state)
{
	char buf[16384], start[65536];
	size_t n;
	FILE *f;

	(void)state;
	assert_int_equal(setenv("GM_TEST_LIST", "GPU-a,1", 1), 0);
	assert_string_equal(getenv("GM_TEST_LIST"), "GPU-a,1");
	assert_true(in_program((uint64_t)(uintptr_t)&environ));	/* the copy is read */
	n = read_self(buf, sizeof(buf));
	assert_true(holds(buf, n, "GM_TEST_LIST=GPU-a,1"));
	assert_int_equal(n, sizeof("GM_TEST_LIST=GPU-a,1"));	/* nothing not asked for */
	/* ... which the environment the process started with does not have */
	f = fopen("/proc/self/environ", "r");
	assert_non_null(f);
	n = fread(start, 1, sizeof(start), f);
	fclose(f);
	assert_false(holds(start, n, "GM_TEST_LIST=GPU-a,1"));
	/* changed again, and unset */
	assert_int_equal(setenv("GM_TEST_LIST", "0", 1), 0);
	n = read_self(buf, sizeof(buf));
	assert_true(holds(buf, n, "GM_TEST_LIST=0"));
	assert_int_equal(unsetenv("GM_TEST_LIST"), 0);
	assert_int_equal(read_self(buf, sizeof(buf)), 0);
}

/* A wanted variable not read whole is not known (-E2BIG), never taken for unset: CUDA would
 * use it, and the ordinals it maps. */
static void test_a_wanted_variable_too_long_or_past_the_room_is_not_known(void **state)
{
	char *value = malloc(ENVIRON_VALUE_MAX + 1), buf[64];
	size_t n;

	(void)state;
	assert_non_null(value);
	memset(value, '7', ENVIRON_VALUE_MAX);
	value[ENVIRON_VALUE_MAX] = 0;
	assert_int_equal(setenv("GM_TEST_LONG", value, 1), 0);
	assert_int_equal(setenv("GM_TEST_LIST", "1", 1), 0);
	assert_int_equal(read_self_err(buf, sizeof(buf), &n), -E2BIG);
	value[ENVIRON_VALUE_MAX - 100] = 0;	/* fits the bound, not buf */
	assert_int_equal(setenv("GM_TEST_LONG", value, 1), 0);
	assert_int_equal(read_self_err(buf, sizeof(buf), &n), -E2BIG);
	unsetenv("GM_TEST_LONG");
	n = read_self(buf, sizeof(buf));
	assert_int_equal(n, sizeof("GM_TEST_LIST=1"));
	assert_true(holds(buf, n, "GM_TEST_LIST=1"));
	unsetenv("GM_TEST_LIST");
	free(value);
}

/* Whether pid sleeps (state S in its stat), as sleep does once it has started. */
static bool asleep(pid_t pid)
{
	char path[64], stat[512] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(stat, sizeof(stat), f))
		stat[0] = 0;
	fclose(f);
	return strstr(stat, "(sleep) S ") != NULL;
}

/* sleep started with envp, read as gpumem reads it: environ_read_live's result, its
 * variables in buf. sleep has no copy of environ of its own: its C library's is read. */
static int read_sleep(char *const *envp, char *buf, size_t cap, size_t *n)
{
	char *const argv[] = { "sleep", "10", NULL };
	struct module_map mm = { 0 };
	int status, err = -ETIMEDOUT;
	pid_t child;

	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		execve("/bin/sleep", argv, envp);
		_exit(127);
	}
	for (int i = 0; i < 8000 && !asleep(child); i++)	/* exec'd and started */
		usleep(1000);
	if (asleep(child) && !module_map_read(child, &mm))
		err = environ_read_live(child, &mm, wanted, buf, cap, n);
	module_map_free(&mm);
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, &status, 0), child);
	return err;
}

/* sleep started with envp reads whole, as exactly the one variable expected. */
static void assert_sleep_reads_only(char *const *envp, const char *expected)
{
	char buf[64];
	size_t n = 0;

	assert_int_equal(read_sleep(envp, buf, sizeof(buf), &n), 0);
	assert_int_equal(n, strlen(expected) + 1);
	assert_string_equal(buf, expected);
}

static void test_a_program_without_a_copy_is_read_through_its_c_library(void **state)
{
	(void)state;
	assert_sleep_reads_only((char *const[]){ "GM_TEST_LIST=9", NULL }, "GM_TEST_LIST=9");
}

/* A name set twice (execve allows it): the first, as getenv takes it. */
static void test_of_a_name_set_twice_the_first_is_read(void **state)
{
	(void)state;
	assert_sleep_reads_only((char *const[]){ "GM_TEST_LIST=1", "GM_TEST_LIST=2", NULL },
				"GM_TEST_LIST=1");
}

/* Past ENVIRON_MAX_VARS variables the read is refused, not cut: gpumem then reads
 * /proc/PID/environ. */
static void test_an_environment_past_the_bound_is_refused(void **state)
{
	char **envp = calloc(ENVIRON_MAX_VARS + 2, sizeof(*envp)), buf[64];
	size_t n = 0;

	(void)state;
	assert_non_null(envp);
	for (int i = 0; i < ENVIRON_MAX_VARS; i++)
		envp[i] = "GM_TEST_OTHER=x";
	assert_int_equal(read_sleep(envp, buf, sizeof(buf), &n), 0);	/* at the bound: read */
	envp[ENVIRON_MAX_VARS] = "GM_TEST_OTHER=x";
	assert_int_equal(read_sleep(envp, buf, sizeof(buf), &n), -E2BIG);
	free(envp);
}

static void test_a_map_without_a_c_library_is_refused(void **state)
{
	struct mapping m = { .start = 0x400000, .end = 0x401000, .exec = true,
			     .path = "/usr/bin/true" };
	struct module_map mm = { &m, 1 };
	char buf[64];
	size_t n = 1;

	(void)state;
	assert_int_equal(environ_read_live(getpid(), &mm, wanted, buf, sizeof(buf), &n), -ENOENT);
	assert_int_equal(n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_variable_set_since_the_start_is_read),
		cmocka_unit_test(test_a_wanted_variable_too_long_or_past_the_room_is_not_known),
		cmocka_unit_test(test_a_program_without_a_copy_is_read_through_its_c_library),
		cmocka_unit_test(test_of_a_name_set_twice_the_first_is_read),
		cmocka_unit_test(test_an_environment_past_the_bound_is_refused),
		cmocka_unit_test(test_a_map_without_a_c_library_is_refused),
	};

	return cmocka_run_group_tests_name("environ", tests, NULL, NULL);
}
