/* The agent benchmark's workload (bench/serve.sh): N cudaMalloc calls through the mock runtime,
 * spread round-robin over SITES call sites (1 to 10, each a function of its own, so that each is
 * a site series of its own in the metrics), all held until a line arrives on stdin (or its end).
 * Prints "holding N" once every allocation is made. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "mock_cuda.h"

#define MAX_SITES 10

/* Each site in a frame of its own, under a name of its own: a stack of its own. */
#define SITE(n)                                                                    \
	static __attribute__((noinline)) int hold_site_##n(size_t size)           \
	{                                                                          \
		void *ptr = NULL;                                                  \
		int rc = cudaMalloc(&ptr, size);                                   \
		__asm__ volatile("" ::: "memory"); /* no tail call: a frame */     \
		return rc;                                                         \
	}
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7) SITE(8) SITE(9)

static int (*const sites[MAX_SITES])(size_t) = {
	hold_site_0, hold_site_1, hold_site_2, hold_site_3, hold_site_4,
	hold_site_5, hold_site_6, hold_site_7, hold_site_8, hold_site_9,
};

static int parse_ulong(const char *text, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(text, &end, 0);
	return errno || !*text || *end || !*out ? -1 : 0;
}

int main(int argc, char **argv)
{
	unsigned long n, nsites, size;
	int c;

	if (argc != 4 || parse_ulong(argv[1], &n) || parse_ulong(argv[2], &nsites) ||
	    parse_ulong(argv[3], &size) || nsites > MAX_SITES) {
		fprintf(stderr, "usage: %s N SITES(1-%d) SIZE\n", argv[0], MAX_SITES);
		return 2;
	}
	for (unsigned long i = 0; i < n; i++) {
		/* Sizes differ by site, so the series have a stable order by bytes. */
		if (sites[i % nsites](size * (1 + i % nsites)) != cudaSuccess) {
			fprintf(stderr, "holder: cudaMalloc %lu of %lu failed\n", i + 1, n);
			return 1;
		}
	}
	printf("holding %lu\n", n);
	fflush(stdout);
	do
		c = getchar();
	while (c != EOF && c != '\n');
	return 0;
}
