// SPDX-License-Identifier: GPL-2.0
/* Function symbols, file offsets and build-ids of ELF files, read with libelf. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/elf_syms.h"

#define NO_FILE_OFF UINT64_MAX

struct elf_sym {
	uint64_t vaddr;
	uint64_t size;
	uint64_t file_off;	/* NO_FILE_OFF when no segment or section holds it */
	bool code;		/* in an executable section of an executable segment */
	char *name;
	int bind_rank;		/* global before weak before local */
};

struct load_seg {
	uint64_t vaddr, filesz, offset;
	bool exec;	/* PF_X */
};

struct elf_symtab {
	struct elf_sym *syms;
	size_t count;
	struct load_seg *loads;
	size_t nloads;
};

/* An open ELF file checked to be whole: every header and section lies inside the file. */
struct elf_file {
	Elf *elf;
	uint64_t size;
	size_t shnum;
	struct load_seg *loads;
	size_t nloads;
};

static int elf_lib_init(void)
{
	static int state;	/* 0 not yet, 1 ready, -1 libelf too old */

	if (state == 0)
		state = elf_version(EV_CURRENT) == EV_NONE ? -1 : 1;
	return state == 1 ? 0 : -ENOSYS;
}

static void elf_file_close(struct elf_file *ef)
{
	free(ef->loads);
	ef->loads = NULL;
	if (ef->elf)
		elf_end(ef->elf);
	ef->elf = NULL;
}

/* The header tables lie inside the file (libelf drops a cut section table silently). */
static int elf_file_check_tables(struct elf_file *ef, const GElf_Ehdr *ehdr)
{
	uint64_t bytes, count;
	size_t phnum;

	if (elf_getshdrnum(ef->elf, &ef->shnum) || elf_getphdrnum(ef->elf, &phnum))
		return -ENOEXEC;
	/* e_shnum 0 with e_shoff set: the count is in section 0, which must be there */
	if (ehdr->e_shoff || ef->shnum) {
		count = ef->shnum > ehdr->e_shnum ? ef->shnum : ehdr->e_shnum;
		bytes = (count ? count : 1) * ehdr->e_shentsize;
		if (ehdr->e_shoff > ef->size || bytes > ef->size - ehdr->e_shoff)
			return -ENOEXEC;
	}
	if (ehdr->e_phoff || phnum) {
		count = phnum > ehdr->e_phnum ? phnum : ehdr->e_phnum;
		bytes = count * ehdr->e_phentsize;
		if (ehdr->e_phoff > ef->size || bytes > ef->size - ehdr->e_phoff)
			return -ENOEXEC;
	}
	return 0;
}

/* The sections read whole into memory (libelf's ELF_C_READ copies each): the symbol and
 * string tables, notes, the dynamic section. */
static bool elf_section_is_read(uint32_t type)
{
	return type == SHT_SYMTAB || type == SHT_DYNSYM || type == SHT_STRTAB ||
	       type == SHT_NOTE || type == SHT_DYNAMIC;
}

/* Every section lies inside the file, and none that is read is over ELF_TABLE_MAX_BYTES: a
 * sparse file of a few KiB on disk can claim gigabytes. */
static int elf_file_check_sections(struct elf_file *ef)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;

	while ((scn = elf_nextscn(ef->elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &shdr))
			return -ENOEXEC;
		if (shdr.sh_type == SHT_NOBITS || shdr.sh_type == SHT_NULL)
			continue;
		if (shdr.sh_offset > ef->size || shdr.sh_size > ef->size - shdr.sh_offset)
			return -ENOEXEC;
		if (elf_section_is_read(shdr.sh_type) && shdr.sh_size > ELF_TABLE_MAX_BYTES)
			return -EFBIG;
	}
	if (elf_errno())
		return -ENOEXEC;
	return 0;
}

static int elf_file_read_loads(struct elf_file *ef)
{
	size_t phnum, i;
	GElf_Phdr phdr;

	if (elf_getphdrnum(ef->elf, &phnum))
		return -ENOEXEC;
	if (phnum == 0)
		return 0;
	ef->loads = calloc(phnum, sizeof(*ef->loads));
	if (!ef->loads)
		return -ENOMEM;
	for (i = 0; i < phnum; i++) {
		if (!gelf_getphdr(ef->elf, i, &phdr))
			return -ENOEXEC;
		if (phdr.p_type != PT_LOAD)
			continue;
		if (phdr.p_offset > ef->size || phdr.p_filesz > ef->size - phdr.p_offset)
			return -ENOEXEC;
		ef->loads[ef->nloads].vaddr = phdr.p_vaddr;
		ef->loads[ef->nloads].filesz = phdr.p_filesz;
		ef->loads[ef->nloads].offset = phdr.p_offset;
		ef->loads[ef->nloads].exec = phdr.p_flags & PF_X;
		ef->nloads++;
	}
	return 0;
}

static int elf_file_open_fd(int fd, struct elf_file *ef)
{
	GElf_Ehdr ehdr;
	struct stat st;
	int err;

	memset(ef, 0, sizeof(*ef));
	err = elf_lib_init();
	if (err)
		return err;
	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ENOEXEC;
	ef->size = st.st_size;
	elf_errno();	/* clear an error left by an earlier file */
	ef->elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!ef->elf)
		return -ENOEXEC;
	err = -ENOEXEC;
	if (elf_kind(ef->elf) != ELF_K_ELF || !gelf_getehdr(ef->elf, &ehdr))
		goto out_close;
	err = elf_file_check_tables(ef, &ehdr);
	if (err)
		goto out_close;
	err = elf_file_check_sections(ef);
	if (err)
		goto out_close;
	err = elf_file_read_loads(ef);
	if (err)
		goto out_close;
	return 0;

out_close:
	elf_file_close(ef);
	return err;
}

static uint64_t loads_vaddr_to_off(const struct load_seg *loads, size_t n, uint64_t vaddr)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (vaddr >= loads[i].vaddr && vaddr - loads[i].vaddr < loads[i].filesz)
			return vaddr - loads[i].vaddr + loads[i].offset;
	}
	return NO_FILE_OFF;
}

/* Through the PT_LOAD that holds vaddr, else through the symbol's own section. */
static uint64_t sym_file_off(struct elf_file *ef, const GElf_Sym *sym)
{
	uint64_t off;
	GElf_Shdr shdr;
	Elf_Scn *scn;

	off = loads_vaddr_to_off(ef->loads, ef->nloads, sym->st_value);
	if (off != NO_FILE_OFF)
		return off;
	if (sym->st_shndx == SHN_UNDEF || sym->st_shndx >= SHN_LORESERVE ||
	    sym->st_shndx >= ef->shnum)
		return NO_FILE_OFF;
	scn = elf_getscn(ef->elf, sym->st_shndx);
	if (!scn || !gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS)
		return NO_FILE_OFF;
	if (sym->st_value < shdr.sh_addr || sym->st_value - shdr.sh_addr >= shdr.sh_size)
		return NO_FILE_OFF;
	return sym->st_value - shdr.sh_addr + shdr.sh_offset;
}

/* Whether the symbol's address is code: inside its own section, one that is allocated and
 * executable, in a PT_LOAD that is executable (when the file has any). A uprobe writes its
 * breakpoint into every mapping of the file that is not writable, code or not: a "function"
 * symbol that names data (a section's, an absolute value) must never get one. */
static bool sym_in_code(struct elf_file *ef, const GElf_Sym *sym)
{
	GElf_Shdr shdr;
	Elf_Scn *scn;

	if (sym->st_shndx == SHN_UNDEF || sym->st_shndx >= SHN_LORESERVE ||
	    sym->st_shndx >= ef->shnum)
		return false;
	scn = elf_getscn(ef->elf, sym->st_shndx);
	if (!scn || !gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS ||
	    (shdr.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR))
		return false;
	if (sym->st_value < shdr.sh_addr || sym->st_value - shdr.sh_addr >= shdr.sh_size)
		return false;
	for (size_t i = 0; i < ef->nloads; i++) {
		const struct load_seg *l = &ef->loads[i];

		if (sym->st_value >= l->vaddr && sym->st_value - l->vaddr < l->filesz)
			return l->exec;
	}
	return ef->nloads == 0;
}

static int bind_rank(unsigned char bind)
{
	switch (bind) {
	case STB_GLOBAL:
		return 0;
	case STB_WEAK:
		return 1;
	case STB_LOCAL:
		return 2;
	default:
		return 3;
	}
}

struct sym_vec {
	struct elf_sym *syms;
	size_t count, cap;
};

static void sym_vec_free(struct sym_vec *v)
{
	size_t i;

	for (i = 0; i < v->count; i++)
		free(v->syms[i].name);
	free(v->syms);
	v->syms = NULL;
	v->count = v->cap = 0;
}

static int sym_vec_push(struct sym_vec *v, const char *name, const GElf_Sym *sym,
			uint64_t file_off, bool code)
{
	struct elf_sym *grown, *s;
	size_t namelen;

	if (v->count == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 256;

		grown = realloc(v->syms, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		v->syms = grown;
		v->cap = cap;
	}
	s = &v->syms[v->count];
	namelen = strcspn(name, "@");
	s->name = strndup(name, namelen);
	if (!s->name)
		return -ENOMEM;
	s->vaddr = sym->st_value;
	s->size = sym->st_size;
	s->file_off = file_off;
	s->code = code;
	s->bind_rank = bind_rank(GELF_ST_BIND(sym->st_info));
	v->count++;
	return 0;
}

static int read_sym_section(struct elf_file *ef, Elf_Scn *scn, const GElf_Shdr *shdr,
			    struct sym_vec *v)
{
	size_t entsize = gelf_fsize(ef->elf, ELF_T_SYM, 1, EV_CURRENT);
	unsigned char type;
	const char *name;
	Elf_Data *data;
	GElf_Sym sym;
	size_t i, n;
	int err;

	if (entsize == 0 || shdr->sh_entsize != entsize)
		return -ENOEXEC;
	data = elf_getdata(scn, NULL);
	if (!data)
		return -ENOEXEC;
	n = data->d_size / entsize;
	for (i = 0; i < n; i++) {
		if (!gelf_getsym(data, i, &sym))
			return -ENOEXEC;
		type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
			continue;
		name = elf_strptr(ef->elf, shdr->sh_link, sym.st_name);
		if (!name)
			return -ENOEXEC;
		if (!name[0] || name[0] == '@')
			continue;
		err = sym_vec_push(v, name, &sym, sym_file_off(ef, &sym), sym_in_code(ef, &sym));
		if (err)
			return err;
	}
	return 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct elf_sym *sa = a, *sb = b;
	int c;

	if (sa->vaddr != sb->vaddr)
		return sa->vaddr < sb->vaddr ? -1 : 1;
	c = strcmp(sa->name, sb->name);
	if (c)
		return c;
	return sa->bind_rank - sb->bind_rank;
}

/* Sorts by address and merges the same (name, address) seen in both tables. */
static void sym_vec_sort_unique(struct sym_vec *v)
{
	size_t i, out = 0;

	if (v->count == 0)
		return;
	qsort(v->syms, v->count, sizeof(*v->syms), sym_cmp);
	for (i = 1; i < v->count; i++) {
		struct elf_sym *kept = &v->syms[out], *s = &v->syms[i];

		if (s->vaddr == kept->vaddr && strcmp(s->name, kept->name) == 0) {
			if (s->size > kept->size)
				kept->size = s->size;
			if (kept->file_off == NO_FILE_OFF)
				kept->file_off = s->file_off;
			free(s->name);
			continue;
		}
		v->syms[++out] = *s;
	}
	v->count = out + 1;
}

/* Both symbol tables of an open file, sorted and merged. */
static int read_funcs(struct elf_file *ef, struct sym_vec *v)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	int err;

	memset(v, 0, sizeof(*v));
	while ((scn = elf_nextscn(ef->elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &shdr))
			return -ENOEXEC;
		if (shdr.sh_type != SHT_SYMTAB && shdr.sh_type != SHT_DYNSYM)
			continue;
		err = read_sym_section(ef, scn, &shdr, v);
		if (err) {
			sym_vec_free(v);
			return err;
		}
	}
	sym_vec_sort_unique(v);
	return 0;
}

int elf_for_each_func_fd(int fd, elf_sym_cb cb, void *ctx)
{
	struct elf_file ef;
	struct sym_vec v;
	size_t i;
	int err;

	err = elf_file_open_fd(fd, &ef);
	if (err)
		return err;
	err = read_funcs(&ef, &v);
	elf_file_close(&ef);
	if (err)
		return err;
	for (i = 0; i < v.count && !err; i++) {
		if (v.syms[i].file_off == NO_FILE_OFF || !v.syms[i].code)
			continue;
		err = cb(v.syms[i].name, v.syms[i].vaddr, v.syms[i].size, v.syms[i].file_off, ctx);
	}
	sym_vec_free(&v);
	return err;
}

int elf_for_each_func(const char *path, elf_sym_cb cb, void *ctx)
{
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = elf_for_each_func_fd(fd, cb, ctx);
	close(fd);
	return err;
}

static int has_func_cb(const char *name, uint64_t vaddr, uint64_t size, uint64_t file_off,
		       void *ctx)
{
	(void)vaddr;
	(void)size;
	(void)file_off;
	return strcmp(name, ctx) == 0 ? 1 : 0;
}

bool elf_has_func(const char *path, const char *name)
{
	return elf_for_each_func(path, has_func_cb, (void *)name) == 1;
}

int elf_symtab_load_fd(int fd, struct elf_symtab **out)
{
	struct elf_symtab *t;
	struct elf_file ef;
	struct sym_vec v;
	int err;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	err = elf_file_open_fd(fd, &ef);
	if (err)
		goto out_free;
	err = read_funcs(&ef, &v);
	if (err)
		goto out_close;
	t->syms = v.syms;
	t->count = v.count;
	t->loads = ef.loads;
	t->nloads = ef.nloads;
	ef.loads = NULL;
	elf_file_close(&ef);
	*out = t;
	return 0;

out_close:
	elf_file_close(&ef);
out_free:
	free(t);
	return err;
}

int elf_symtab_load(const char *path, struct elf_symtab **out)
{
	int fd, err;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = elf_symtab_load_fd(fd, out);
	close(fd);
	return err;
}

void elf_symtab_free(struct elf_symtab *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->count; i++)
		free(t->syms[i].name);
	free(t->syms);
	free(t->loads);
	free(t);
}

size_t elf_symtab_count(const struct elf_symtab *t)
{
	return t->count;
}

int elf_symtab_file_off_to_vaddr(const struct elf_symtab *t, uint64_t file_off, uint64_t *vaddr)
{
	size_t i;

	for (i = 0; i < t->nloads; i++) {
		const struct load_seg *l = &t->loads[i];

		if (file_off >= l->offset && file_off - l->offset < l->filesz) {
			*vaddr = file_off - l->offset + l->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

/* How many symbols below the nearest one are checked for one that spans vaddr. */
#define LOOKUP_OVERLAP_SCAN 64

static bool sym_contains(const struct elf_sym *s, uint64_t vaddr)
{
	return vaddr >= s->vaddr && vaddr - s->vaddr < s->size;
}

const char *elf_symtab_lookup(const struct elf_symtab *t, uint64_t vaddr, uint64_t *sym_off)
{
	const struct elf_sym *best = NULL, *s;
	size_t lo = 0, hi = t->count, mid, i, scanned;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (t->syms[mid].vaddr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	/* The symbols that start nearest below: a sized one that spans vaddr wins, then a
	 * size-0 one; global before weak before local. */
	for (i = lo; i > 0 && t->syms[i - 1].vaddr == t->syms[lo - 1].vaddr; i--) {
		s = &t->syms[i - 1];
		if (s->size ? !sym_contains(s, vaddr) : false)
			continue;
		if (!best || (s->size && !best->size) ||
		    (!s->size == !best->size && s->bind_rank < best->bind_rank))
			best = s;
	}
	/* Else a larger symbol further below that still spans vaddr. */
	for (scanned = 0; !best && i > 0 && scanned < LOOKUP_OVERLAP_SCAN; i--, scanned++) {
		if (sym_contains(&t->syms[i - 1], vaddr))
			best = &t->syms[i - 1];
	}
	if (!best)
		return NULL;
	if (sym_off)
		*sym_off = vaddr - best->vaddr;
	return best->name;
}

static int note_build_id(Elf_Data *data, char *hex, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	size_t off = 0, next, name_off, desc_off, i;
	const unsigned char *desc;
	GElf_Nhdr nhdr;

	while ((next = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
		off = next;
		if (nhdr.n_type != NT_GNU_BUILD_ID || nhdr.n_namesz != 4 ||
		    memcmp((const char *)data->d_buf + name_off, "GNU", 4) != 0 ||
		    nhdr.n_descsz == 0)
			continue;
		if (len < nhdr.n_descsz * 2 + 1)
			return -ENOSPC;
		desc = (const unsigned char *)data->d_buf + desc_off;
		for (i = 0; i < nhdr.n_descsz; i++) {
			hex[2 * i] = digits[desc[i] >> 4];
			hex[2 * i + 1] = digits[desc[i] & 0xf];
		}
		hex[2 * i] = '\0';
		return 0;
	}
	return -ENOENT;
}

int elf_build_id_fd(int fd, char *hex, size_t len)
{
	struct elf_file ef;
	Elf_Scn *scn = NULL;
	size_t phnum, i;
	GElf_Shdr shdr;
	GElf_Phdr phdr;
	Elf_Data *data;
	int err;

	err = elf_file_open_fd(fd, &ef);
	if (err)
		return err;
	err = -ENOENT;
	while (err == -ENOENT && (scn = elf_nextscn(ef.elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		if (data)
			err = note_build_id(data, hex, len);
	}
	/* A file stripped of its section headers still has PT_NOTE. */
	if (err == -ENOENT && elf_getphdrnum(ef.elf, &phnum) == 0) {
		for (i = 0; i < phnum && err == -ENOENT; i++) {
			if (!gelf_getphdr(ef.elf, i, &phdr) || phdr.p_type != PT_NOTE)
				continue;
			if (phdr.p_offset > ef.size || phdr.p_filesz > ef.size - phdr.p_offset ||
			    phdr.p_filesz > ELF_TABLE_MAX_BYTES)
				continue;
			data = elf_getdata_rawchunk(ef.elf, phdr.p_offset, phdr.p_filesz,
						    ELF_T_NHDR);
			if (data)
				err = note_build_id(data, hex, len);
		}
	}
	elf_file_close(&ef);
	return err;
}

int elf_build_id(const char *path, char *hex, size_t len)
{
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = elf_build_id_fd(fd, hex, len);
	close(fd);
	return err;
}

/* Whether a SystemTap note (NT_STAPSDT: pc, base, semaphore, then provider, name and
 * arguments as strings) names provider:name. */
static bool note_is_usdt(Elf_Data *data, const char *provider, const char *name)
{
	size_t off = 0, next, name_off, desc_off, plen = strlen(provider), nlen = strlen(name);
	GElf_Nhdr nhdr;

	while ((next = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
		const char *desc = (const char *)data->d_buf + desc_off;
		size_t skip = 3 * sizeof(uint64_t);

		off = next;
		if (nhdr.n_type != 3 || nhdr.n_namesz != 8 ||
		    memcmp((const char *)data->d_buf + name_off, "stapsdt", 8) != 0 ||
		    nhdr.n_descsz < skip + plen + nlen + 2)
			continue;
		if (memcmp(desc + skip, provider, plen + 1) == 0 &&
		    memcmp(desc + skip + plen + 1, name, nlen + 1) == 0)
			return true;
	}
	return false;
}

bool elf_has_usdt_fd(int fd, const char *provider, const char *name)
{
	struct elf_file ef;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	Elf_Data *data;
	bool found = false;

	if (elf_file_open_fd(fd, &ef))
		return false;
	while (!found && (scn = elf_nextscn(ef.elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		if (data)
			found = note_is_usdt(data, provider, name);
	}
	elf_file_close(&ef);
	return found;
}

/* DT_SONAME through the SHT_DYNAMIC section and the string table it links to. */
static int dynamic_soname(struct elf_file *ef, Elf_Scn *scn, const GElf_Shdr *shdr,
			  char *buf, size_t len)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n = data && shdr->sh_entsize ? data->d_size / shdr->sh_entsize : 0;
	GElf_Dyn dyn;

	for (size_t i = 0; i < n && gelf_getdyn(data, (int)i, &dyn); i++) {
		const char *name;

		if (dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag != DT_SONAME)
			continue;
		name = shdr->sh_link < ef->shnum ?
			elf_strptr(ef->elf, shdr->sh_link, dyn.d_un.d_val) : NULL;
		if (!name)
			return -ENOEXEC;
		if (strlen(name) >= len)
			return -ENOSPC;
		strcpy(buf, name);
		return 0;
	}
	return -ENOENT;
}

/* The values of names in a .dynsym, into value[i] (0: not exported there), each a defined,
 * global or weak data symbol (OBJECT or NOTYPE): never a local, TLS or absolute one. 0 or
 * -ENOEXEC. */
static int exported_objects(struct elf_file *ef, Elf_Scn *scn, const GElf_Shdr *shdr,
			    const char *const *names, uint64_t *value)
{
	size_t entsize = gelf_fsize(ef->elf, ELF_T_SYM, 1, EV_CURRENT);
	Elf_Data *data = elf_getdata(scn, NULL);
	unsigned char bind, type;
	const char *sname;
	GElf_Sym sym;

	if (!entsize || shdr->sh_entsize != entsize || !data)
		return -ENOEXEC;
	for (size_t i = 0; i < data->d_size / entsize; i++) {
		if (!gelf_getsym(data, (int)i, &sym))
			return -ENOEXEC;
		bind = GELF_ST_BIND(sym.st_info);
		type = GELF_ST_TYPE(sym.st_info);
		if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS || !sym.st_value ||
		    (bind != STB_GLOBAL && bind != STB_WEAK) ||
		    (type != STT_OBJECT && type != STT_NOTYPE))
			continue;
		sname = elf_strptr(ef->elf, shdr->sh_link, sym.st_name);
		for (size_t j = 0; sname && names[j]; j++)
			if (!value[j] && !strcmp(sname, names[j]))
				value[j] = sym.st_value;
	}
	return 0;
}

#define ELF_SYMBOL_NAMES_MAX 8
#define ELF_PAGE 4096u

/* The vaddr file_off loads at, through the PT_LOAD whose pages hold it (a mapping starts on a
 * page, a segment need not: lld's share their pages), an executable one first (exec: the
 * offset is an executable mapping's). 0 or -ENOENT. */
static int off_to_vaddr(const struct elf_file *ef, uint64_t file_off, bool exec, uint64_t *vaddr)
{
	for (int pass = exec ? 0 : 1; pass < 2; pass++)
		for (size_t i = 0; i < ef->nloads; i++) {
			const struct load_seg *l = &ef->loads[i];

			if ((!pass && !l->exec) || file_off < (l->offset & ~(uint64_t)(ELF_PAGE - 1)) ||
			    file_off >= l->offset + l->filesz)
				continue;
			*vaddr = l->vaddr - l->offset + file_off;
			return 0;
		}
	return -ENOENT;
}

int elf_exported_object_fd(int fd, const char *const *names, uint64_t file_off, bool exec,
			   uint64_t *value, uint64_t *vaddr_of_off)
{
	uint64_t found[ELF_SYMBOL_NAMES_MAX] = { 0 };
	struct elf_file ef;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	size_t n = 0;
	int err;

	while (names[n])
		if (++n > ELF_SYMBOL_NAMES_MAX)
			return -EINVAL;
	err = elf_file_open_fd(fd, &ef);
	if (err)
		return err;
	err = off_to_vaddr(&ef, file_off, exec, vaddr_of_off);
	while (!err && (scn = elf_nextscn(ef.elf, scn)) != NULL)
		if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_DYNSYM)
			err = exported_objects(&ef, scn, &shdr, names, found);
	elf_file_close(&ef);
	for (size_t j = 0; !err && j < n; j++)
		if (found[j]) {
			*value = found[j];
			return 0;
		}
	return err ? err : -ENOENT;
}

int elf_soname_fd(int fd, char *buf, size_t len)
{
	struct elf_file ef;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	int err;

	err = elf_file_open_fd(fd, &ef);
	if (err)
		return err;
	err = -ENOENT;
	while (err == -ENOENT && (scn = elf_nextscn(ef.elf, scn)) != NULL)
		if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_DYNAMIC)
			err = dynamic_soname(&ef, scn, &shdr, buf, len);
	elf_file_close(&ef);
	return err;
}

int elf_debugaltlink_fd(int fd, char *name, size_t namelen, char *hex, size_t hexlen)
{
	struct elf_file ef;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Shdr shdr;
	int err;

	err = elf_file_open_fd(fd, &ef);
	if (err)
		return err;
	err = -ENOENT;
	if (elf_getshdrstrndx(ef.elf, &shstrndx))
		goto out;
	while (err == -ENOENT && (scn = elf_nextscn(ef.elf, scn)) != NULL) {
		const char *sname, *nul;
		Elf_Data *data;
		size_t idlen;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS ||
		    !(sname = elf_strptr(ef.elf, shstrndx, shdr.sh_name)) ||
		    strcmp(sname, ".gnu_debugaltlink"))
			continue;
		err = -ENOEXEC;	/* a name, its NUL, an id: 64 bytes at most, as any */
		if (shdr.sh_size > 4096 + 64 || !(data = elf_getdata(scn, NULL)) || !data->d_buf ||
		    !(nul = memchr(data->d_buf, 0, data->d_size)))
			break;
		idlen = data->d_size - (size_t)(nul + 1 - (const char *)data->d_buf);
		if (!idlen || idlen > 64 || nul - (const char *)data->d_buf >= (ptrdiff_t)namelen)
			break;
		if (hexlen < 2 * idlen + 1) {
			err = -ENOSPC;
			break;
		}
		memcpy(name, data->d_buf, (size_t)(nul - (const char *)data->d_buf) + 1);
		for (size_t i = 0; i < idlen; i++)
			snprintf(hex + 2 * i, 3, "%02x", (unsigned char)nul[1 + i]);
		err = 0;
	}
out:
	elf_file_close(&ef);
	return err;
}

int elf_soname(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = elf_soname_fd(fd, buf, len);
	close(fd);
	return err;
}

bool elf_has_usdt(const char *path, const char *provider, const char *name)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool found;

	if (fd < 0)
		return false;
	found = elf_has_usdt_fd(fd, provider, name);
	close(fd);
	return found;
}
