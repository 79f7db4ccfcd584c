/* SPDX-License-Identifier: GPL-2.0 */
/* User stacks: the frame-pointer walk of the calling thread into `stacks`, the copy of a new
 * site's stack for DWARF unwinding, and what the walk read at the call's out-pointers. */
#ifndef GPUMEM_USTACK_BPF_H
#define GPUMEM_USTACK_BPF_H

#include "base.bpf.h"

/* Bytes of the user stack a walk reads at once (struct walk). */
#define GM_STACK_WINDOW 256
/* Windows read onto the BPF stack past the first before the rest of a deep stack is read into
 * the thread's map value, GM_STACK_FAR bytes at a time (gm_frame_record()). */
#define GM_STACK_NEAR_READS 3
/* Frames a call of the walk's bpf_loop callback walks: each call is a call and a return (the
 * return through the kernel's thunk), about 10 ns a frame here. Three or four a call cost the
 * verifier 13% and 50% more instructions than two. */
#define GM_WALK_PER_CALL 2

/* Where a walk's probe fired (gm_user_stack_id()). */
enum gm_stack_at {
	/* A return probe: the registers are the caller's, and its first window, read from sp,
	 * also holds the variables the call wrote its results to (rec's out-pointers). */
	GM_STACK_AT_RETURN,
	/* A function's first instruction: the caller's return address at sp, fp still the
	 * caller's. */
	GM_STACK_AT_ENTRY,
	/* Inside a function (a USDT probe): no results to read, so the first window is read
	 * from its frame record up, not from sp: the function's own locals are no frames, and
	 * a caller's record just past 256 bytes from sp took a second read. */
	GM_STACK_IN_BODY,
};

/* A walk's upper bound when the stack mapping is not known now: a variable, not the constant,
 * so that the verifier takes it as it takes a known bound, any value. With the constant, every
 * read's size had two histories and the walk was verified twice over at each frame (with two
 * frames a callback, about 20k instructions more in each program that walks). */
__u64 gm_no_bound = ~0ULL;

/*
 * The frame-pointer walk of the calling thread, hashed into `stacks`. The kernel's walk
 * (bpf_get_stackid) reads frame after frame until a read faults, and every stack ends in one:
 * main's caller keeps no frame pointer. That fault cost 600 ns of the 3.5 µs a traced pair
 * took. Here every read stays inside the thread's stack mapping (found once per thread, with
 * bpf_find_vma), a frame must lie above the one before, and a window of the stack is read at
 * once: one read for the frames of most calls.
 */
struct vma_bounds {
	__u64 lo, hi;
};

static long stack_vma(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_bounds *b = data;

	b->lo = vma->vm_start;
	b->hi = vma->vm_end;
	return 0;
}

/* The stack mapping around sp, kept per thread; looked up again only when sp leaves it (the
 * main thread's stack grows down, a coroutine runs on a stack of its own). False when it
 * cannot be known now: bpf_find_vma only tries the mmap lock, which a thread that maps
 * memory holds. */
static __always_inline bool stack_bounds(struct stack_scratch *sc, __u64 sp)
{
	struct vma_bounds b = {};

	if (sp >= sc->lo && sp < sc->hi)
		return true;
	if (bpf_find_vma(bpf_get_current_task_btf(), sp, stack_vma, &b, 0) || sp < b.lo ||
	    sp >= b.hi)
		return false;
	sc->lo = b.lo;
	sc->hi = b.hi;
	return true;
}

/* The window of the user stack a walk read last, [base, base + have), on the BPF stack: a read
 * into map memory cost about 65-125 ns more here, the kernel's check of a heap destination
 * (hardened usercopy, on in Debian's kernels), where a stack destination is told at once. The
 * first read is from sp up, or from the frame record in a function's body (stack_top()), up
 * to GM_STACK_NEAR_READS more each at the first frame record past the last
 * (gm_frame_record()). */
struct stack_win {
	__u64 sp, base, have;
	__u64 reads;		/* windows read past the first */
	__u64 w[GM_STACK_WINDOW / 8];
};

/* A walk's state, on the BPF stack. */
struct walk {
	struct gm_user_stack *st;
	struct stack_scratch *sc;	/* the thread's: the stack past win (gm_frame_record()) */
	__u64 fp, hi;
	struct stack_win win;
};

/* Reads [fp, fp + len) of the user stack into dst, len at most max, and returns the bytes read
 * (0 for none): as far as the mapping's end [.., hi) where it is known (hi ~0: not); where the
 * read fails (past the end when it is not known, or a page not faulted in), the rest of fp's
 * page, then 16 bytes, so that whether the mapping was known never changes a stack and a 4 KiB
 * read that fails is not paid again at each frame of its page. */
static __always_inline __u64 stack_read(void *dst, __u64 fp, __u64 hi, __u64 max)
{
	__u64 len = fp + 16 <= hi ? hi - fp : 16, page = 4096 - (fp & 4095);

	if (len > max)
		len = max;
	if (!bpf_probe_read_user(dst, len, (void *)fp))
		return len;
	if (page >= 16 && page < len && !bpf_probe_read_user(dst, page, (void *)fp))
		return page;
	if (len == 16 || bpf_probe_read_user(dst, 16, (void *)fp))
		return 0;
	return 16;
}

/* The frame record at fp (saved fp, return address) past what win holds, into sc->fnext and
 * sc->fret: win read again at fp while fewer than GM_STACK_NEAR_READS windows were (most
 * stacks end there, and a read onto the BPF stack costs the least), else from sc->far, read
 * at fp GM_STACK_FAR bytes at a time where it does not hold it: a read costs about 100 ns here
 * whatever its size, and frames of a few hundred bytes, as deep stacks have, took a read
 * apiece in 256-byte windows (40 frames of 384 bytes: 6.4 µs a pair, 4.5 since). False
 * when it cannot be read. A global function: verified once, not at each step of the walk
 * (inlined, the two windows took gpumem's start from 1.3 s to 27 s). */
__noinline bool gm_frame_record(struct stack_scratch *sc, struct stack_win *win, __u64 fp,
				__u64 hi)
{
	__u64 off, len;

	if (!sc || !win)
		return false;
	if (win->reads < GM_STACK_NEAR_READS) {
		len = stack_read(win->w, fp, hi, GM_STACK_WINDOW);
		if (!len)
			return false;
		win->reads++;
		win->base = fp;
		win->have = len;
		sc->fnext = win->w[0];
		sc->fret = win->w[1];
		return true;
	}
	off = fp - sc->fbase;
	if (fp < sc->fbase || off + 16 > sc->fhave) {
		len = stack_read(sc->far, fp, hi, GM_STACK_FAR);
		if (!len)
			return false;
		sc->fbase = fp;
		sc->fhave = len;
		off = 0;
	}
	off /= 8;
	if (off > GM_STACK_FAR / 8 - 2)
		return false;
	/* The masks are the verifier's proof; the test above keeps both words in what was
	 * read. */
	sc->fnext = sc->far[off & (GM_STACK_FAR / 8 - 1)];
	sc->fret = sc->far[(off + 1) & (GM_STACK_FAR / 8 - 1)];
	return true;
}

/* Frame i + 1 of w->st; non-zero: the stack ended. */
static __always_inline long walk_step(__u64 i, struct walk *w)
{
	__u64 fp = w->fp, off = fp - w->win.base, next, ret;
	__u32 at = (i + 1) & (GM_MAX_STACK_DEPTH - 1);

	if (fp < w->win.sp || (fp & 7) || fp + 16 < fp)
		goto end;
	if (fp >= w->win.base && off + 16 <= w->win.have) {
		off /= 8;
		if (off > GM_STACK_WINDOW / 8 - 2)
			goto end;
		/* The masks are the verifier's proof; the test above keeps both words in what
		 * was read. */
		next = w->win.w[off & (GM_STACK_WINDOW / 8 - 1)];
		ret = w->win.w[(off + 1) & (GM_STACK_WINDOW / 8 - 1)];
	} else {
		if (!gm_frame_record(w->sc, &w->win, fp, w->hi))
			goto end;
		next = w->sc->fnext;
		ret = w->sc->fret;
	}
	if (!ret)
		goto end;
	w->st->ips[at] = ret;
	if (next <= fp) {
		at = (at + 1) & (GM_MAX_STACK_DEPTH - 1);
		goto end;
	}
	w->fp = next;
	return 0;
end:
	if (at)		/* 0: the stack is full, no zero after it */
		w->st->ips[at] = 0;
	return 1;
}

/* GM_WALK_PER_CALL frames of the walk, a bpf_loop callback: the verifier checks its body once (a
 * loop whose index is an array subscript it would check frame by frame). More than one frame a
 * call: each call of a callback is a call and a return. */
static long walk_frame(__u64 i, void *data)
{
	struct walk *w = data;

	for (__u32 k = 0; k < GM_WALK_PER_CALL; k++) {
		__u64 f = i * GM_WALK_PER_CALL + k;

		barrier_var(f);	/* else clang folds walk_step's mask of f + 1 away */

		if (f >= GM_MAX_STACK_DEPTH - 1 || walk_step(f, w))
			return 1;
	}
	return 0;
}

/* The return addresses from fp up, after first, into w->st: a zero after the last. w->win
 * holds what stack_top() read; past it, inside the stack mapping [lo, hi) (hi ~0:
 * not known now) gm_frame_record() reads a window at once, elsewhere a frame at a time; a
 * read that faults ends the stack, as the kernel's walk ends. */
static __always_inline void walk_frames(struct walk *w, __u64 first, __u64 fp)
{
	w->fp = fp;
	w->win.reads = 0;
	w->st->ips[0] = first;
	bpf_loop((GM_MAX_STACK_DEPTH - 1 + GM_WALK_PER_CALL - 1) / GM_WALK_PER_CALL, walk_frame, w,
		 0);
}

/* a and b up to a's first zero (or all of them). */
static __always_inline bool same_stack(const struct gm_user_stack *a,
				       const struct gm_user_stack *b)
{
	for (__u32 i = 0; i < GM_MAX_STACK_DEPTH; i++) {
		if (a->ips[i] != b->ips[i])
			return false;
		if (!a->ips[i])
			return true;
	}
	return true;
}

/* A stack's id: its hash, then the next ids while another stack holds one (a few tries, then
 * counted: two stacks never share an id). */
static __always_inline __s32 stack_id_of(struct gm_user_stack *st)
{
	struct gm_user_stack *found;
	__u64 h = 0xcbf29ce484222325ULL;
	bool ended = false;
	__u32 id;

	for (__u32 i = 0; i < GM_MAX_STACK_DEPTH; i++) {
		if (!st->ips[i])
			break;
		h = (h ^ st->ips[i]) * 0x100000001b3ULL;
	}
	id = (__u32)(h ^ (h >> 31)) & 0x7fffffff;
	for (int probe = 0; probe < 4; probe++, id = (id + 1) & 0x7fffffff) {
		found = bpf_map_lookup_elem(&stacks, &id);
		if (!found) {
			/* A new stack: zeros after its end, as the map keeps them. */
			for (__u32 i = 0; i < GM_MAX_STACK_DEPTH; i++) {
				if (ended)
					st->ips[i] = 0;
				else if (!st->ips[i])
					ended = true;
			}
			if (bpf_map_update_elem(&stacks, &id, st, BPF_NOEXIST) == 0)
				return (__s32)id;
			found = bpf_map_lookup_elem(&stacks, &id);	/* another CPU's? */
			if (!found)
				return -1;	/* full */
		}
		if (same_stack(found, st))
			return (__s32)id;
	}
	return -1;
}

/* The word at addr, if the walk's first window holds it (8-aligned, as stack slots are). */
static __always_inline bool window_word(const struct walk *w, __u64 addr, __u64 *val)
{
	__u64 off = addr - w->win.base;

	if (addr < w->win.base || (off & 7) || off + 8 > w->win.have)
		return false;
	*val = w->win.w[(off / 8) & (GM_STACK_WINDOW / 8 - 1)];
	return true;
}

/* The first read of a walk: the stack from `from` up (sp, or the frame record in a function's
 * body; inside its mapping, w->hi ~0: not known now), which holds the innermost frames and, at
 * a return, most often the caller's variables the call wrote its results to (one read at a
 * return, not two). Sets w->win: base, and have, the bytes read: 0 when none (the walk then
 * reads from fp, as it would past the window). */
static __always_inline void stack_top(struct walk *w, struct stack_scratch *sc,
				      const struct gm_inflight *rec, __u64 from, int at)
{
	__u64 hi = w->hi;
	__u64 len = hi > from && hi - from < GM_STACK_WINDOW ? hi - from : GM_STACK_WINDOW;

	w->win.base = from;
	w->win.have = 0;
	if (len < 16 || bpf_probe_read_user(w->win.w, len, (void *)from))
		return;
	w->win.have = len;
	if (at == GM_STACK_AT_RETURN) {
		if (window_word(w, rec->out_ptr, &sc->out_val[0]))
			sc->out_have |= 1;
		if (window_word(w, rec->out_pitch, &sc->out_val[1]))
			sc->out_have |= 2;
	}
}

/* at (enum gm_stack_at): at the entry, the probe is on a function's first instruction, where
 * the caller's return address is at sp and fp is still the caller's: the stack starts at the
 * caller. Else (a return probe, a USDT probe) the stack starts at the probed instruction. A
 * global function: the verifier checks it once, not in every program that calls it (the walk's
 * loop made that a 10 s load). */
__noinline int gm_user_stack_id(struct pt_regs *ctx, struct thread_state *ts, int at)
{
	struct stack_scratch *sc;
	struct gm_user_stack *st, *last;
	struct walk w;		/* not zeroed: the walk reads only what it read in */
	__u64 first, fp, from;
	int id = -1;

	if (stack_mode == GM_STACKS_NONE || !ctx || !ts)
		return -1;
	sc = &ts->stack;
	sc->out_have = 0;
	w.win.sp = PT_REGS_SP(ctx);
	w.hi = stack_bounds(sc, w.win.sp) ? sc->hi : gm_no_bound;
	fp = PT_REGS_FP(ctx);
	/* In a function's body the first window starts at its frame record, where one lies
	 * above sp inside the stack mapping (else at sp, as at a return): the walk starts at fp
	 * either way, so the frames found are the same; only the reads differ. */
	from = at == GM_STACK_IN_BODY && fp > w.win.sp && fp < w.hi && !(fp & 7) ? fp : w.win.sp;
	stack_top(&w, sc, &ts->rec, from, at);
	first = PT_REGS_IP(ctx);
	if (at == GM_STACK_AT_ENTRY) {
		if (w.win.have >= sizeof(first))
			first = w.win.w[0];
		else if (bpf_probe_read_user(&first, sizeof(first), (void *)w.win.sp))
			goto out;
	}
	st = &sc->st[sc->cur & 1];
	last = &sc->st[(sc->cur + 1) & 1];
	w.st = st;
	w.sc = sc;
	sc->fhave = 0;
	walk_frames(&w, first, fp);
	if (sc->last_id_plus1 && same_stack(last, st))
		return (int)(sc->last_id_plus1 - 1);
	id = stack_id_of(st);
	if (id >= 0) {
		sc->last_id_plus1 = (__u32)id + 1;
		sc->cur ^= 1;
	}
out:
	if (id < 0)
		count(GM_CNT_STACK_ERRORS);
	return id;
}

/* The calling thread's user stack id (-1: none), its probe `at` as enum gm_stack_at says. */
static __always_inline __s32 user_stack(struct pt_regs *ctx, struct gm_inflight *rec, int at)
{
	if (stack_mode == GM_STACKS_NONE)
		return -1;
	return gm_user_stack_id(ctx, (struct thread_state *)rec, at);
}

/* The bytes from sp to the end of the k-th page from sp's own (k >= 1). */
#define STACK_PAGES_BYTES(sp, k) ((__u32)(((sp) | 4095) + 1 + ((__u64)(k) - 1) * 4096 - (sp)))

/* Copies up to len bytes of the stack from sp into dst, and returns how many: where a page of
 * them cannot be read (past the stack mapping's end when its end is not known, or not in
 * memory), as far as the last page that can, found by halving the pages past sp's own (a
 * failed read zeroes dst: the copy kept is read again). */
static __always_inline __u32 copy_stack_top(__u8 *dst, __u64 sp, __u32 len)
{
	/* Pages from sp's own: all that len reaches into could not be read (bad), none (good). */
	__u32 bad, good = 0, n, mid = 0;

	if (len > GM_STACK_COPY_MAX)
		len = GM_STACK_COPY_MAX;
	bad = (len + (__u32)(sp & 4095) + 4095) / 4096;
	if (!bpf_probe_read_user(dst, len, (void *)sp))
		return len;
	for (int i = 0; i < 4 && bad - good > 1; i++) {
		mid = (good + bad) / 2;
		n = STACK_PAGES_BYTES(sp, mid);
		if (n > GM_STACK_COPY_MAX)
			n = GM_STACK_COPY_MAX;
		if (!bpf_probe_read_user(dst, n, (void *)sp))
			good = mid;
		else
			bad = mid;
	}
	if (!good)
		return 0;
	n = STACK_PAGES_BYTES(sp, good);
	if (n > GM_STACK_COPY_MAX)
		n = GM_STACK_COPY_MAX;
	/* The last read failed: it zeroed the copy kept. */
	if (mid != good && bpf_probe_read_user(dst, n, (void *)sp))
		return 0;
	return n;
}

/* The first allocation of a new site in DWARF mode: the caller's registers and the top of its
 * stack, for userspace to unwind through code built without frame pointers. rec: the calling
 * thread's record, whose stack mapping (found by the walk) bounds the copy: a copy that ran
 * past the mapping's end would fault, and one cut short would end the unwound stack early. */
static __always_inline void emit_stack_copy(struct pt_regs *ctx, struct gm_inflight *rec,
					    __u32 tgid, __u32 tid, __s32 stack_id)
{
	struct gm_stack_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	const struct stack_scratch *sc = &((struct thread_state *)rec)->stack;
	__u64 sp = PT_REGS_SP(ctx);
	__u32 len = stack_copy_bytes, gen = rec->gen, whole = 0;

	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	e->type = GM_REC_STACK_COPY;
	e->pid = tgid;
	e->tid = tid;
	e->stack_id = stack_id;
	e->regs[GM_REG_IP] = PT_REGS_IP(ctx);
	e->regs[GM_REG_SP] = sp;
	e->regs[GM_REG_BP] = PT_REGS_FP(ctx);
	e->regs[GM_REG_BX] = ctx->bx;
	e->regs[GM_REG_R12] = ctx->r12;
	e->regs[GM_REG_R13] = ctx->r13;
	e->regs[GM_REG_R14] = ctx->r14;
	e->regs[GM_REG_R15] = ctx->r15;
	e->gen = gen;
	if (len > GM_STACK_COPY_MAX)
		len = GM_STACK_COPY_MAX;
	if (sp >= sc->lo && sp < sc->hi && sc->hi - sp <= len)
		len = whole = (__u32)(sc->hi - sp);	/* the stack's end: all of it there is */
	/* Where the mapping's end is not known (bpf_find_vma only tries the mmap lock), the copy
	 * ends at it all the same, by its pages. One cut short of the frames (a page not in
	 * memory, or --stack-bytes) is counted where the unwind runs off it (stacks_cut), unless
	 * it is known to hold the stack whole. */
	len = copy_stack_top(e->stack, sp, len);
	e->len = (__u16)len;
	e->flags = whole && len == whole ? GM_STACK_COPY_WHOLE : 0;
	bpf_ringbuf_submit(e, 0);
}

/* What the call wrote at ptr (out-pointer i: 0 the result, 1 the pitch), as the stack walk of
 * this return read it, else read now; 0 when it cannot be read. */
static __always_inline __u64 out_word(struct gm_inflight *rec, __u32 i, __u64 ptr)
{
	struct stack_scratch *sc = &((struct thread_state *)rec)->stack;
	__u64 v = 0;

	if (sc->out_have & (1u << i))
		return sc->out_val[i & 1];
	bpf_probe_read_user(&v, sizeof(v), (void *)ptr);
	return v;
}

#endif /* GPUMEM_USTACK_BPF_H */
