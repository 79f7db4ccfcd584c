// SPDX-License-Identifier: GPL-2.0
/* Attaching the probe table's entry/return programs to one file: where each probe goes, one
 * link per probe or uprobe_multi links, the agent's pins, and PyTorch's USDT probes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "base/util.h"
#include "discover/probe_place.h"
#include "loader/attach.h"
#include "loader/pin.h"
#include "loader/uprobe_multi.h"
#include "symbols/elf_syms.h"

struct attached_file {
	char *path;
	struct bpf_link **links;	/* perf-event uprobes, one per probe */
	unsigned int nlinks;
	int multi_fds[PIN_FILE_PROGS];	/* uprobe_multi links: one per program */
	struct bpf_link *tensor_links[2];	/* USDT pytorch:malloc, pytorch:free */
	unsigned int ntensor_links;
	unsigned int nmulti;
	unsigned int new_pins;		/* the agent's: programs whose link this attempt pinned */
	const char *pin_dir;		/* the agent's pins (lent), NULL: none */
	uint64_t pin_kdev, pin_ino;
	unsigned int nprobes;
	unsigned int nmoved;		/* probes placed past a flag-setting entry instruction */
	uint64_t offsets[PROBE_ROWS];	/* where each probe goes; 0: symbol absent */
	uint64_t sizes[PROBE_ROWS];	/* the symbol's size, 0 if unknown */
};

static bool offset_taken(const struct attached_file *f, unsigned int api)
{
	for (unsigned int i = 0; i < api; i++)
		if (f->offsets[i] == f->offsets[api])
			return true;
	return false;
}

static int collect_symbol(const char *name, uint64_t vaddr, uint64_t size, uint64_t file_off,
			  void *ctx)
{
	struct attached_file *f = ctx;
	int api = probe_find(name);

	(void)vaddr;
	if (api >= 0 && probe_is_tensor((unsigned int)api))
		return 0;	/* a USDT probe's name, never a function's */
	if (api >= 0 && !f->offsets[api]) {
		f->offsets[api] = file_off;
		f->sizes[api] = size;
	}
	return 0;
}

/* The moves placement made, checked against every function of the file. */
struct moves {
	const uint64_t *symbol;
	uint64_t *placed;
	struct probe_place *where;
};

/* A function that starts in the bytes a probe moved past, or where it landed (its own symbol
 * wider than its code: hand-written assembly, a hostile file): the probe there would fire at
 * that function's calls, as the API's. That probe goes back to its symbol. */
static int unmove_onto_function(const char *name, uint64_t vaddr, uint64_t size,
				uint64_t file_off, void *ctx)
{
	struct moves *m = ctx;

	(void)name;
	(void)vaddr;
	(void)size;
	for (unsigned int api = 0; api < probe_count; api++) {
		if (m->where[api].offset && file_off > m->symbol[api] &&
		    file_off <= m->placed[api]) {
			memset(&m->where[api], 0, sizeof(m->where[api]));
			m->placed[api] = m->symbol[api];
		}
	}
	return 0;
}

/* Moves each probe past a flag-setting entry instruction where probe_place.c finds one: the
 * kernel then emulates the instruction it traps on instead of single-stepping one out of line.
 * Anything unreadable or unknown keeps the symbol. */
static void place_probes(struct attached_file *f)
{
	struct moves moves;
	bool moved = false;
	uint64_t symbol[PROBE_ROWS], placed[PROBE_ROWS];
	struct probe_place where[PROBE_ROWS];
	int fd;

	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!probe_place_file_ok(fd)) {
		close(fd);
		return;
	}
	for (unsigned int api = 0; api < probe_count; api++) {
		memset(&where[api], 0, sizeof(where[api]));
		symbol[api] = placed[api] = f->offsets[api];
		if (!f->offsets[api] || probe_is_tensor(api))
			continue;
		probe_place_read(fd, f->offsets[api], f->sizes[api], &where[api]);
		placed[api] += where[api].offset;
	}
	close(fd);
	probe_place_unshare(symbol, placed, where, probe_count);
	for (unsigned int api = 0; api < probe_count; api++)
		moved |= where[api].offset != 0;
	moves = (struct moves){ .symbol = symbol, .placed = placed, .where = where };
	if (moved && elf_for_each_func(f->path, unmove_onto_function, &moves))
		return;		/* unread: every probe stays on its symbol */
	for (unsigned int api = 0; api < probe_count; api++) {
		if (!where[api].offset)
			continue;
		f->offsets[api] = placed[api];
		if (!offset_taken(f, api))
			f->nmoved++;
		p_debug("%s: probe at +%u (after %s, on %s) in %s", probe_table[api].symbol,
			where[api].offset, where[api].skipped, where[api].landing, f->path);
	}
}

static struct bpf_program *entry_program(const struct probe_programs *pp, enum gm_shape shape)
{
	switch (shape) {
	case GM_SHAPE_ALLOC:
	case GM_SHAPE_REGISTER:
	case GM_SHAPE_IMPORT:
		return pp->enter_alloc;
	case GM_SHAPE_VMM_CREATE:	/* its properties' device is read at entry */
	case GM_SHAPE_ARRAY_RT:
	case GM_SHAPE_ARRAY3D_RT:
	case GM_SHAPE_MIPMAP_RT:
	case GM_SHAPE_ARRAY_DRV:
	case GM_SHAPE_ARRAY3D_DRV:
	case GM_SHAPE_MIPMAP_DRV:
	case GM_SHAPE_MALLOC3D:
		return pp->enter_array;
	case GM_SHAPE_ALLOC_PITCH:
		return pp->enter_alloc_pitch;
	case GM_SHAPE_FREE:
	case GM_SHAPE_VMM_RELEASE:
	case GM_SHAPE_CTX_DESTROY:
	case GM_SHAPE_PRIMARY_RESET:
	case GM_SHAPE_DEVICE_RESET:
		return pp->enter_free;
	case GM_SHAPE_CTX_SET:
	case GM_SHAPE_CTX_PUSH:
	case GM_SHAPE_CTX_POP:
	case GM_SHAPE_SET_DEVICE:
	case GM_SHAPE_CTX_CREATE:
	case GM_SHAPE_CTX_CREATE_V3:
	case GM_SHAPE_CTX_CREATE_V4:
	case GM_SHAPE_CTX_RETAIN:
		return pp->enter_ctx;
	case GM_SHAPE_TENSOR:
		return NULL;	/* USDT: attach_tensor_probes() */
	case GM_SHAPE_COUNT:
		break;
	}
	return NULL;
}

/* Frees are accounted at their entry (bpf/gpumem.bpf.c, free_enter): no return probe. */
static bool has_return_probe(enum gm_shape shape)
{
	return shape != GM_SHAPE_FREE && shape != GM_SHAPE_VMM_RELEASE;
}

static int attach_one(const struct probe_programs *pp, struct attached_file *f, unsigned int api)
{
	const struct probe_def *p = &probe_table[api];
	LIBBPF_OPTS(bpf_uprobe_opts, opts);
	struct bpf_link *entry, *ret;
	int err;

	opts.bpf_cookie = probe_cookie(api);
	entry = bpf_program__attach_uprobe_opts(entry_program(pp, p->shape), -1, f->path,
						f->offsets[api], &opts);
	if (!entry)
		return -errno;
	f->links[f->nlinks++] = entry;
	if (!has_return_probe(p->shape))
		return 0;
	opts.retprobe = true;
	ret = bpf_program__attach_uprobe_opts(pp->call_return, -1, f->path,
					      f->offsets[api], &opts);
	if (!ret) {
		err = -errno;
		bpf_link__destroy(entry);
		f->nlinks--;
		return err;
	}
	f->links[f->nlinks++] = ret;
	return 0;
}

/* The agent's link for program i of a file: the one an earlier agent pinned, else a new one,
 * pinned (and remembered in new_pins, so that an attempt that fails takes its pins back:
 * a link left pinned alone, an entry probe without its return, would count wrong). */
static int pinned_link(const struct probe_programs *pp, struct attached_file *f, unsigned int i,
		       const __u64 *offsets, const __u64 *cookies, unsigned int cnt, bool ret)
{
	struct bpf_program *progs[] = { pp->enter_alloc, pp->enter_alloc_pitch, pp->enter_free,
					pp->call_return, pp->enter_array, pp->enter_ctx };
	char name[PATH_MAX];
	int fd, err;

	if (pin_file_link_name(name, sizeof(name), pp->pin_dir, pp->pin_kdev, pp->pin_ino, i))
		return -ENAMETOOLONG;
	fd = pp->adopt ? bpf_obj_get(name) : -1;
	if (fd >= 0)
		return fd;
	fd = uprobe_multi_link(progs[i], f->path, offsets, cookies, cnt, ret);
	if (fd < 0)
		return fd;
	err = pin_fd(fd, name);
	if (err) {
		close(fd);
		return err;
	}
	f->new_pins |= 1u << i;
	return fd;
}

static void unpin_new(const struct probe_programs *pp, const struct attached_file *f)
{
	char name[PATH_MAX];

	for (unsigned int i = 0; i < PIN_FILE_PROGS; i++)
		if ((f->new_pins & (1u << i)) &&
		    !pin_file_link_name(name, sizeof(name), pp->pin_dir, pp->pin_kdev, pp->pin_ino, i))
			unlink(name);
}

/* One link for each entry program with the probes of its shapes, one for every return. */
static int attach_multi(const struct probe_programs *pp, struct attached_file *f)
{
	struct bpf_program *progs[] = { pp->enter_alloc, pp->enter_alloc_pitch, pp->enter_free,
					pp->call_return, pp->enter_array, pp->enter_ctx };
	__u64 offsets[PROBE_ROWS], cookies[PROBE_ROWS];

	for (unsigned int i = 0; i < ARRAY_SIZE(progs); i++) {
		bool ret = progs[i] == pp->call_return;
		unsigned int cnt = 0;
		int fd;

		for (unsigned int api = 0; api < probe_count; api++) {
			const struct probe_def *p = &probe_table[api];

			if (!f->offsets[api] || offset_taken(f, api))
				continue;
			if (ret ? !has_return_probe(p->shape) : entry_program(pp, p->shape) != progs[i])
				continue;
			if (ret && pp->session && entry_program(pp, p->shape) == pp->enter_alloc)
				continue;	/* its session's return */
			offsets[cnt] = f->offsets[api];
			cookies[cnt++] = probe_cookie(api);
		}
		if (!cnt)
			continue;
		fd = pp->pin_dir ? pinned_link(pp, f, i, offsets, cookies, cnt, ret)
				 : uprobe_multi_link(progs[i], f->path, offsets, cookies, cnt, ret);
		if (fd < 0)
			return fd;
		f->multi_fds[f->nmulti++] = fd;
		f->nprobes += cnt;
	}
	return 0;
}

static int attach_each(const struct probe_programs *pp, struct attached_file *f)
{
	f->links = xcalloc(2 * probe_count, sizeof(*f->links));
	for (unsigned int api = 0; api < probe_count; api++) {
		int err;

		if (!f->offsets[api] || offset_taken(f, api))
			continue;
		err = attach_one(pp, f, api);
		if (err) {
			p_err("cannot attach to %s:%s: %s", f->path, probe_table[api].symbol,
			      strerror(-err));
			return err;
		}
	}
	f->nprobes = f->nlinks;
	return 0;
}

/* PyTorch's caching allocator: libbpf's USDT support attaches both probes (one uprobe per
 * call site, whose reference counter is the probe's semaphore: the kernel sets it in every
 * process that maps the file while the probe is attached). Not pinned: an agent's tensor
 * probes last as long as it runs. */
static int attach_tensor_probes(const struct probe_programs *pp, struct attached_file *f)
{
	static const char *const names[2] = { "malloc", "free" };
	struct bpf_program *progs[2] = { pp->tensor_malloc, pp->tensor_free };
	char soname[256];
	const struct probe_def *p;
	LIBBPF_OPTS(bpf_usdt_opts, opts);
	int api;

	if (!pp->tensor_malloc || !pp->tensor_free || !elf_has_usdt(f->path, "pytorch", "malloc"))
		return 0;
	/* CUDA's or ROCm's allocator: by the library's own name, wherever the file lies. */
	api = probe_tensor_row(elf_soname(f->path, soname, sizeof(soname)) ? f->path : soname);
	p = &probe_table[api];
	opts.usdt_cookie = GM_COOKIE(api, p->kind, p->layer, p->shape);
	for (unsigned int i = 0; i < 2; i++) {
		struct bpf_link *link = bpf_program__attach_usdt(progs[i], -1, f->path, "pytorch",
								 names[i], &opts);

		if (!link) {
			int err = -errno;

			p_err("cannot attach to %s:pytorch:%s: %s", f->path, names[i],
			      strerror(-err));
			return err;
		}
		f->tensor_links[f->ntensor_links++] = link;
		f->nprobes++;
	}
	return 0;
}

int attach_file(const struct probe_programs *pp, const char *path, struct attached_file **out)
{
	struct attached_file *f = xcalloc(1, sizeof(*f));
	int err;

	*out = NULL;
	f->path = xstrdup(path);
	f->pin_dir = pp->pin_dir;
	f->pin_kdev = pp->pin_kdev;
	f->pin_ino = pp->pin_ino;
	err = elf_for_each_func(path, collect_symbol, f);
	if (err)
		goto out_free;
	place_probes(f);
	if (pp->pin_dir && !pp->multi) {	/* tracer_open refuses an agent on such a kernel */
		err = -EOPNOTSUPP;
		goto out_free;
	}
	err = pp->multi ? attach_multi(pp, f) : attach_each(pp, f);
	if (!err)
		err = attach_tensor_probes(pp, f);
	if (err) {
		if (pp->multi)	/* the caller says what it does about it */
			p_debug("cannot attach to %s: %s", path, strerror(-err));
		goto out_detach;
	}
	if (!f->nprobes)
		goto out_detach;	/* no CUDA allocation API here: not an error */
	p_debug("attached %u probes to %s (%u functions probed past a flag-setting entry "
		"instruction)", f->nprobes, path, f->nmoved);
	*out = f;
	return 0;

out_detach:
	unpin_new(pp, f);
	detach_file(f);
	return err;
out_free:
	free(f->path);
	free(f);
	return err;
}

void detach_file(struct attached_file *f)
{
	if (!f)
		return;
	for (unsigned int i = 0; i < f->nlinks; i++)
		bpf_link__destroy(f->links[i]);
	for (unsigned int i = 0; i < f->nmulti; i++)
		close(f->multi_fds[i]);
	for (unsigned int i = 0; i < f->ntensor_links; i++)
		bpf_link__destroy(f->tensor_links[i]);
	free(f->links);
	free(f->path);
	free(f);
}

/* Enough threads that every link's grace periods overlap (a file has PIN_FILE_PROGS links):
 * small stacks, as each only closes. */
#define DETACH_THREADS 1024
#define DETACH_STACK (64 * 1024)

/* The closes one thread makes: every step-th link fd from the first. */
struct close_share {
	const int *fds;
	size_t n, first, step;
};

static void *close_share_run(void *arg)
{
	const struct close_share *sh = arg;

	for (size_t i = sh->first; i < sh->n; i += sh->step)
		close(sh->fds[i]);
	return NULL;
}

/* Closes fds on up to DETACH_THREADS threads, this one among them (and in its place for a
 * thread that could not start: fewer threads, the same closes). */
static void close_all(const int *fds, size_t n)
{
	size_t nth = n < DETACH_THREADS ? n : DETACH_THREADS;
	struct close_share *sh = xcalloc(nth ? nth : 1, sizeof(*sh));
	pthread_t *th = xcalloc(nth ? nth : 1, sizeof(*th));
	bool *started = xcalloc(nth ? nth : 1, sizeof(*started));
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, DETACH_STACK);
	for (size_t t = 0; t < nth; t++) {
		sh[t] = (struct close_share){ .fds = fds, .n = n, .first = t, .step = nth };
		started[t] = t && !pthread_create(&th[t], &attr, close_share_run, &sh[t]);
	}
	pthread_attr_destroy(&attr);
	for (size_t t = 0; t < nth; t++)
		if (!started[t])
			close_share_run(&sh[t]);
	for (size_t t = 1; t < nth; t++)
		if (started[t])
			pthread_join(th[t], NULL);
	free(started);
	free(th);
	free(sh);
}

void detach_files(struct attached_file **files, size_t n)
{
	size_t nfds = 0;
	int *fds;

	for (size_t i = 0; i < n; i++)
		nfds += files[i]->nmulti;
	fds = xcalloc(nfds ? nfds : 1, sizeof(*fds));
	nfds = 0;
	for (size_t i = 0; i < n; i++) {
		for (unsigned int j = 0; j < files[i]->nmulti; j++)
			fds[nfds++] = files[i]->multi_fds[j];
		files[i]->nmulti = 0;	/* closed below, not by detach_file */
	}
	close_all(fds, nfds);
	free(fds);
	for (size_t i = 0; i < n; i++)
		detach_file(files[i]);
}

void attached_unpin(const struct attached_file *f)
{
	char name[PATH_MAX];

	for (unsigned int i = 0; f->pin_dir && i < PIN_FILE_PROGS; i++)
		if (!pin_file_link_name(name, sizeof(name), f->pin_dir, f->pin_kdev, f->pin_ino, i))
			unlink(name);
}

unsigned int attached_probe_count(const struct attached_file *f)
{
	return f->nprobes;
}

const char *attached_path(const struct attached_file *f)
{
	return f->path;
}

bool attached_has_api(const struct attached_file *f, unsigned int api)
{
	if (api >= probe_count)
		return false;
	if (probe_is_tensor(api))
		return f->ntensor_links > 0;
	return f->offsets[api] != 0;
}
