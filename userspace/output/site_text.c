// SPDX-License-Identifier: GPL-2.0
/* How a call site reads in text: from the innermost frame of the user's own code outward, so
 * that a line of a Python model is what a row says first, not the interpreter, libffi or
 * ctypes frames that carried the call; and as many frames as tell the rows of one listing
 * apart. */
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "output/report.h"
#include "output/site_text.h"

static const char *base_name_of(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

enum tier { T_USER_PY, T_ANY_PY, T_NATIVE, T_ALL };

static bool shown(const struct snap_frame *f, enum tier t)
{
	switch (t) {
	case T_USER_PY:
		return f->python && !snap_frame_is_library(f);
	case T_ANY_PY:
		return f->python;
	case T_NATIVE:
		return !snap_frame_is_glue(f);
	default:
		return true;
	}
}

/* The best tier the stack has a frame of: the program's own Python lines, then any Python
 * line, then native frames outside the call glue, then every frame. */
static enum tier tier_of(const struct snap_stack *st)
{
	enum tier best = T_ALL;

	for (uint32_t i = 0; st && i < st->nframes; i++) {
		const struct snap_frame *f = &st->frames[i];

		if (f->python && !snap_frame_is_library(f))
			return T_USER_PY;
		if (f->python)
			best = T_ANY_PY;
		else if (best == T_ALL && !snap_frame_is_glue(f))
			best = T_NATIVE;
	}
	return best;
}

unsigned int site_frames(const struct snap_stack *st, uint32_t *idx, unsigned int cap)
{
	enum tier t = tier_of(st);
	unsigned int n = 0;

	for (uint32_t i = 0; st && i < st->nframes && n < cap; i++)
		if (shown(&st->frames[i], t))
			idx[n++] = i;
	return n;
}

void text_site(FILE *out, const struct snap_stack *st, unsigned int max, bool all_frames)
{
	uint32_t idx[SITE_TEXT_MAX_FRAMES];
	unsigned int n;

	if (all_frames || !st || !st->nframes) {
		text_frames(out, st, " <- ", all_frames ? (st ? st->nframes : 0) : max);
		return;
	}
	n = site_frames(st, idx, SITE_TEXT_MAX_FRAMES);
	if (max > n)
		max = n;
	for (unsigned int i = 0; i < max; i++) {
		if (i)
			fputs(" <- ", out);
		frame_text(out, &st->frames[idx[i]]);
	}
	if (n > max)
		fputs(" <- ...", out);
}

struct text_site_args {
	unsigned int max;
	bool all_frames;
};

static void write_text_site(FILE *f, const struct snap_stack *st, const void *arg)
{
	const struct text_site_args *a = arg;

	text_site(f, st, a->max, a->all_frames);
}

void text_site_cached(FILE *out, const struct snap_stack *st, unsigned int max, bool all_frames)
{
	struct text_site_args a = { .max = max, .all_frames = all_frames };
	size_t len;
	const char *text = frames_cache_text(st, FRAMES_TEXT, max << 1 | all_frames,
					     write_text_site, &a, &len);

	if (text)
		fwrite(text, 1, len, out);
	else
		text_site(out, st, max, all_frames);
}

/* ---- as many frames as tell the rows apart ---------------------------------------------- */

struct shown_frames {
	const struct snap_stack *st;
	uint32_t idx[SITE_TEXT_MAX_FRAMES];
	unsigned int n;
	size_t pos;		/* in the caller's array */
};

static bool same_text(const struct snap_frame *a, const struct snap_frame *b)
{
	return a->python == b->python && a->line == b->line &&
	       (a->symbol == b->symbol || (a->symbol && b->symbol && !strcmp(a->symbol, b->symbol))) &&
	       (a->file == b->file || (a->file && b->file &&
				       !strcmp(base_name_of(a->file), base_name_of(b->file)))) &&
	       (a->symbol || a->offset == b->offset);
}

/* Frames a and b show alike, from the first. */
static unsigned int common(const struct shown_frames *a, const struct shown_frames *b)
{
	unsigned int i = 0;

	while (i < a->n && i < b->n &&
	       same_text(&a->st->frames[a->idx[i]], &b->st->frames[b->idx[i]]))
		i++;
	return i;
}

static int shown_cmp(const void *x, const void *y)
{
	const struct shown_frames *a = x, *b = y;
	unsigned int c = common(a, b);

	if (c < a->n && c < b->n) {
		const struct snap_frame *fa = &a->st->frames[a->idx[c]];
		const struct snap_frame *fb = &b->st->frames[b->idx[c]];
		int r = strcmp(fa->symbol ? fa->symbol : "", fb->symbol ? fb->symbol : "");

		if (r)
			return r;
		if (fa->line != fb->line)
			return fa->line < fb->line ? -1 : 1;
		r = strcmp(fa->file ? base_name_of(fa->file) : "", fb->file ? base_name_of(fb->file) : "");
		if (r)
			return r;
		if (fa->python != fb->python)
			return fa->python ? 1 : -1;
		return (fa->offset > fb->offset) - (fa->offset < fb->offset);
	}
	return (a->n > b->n) - (a->n < b->n);
}

void site_text_depths(const struct snap_stack *const *stacks, size_t n, unsigned int min,
		      unsigned int *depth)
{
	struct shown_frames *v;

	for (size_t i = 0; i < n; i++)
		depth[i] = min;
	if (n < 2)
		return;
	v = calloc(n, sizeof(*v));
	if (!v)
		return;
	for (size_t i = 0; i < n; i++) {
		v[i].st = stacks[i];
		v[i].pos = i;
		v[i].n = stacks[i] ? site_frames(stacks[i], v[i].idx, SITE_TEXT_MAX_FRAMES) : 0;
	}
	/* In sorted order, a row shares the most frames with a neighbour: one more than that
	 * tells it apart from every other row. */
	qsort(v, n, sizeof(*v), shown_cmp);
	for (size_t i = 0; i < n; i++) {
		unsigned int need = 0;

		if (i > 0)
			need = common(&v[i], &v[i - 1]) + 1;
		if (i + 1 < n && common(&v[i], &v[i + 1]) + 1 > need)
			need = common(&v[i], &v[i + 1]) + 1;
		if (need > v[i].n)
			need = v[i].n;	/* the same frames all the way: nothing more tells them */
		if (need > depth[v[i].pos])
			depth[v[i].pos] = need;
	}
	free(v);
}

unsigned int *site_depths(const struct snap_site *sites, size_t n)
{
	const struct snap_stack **st = xcalloc(n ? n : 1, sizeof(*st));
	unsigned int *depth = xcalloc(n ? n : 1, sizeof(*depth));

	for (size_t i = 0; i < n; i++)
		st[i] = sites[i].stack;
	site_text_depths(st, n, SITE_TEXT_FRAMES, depth);
	free(st);
	return depth;
}
