// SPDX-License-Identifier: GPL-2.0
/* Symbolization throughput: frames per second over one real binary's functions, cold (a new
 * symbolizer: the file loaded, its debug info parsed) and warm (every answer cached).
 * `symbench [BINARY [ROUNDS]]`; BINARY defaults to build/gpumem. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "symbols/elf_syms.h"
#include "symbols/symbolize.h"

#define MAX_ADDRS 100000
#define MAP_START 0x100000ULL

struct addrs {
	uint64_t *at;
	size_t n;
};

/* One return address inside each function: as if it had called something midway. */
static int add_func(const char *name, uint64_t vaddr, uint64_t size, uint64_t file_off,
		    void *ctx)
{
	struct addrs *a = ctx;

	(void)name;
	(void)vaddr;
	if (size < 8 || a->n == MAX_ADDRS)
		return 0;
	a->at[a->n++] = MAP_START + file_off + size / 2;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Looks every address up once; returns the frames produced (inlined calls included). */
static size_t pass(struct symbolizer *s, const struct module_map *mm, const struct addrs *a,
		   size_t *with_line)
{
	struct frame f[SYM_MAX_INLINE];
	size_t frames = 0;

	*with_line = 0;
	for (size_t i = 0; i < a->n; i++) {
		int n = symbolize_frames(s, 0, mm, a->at[i], true, f, SYM_MAX_INLINE);

		if (n <= 0)
			continue;
		frames += n;
		if (f[n - 1].line)
			(*with_line)++;
	}
	return frames;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "build/gpumem";
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	double cold = 0, warm = 0, t;
	struct addrs a = { 0 };
	struct mapping m = { 0 };
	struct module_map mm = { &m, 1 };
	size_t frames = 0, with_line = 0;
	struct stat st;
	int err;

	if (rounds < 1 || stat(path, &st)) {
		fprintf(stderr, "usage: symbench [BINARY [ROUNDS]] (%s: %s)\n", path,
			strerror(errno));
		return 2;
	}
	a.at = calloc(MAX_ADDRS, sizeof(*a.at));
	err = a.at ? elf_for_each_func(path, add_func, &a) : -ENOMEM;
	if (err || a.n == 0) {
		fprintf(stderr, "symbench: no functions in %s (%s)\n", path, strerror(-err));
		return 1;
	}
	m.start = MAP_START;
	m.end = MAP_START + st.st_size + 0x1000;
	m.ino = st.st_ino;
	m.dev_major = major(st.st_dev);	/* the file is opened only where it is this one */
	m.dev_minor = minor(st.st_dev);
	m.exec = true;
	/* A mapping's path, as /proc/PID/maps gives it: absolute. */
	m.path = realpath(path, NULL);
	if (!m.path) {
		fprintf(stderr, "symbench: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (int r = 0; r < rounds; r++) {
		struct symbolizer *s = symbolizer_new();

		t = now_s();
		frames = pass(s, &mm, &a, &with_line);
		cold += now_s() - t;
		t = now_s();
		for (int w = 0; w < 10; w++)
			pass(s, &mm, &a, &with_line);
		warm += (now_s() - t) / 10;
		symbolizer_free(s);
	}
	cold /= rounds;
	warm /= rounds;
	printf("symbench: %s: %zu addresses -> %zu frames (%zu with file:line)\n", path, a.n,
	       frames, with_line);
	printf("symbench: cold (new symbolizer, file and DWARF loaded): %.0f frames/s "
	       "(%.1f ms per pass)\n", frames / cold, cold * 1e3);
	printf("symbench: warm (cached):                               %.0f frames/s "
	       "(%.2f ms per pass)\n", frames / warm, warm * 1e3);
	free(a.at);
	free(m.path);
	return 0;
}
