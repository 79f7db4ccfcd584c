// SPDX-License-Identifier: GPL-2.0
/* The benchmark's "bare probes": bare.bpf.c's empty programs attached as entry and return
 * probes to the CUDA allocation symbols gpumem probes, the way gpumem attaches them (one
 * uprobe_multi link per program and file), held until SIGINT or SIGTERM. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bare.skel.h"
#include "uprobe_multi.h"
#include "elf_syms.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_FILES 8

/* The symbols of probe_table in userspace/probes.c, in its order. */
static const char *const probed_symbols[] = {
	"cudaMalloc", "cudaMallocPitch", "cudaMallocManaged", "cudaMallocHost", "cudaHostAlloc",
	"cudaMallocAsync", "cudaMallocAsync_ptsz", "cudaMallocFromPoolAsync",
	"cudaMallocFromPoolAsync_ptsz", "cudaFree", "cudaFreeHost", "cudaFreeAsync",
	"cudaFreeAsync_ptsz", "cuMemAlloc_v2", "cuMemAllocPitch_v2", "cuMemAllocManaged",
	"cuMemAllocHost_v2", "cuMemHostAlloc", "cuMemAllocAsync", "cuMemAllocAsync_ptsz",
	"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", "cuMemFree_v2",
	"cuMemFreeHost", "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuMemCreate", "cuMemRelease",
};

struct file_probes {
	__u64 offsets[ARRAY_SIZE(probed_symbols)];	/* 0: symbol absent */
	__u64 cookies[ARRAY_SIZE(probed_symbols)];
	unsigned int count;
};


/* --malloc-free: only what the few-line user script of bench/live_bytes.bt probes (entry and
 * return of cudaMalloc, entry of cudaFree), for the runtime-only setup. */
static bool malloc_free_only;

static bool wanted(const char *name)
{
	return !malloc_free_only || !strcmp(name, "cudaMalloc") || !strcmp(name, "cudaFree");
}

static int collect_symbol(const char *name, uint64_t vaddr, uint64_t size, uint64_t file_off,
			  void *ctx)
{
	__u64 *offsets = ctx;

	(void)vaddr;
	(void)size;
	if (!wanted(name))
		return 0;
	for (unsigned int i = 0; i < ARRAY_SIZE(probed_symbols); i++)
		if (!offsets[i] && strcmp(probed_symbols[i], name) == 0)
			offsets[i] = file_off;
	return 0;
}

/* The probed symbols of one file, each offset once (aliases share a probe). */
static int find_probes(const char *path, struct file_probes *fp)
{
	__u64 offsets[ARRAY_SIZE(probed_symbols)] = {};
	int err = elf_for_each_func(path, collect_symbol, offsets);

	if (err)
		return err;
	fp->count = 0;
	for (unsigned int i = 0; i < ARRAY_SIZE(probed_symbols); i++) {
		bool taken = false;

		for (unsigned int j = 0; j < i; j++)
			taken |= offsets[j] == offsets[i];
		if (!offsets[i] || taken)
			continue;
		fp->offsets[fp->count] = offsets[i];
		fp->cookies[fp->count++] = i;
	}
	return 0;
}

/* The return probes of --malloc-free: the user's script has none on cudaFree. */
static void drop_frees(struct file_probes *fp)
{
	unsigned int kept = 0;

	for (unsigned int i = 0; i < fp->count; i++) {
		if (!strcmp(probed_symbols[fp->cookies[i]], "cudaFree"))
			continue;
		fp->offsets[kept] = fp->offsets[i];
		fp->cookies[kept++] = fp->cookies[i];
	}
	fp->count = kept;
}

static int wait_for_stop_signal(void)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	return sigwait(&set, &sig);
}

int main(int argc, char **argv)
{
	int link_fds[2 * MAX_FILES], nlinks = 0, err = 1;
	unsigned int probes = 0;
	struct bare_bpf *skel;
	sigset_t stop;

	if (argc > 1 && !strcmp(argv[1], "--malloc-free")) {
		malloc_free_only = true;
		argv++;
		argc--;
	}
	if (argc < 2 || argc - 1 > MAX_FILES) {
		fprintf(stderr, "usage: %s [--malloc-free] LIBRARY... (at most %d)\n", argv[0],
			MAX_FILES);
		return 2;
	}
	/* Blocked before anything is attached, so a stop signal is never lost. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, NULL);

	skel = bare_bpf__open();
	if (!skel) {
		fprintf(stderr, "bare: cannot open the BPF object: %s\n", strerror(errno));
		return 1;
	}
	bpf_program__set_expected_attach_type(skel->progs.bare_entry, ATTACH_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(skel->progs.bare_return, ATTACH_UPROBE_MULTI);
	if (bare_bpf__load(skel)) {
		fprintf(stderr, "bare: cannot load the BPF programs: %s (run as root)\n",
			strerror(errno));
		goto out_destroy;
	}
	for (int i = 1; i < argc; i++) {
		struct file_probes fp;
		int entry, ret;

		err = find_probes(argv[i], &fp);
		if (err) {
			fprintf(stderr, "bare: cannot read %s: %s\n", argv[i], strerror(-err));
			goto out_detach;
		}
		if (!fp.count) {
			fprintf(stderr, "bare: %s has none of the probed symbols\n", argv[i]);
			goto out_detach;
		}
		entry = uprobe_multi_link(skel->progs.bare_entry, argv[i], fp.offsets, fp.cookies,
					  fp.count, false);
		if (entry < 0) {
			fprintf(stderr, "bare: cannot attach to %s: %s\n", argv[i], strerror(-entry));
			goto out_detach;
		}
		link_fds[nlinks++] = entry;
		probes += fp.count;
		if (malloc_free_only)
			drop_frees(&fp);
		ret = uprobe_multi_link(skel->progs.bare_return, argv[i], fp.offsets, fp.cookies,
					fp.count, true);
		if (ret < 0) {
			fprintf(stderr, "bare: cannot attach return probes to %s: %s\n", argv[i],
				strerror(-ret));
			goto out_detach;
		}
		link_fds[nlinks++] = ret;
		probes += fp.count;
	}
	fprintf(stderr, "bare: attached %u probes on %d files\n", probes, argc - 1);
	err = wait_for_stop_signal() ? 1 : 0;

out_detach:
	while (nlinks > 0)
		close(link_fds[--nlinks]);
out_destroy:
	bare_bpf__destroy(skel);
	return err ? 1 : 0;
}
