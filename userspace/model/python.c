// SPDX-License-Identifier: GPL-2.0
/* Processes that run CPython. An interpreter is the module (the python executable, or
 * libpython) that defines PyCode_Type and _PyRuntime; its version comes from Py_Version (3.11+)
 * or the file's name; only a version with a layout (pycode.c; 3.13's read from the process's
 * _Py_DebugOffsets) is enabled, and only after the live process agreed with it. The BPF side
 * checks every new stack again (each frame's code object type) and turns a mismatching process
 * off; that is said here, with -v. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "base/util.h"
#include "host/procs.h"
#include "model/python.h"
#include "symbols/elf_syms.h"
#include "symbols/pycode.h"
#include "symbols/symbolize.h"

#define PY_KEEP_ENDED 1024	/* ended processes whose named stacks are kept */

/* A Python frame as named from its code object; file NULL: unknown. */
struct py_frame {
	uint64_t code;
	const char *file, *qualname;
	int line;		/* -1: unknown or none */
	bool entry;
};

struct py_named {
	int32_t id;
	uint32_t n;
	bool truncated;
	bool complete;		/* every frame named: never read again */
	struct py_frame frames[GM_PY_MAX_FRAMES];
};

struct py_interp {
	int pid;
	uint64_t start_ticks;
	struct py_layout *layout;	/* NULL: examined, not a (supported) Python */
	uint64_t code_type;
	char *module;			/* the interpreter's mapping path */
	bool registered;		/* in py_procs */
	/* Refused (said with -v at once), counted in python_refused only once the process
	 * allocates: a host's other interpreters are none of gpumem's business. */
	bool refused, refusal_counted, traced;
	bool ended;			/* gone: its names kept for its final report */
	bool mismatch_said;
	struct py_named *named;
	size_t nnamed;
};

/* Names live as long as the session: snapshots point at them. A traced program chooses them:
 * past PY_NAMES_MAX_BYTES a new one is dropped (its frame shows no name) and counted. */
#define PY_NAMES_MAX_BYTES (16u << 20)
struct intern {
	char **strs;
	size_t n, cap;
	size_t bytes;
	uint64_t dropped;
};

struct interp_file {
	uint64_t runtime, code_type, version_vaddr;	/* symbol values; 0: absent */
	bool dyn;			/* ET_DYN: add the load bias */
	uint64_t first_load;		/* vaddr of the first PT_LOAD, page aligned */
	uint32_t version_hex;		/* Py_Version; 0: none */
	bool frame_getcode, is_none;	/* PyFrame_GetCode (new in 3.9), Py_IsNone (3.10) */
};

/* Interpreter files examined, by identity (device, inode, size, mtime and ctime: any change to
 * the file sets its ctime, which no user can set back): a host that runs python many times a
 * second reads each interpreter's symbols once, not at every exec. A ring, the oldest
 * overwritten first. */
#define PY_FILES_SEEN 16
struct interp_seen {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	int err;		/* read_interp_fd's */
	struct interp_file f;
};

struct python {
	int procs_fd, stacks_fd;
	int procs_gen_fd;	/* counts the entries made in procs_fd (the BPF side's cue) */
	bool read_only;		/* a running agent's maps: it registers, this only names */
	uint64_t *refused;
	bool final;		/* the examination at a process's first call: no later one */
	struct py_interp *interps;
	size_t ninterps;
	struct intern names;
	uint64_t stacks_unnamed;	/* new stacks of a process with PY_MAX_NAMED named */
	struct interp_seen seen[PY_FILES_SEEN];
	size_t nseen, next_seen;
};

uint64_t python_names_dropped(const struct python *py)
{
	return py ? py->names.dropped : 0;
}

uint64_t python_stacks_unnamed(const struct python *py)
{
	return py ? py->stacks_unnamed : 0;
}

struct python *python_new(int py_procs_fd, int py_stacks_fd, int py_procs_gen_fd,
			  uint64_t *refused, bool read_only)
{
	struct python *py = xcalloc(1, sizeof(*py));

	py->procs_fd = py_procs_fd;
	py->stacks_fd = py_stacks_fd;
	py->procs_gen_fd = py_procs_gen_fd;
	py->read_only = read_only;
	py->refused = refused;
	return py;
}

/* Counts an entry just made in py_procs (this is its only writer): a thread that found none for
 * its process looks again (the BPF side's python_stack). */
static void count_new_entry(struct python *py)
{
	uint32_t key = 0;
	uint64_t made = 0;

	if (py->procs_gen_fd < 0)
		return;
	if (bpf_map_lookup_elem(py->procs_gen_fd, &key, &made) == 0) {
		made++;
		if (bpf_map_update_elem(py->procs_gen_fd, &key, &made, BPF_ANY) == 0)
			return;
	}
	p_err("cannot count a new entry in the py_procs_gen map: %s (Python frames of threads "
	      "that allocated before may be missed)", strerror(errno));
}

static void interp_free(struct py_interp *pi)
{
	free(pi->layout);
	free(pi->module);
	free(pi->named);
}

void python_free(struct python *py)
{
	if (!py)
		return;
	for (size_t i = 0; i < py->ninterps; i++)
		interp_free(&py->interps[i]);
	free(py->interps);
	for (size_t i = 0; i < py->names.cap; i++)
		free(py->names.strs[i]);
	free(py->names.strs);
	free(py);
}

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static const char *intern(struct intern *in, const char *s)
{
	size_t i;

	if (!s)
		return NULL;
	if (2 * (in->n + 1) > in->cap) {
		struct intern grown = { .cap = in->cap ? in->cap * 2 : 256 };

		grown.strs = xcalloc(grown.cap, sizeof(char *));
		for (size_t j = 0; j < in->cap; j++) {
			if (!in->strs[j])
				continue;
			for (i = str_hash(in->strs[j]) % grown.cap; grown.strs[i];)
				i = (i + 1) % grown.cap;
			grown.strs[i] = in->strs[j];
		}
		grown.n = in->n;
		grown.bytes = in->bytes;
		grown.dropped = in->dropped;
		free(in->strs);
		*in = grown;
	}
	for (i = str_hash(s) % in->cap; in->strs[i]; i = (i + 1) % in->cap)
		if (strcmp(in->strs[i], s) == 0)
			return in->strs[i];
	if (in->bytes + strlen(s) + 1 > PY_NAMES_MAX_BYTES) {
		in->dropped++;
		return NULL;
	}
	in->strs[i] = xstrdup(s);
	in->bytes += strlen(s) + 1;
	in->n++;
	return in->strs[i];
}

static struct py_interp *find_interp(struct python *py, int pid)
{
	for (size_t i = 0; i < py->ninterps; i++)
		if (py->interps[i].pid == pid)
			return &py->interps[i];
	return NULL;
}

static void forget(struct python *py, int pid)
{
	struct py_interp *pi = find_interp(py, pid);
	__u32 key = (__u32)pid;

	if (!pi)
		return;
	if (pi->registered && py->procs_fd >= 0 && !py->read_only)
		bpf_map_delete_elem(py->procs_fd, &key);
	interp_free(pi);
	*pi = py->interps[--py->ninterps];
}

/* ---- the interpreter's file ---- */

/* Whether the symbol table scn's header sh describes, and its string table, are within what
 * is read whole (ELF_TABLE_MAX_BYTES; libelf checks that they lie inside the file). */
static bool symbols_readable(Elf *elf, const GElf_Shdr *sh)
{
	GElf_Shdr strs;

	return sh->sh_size <= ELF_TABLE_MAX_BYTES &&
	       gelf_getshdr(elf_getscn(elf, sh->sh_link), &strs) &&
	       strs.sh_size <= ELF_TABLE_MAX_BYTES;
}

/* The interpreter's file, opened (fd; closed here) from the very file the process maps. */
static int read_interp_fd(int fd, struct interp_file *out)
{
	Elf_Scn *scn = NULL;
	int err = -ENOEXEC;
	GElf_Ehdr eh;
	size_t nph;
	Elf *elf;

	memset(out, 0, sizeof(*out));
	if (fd < 0)
		return fd;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || !gelf_getehdr(elf, &eh) || elf_getphdrnum(elf, &nph))
		goto out;
	out->dyn = eh.e_type == ET_DYN;
	out->first_load = UINT64_MAX;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    (ph.p_vaddr & ~0xfffull) < out->first_load)
			out->first_load = ph.p_vaddr & ~0xfffull;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) ||
		    !sh.sh_entsize || !symbols_readable(elf, &sh) || !(data = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(data, (int)i, &sym) || !sym.st_value ||
			    sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name)
				continue;
			if (!strcmp(name, "_PyRuntime"))
				out->runtime = sym.st_value;
			else if (!strcmp(name, "PyCode_Type"))
				out->code_type = sym.st_value;
			else if (!strcmp(name, "Py_Version"))
				out->version_vaddr = sym.st_value;
			else if (!strcmp(name, "PyFrame_GetCode"))
				out->frame_getcode = true;
			else if (!strcmp(name, "Py_IsNone"))
				out->is_none = true;
		}
	}
	err = out->code_type ? 0 : -ENOENT;	/* _PyRuntime: 3.7+ */
	/* Py_Version, a const in the file: read through the PT_LOAD that holds it. */
	for (size_t i = 0; !err && out->version_vaddr && i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    out->version_vaddr < ph.p_vaddr ||
		    out->version_vaddr + 4 > ph.p_vaddr + ph.p_filesz)
			continue;
		if (pread(fd, &out->version_hex, 4, (off_t)(ph.p_offset + out->version_vaddr -
							    ph.p_vaddr)) != 4)
			out->version_hex = 0;
		break;
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return err;
}

static bool same_file(const struct interp_seen *s, const struct stat *st)
{
	return s->dev == st->st_dev && s->ino == st->st_ino && s->size == st->st_size &&
	       s->mtime.tv_sec == st->st_mtim.tv_sec && s->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       s->ctime.tv_sec == st->st_ctim.tv_sec && s->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* read_interp_fd, once for a file while it is unchanged (fd: closed here). */
static int read_interp(struct python *py, int fd, struct interp_file *out)
{
	struct interp_seen *s;
	struct stat st;

	if (fd < 0 || fstat(fd, &st))
		return read_interp_fd(fd, out);
	for (size_t i = 0; i < py->nseen; i++) {
		if (same_file(&py->seen[i], &st)) {
			close(fd);
			*out = py->seen[i].f;
			return py->seen[i].err;
		}
	}
	s = &py->seen[py->next_seen];
	py->next_seen = (py->next_seen + 1) % PY_FILES_SEEN;
	if (py->nseen < PY_FILES_SEEN)
		py->nseen++;
	*s = (struct interp_seen){ .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size,
				   .mtime = st.st_mtim, .ctime = st.st_ctim };
	s->err = read_interp_fd(fd, &s->f);
	*out = s->f;
	return s->err;
}

/* Before 3.11 (no Py_Version) the version is the file's name's: its exports must agree, the
 * functions each version added, as they are what tells 3.9 from 3.10 (whose frames differ). */
static bool exports_agree(const struct interp_file *f, unsigned int major, unsigned int minor)
{
	if (major != 3 || minor < 9 || minor > 10)
		return true;	/* refused anyway, or told by Py_Version */
	return f->frame_getcode && f->is_none == (minor == 10);
}

/* "python3.11", "libpython3.11.so.1.0": the version a file's name says. */
static bool version_from_name(const char *path, unsigned int *major, unsigned int *minor)
{
	const char *base = strrchr(path, '/'), *p;

	base = base ? base + 1 : path;
	p = strstr(base, "python");
	return p && sscanf(p + 6, "%u.%u", major, minor) == 2;
}

static bool could_be_interpreter(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "python", 6) || !strncmp(base, "libpython", 9);
}

/* The thread id a thread state holds is one a thread can have: a pid namespace's tid (below
 * the kernel's PID_MAX_LIMIT), or pthread_self(), a pointer. */
static bool thread_id_plausible(const struct py_layout *l, uint64_t id)
{
	if (l->walk.thread_id_kind == GM_PY_TID_NATIVE)
		return id > 0 && id <= (1u << 22);
	return id >= 4096 && id < (1ull << 47) && !(id & 7);
}

/* The live process agrees with the layout: PyCode_Type is the type named "code", and a running
 * interpreter's first thread points back at it and holds a thread id. An interpreter not
 * started yet passes. Frames are not looked at here (a running thread changes them under
 * us): the BPF side checks each frame's code object of every new stack. NULL or why not. */
static const char *check_live(int pid, const struct py_layout *l, uint64_t runtime,
			      uint64_t code_type)
{
	const struct gm_py_offsets *w = &l->walk;
	uint64_t name_ptr = 0, interp = 0, tstate = 0, back = 0, tid = 0;
	char name[8] = { 0 };

	if (proc_read_mem(pid, code_type + l->type_name, &name_ptr, 8) ||
	    proc_read_mem(pid, name_ptr, name, 5) || strcmp(name, "code"))
		return "PyCode_Type is not the type \"code\"";
	if (proc_read_mem(pid, runtime + w->runtime_interp_head, &interp, 8))
		return "_PyRuntime cannot be read";
	if (!interp)
		return NULL;
	if (proc_read_mem(pid, interp + w->interp_threads_head, &tstate, 8))
		return "the interpreter cannot be read";
	if (!tstate)
		return NULL;
	if (proc_read_mem(pid, tstate + w->tstate_interp, &back, 8) || back != interp)
		return "the first thread state does not point back at its interpreter";
	if (proc_read_mem(pid, tstate + w->tstate_thread_id, &tid, 8) || !thread_id_plausible(l, tid))
		return "the first thread state holds no thread id";
	return NULL;
}

/* 3.13+: the offsets of the process's own _Py_DebugOffsets, over the version's table. NULL
 * or why not. */
static const char *live_layout(int pid, uint64_t runtime, struct py_layout *l)
{
	uint8_t buf[PY_DEBUG_OFFSETS_LEN];
	const char *why = NULL;
	struct py_layout base = *l;

	if (proc_read_mem(pid, runtime, buf, sizeof(buf)))
		return "_PyRuntime cannot be read";
	if (py_layout_from_debug(buf, sizeof(buf), &base, l, &why))
		return why;
	return NULL;
}

static void count_refusal(struct python *py, struct py_interp *pi)
{
	if (pi->refused && pi->traced && !pi->refusal_counted) {
		pi->refusal_counted = true;
		(*py->refused)++;
	}
}

static void refuse(struct python *py, struct py_interp *pi, const char *module, const char *why)
{
	pi->refused = true;
	count_refusal(py, pi);
	p_debug("PID %d: no Python frames from %s: %s", pi->pid, module, why);
}

void python_examine_final(struct python *py, int pid)
{
	py->final = true;
	python_examine_pid(py, pid);
	py->final = false;
}

void python_on_traced(struct python *py, int pid)
{
	struct py_interp *pi = find_interp(py, pid);

	if (pi) {
		pi->traced = true;
		count_refusal(py, pi);
	}
}

/* The interpreter's version: its PY_VERSION_HEX, or its name where its exports agree.
 * NULL, or why it is not known. */
static const char *interp_version(const struct interp_file *f, const char *path,
				  unsigned int *major, unsigned int *minor)
{
	if (f->version_hex) {
		*major = f->version_hex >> 24;
		*minor = (f->version_hex >> 16) & 0xff;
		return NULL;
	}
	if (!version_from_name(path, major, minor))
		return "its version is not known";
	if (!exports_agree(f, *major, *minor))
		return "its exports are not those of the version its name says";
	return NULL;
}

/* The bias of a position-independent interpreter: where its first segment was mapped, less
 * its address in the file. False when the process's map does not say. */
static bool load_bias(const struct module_map *mm, const struct mapping *m,
		      const struct interp_file *f, uint64_t *bias)
{
	uint64_t lowest = UINT64_MAX;

	*bias = 0;
	if (!f->dyn)
		return true;
	for (size_t i = 0; i < mm->count; i++)
		if (!strcmp(mm->maps[i].path, m->path) && mm->maps[i].start < lowest &&
		    mm->maps[i].pgoff == 0)
			lowest = mm->maps[i].start;
	if (lowest == UINT64_MAX)
		return false;
	*bias = lowest - f->first_load;
	return true;
}

/* The offsets for that version, checked against the live process; NULL, or why not (a
 * mismatch is final only at the process's first call: the loader may not have relocated it
 * yet). */
static const char *layout_for(int pid, const struct py_layout *table, struct gm_py_proc *val,
			      struct py_layout *l)
{
	const char *why;

	*l = *table;
	why = l->debug_offsets ? live_layout(pid, val->runtime, l) : NULL;
	if (!why)
		why = check_live(pid, l, val->runtime, val->code_type);
	val->off = l->walk;
	return why;
}

/* The BPF side walks pi's frames from now on. False (refused) when its map cannot take it. */
static bool register_interp(struct python *py, struct py_interp *pi, const char *module,
			    const struct py_layout *l, const struct gm_py_proc *val)
{
	__u32 key = (__u32)pi->pid;

	if (py->procs_fd < 0 ||
	    (!py->read_only && bpf_map_update_elem(py->procs_fd, &key, val, BPF_ANY))) {
		refuse(py, pi, module, py->procs_fd < 0 ? "no BPF map (a reader)"
							 : "the py_procs map is full");
		return false;
	}
	if (!py->read_only)
		count_new_entry(py);
	pi->layout = xcalloc(1, sizeof(*pi->layout));
	*pi->layout = *l;
	pi->code_type = val->code_type;
	pi->module = xstrdup(module);
	pi->registered = true;
	return true;
}

/* Examines one mapped file; true when it is an interpreter (registered or refused). */
static bool examine_module(struct python *py, struct py_interp *pi, const struct module_map *mm,
			   const struct mapping *m)
{
	struct gm_py_proc val = { .state = GM_PY_ON };
	unsigned int major = 0, minor = 0;
	const struct py_layout *table;
	struct py_layout l;
	struct interp_file f;
	uint64_t bias;
	const char *why;
	char name[64 + 4096], why_v[80];

	/* The very file mapped (an interpreter in a container is its own file), opened as any
	 * file a process names is: what lies at its path now may be a FIFO. */
	if (read_interp(py, symbolize_open_mapped(pi->pid, m, name, sizeof(name)), &f))
		return false;
	why = interp_version(&f, m->path, &major, &minor);
	table = why ? NULL : py_layout_find(major, minor);
	if (!why && (!table || !f.runtime)) {
		snprintf(why_v, sizeof(why_v), "Python %u.%u has no offsets in this gpumem "
			 "(3.9 to 3.13 have)", major, minor);
		why = why_v;
	}
#ifndef __x86_64__
	if (!why && table->walk.thread_id_kind == GM_PY_TID_PTHREAD)
		why = "its thread ids are pthread_self(), known on x86-64 only";
#endif
	if (!why && !load_bias(mm, m, &f, &bias))
		why = "its load address is not known";
	if (why) {
		refuse(py, pi, m->path, why);
		return true;
	}
	val.runtime = f.runtime + bias;
	val.code_type = f.code_type + bias;
	why = layout_for(pi->pid, table, &val, &l);
	if (why && !py->final) {
		p_debug("PID %d: %s: %s; looked at again at its first call", pi->pid, m->path, why);
		return false;
	}
	if (why)
		refuse(py, pi, m->path, why);
	else if (register_interp(py, pi, m->path, &l, &val))
		p_debug("PID %d: Python %u.%u frames from %s (_PyRuntime at 0x%llx%s)", pi->pid,
			major, minor, m->path, (unsigned long long)val.runtime,
			l.debug_offsets ? ", offsets from its _Py_DebugOffsets" : "");
	return true;
}

void python_examine(struct python *py, int pid, const struct module_map *mm)
{
	struct py_interp *pi;

	if (find_interp(py, pid) || !mm->count)
		return;
	py->interps = xrealloc(py->interps, (py->ninterps + 1) * sizeof(*py->interps));
	pi = &py->interps[py->ninterps++];
	memset(pi, 0, sizeof(*pi));
	pi->pid = pid;
	proc_start_time(pid, &pi->start_ticks);
	for (size_t i = 0; i < mm->count; i++) {
		const struct mapping *m = &mm->maps[i];

		if (m->exec && could_be_interpreter(m->path) && examine_module(py, pi, mm, m))
			return;
	}
	/* No interpreter mapped (yet: at exec, before the loader maps libpython): examined
	 * again when the process is next seen. */
	interp_free(pi);
	py->ninterps--;
}

void python_on_exec(struct python *py, int pid, const char *exe)
{
	struct py_interp *pi = find_interp(py, pid);
	bool traced = pi && pi->traced;	/* the same process, another image */

	forget(py, pid);
	if (exe && !could_be_interpreter(exe))
		return;		/* spared a read of its maps: most programs a host runs */
	python_examine_pid(py, pid);
	if (traced)
		python_on_traced(py, pid);
}

void python_examine_pid(struct python *py, int pid)
{
	struct module_map mm = { 0 };

	if (find_interp(py, pid))
		return;
	if (module_map_read(pid, &mm) == 0)
		python_examine(py, pid, &mm);
	module_map_free(&mm);
}

void python_on_exit(struct python *py, int pid)
{
	struct py_interp *pi = find_interp(py, pid);
	__u32 key = (__u32)pid;

	if (pi)
		pi->ended = true;
	if (pi && pi->registered && py->procs_fd >= 0 && !py->read_only) {
		bpf_map_delete_elem(py->procs_fd, &key);
		pi->registered = false;
	}
}

void python_refresh(struct python *py)
{
	size_t nended = 0;

	for (size_t i = 0; i < py->ninterps;) {
		struct py_interp *pi = &py->interps[i];
		struct gm_py_proc val;
		__u32 key = (__u32)pi->pid;
		uint64_t ticks = 0;

		if (pi->registered && !pi->mismatch_said &&
		    bpf_map_lookup_elem(py->procs_fd, &key, &val) == 0 &&
		    val.state == GM_PY_MISMATCH) {
			pi->mismatch_said = true;
			p_debug("PID %d: Python frames off: its interpreter (%s) does not match "
				"gpumem's offsets for Python %u.%u (py_mismatch)", pi->pid,
				pi->module, pi->layout->major, pi->layout->minor);
		}
		/* Gone, or its pid another's: its names stay for the reports of its end. */
		if (!pi->ended && (proc_start_time(pi->pid, &ticks) || ticks != pi->start_ticks)) {
			python_on_exit(py, pi->pid);
			pi->ended = true;
			nended++;
		} else if (pi->ended) {
			nended++;
		}
		i++;
	}
	for (size_t i = 0; nended > PY_KEEP_ENDED && i < py->ninterps;) {
		if (py->interps[i].ended) {
			forget(py, py->interps[i].pid);
			nended--;
			continue;
		}
		i++;
	}
}

/* ---- naming ---- */

static struct py_named *named_of(struct py_interp *pi, int32_t id)
{
	for (size_t i = 0; i < pi->nnamed; i++)
		if (pi->named[i].id == id)
			return &pi->named[i];
	return NULL;
}

/* Names what can be named of st, while the process lives. */
static void name_stack(struct python *py, struct py_interp *pi, struct py_named *nm,
		       const struct gm_py_stack *st)
{
	uint32_t depth = st->depth < GM_PY_MAX_FRAMES ? st->depth : GM_PY_MAX_FRAMES;

	nm->n = depth;
	nm->truncated = st->truncated;
	nm->complete = true;
	for (uint32_t i = 0; i < depth; i++) {
		struct py_frame *f = &nm->frames[i];
		uint32_t instr = st->instr[i] & ~GM_PY_INSTR_ENTRY;
		struct py_code code;

		if (f->file)
			continue;	/* named at an earlier try */
		f->code = st->code[i];
		f->entry = (st->instr[i] & GM_PY_INSTR_ENTRY) || pi->layout->frame_per_eval;
		f->line = -1;
		if (py_read_code(pi->pid, f->code, pi->code_type, pi->layout, &code)) {
			nm->complete = false;
			continue;
		}
		f->file = intern(&py->names, code.file);
		f->qualname = intern(&py->names, code.qualname);
		if (instr != GM_PY_INSTR_NONE)
			f->line = py_code_line(pi->layout, &code, instr);
		py_code_free(&code);
	}
}

static struct py_named *add_named(struct py_interp *pi, int32_t id)
{
	struct py_named *nm;

	if (pi->nnamed >= PY_MAX_NAMED)
		return NULL;
	pi->named = xrealloc(pi->named, (pi->nnamed + 1) * sizeof(*pi->named));
	nm = &pi->named[pi->nnamed++];
	memset(nm, 0, sizeof(*nm));
	nm->id = id;
	return nm;
}

void python_on_stack(struct python *py, const struct gm_py_stack_event *e)
{
	struct py_interp *pi = find_interp(py, (int)e->pid);
	struct py_named *nm;

	if (!pi || !pi->layout)
		return;
	nm = named_of(pi, e->py_stack_id);
	if (!nm)
		nm = add_named(pi, e->py_stack_id);
	if (!nm)	/* once a stack: the kernel sends each new one once */
		py->stacks_unnamed++;
	if (nm && !nm->complete)
		name_stack(py, pi, nm, &e->stack);
}

/* The named stack id of pid: named now if it was not (its event lost), while it lives. */
static const struct py_named *lookup(struct python *py, int pid, int32_t id)
{
	struct py_interp *pi = find_interp(py, pid);
	struct py_named *nm;
	struct gm_py_stack st;
	__u32 key = (__u32)id;

	if (!pi || !pi->layout)
		return NULL;
	nm = named_of(pi, id);
	if ((nm && nm->complete) || pi->ended)
		return nm;
	if (py->stacks_fd < 0 || bpf_map_lookup_elem(py->stacks_fd, &key, &st))
		return nm;
	if (!nm)
		nm = add_named(pi, id);
	if (nm)
		name_stack(py, pi, nm, &st);
	return nm;
}

static struct snap_frame python_frame(const struct py_frame *f)
{
	return (struct snap_frame){
		.addr = f->code, .symbol = f->qualname, .file = f->file,
		.line = f->line > 0 ? (uint32_t)f->line : 0, .python = true,
	};
}

static bool is_eval_frame(const struct snap_frame *f)
{
	return f->symbol && !strcmp(f->symbol, "_PyEval_EvalFrameDefault");
}

/*
 * The merge rule. Native frames of the interpreter's module up to its outermost
 * _PyEval_EvalFrameDefault are the eval loop and its call machinery: they go. At each eval
 * loop frame, the Python frames it ran come in, innermost first, up to and including the next
 * entry frame (the first one that C call of the loop ran), so that C extensions between two
 * Python frames stay where they were. Python frames left over (a native stack cut short) come
 * after the last ones placed; with no eval-loop frame at all, all of them come in where the
 * interpreter's first frame was (or at the end). Frames above (main, Py_RunMain) stay.
 */
void python_merge(struct python *py, int pid, int32_t py_stack_id, struct snap_frame *frames,
		  uint32_t *n)
{
	const struct py_named *nm;
	struct py_interp *pi;
	struct snap_frame *out;
	uint32_t next = 0, k = 0, last_eval = UINT32_MAX, first_interp = UINT32_MAX;
	uint32_t after = UINT32_MAX;	/* where the leftovers go in out */
	struct py_frame marker = { .line = -1 };
	bool kept_since = false;	/* a native frame was kept after the first interpreter's */

	if (py_stack_id < 0 || !(nm = lookup(py, pid, py_stack_id)) || !nm->n)
		return;
	pi = find_interp(py, pid);
	for (uint32_t i = 0; i < *n; i++) {
		bool in_interp = frames[i].module && pi->module &&
				 !strcmp(frames[i].module, pi->module);

		if (in_interp && first_interp == UINT32_MAX)
			first_interp = i;
		if (in_interp && is_eval_frame(&frames[i]))
			last_eval = i;
	}
	out = xcalloc(*n + nm->n + 1, sizeof(*out));
	for (uint32_t i = 0; i < *n; i++) {
		bool in_interp = frames[i].module && !strcmp(frames[i].module, pi->module);

		if (last_eval == UINT32_MAX && i == first_interp) {
			while (next < nm->n)
				out[k++] = python_frame(&nm->frames[next++]);
			after = k;
		}
		/* No eval loop frame (the native stack was cut inside the interpreter): the run
		 * of interpreter frames where the Python ones came in is its call machinery. */
		if (last_eval == UINT32_MAX && in_interp && i >= first_interp && !kept_since)
			continue;
		if (!in_interp)
			kept_since = i > first_interp || first_interp == UINT32_MAX ? true : kept_since;
		if (!in_interp || last_eval == UINT32_MAX || i > last_eval) {
			out[k++] = frames[i];
			continue;
		}
		if (!is_eval_frame(&frames[i]))
			continue;
		while (next < nm->n) {
			bool entry = nm->frames[next].entry;

			out[k++] = python_frame(&nm->frames[next++]);
			if (entry)
				break;
		}
		after = k;
	}
	if (next < nm->n || nm->truncated) {
		uint32_t left = nm->n - next + (nm->truncated ? 1 : 0);

		if (after == UINT32_MAX)
			after = k;
		memmove(&out[after + left], &out[after], (k - after) * sizeof(*out));
		for (uint32_t j = 0; next < nm->n; j++)
			out[after + j] = python_frame(&nm->frames[next++]);
		if (nm->truncated) {
			marker.qualname = "[more Python frames]";
			out[after + left - 1] = python_frame(&marker);
		}
		k += left;
	}
	memcpy(frames, out, k * sizeof(*out));
	*n = k;
	free(out);
}
