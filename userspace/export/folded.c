// SPDX-License-Identifier: GPL-2.0
/* --format folded: the final snapshot as folded stacks, one `frame;frame;...;frame BYTES` line
 * per distinct stack of each process, root first and the call site last, weighted by the GPU
 * bytes held at the end (for a process that ended: when it ended; pinned host memory is left
 * out, as in every GPU total). The process is the root: its comm, then "pid N", then, for a
 * process whose memory is on more than GPU 0, "GPU N" ("GPU ?": a device not known). For
 * flamegraph.pl, speedscope, inferno and the other flame-graph tools. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "export/exporters.h"
#include "export/intern.h"
#include "output/json.h"

/* A line's bound: every frame a stack can have (64 native ones with their inlined calls, 32
 * Python ones) at 100-odd bytes a name fits many times over. */
#define FOLDED_LINE_MAX 262144
#define FOLDED_CUT ";[frames cut]"

struct folded {
	FILE *out;
	struct intern lines;	/* a process's distinct stacks */
	uint64_t *bytes;	/* by line index */
	size_t bytes_cap;
};

/* Appends one frame name to line, ';' inside a name being the separator's, written ':'.
 * *cut: the line was cut, and ends (a frame may be named as the mark is). */
static size_t append_frame(char *line, size_t at, const char *name, bool *cut)
{
	size_t n = strlen(name);

	if (*cut)
		return at;
	if (at + 1 + n + sizeof(FOLDED_CUT) >= FOLDED_LINE_MAX) {
		/* An absurdly deep stack keeps its outer frames, and says it was cut. */
		memcpy(line + at, FOLDED_CUT, sizeof(FOLDED_CUT));
		*cut = true;
		return at + strlen(FOLDED_CUT);
	}
	line[at++] = ';';
	for (size_t i = 0; i < n; i++)
		line[at++] = name[i] == ';' ? ':' : name[i];
	line[at] = '\0';
	return at;
}

static size_t stack_line(char *line, const struct snap_proc *p, const struct snap_site *ss)
{
	const struct snap_stack *st = ss->stack;
	char name[512], comm[GM_COMM_LEN + 1];
	bool cut = false;
	size_t at;

	text_sanitize(comm, sizeof(comm), p->valid & SP_COMM && p->comm[0] ? p->comm : "?");
	at = (size_t)snprintf(line, FOLDED_LINE_MAX, "%s", comm);
	for (size_t i = 0; i < at; i++)
		line[i] = line[i] == ';' ? ':' : line[i];
	snprintf(name, sizeof(name), "pid %d", p->pid);
	at = append_frame(line, at, name, &cut);
	if (snap_proc_many_gpus(p)) {
		if (ss->gpu)
			snprintf(name, sizeof(name), "GPU %u", ss->gpu - 1);
		else
			snprintf(name, sizeof(name), "GPU ?");
		at = append_frame(line, at, name, &cut);
	}
	if (!st || !st->nframes)
		return append_frame(line, at, "[no stack]", &cut);
	for (uint32_t i = st->nframes; i-- > 0;)
		at = append_frame(line, at, export_frame_name(&st->frames[i], name, sizeof(name)),
				  &cut);
	return at;
}

static void add_line(struct folded *fd, const char *line, size_t len, uint64_t bytes)
{
	bool added;
	uint32_t i = intern(&fd->lines, line, len, &added);

	if (i >= fd->bytes_cap) {
		fd->bytes_cap = fd->bytes_cap ? fd->bytes_cap * 2 : 64;
		fd->bytes = xrealloc(fd->bytes, fd->bytes_cap * sizeof(*fd->bytes));
	}
	if (added)
		fd->bytes[i] = 0;
	fd->bytes[i] += bytes;
}

static void process_lines(struct folded *fd, const struct snap_proc *p)
{
	static char line[FOLDED_LINE_MAX];

	for (size_t j = 0; j < p->nsites; j++) {
		const struct snap_site *ss = &p->sites[j];
		size_t len;

		if (!ss->st.current_bytes || !export_kind_is_gpu(ss->kind))
			continue;
		len = stack_line(line, p, ss);
		add_line(fd, line, len, ss->st.current_bytes);
	}
	for (size_t i = 0; i < fd->lines.n; i++)
		fprintf(fd->out, "%s %" PRIu64 "\n", (const char *)fd->lines.keys[i].data,
			fd->bytes[i]);
	intern_free(&fd->lines);
}

static void folded_snapshot(struct exporter *x, const struct snapshot *snap, bool final)
{
	struct folded *fd = x->priv;

	if (!final)
		return;
	for (size_t i = 0; i < snap->nprocs; i++)
		if (snap->procs[i].valid & SP_STATS)
			process_lines(fd, &snap->procs[i]);
}

static int folded_begin(struct exporter *x)
{
	struct folded *fd = xcalloc(1, sizeof(*fd));

	fd->out = outfile_create(x->path);
	if (!fd->out) {
		free(fd);
		return -EIO;
	}
	x->priv = fd;
	return 0;
}

static int folded_end(struct exporter *x)
{
	struct folded *fd = x->priv;
	int err = outfile_close(fd->out, x->path);

	intern_free(&fd->lines);
	free(fd->bytes);
	free(fd);
	x->priv = NULL;
	return err;
}

const struct exporter_ops folded_exporter = {
	.name = "folded",
	.what = "folded stacks weighted by bytes held, for flame graphs",
	.begin = folded_begin,
	.on_snapshot = folded_snapshot,
	.end = folded_end,
};
