/* SPDX-License-Identifier: GPL-2.0 */
/* Python stacks: the CPython frames of the calling thread, walked with the offsets userspace
 * put in py_procs, into `py_stacks`; each new stack told to userspace. */
#ifndef GPUMEM_PYSTACK_BPF_H
#define GPUMEM_PYSTACK_BPF_H

#include "lifecycle.bpf.h"

static __always_inline __u64 read_user_u64(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* A word of the thread state read; 0 past what was read. */
static __always_inline __u64 tstate_word(const struct py_scratch *sc, __u32 off)
{
	if (off > GM_PY_TSTATE_READ - 8)
		return 0;
	return sc->tstate[off / 8];
}

static __always_inline bool tstate_load(struct py_scratch *sc, __u64 tstate)
{
	return bpf_probe_read_user(sc->tstate, sizeof(sc->tstate), (void *)tstate) == 0;
}

/* The 8-byte-aligned word at frame + off, the frame being in the window. The mask keeps any
 * offset inside the buffer (the verifier's proof); userspace keeps off inside frame_read. */
static __always_inline __u64 frame_word(const struct py_scratch *sc, __u64 frame, __u32 off)
{
	return sc->win[((frame - sc->win_base + off) / 8) & (GM_PY_WINDOW / 8 - 1)];
}

/* A field of size bytes (1 or 4) at frame + off, little-endian. */
static __always_inline __u32 frame_field(const struct py_scratch *sc, __u64 frame, __u32 off,
					 __u32 size)
{
	__u64 w = frame_word(sc, frame, off & ~7u) >> ((off & 7) * 8);

	return size == 1 ? (__u32)(w & 0xff) : (__u32)w;
}

/* Reads [base, end) of the user's memory into the window. */
static __always_inline bool window_read(struct py_scratch *sc, __u64 base, __u64 end)
{
	__u64 len = end - base;

	if (len > GM_PY_WINDOW || bpf_probe_read_user(sc->win, len, (void *)base))
		return false;
	sc->win_base = base;
	sc->win_len = len;
	return true;
}

/* Whether [lo, hi) and a frame at [frame, end) lie on pages next to each other or shared, and
 * span no more than a window together: then every page between them holds a frame (mapped)
 * and one read takes them all. */
static __always_inline bool run_reaches(__u64 lo, __u64 hi, __u64 frame, __u64 end)
{
	__u64 a = frame < lo ? frame : lo, b = end > hi ? end : hi;

	return b - a <= GM_PY_WINDOW && ((end - 1) >> 12) + 1 >= lo >> 12 &&
	       frame >> 12 <= ((hi - 1) >> 12) + 1;
}

/* Reads into the window the run of frames off the data stack that the last walk found the
 * frame at [frame, end) in; false when none holds it, or its read failed. A global function:
 * verified once, not at each frame of each walking program (inlined, it doubled gpumem's
 * start). */
__noinline bool window_load_run(struct py_scratch *sc, __u64 frame, __u64 end)
{
	__u32 set, n;

	if (!sc || end < frame)		/* a frame at the top, whose end wraps: none */
		return false;
	set = sc->run_set & 1;
	n = sc->runs[set];
	for (__u32 j = 0; j < GM_PY_RUNS && j < n; j++)
		if (sc->run_lo[set][j] <= frame && end <= sc->run_hi[set][j])
			return window_read(sc, sc->run_lo[set][j], sc->run_hi[set][j]);
	return false;
}

/* Adds a frame off the data stack at [frame, end) to this walk's runs: to the last run if it
 * reaches it (run_reaches), else as a run of its own while there is room. */
static __always_inline void run_add(struct py_scratch *sc, __u64 frame, __u64 end)
{
	__u32 set = (sc->run_set ^ 1) & 1, n = sc->runs[set], k = (n - 1) & (GM_PY_RUNS - 1);
	__u64 lo = sc->run_lo[set][k], hi = sc->run_hi[set][k];

	if (n && run_reaches(lo, hi, frame, end)) {
		sc->run_lo[set][k] = frame < lo ? frame : lo;
		sc->run_hi[set][k] = end > hi ? end : hi;
		return;
	}
	if (n >= GM_PY_RUNS)
		return;
	sc->run_lo[set][n & (GM_PY_RUNS - 1)] = frame;
	sc->run_hi[set][n & (GM_PY_RUNS - 1)] = end;
	sc->runs[set] = n + 1;
}

/* Makes the frame's first frame_read bytes readable from the window. A frame in the live part
 * of the thread's data stack (3.11+: [chunk, top)) comes with the frames below it, its callers,
 * sc->want bytes (at most GM_PY_WINDOW) in one read: the walk that follows finds them there. Any
 * other frame (a generator's, a C-stack shim, 3.9's and 3.10's heap frames) comes with the run
 * of frames the thread's last walk found it in (a loop's frames are where they were: 3.9's
 * depth-50 walk here: 7 reads a page at a time, 5 by runs), else with the rest of its page,
 * where its callers' often are (frames of one size share a page of the heap). A run read that
 * fails (its memory freed since) is read again as a page. */
static __always_inline bool window_load(struct py_scratch *sc, __u64 frame, __u32 frame_read,
					__u64 chunk, __u64 top)
{
	__u64 end = frame + frame_read, want = sc->want;

	if (frame & 7)
		return false;
	if (want > GM_PY_WINDOW)
		want = GM_PY_WINDOW;
	sc->want = GM_PY_WINDOW;	/* a window that fell short: the next is full */
	if (frame >= chunk && end <= top)
		return window_read(sc, end - chunk > want ? end - want : chunk, end);
	if (window_load_run(sc, frame, end))
		return true;
	return window_read(sc, frame & ~4095ull, end);	/* its page: mapped */
}

static __always_inline bool window_has(const struct py_scratch *sc, __u64 frame,
				       __u32 frame_read)
{
	/* A frame in the last bytes of the address space, whose sum wraps, passes: the program
	 * that made it can forge its frames anyway, and what is read there is checked as any new
	 * stack is (python_checked). Written not to wrap, the test took gpumem's start from 1.3 s
	 * to 5.3 s (the verifier's states). */
	return frame >= sc->win_base && frame + frame_read <= sc->win_base + sc->win_len &&
	       !((frame - sc->win_base) & 7);
}

/* Off for this process for good: the offsets do not describe what runs there. */
static __always_inline void python_mismatch(struct gm_py_proc *pp)
{
	if (__sync_bool_compare_and_swap(&pp->state, GM_PY_ON, GM_PY_MISMATCH))
		count(GM_CNT_PY_MISMATCH);
}

/* The calling thread's id as its interpreter records it: its tid in its own pid namespace
 * (native_thread_id), or pthread_self(), which on x86-64 is the thread's fs base. */
static __always_inline __u64 python_thread_id(const struct gm_py_offsets *o)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pid *pid;
	unsigned int level;
	struct upid up = {};

	if (o->thread_id_kind == GM_PY_TID_PTHREAD) {
#ifdef __TARGET_ARCH_x86
		return BPF_CORE_READ(task, thread.fsbase);
#else
		return 0;	/* userspace registers no such interpreter here */
#endif
	}
	pid = BPF_CORE_READ(task, thread_pid);
	level = BPF_CORE_READ(pid, level);
	bpf_probe_read_kernel(&up, sizeof(up), &pid->numbers[level & 31]);
	return (__u64)up.nr;
}

/* The calling thread's PyThreadState, its first bytes read into sc: the one its record
 * remembers if that one still names this thread, else found in the interpreter's thread list
 * by thread id (the running thread's pointer in _PyRuntime is cleared while ctypes calls out
 * without the GIL). */
static __always_inline __u64 python_thread_state(struct gm_py_proc *pp, struct py_scratch *sc,
						 __u64 *cache, __u32 gen)
{
	const struct gm_py_offsets *o = &pp->off;
	__u64 interp, tstate = *cache, tid;

	/* The one it found before, still this thread's, of the interpreter it was found in, and
	 * live: a thread state cleared at its end (at finalisation too) has no data stack (3.11+)
	 * or no frame (3.9, 3.10: the walk finds none). The interpreter is read only when not. */
	if (tstate && sc->tid_gen == gen + 1 && tstate_load(sc, tstate) &&
	    tstate_word(sc, o->tstate_thread_id) == sc->tid &&
	    tstate_word(sc, o->tstate_interp) == sc->interp &&
	    (o->tstate_datastack_chunk == GM_PY_OFF_NONE ||
	     tstate_word(sc, o->tstate_datastack_chunk)))
		return tstate;
	interp = read_user_u64(pp->runtime + o->runtime_interp_head);
	if (!interp)
		return 0;	/* not initialised yet, or finalised */
	if (sc->tid_gen != gen + 1) {
		sc->tid = python_thread_id(o);
		sc->tid_gen = gen + 1;
		sc->runs[0] = sc->runs[1] = 0;	/* an exec's: another image's frames */
	}
	tid = sc->tid;
	if (!tid)
		return 0;
	if (tstate && tstate_load(sc, tstate) && tstate_word(sc, o->tstate_thread_id) == tid &&
	    tstate_word(sc, o->tstate_interp) == interp) {
		sc->interp = interp;
		return tstate;
	}
	tstate = read_user_u64(interp + o->interp_threads_head);
	for (int i = 0; i < GM_PY_MAX_THREADS && tstate; i++) {
		if (read_user_u64(tstate + o->tstate_thread_id) == tid) {
			if (!tstate_load(sc, tstate) ||
			    tstate_word(sc, o->tstate_interp) != interp) {
				python_mismatch(pp);
				return 0;
			}
			*cache = tstate;
			sc->interp = interp;
			return tstate;
		}
		tstate = read_user_u64(tstate + o->tstate_next);
	}
	return 0;	/* a thread Python does not know: native frames only */
}

/* The code-unit index of a frame's instruction, or GM_PY_INSTR_NONE. */
static __always_inline __u32 python_instr(const struct gm_py_offsets *o,
					  const struct py_scratch *sc, __u64 frame, __u64 code)
{
	__u64 instr, units;
	__s32 lasti;

	if (o->instr_kind == GM_PY_INSTR_POINTER) {
		instr = frame_word(sc, frame, o->frame_instr);
		units = code + o->code_units;
		return instr >= units && instr - units < 2ull * GM_PY_INSTR_NONE
			       ? (__u32)((instr - units) / 2) : GM_PY_INSTR_NONE;
	}
	lasti = (__s32)frame_field(sc, frame, o->frame_instr, 4);
	if (lasti < 0)
		return GM_PY_INSTR_NONE;	/* not started */
	return o->instr_kind == GM_PY_INSTR_LASTI_BYTES ? (__u32)lasti / 2 : (__u32)lasti;
}

/* python_walk's state, the bpf_loop callback's data. */
struct py_walk {
	struct gm_py_proc *pp;
	struct py_scratch *sc;
	__u64 frame, chunk, top;
	__u64 h;		/* the id so far: FNV-1a of the process, each frame's code and instruction */
	__u32 frame_read;
	bool failed;
};

/* Frame i of the walk: 0 to go on, 1 when the chain ends (or cannot be read). */
static __always_inline long python_frame(struct py_walk *w, __u64 i)
{
	const struct gm_py_offsets *o = &w->pp->off;
	struct py_scratch *sc = w->sc;
	struct gm_py_stack *st = &sc->st;
	__u64 frame = w->frame, code;
	__u32 d = st->depth, idx;

	if (!frame)
		return 1;
	if (!window_has(sc, frame, w->frame_read) &&
	    !window_load(sc, frame, w->frame_read, w->chunk, w->top)) {
		w->failed = true;
		return 1;
	}
	if (i == 0)
		sc->first_end = frame + w->frame_read;
	if (frame >= w->chunk && frame < w->top)
		sc->lowest = frame;	/* callers lie below: the last is the lowest */
	else
		run_add(sc, frame, frame + w->frame_read);
	code = frame_word(sc, frame, o->frame_code);
	if (o->owner_cstack != GM_PY_OFF_NONE &&
	    frame_field(sc, frame, o->frame_owner, 1) == o->owner_cstack) {
		/* The C stack's shim (3.12+): the frame below it is the first its eval loop ran,
		 * an entry frame. */
		if (d > 0)
			st->instr[(d - 1) & (GM_PY_MAX_FRAMES - 1)] |= GM_PY_INSTR_ENTRY;
		w->frame = frame_word(sc, frame, o->frame_previous);
		return 0;
	}
	if (d >= GM_PY_MAX_FRAMES) {
		st->truncated = 1;
		w->h ^= 1ull << 63;	/* the chain went on: another stack than the one it ends */
		return 1;
	}
	idx = python_instr(o, sc, frame, code);
	if (o->frame_entry != GM_PY_OFF_NONE && frame_field(sc, frame, o->frame_entry, 1))
		idx |= GM_PY_INSTR_ENTRY;
	st->code[d & (GM_PY_MAX_FRAMES - 1)] = code;
	st->instr[d & (GM_PY_MAX_FRAMES - 1)] = idx;
	st->depth = d + 1;
	w->h = (w->h ^ code) * 0x100000001b3ull;
	w->h = (w->h ^ idx) * 0x100000001b3ull;
	w->frame = frame_word(sc, frame, o->frame_previous);
	return 0;
}

/* PY_FRAMES_PER_CALL frames of the walk, a bpf_loop callback: the verifier checks its body
 * once, not once per frame (the walk unrolled whole took 1.3 s of verification in each program
 * that walks), and a call returns once for that many frames (each return takes the kernel's
 * return thunk where the CPU needs one). Measured here at depth 50, a run of session_alloc:
 * 1 frame a call 584 ns, 2 532, 4 514; but gpumem's start took 0.96 s, 1.13 s and 1.45 s (the
 * verifier's 629k, 675k and 795k instructions, most of them the walk, checked in each of the
 * three programs that walk). */
#define PY_FRAMES_PER_CALL 2

static long python_frame_calls(__u64 i, void *data)
{
	struct py_walk *w = data;

#pragma unroll
	for (int k = 0; k < PY_FRAMES_PER_CALL; k++)
		if (python_frame(w, i * PY_FRAMES_PER_CALL + k))
			return 1;
	return 0;
}

/* Walks the frame chain of the thread state in sc into st, and hashes it into sc->hash as it
 * goes (the process is part of the hash: a stack checked in one process is never taken as
 * checked in another with the same addresses); false when a frame cannot be read. The code
 * objects are not checked here: a stack seen before was checked when it was first
 * recorded (python_checked), which spares two reads a frame on every call of a known line. */
static __always_inline bool python_walk(struct gm_py_proc *pp, struct py_scratch *sc,
					__u32 tgid)
{
	const struct gm_py_offsets *o = &pp->off;
	struct gm_py_stack *st = &sc->st;
	struct py_walk w = { .pp = pp, .sc = sc, .frame_read = o->frame_read,
			     .h = (0xcbf29ce484222325ull ^ ((__u64)tgid << 1)) * 0x100000001b3ull };

	st->depth = 0;
	st->truncated = 0;
	if (w.frame_read < 8 || w.frame_read > GM_PY_FRAME_READ)
		return false;

	if (o->tstate_cframe != GM_PY_OFF_NONE)
		w.frame = read_user_u64(tstate_word(sc, o->tstate_cframe) + o->cframe_frame);
	else
		w.frame = tstate_word(sc, o->cframe_frame);
	if (o->tstate_datastack_chunk != GM_PY_OFF_NONE) {
		w.chunk = tstate_word(sc, o->tstate_datastack_chunk);
		w.top = tstate_word(sc, o->tstate_datastack_top);
	}
	sc->win_base = sc->win_len = 0;
	/* As much data stack as the last walk used, and some: most loops call from one depth. */
	sc->want = sc->span ? sc->span + GM_PY_WINDOW_SLACK : GM_PY_WINDOW;
	sc->first_end = sc->lowest = 0;
	sc->runs[(sc->run_set ^ 1) & 1] = 0;
	bpf_loop((2 * GM_PY_MAX_FRAMES + PY_FRAMES_PER_CALL) / PY_FRAMES_PER_CALL, python_frame_calls,
		 &w, 0);
	sc->run_set ^= 1;	/* this walk's runs, for the next */
	if (w.failed)
		return false;
	sc->span = sc->lowest && sc->lowest < sc->first_end ? sc->first_end - sc->lowest : 0;
	w.h ^= w.h >> 29;
	sc->hash = (__u32)(w.h ^ (w.h >> 32)) & 0x7fffffff;
	return true;
}

/* Whether every frame's code is a code object: the offsets describe what runs there. Only a
 * stack that passes is recorded, so a name is never read from what is not a code object. */
static __always_inline bool python_checked(const struct gm_py_proc *pp,
					   const struct gm_py_stack *st)
{
	for (int i = 0; i < GM_PY_MAX_FRAMES; i++) {
		if (i >= st->depth)
			break;
		if (read_user_u64(st->code[i] + pp->off.object_type) != pp->code_type)
			return false;
	}
	return true;
}

static __always_inline bool python_same(const struct gm_py_stack *a, const struct gm_py_stack *b)
{
	if (a->depth != b->depth || a->truncated != b->truncated)
		return false;
	for (int i = 0; i < GM_PY_MAX_FRAMES; i++) {
		if (i >= a->depth)
			break;
		if (a->code[i] != b->code[i] || a->instr[i] != b->instr[i])
			return false;
	}
	return true;
}

/* The stack just walked, whose id py_stacks gives, as the thread's last. */
static __always_inline void python_keep_last(struct py_scratch *sc, __u32 id)
{
	sc->last = sc->st;
	sc->last_id_plus1 = id + 1;
}

/* A new Python stack: userspace reads its code objects while the process lives (held until
 * then, for -c). */
static __always_inline void emit_python_stack(__u32 tgid, __u32 gen, __s32 id,
					      const struct gm_py_stack *st)
{
	struct gm_py_stack_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(GM_CNT_RINGBUF_DROPPED);
		return;
	}
	e->type = GM_REC_PY_STACK;
	e->pid = tgid;
	e->gen = gen;
	e->py_stack_id = id;
	e->pad = 0;
	bpf_probe_read_kernel(&e->stack, sizeof(e->stack), st);
	e->held = hold_new_procs && hold(tgid);
	bpf_ringbuf_submit(e, 0);
}

/* python_stack() past its first test; none: what *none_cache takes where the process has no
 * interpreter to walk (py_procs_gen's count as read before the lookup + 1, 0: none read). */
static __noinline __s32 python_walked(__u32 tgid, __u32 gen, __u64 *tstate_cache,
				      __u64 *none_cache, __u64 none)
{
	struct gm_py_stack *st, *found;
	struct py_scratch *sc;
	struct gm_py_proc *pp;
	__u64 tstate;
	__u32 id;

	pp = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!pp || pp->state != GM_PY_ON) {
		/* Off stays off: only userspace turns an entry on, and it counts that. */
		*none_cache = none;
		return -1;
	}
	sc = bpf_task_storage_get(&py_scratch, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!sc) {
		count(GM_CNT_PY_STACK_ERRORS);
		return -1;
	}
	st = &sc->st;
	tstate = python_thread_state(pp, sc, tstate_cache, gen);
	if (!tstate)
		return -1;
	if (!python_walk(pp, sc, tgid)) {
		python_mismatch(pp);
		return -1;
	}
	if (!st->depth)
		return -1;
	id = sc->hash;
	/* The thread's stack before, again (a loop's allocations): its id with no lookup. */
	if (sc->last_id_plus1 == id + 1 && python_same(&sc->last, st))
		return (__s32)id;
	found = bpf_map_lookup_elem(&py_stacks, &id);
	if (found) {
		if (!python_same(found, st)) {
			count(GM_CNT_PY_STACK_ERRORS);	/* two stacks, one bucket */
			return -1;
		}
		python_keep_last(sc, id);
		return (__s32)id;
	}
	if (!python_checked(pp, st)) {
		python_mismatch(pp);
		return -1;
	}
	if (bpf_map_update_elem(&py_stacks, &id, st, BPF_NOEXIST) == 0) {
		emit_python_stack(tgid, gen, (__s32)id, st);
		python_keep_last(sc, id);
		return (__s32)id;
	}
	found = bpf_map_lookup_elem(&py_stacks, &id);	/* another CPU's, just made */
	if (found && python_same(found, st)) {
		python_keep_last(sc, id);
		return (__s32)id;
	}
	count(GM_CNT_PY_STACK_ERRORS);
	return -1;
}

/* The calling thread's Python stack id, or -1 (no interpreter, no Python frames, lost). A
 * thread of a process without an interpreter is told here, with no call. */
static __always_inline __s32 python_stack(__u32 tgid, __u32 gen, __u64 *tstate_cache,
					  __u64 *none_cache)
{
	__u64 *procs_gen, seen;
	__u32 zero = 0;

	if (!python_frames || stack_mode == GM_STACKS_NONE)
		return -1;
	/* Read before the lookup: an entry made meanwhile is counted after it. */
	procs_gen = bpf_map_lookup_elem(&py_procs_gen, &zero);
	seen = procs_gen ? *(volatile __u64 *)procs_gen : 0;
	if (procs_gen && *none_cache == seen + 1)
		return -1;
	return python_walked(tgid, gen, tstate_cache, none_cache, procs_gen ? seen + 1 : 0);
}

#endif /* GPUMEM_PYSTACK_BPF_H */
