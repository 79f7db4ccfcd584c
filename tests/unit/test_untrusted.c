// SPDX-License-Identifier: GPL-2.0
/* Files that traced processes control: a FIFO never blocks, only regular files open, never a
 * relative path, the wanted inode is checked on the descriptor, and a path inside another
 * process's root resolves its absolute symlinks and ".." inside that root. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/untrusted.h"

static char dir[] = "/tmp/gpumem-untrusted-XXXXXX";

static void path_in(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_fifo_is_refused_without_blocking(void **state)
{
	char fifo[256];

	(void)state;
	path_in(fifo, sizeof(fifo), "libcudart.so.13");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	alarm(5);	/* a blocking open would hang here: SIGALRM fails the test instead */
	assert_int_equal(open_untrusted(fifo, NULL), -EINVAL);
	alarm(0);
	unlink(fifo);
}

/* Whether fd (inotify, IN_OPEN) saw an open since it was last read. */
static bool opened_since(int fd)
{
	char events[4096];

	return read(fd, events, sizeof(events)) > 0;
}

/* What is not the wanted regular file is never opened: found by a lookup that opens nothing
 * (a device whose open has effects, a FIFO), checked, and only then opened for reading. */
static void test_nothing_is_opened_before_it_is_checked(void **state)
{
	char fifo[256], path[256];
	struct file_want want = { 0 };
	struct stat st;
	int in, fd;

	(void)state;
	path_in(fifo, sizeof(fifo), "libnvinfer.so.10");
	path_in(path, sizeof(path), "libnccl.so.2");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	write_file(path, "x");
	assert_int_equal(stat(path, &st), 0);
	in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	assert_true(in >= 0);
	assert_true(inotify_add_watch(in, fifo, IN_OPEN) >= 0);
	assert_true(inotify_add_watch(in, path, IN_OPEN) >= 0);
	assert_int_equal(open_untrusted(fifo, NULL), -EINVAL);
	assert_int_equal(open_in_root(getpid(), fifo, NULL), -EINVAL);
	want.ino = st.st_ino + 1;
	assert_int_equal(open_untrusted(path, &want), -ESTALE);
	assert_false(opened_since(in));
	want.ino = st.st_ino;	/* the wanted file is opened */
	fd = open_untrusted(path, &want);
	assert_true(fd >= 0);
	close(fd);
	assert_true(opened_since(in));
	close(in);
	unlink(fifo);
	unlink(path);
}

static void test_relative_paths_and_directories_are_refused(void **state)
{
	(void)state;
	assert_int_equal(open_untrusted("libc.so.6", NULL), -EINVAL);
	assert_int_equal(open_untrusted("", NULL), -EINVAL);
	assert_int_equal(open_untrusted(dir, NULL), -EINVAL);
	assert_int_equal(open_in_root(getpid(), "lib/x.so", NULL), -EINVAL);
}

static void test_a_file_is_opened_only_if_it_is_the_wanted_inode(void **state)
{
	char path[256];
	struct stat st;
	struct file_want want = { 0 };
	int fd;

	(void)state;
	path_in(path, sizeof(path), "lib.so");
	write_file(path, "x");
	assert_int_equal(stat(path, &st), 0);
	want.ino = st.st_ino + 1;
	assert_int_equal(open_untrusted(path, &want), -ESTALE);
	want.ino = st.st_ino;
	want.dev = st.st_dev + 1;
	want.check_dev = true;
	assert_int_equal(open_untrusted(path, &want), -ESTALE);
	want.dev = st.st_dev;
	fd = open_untrusted(path, &want);
	assert_true(fd >= 0);
	close(fd);
	unlink(path);
}

/* A child in a root of its own (chroot), as a container is. */
static pid_t start_chrooted(void)
{
	int ready[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (chroot(dir) || chdir("/"))
			_exit(1);
		c = 1;
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	return pid;
}

static void test_symlinks_in_a_root_resolve_inside_it(void **state)
{
	char path[256], lib[256], etc[256];
	struct stat inside, host;
	pid_t child;
	int fd;

	(void)state;
	if (geteuid() != 0) {
		print_message("skipped: chroot needs root\n");
		skip();
	}
	path_in(etc, sizeof(etc), "etc");
	mkdir(etc, 0755);
	path_in(path, sizeof(path), "etc/passwd");
	write_file(path, "the container's own\n");
	assert_int_equal(stat(path, &inside), 0);
	assert_int_equal(stat("/etc/passwd", &host), 0);
	path_in(lib, sizeof(lib), "lib");
	mkdir(lib, 0755);
	path_in(path, sizeof(path), "lib/libcudart.so.13");
	assert_int_equal(symlink("/etc/passwd", path), 0);	/* absolute: the host's, naively */
	path_in(path, sizeof(path), "lib/up.so");
	assert_int_equal(symlink("../../../../etc/passwd", path), 0);
	child = start_chrooted();
	fd = open_in_root(child, "/lib/libcudart.so.13", NULL);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &host), 0);
	assert_int_equal(host.st_ino, inside.st_ino);
	close(fd);
	fd = open_in_root(child, "/lib/up.so", NULL);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &host), 0);
	assert_int_equal(host.st_ino, inside.st_ino);
	close(fd);
	assert_int_equal(open_in_root(child, "/lib/none.so", NULL), -ENOENT);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	path_in(path, sizeof(path), "lib/libcudart.so.13");
	unlink(path);
	path_in(path, sizeof(path), "lib/up.so");
	unlink(path);
	rmdir(lib);
	path_in(path, sizeof(path), "etc/passwd");
	unlink(path);
	rmdir(etc);
}

static void test_beneath_a_directory_no_symlink_is_followed(void **state)
{
	char path[256], target[256];
	int dirfd, fd;

	(void)state;
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dirfd >= 0);
	path_in(path, sizeof(path), "b");
	assert_int_equal(mkdir(path, 0755), 0);
	path_in(path, sizeof(path), "b/config.json");
	write_file(path, "{}");
	fd = open_beneath(dirfd, "b/config.json", NULL);
	assert_true(fd >= 0);
	close(fd);
	/* a symlinked file, a symlinked directory on the way, a way out, a directory */
	path_in(path, sizeof(path), "b/link.json");
	assert_int_equal(symlink("config.json", path), 0);
	assert_int_equal(open_beneath(dirfd, "b/link.json", NULL), -ELOOP);
	path_in(target, sizeof(target), "b");
	path_in(path, sizeof(path), "c");
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(open_beneath(dirfd, "c/config.json", NULL), -ELOOP);
	assert_int_equal(open_beneath(dirfd, "../etc/passwd", NULL), -EXDEV);
	assert_int_equal(open_beneath(dirfd, "b", NULL), -EINVAL);
	assert_int_equal(open_beneath(dirfd, "/etc/passwd", NULL), -EINVAL);
	assert_int_equal(open_beneath(dirfd, "b/none.json", NULL), -ENOENT);
	unlink(path);
	path_in(path, sizeof(path), "b/link.json");
	unlink(path);
	path_in(path, sizeof(path), "b/config.json");
	unlink(path);
	path_in(path, sizeof(path), "b");
	rmdir(path);
	close(dirfd);
}

static void test_fd_path_names_the_descriptor(void **state)
{
	char buf[64];

	(void)state;
	fd_path(7, buf, sizeof(buf));
	assert_string_equal(buf, "/proc/self/fd/7");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_is_refused_without_blocking),
		cmocka_unit_test(test_nothing_is_opened_before_it_is_checked),
		cmocka_unit_test(test_relative_paths_and_directories_are_refused),
		cmocka_unit_test(test_a_file_is_opened_only_if_it_is_the_wanted_inode),
		cmocka_unit_test(test_symlinks_in_a_root_resolve_inside_it),
		cmocka_unit_test(test_beneath_a_directory_no_symlink_is_followed),
		cmocka_unit_test(test_fd_path_names_the_descriptor),
	};
	int rc;

	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return rc;
}
