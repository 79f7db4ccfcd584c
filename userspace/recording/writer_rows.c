// SPDX-License-Identifier: GPL-2.0
/* The rows every event and sample refers to, each written once: a process (matched between
 * events, which know its pid, and snapshots, which know its serial), its call sites, and
 * stacks stored once per distinct content with their named frames. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "recording/writer_int.h"

#define STACK_CACHE_MAX 65536	/* stacks whose row is remembered by pointer; then cleared */
#define UNMATCHED_GENS 10	/* snapshots an ended, never-matched process is kept for */

static struct rec_proc *proc_new(struct recorder *r, int pid, const char *comm,
				 uint64_t start_ns)
{
	struct rec_proc *p = xcalloc(1, sizeof(*p));
	sqlite3_stmt *st = r->st[ST_PROC_NEW];

	p->id = r->next_proc_id++;
	p->pid = pid;
	p->open = true;
	p->seen_gen = r->gen;
	sqlite3_bind_int64(st, 1, (int64_t)p->id);
	sqlite3_bind_int64(st, 2, (int64_t)r->session_id);
	sqlite3_bind_int(st, 3, pid);
	rec_bind_text(st, 4, comm);
	sqlite3_bind_int64(st, 5, (int64_t)start_ns);
	rec_step(r, ST_PROC_NEW);
	if (r->nprocs == r->procs_cap) {
		r->procs_cap = r->procs_cap ? 2 * r->procs_cap : 64;
		r->procs = xrealloc(r->procs, r->procs_cap * sizeof(*r->procs));
	}
	r->procs[r->nprocs++] = p;
	idmap_put(&r->by_pid, (uint64_t)pid + 1, 0, (uintptr_t)p, 0);
	return p;
}

static struct rec_proc *proc_at(const struct idmap *m, uint64_t key)
{
	struct idmap_slot *s = idmap_find(m, key + 1, 0);

	return s ? (struct rec_proc *)(uintptr_t)s->v : NULL;
}

struct rec_proc *rec_proc_of_event(struct recorder *r, const struct gm_call_event *e,
				   uint64_t wall_ns)
{
	struct rec_proc *p = proc_at(&r->by_pid, e->pid);
	char comm[GM_COMM_LEN + 1];

	if (p)
		return p;
	snprintf(comm, sizeof(comm), "%.*s", GM_COMM_LEN, e->comm);
	return proc_new(r, (int)e->pid, comm, wall_ns);
}

void rec_proc_close(struct recorder *r, struct rec_proc *p, uint64_t end_ns, bool has_code,
		    int code)
{
	sqlite3_stmt *st = r->st[ST_PROC_END];

	if (!p->open)
		return;
	p->open = false;
	p->end_ns = end_ns;
	if (proc_at(&r->by_pid, (uint64_t)p->pid) == p)
		idmap_del(&r->by_pid, (uint64_t)p->pid + 1, 0, NULL);
	if (!p->serial)
		idmap_put(&r->unmatched, (uint64_t)p->pid + 1, 0, (uintptr_t)p, 0);
	if (p->live)
		r->live_sweep_due = true;
	if (p->deleted)
		return;
	sqlite3_bind_int64(st, 1, (int64_t)p->id);
	sqlite3_bind_int64(st, 2, (int64_t)end_ns);
	if (has_code)
		sqlite3_bind_int(st, 3, code);
	else
		sqlite3_bind_null(st, 3);
	rec_step(r, ST_PROC_END);
}

static void set_serial(struct recorder *r, struct rec_proc *p, uint64_t serial)
{
	p->serial = serial;
	p->identity = 0;	/* written again, with the serial */
	idmap_put(&r->by_serial, serial + 1, 0, (uintptr_t)p, 0);
}

/* An ended process of a snapshot whose serial is new: the row its exit event closed. */
static struct rec_proc *match_ended(struct recorder *r, const struct snap_proc *sp)
{
	struct rec_proc *p = proc_at(&r->unmatched, (uint64_t)sp->pid);

	if (p) {
		idmap_del(&r->unmatched, (uint64_t)sp->pid + 1, 0, NULL);
		return p;
	}
	p = proc_at(&r->by_pid, (uint64_t)sp->pid);	/* it ended without an exit record */
	return p && !p->serial ? p : NULL;
}

struct rec_proc *rec_proc_of_snapshot(struct recorder *r, const struct snapshot *snap,
				      const struct snap_proc *sp)
{
	struct rec_proc *p = proc_at(&r->by_serial, sp->serial);
	uint64_t wall_ns = snapshot_wall_ns(snap, snap->time_ns), start = wall_ns;

	if (p)
		return p;
	if (!sp->alive) {
		p = match_ended(r, sp);
	} else {
		p = proc_at(&r->by_pid, (uint64_t)sp->pid);
		if (p && p->serial) {	/* that one ended unseen: this is a new process */
			rec_proc_close(r, p, wall_ns, false, 0);
			p = NULL;
		}
	}
	if (!p) {
		if ((sp->valid & SP_STATS) && sp->st.first_seen_ns)
			start = snapshot_wall_ns(snap, sp->st.first_seen_ns);
		p = proc_new(r, sp->pid, sp->valid & SP_COMM ? sp->comm : NULL, start);
	}
	set_serial(r, p, sp->serial);
	return p;
}

static unsigned int identity_of(const struct snap_proc *sp)
{
	const struct container_info *ci = &sp->container;
	unsigned int bits = sp->valid & (SP_COMM | SP_CMDLINE | SP_CGROUP | SP_NS_PID | SP_USER);

	if (ci->pod_name[0] || ci->pod_namespace[0] || ci->container_name[0])
		bits |= REC_NAMES_WRITTEN;
	return bits;
}

void rec_proc_identity(struct recorder *r, struct rec_proc *rp, const struct snap_proc *sp)
{
	const struct container_info *ci = &sp->container;
	sqlite3_stmt *st = r->st[ST_PROC_IDENTITY];
	unsigned int bits = identity_of(sp);

	if (rp->identity == bits || rp->deleted)
		return;
	rp->identity = bits;
	sqlite3_bind_int64(st, 1, (int64_t)rp->id);
	sqlite3_bind_int64(st, 2, (int64_t)sp->serial);
	if (sp->valid & SP_NS_PID)
		sqlite3_bind_int(st, 3, sp->ns_pid);
	else
		sqlite3_bind_null(st, 3);
	rec_bind_text(st, 4, sp->valid & SP_COMM ? sp->comm : NULL);
	rec_bind_text(st, 5, sp->valid & SP_CMDLINE ? sp->cmdline : NULL);
	rec_bind_text(st, 6, sp->valid & SP_CGROUP ? sp->cgroup : NULL);
	rec_bind_text(st, 7, sp->valid & SP_USER ? sp->user : NULL);
	rec_bind_text(st, 8, ci->runtime);
	rec_bind_text(st, 9, ci->has_id ? ci->id : NULL);
	rec_bind_text(st, 10, ci->has_pod ? ci->pod_uid : NULL);
	rec_bind_text(st, 11, ci->has_pod ? ci->qos : NULL);
	rec_bind_text(st, 12, ci->pod_name);
	rec_bind_text(st, 13, ci->pod_namespace);
	rec_bind_text(st, 14, ci->container_name);
	rec_step(r, ST_PROC_IDENTITY);
}

/* The site key beside the process row: the kernel's stack id, the device + 1 (below
 * GM_MAX_GPUS + 1), the api and the kind. */
static uint64_t site_key(int32_t stack_key, uint32_t api, uint32_t kind, uint32_t gpu)
{
	return (uint64_t)(uint32_t)stack_key << 32 | (uint64_t)(gpu & 0xff) << 24 |
	       (uint64_t)(api & 0xffff) << 8 | (kind & 0xff);
}

/* The process row (below 2^32) with the Python stack id above it: Python lines that reach one
 * native stack (PyTorch's tensors all do) are sites apart, as in the kernel. */
static uint64_t site_owner(const struct rec_proc *p, int32_t py_stack_id)
{
	return p->id | (uint64_t)(uint32_t)(py_stack_id < 0 ? 0 : py_stack_id + 1) << 32;
}

static struct rec_site *site_new(struct recorder *r, struct rec_proc *p, int32_t stack_key,
				 int32_t py_stack_id, uint32_t api, uint32_t kind, uint32_t gpu,
				 uint64_t stack_row)
{
	struct rec_site *s = xcalloc(1, sizeof(*s));
	sqlite3_stmt *st = r->st[ST_SITE_NEW];

	s->id = r->next_site_id++;
	s->stack_row = stack_row;
	sqlite3_bind_int64(st, 1, (int64_t)s->id);
	sqlite3_bind_int64(st, 2, (int64_t)p->id);
	sqlite3_bind_int(st, 3, stack_key);
	sqlite3_bind_int(st, 4, (int)api);
	sqlite3_bind_int(st, 5, (int)kind);
	if (stack_row)
		sqlite3_bind_int64(st, 6, (int64_t)stack_row);
	else
		sqlite3_bind_null(st, 6);
	if (py_stack_id >= 0)
		sqlite3_bind_int(st, 7, py_stack_id);
	else
		sqlite3_bind_null(st, 7);
	if (gpu)
		sqlite3_bind_int(st, 8, (int)gpu - 1);
	else
		sqlite3_bind_null(st, 8);
	rec_step(r, ST_SITE_NEW);
	p->sites = xrealloc(p->sites, (p->nsites + 1) * sizeof(*p->sites));
	p->sites[p->nsites++] = s;
	idmap_put(&r->sites, site_owner(p, py_stack_id), site_key(stack_key, api, kind, gpu),
		  (uintptr_t)s, 0);
	return s;
}

struct rec_site *rec_site_of(struct recorder *r, struct rec_proc *p, int32_t stack_key,
			     int32_t py_stack_id, uint32_t api, uint32_t kind, uint32_t gpu,
			     struct snap_stack *stack)
{
	struct idmap_slot *slot = idmap_find(&r->sites, site_owner(p, py_stack_id),
					     site_key(stack_key, api, kind, gpu));
	uint64_t row = rec_stack_row(r, stack);
	struct rec_site *s;

	if (!slot)
		return site_new(r, p, stack_key, py_stack_id, api, kind, gpu, row);
	s = (struct rec_site *)(uintptr_t)slot->v;
	if (row && row != s->stack_row) {	/* named better since (its exit map came) */
		s->stack_row = row;
		sqlite3_bind_int64(r->st[ST_SITE_STACK], 1, (int64_t)s->id);
		sqlite3_bind_int64(r->st[ST_SITE_STACK], 2, (int64_t)row);
		rec_step(r, ST_SITE_STACK);
	}
	return s;
}

static void hash_bytes(uint64_t *h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		*h = (*h ^ p[i]) * 0x100000001b3ull;
}

static void hash_string(uint64_t *h, const char *s)
{
	hash_bytes(h, s ? s : "", s ? strlen(s) + 1 : 1);	/* NULL and "" differ */
	if (!s)
		hash_bytes(h, "\xff", 1);
}

/* FNV-1a over everything the frames say. */
static uint64_t stack_hash(const struct snap_stack *st)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint32_t i = 0; i < st->nframes; i++) {
		const struct snap_frame *f = &st->frames[i];
		uint64_t nums[4] = { f->addr, f->offset, f->symbol_offset,
				     (uint64_t)f->line << 2 | (uint64_t)f->python << 1 |
					     f->inlined };

		hash_bytes(&h, nums, sizeof(nums));
		hash_string(&h, f->module);
		hash_string(&h, f->symbol);
		hash_string(&h, f->file);
	}
	return h;
}

static void frame_insert(struct recorder *r, uint64_t id, uint32_t idx, const struct snap_frame *f)
{
	sqlite3_stmt *st = r->st[ST_FRAME_NEW];

	sqlite3_bind_int64(st, 1, (int64_t)id);
	sqlite3_bind_int(st, 2, (int)idx);
	sqlite3_bind_int64(st, 3, (int64_t)f->addr);
	rec_bind_text(st, 4, f->module);
	rec_bind_text(st, 5, f->symbol);
	sqlite3_bind_int64(st, 6, (int64_t)f->offset);
	if (f->symbol && !f->inlined)
		sqlite3_bind_int64(st, 7, (int64_t)f->symbol_offset);
	else
		sqlite3_bind_null(st, 7);
	rec_bind_text(st, 8, f->file);
	if (f->line)
		sqlite3_bind_int(st, 9, (int)f->line);
	else
		sqlite3_bind_null(st, 9);
	sqlite3_bind_int(st, 10, f->inlined);
	sqlite3_bind_int(st, 11, f->python);
	rec_step(r, ST_FRAME_NEW);
}

/* The row of a stack with this content: found by its hash, else written. */
static uint64_t stack_resolve(struct recorder *r, const struct snap_stack *st)
{
	sqlite3_stmt *find = r->st[ST_STACK_FIND], *ins = r->st[ST_STACK_NEW];
	uint64_t h = stack_hash(st), id = 0, now = realtime_ns();

	sqlite3_bind_int64(find, 1, (int64_t)h);
	sqlite3_bind_int(find, 2, (int)st->nframes);
	if (sqlite3_step(find) == SQLITE_ROW)
		id = (uint64_t)sqlite3_column_int64(find, 0);
	sqlite3_reset(find);
	if (id) {
		sqlite3_bind_int64(r->st[ST_STACK_TOUCH], 1, (int64_t)id);
		sqlite3_bind_int64(r->st[ST_STACK_TOUCH], 2, (int64_t)now);
		rec_step(r, ST_STACK_TOUCH);
		return id;
	}
	id = r->next_stack_id++;
	sqlite3_bind_int64(ins, 1, (int64_t)id);
	sqlite3_bind_int64(ins, 2, (int64_t)h);
	sqlite3_bind_int(ins, 3, (int)st->nframes);
	sqlite3_bind_int64(ins, 4, (int64_t)now);
	if (rec_step(r, ST_STACK_NEW))
		for (uint32_t i = 0; i < st->nframes; i++)
			frame_insert(r, id, i, &st->frames[i]);
	return id;
}

uint64_t rec_stack_row(struct recorder *r, struct snap_stack *st)
{
	struct idmap_slot *slot;
	uint64_t id;

	if (!st || !st->nframes || r->err)
		return 0;
	slot = idmap_find(&r->stacks, (uintptr_t)st, 0);
	if (slot) {
		slot->v2 = 1;	/* used since the last flush */
		return slot->v;
	}
	if (r->stacks.n >= STACK_CACHE_MAX)
		rec_stacks_flush(r, realtime_ns(), true);
	id = stack_resolve(r, st);
	idmap_put(&r->stacks, (uintptr_t)snap_stack_get(st), 0, id, 0);
	return id;
}

/* Writes when the stacks used since the last flush were last used (now_wall 0: does not);
 * clear: forgets them. */
void rec_stacks_flush(struct recorder *r, uint64_t now_wall, bool clear)
{
	sqlite3_stmt *st = r->st[ST_STACK_TOUCH];

	for (size_t i = 0; i < r->stacks.cap; i++) {
		struct idmap_slot *s = &r->stacks.slots[i];

		if (!s->k1)
			continue;
		if (s->v2 && now_wall && !r->err) {
			sqlite3_bind_int64(st, 1, (int64_t)s->v);
			sqlite3_bind_int64(st, 2, (int64_t)now_wall);
			rec_step(r, ST_STACK_TOUCH);
			s->v2 = 0;
		}
		if (clear)
			snap_stack_put((struct snap_stack *)(uintptr_t)s->k1);
	}
	if (clear)
		idmap_clear(&r->stacks);
}

/* Drops from the site map the sites of processes that go, and from the live map the live
 * allocations of processes that ended (the driver freed those when the process ended). */
static void forget(struct recorder *r, const struct idmap *sites_of, const struct idmap *live_of)
{
	for (int pass = 0; pass < 2; pass++) {
		struct idmap *m = pass ? &r->live : &r->sites;
		const struct idmap *of = pass ? live_of : sites_of;

		for (size_t i = 0; of->n && i < m->cap;) {
			struct idmap_slot *s = &m->slots[i];
			uint64_t proc = pass ? s->k1 >> REC_LIVE_SPACE_BITS : s->k1 & 0xffffffffull;

			/* A deletion shifts a later entry into slot i: look at i again. */
			if (s->k1 && idmap_find(of, proc, 0) && idmap_del(m, s->k1, s->k2, NULL))
				continue;
			i++;
		}
	}
}

static bool going(const struct recorder *r, const struct rec_proc *p)
{
	if (p->open)
		return false;
	if (p->serial)
		return p->seen_gen != r->gen;
	return r->gen - p->seen_gen > UNMATCHED_GENS;
}

static void proc_drop(struct recorder *r, struct rec_proc *p)
{
	if (p->serial && proc_at(&r->by_serial, p->serial) == p)
		idmap_del(&r->by_serial, p->serial + 1, 0, NULL);
	if (proc_at(&r->unmatched, (uint64_t)p->pid) == p)
		idmap_del(&r->unmatched, (uint64_t)p->pid + 1, 0, NULL);
	for (size_t i = 0; i < p->nsites; i++)
		free(p->sites[i]);
	free(p->sites);
	free(p);
}

void rec_prune(struct recorder *r)
{
	struct idmap sites_of = { 0 }, live_of = { 0 };
	size_t kept = 0;

	for (size_t i = 0; i < r->nprocs; i++) {
		struct rec_proc *p = r->procs[i];
		bool go = going(r, p);

		if (!p->open && p->live && (go || r->live_sweep_due)) {
			idmap_put(&live_of, p->id, 0, 1, 0);
			p->live = 0;
		}
		if (!go) {
			r->procs[kept++] = p;
			continue;
		}
		idmap_put(&sites_of, p->id, 0, 1, 0);
		proc_drop(r, p);
	}
	r->nprocs = kept;
	r->live_sweep_due = false;
	forget(r, &sites_of, &live_of);
	idmap_free(&sites_of);
	idmap_free(&live_of);
}

void rec_forget_all(struct recorder *r)
{
	rec_stacks_flush(r, 0, true);
	for (size_t i = 0; i < r->nprocs; i++)
		proc_drop(r, r->procs[i]);
	free(r->procs);
	r->procs = NULL;
	r->nprocs = 0;
	idmap_free(&r->by_pid);
	idmap_free(&r->by_serial);
	idmap_free(&r->unmatched);
	idmap_free(&r->sites);
	idmap_free(&r->stacks);
	idmap_free(&r->live);
}
