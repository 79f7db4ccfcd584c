// SPDX-License-Identifier: GPL-2.0
/* The benchmark's "bare probes": bare.bpf.c's empty programs attached as entry probes to the
 * CUDA allocation symbols gpumem probes and as return probes to all but the frees, the way
 * gpumem attaches them (one uprobe_multi link per program and file, each probe where
 * discover/probe_place.c puts it, or at the symbol with --at symbol), held until SIGINT or
 * SIGTERM. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bare.skel.h"
#include "loader/uprobe_multi.h"
#include "symbols/elf_syms.h"
#include "discover/probe_place.h"

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
	unsigned int count, moved;
};

struct symbols {
	uint64_t offsets[ARRAY_SIZE(probed_symbols)];
	uint64_t sizes[ARRAY_SIZE(probed_symbols)];
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
	struct symbols *syms = ctx;

	(void)vaddr;
	if (!wanted(name))
		return 0;
	for (unsigned int i = 0; i < ARRAY_SIZE(probed_symbols); i++)
		if (!syms->offsets[i] && strcmp(probed_symbols[i], name) == 0) {
			syms->offsets[i] = file_off;
			syms->sizes[i] = size;
		}
	return 0;
}

/* Each probe where gpumem puts it (userspace/discover/probes.c's place_probes). */
static unsigned int place(const char *path, struct symbols *syms)
{
	uint64_t placed[ARRAY_SIZE(probed_symbols)];
	struct probe_place where[ARRAY_SIZE(probed_symbols)] = {};
	unsigned int moved = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool decodable;

	if (fd < 0)
		return 0;
	decodable = probe_place_file_ok(fd);
	for (unsigned int i = 0; i < ARRAY_SIZE(probed_symbols); i++) {
		placed[i] = syms->offsets[i];
		if (!syms->offsets[i] || !decodable)
			continue;
		probe_place_read(fd, syms->offsets[i], syms->sizes[i], &where[i]);
		placed[i] += where[i].offset;
	}
	close(fd);
	probe_place_unshare(syms->offsets, placed, where, ARRAY_SIZE(probed_symbols));
	for (unsigned int i = 0; i < ARRAY_SIZE(probed_symbols); i++) {
		moved += where[i].offset != 0;
		syms->offsets[i] = placed[i];
	}
	return moved;
}

/* The probed symbols of one file, each offset once (aliases share a probe). */
static int find_probes(const char *path, bool at_symbol, struct file_probes *fp)
{
	struct symbols syms = {};
	const uint64_t *offsets = syms.offsets;
	int err = elf_for_each_func(path, collect_symbol, &syms);

	if (err)
		return err;
	fp->moved = at_symbol ? 0 : place(path, &syms);
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

/* The return probes: none on a free, as gpumem has none (it accounts frees at their entry),
 * and as the user's script of --malloc-free has none on cudaFree. */
static void drop_frees(struct file_probes *fp)
{
	unsigned int kept = 0;

	for (unsigned int i = 0; i < fp->count; i++) {
		const char *name = probed_symbols[fp->cookies[i]];

		if (strstr(name, "Free") || !strcmp(name, "cuMemRelease"))
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
	int link_fds[2 * MAX_FILES], nlinks = 0, err = 1, first = 1;
	unsigned int probes = 0, moved = 0;
	bool at_symbol = false;
	struct bare_bpf *skel;
	sigset_t stop;

	while (first < argc && argv[first][0] == '-') {
		if (!strcmp(argv[first], "--malloc-free")) {
			malloc_free_only = true;
			first++;
		} else if (first + 1 < argc && !strcmp(argv[first], "--at") &&
			   (!strcmp(argv[first + 1], "symbol") ||
			    !strcmp(argv[first + 1], "placed"))) {
			at_symbol = !strcmp(argv[first + 1], "symbol");
			first += 2;
		} else {
			argc = 0;	/* usage */
			break;
		}
	}
	if (argc - first < 1 || argc - first > MAX_FILES) {
		fprintf(stderr, "usage: %s [--malloc-free] [--at symbol|placed] LIBRARY... "
			"(at most %d)\n", argv[0], MAX_FILES);
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
	for (int i = first; i < argc; i++) {
		struct file_probes fp;
		int entry, ret;

		err = find_probes(argv[i], at_symbol, &fp);
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
		moved += fp.moved;
	}
	fprintf(stderr, "bare: attached %u probes on %d files (%u functions probed past their "
		"entry instruction)\n", probes, argc - first, moved);
	err = wait_for_stop_signal() ? 1 : 0;

out_detach:
	while (nlinks > 0)
		close(link_fds[--nlinks]);
out_destroy:
	bare_bpf__destroy(skel);
	return err ? 1 : 0;
}
