/* SPDX-License-Identifier: GPL-2.0 */
/* Function symbols of ELF files (libelf): enumeration for attaching uprobes, an address ->
 * symbol table for symbolizing, build-ids. A corrupt file is an error, never a crash. */
#ifndef GPUMEM_ELF_SYMS_H
#define GPUMEM_ELF_SYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Called once per distinct (name, vaddr) among the defined STT_FUNC / STT_GNU_IFUNC symbols
 * with a non-zero value in .symtab and .dynsym whose address is code (in an allocated,
 * executable section of an executable PT_LOAD: never data a symbol calls a function), in
 * address order. name has any "@VERSION" /
 * "@@VERSION" suffix stripped; file_off is the symbol's file offset (through the PT_LOAD that
 * holds st_value) as uprobes need. A non-zero return stops the walk and is returned.
 */
typedef int (*elf_sym_cb)(const char *name, uint64_t vaddr, uint64_t size, uint64_t file_off,
			  void *ctx);

/* The most bytes a symbol or string table, note or dynamic section may have, each read whole
 * into memory (and freed with the file): 80 times the largest on the project's host, libLLVM's
 * .dynstr (3 MB), room for a debug build's tables. A file with a larger one is not read
 * (-EFBIG): a few KiB of sparse file on disk can claim gigabytes. */
#define ELF_TABLE_MAX_BYTES (256ull << 20)

/* 0 or -errno; a truncated or corrupt ELF gives -ENOEXEC, one with a table over
 * ELF_TABLE_MAX_BYTES -EFBIG. */
int elf_for_each_func(const char *path, elf_sym_cb cb, void *ctx);
int elf_for_each_func_fd(int fd, elf_sym_cb cb, void *ctx);
bool elf_has_func(const char *path, const char *name);

/* A symbol table for address lookup, loaded once per file: both tables, sorted by address;
 * the PT_LOAD segments kept for file offset -> vaddr. */
struct elf_symtab;

int elf_symtab_load(const char *path, struct elf_symtab **out);
int elf_symtab_load_fd(int fd, struct elf_symtab **out);
void elf_symtab_free(struct elf_symtab *t);
/* -ENOENT when no PT_LOAD holds file_off. */
int elf_symtab_file_off_to_vaddr(const struct elf_symtab *t, uint64_t file_off, uint64_t *vaddr);
/* The symbol that contains vaddr (for size-0 symbols: the nearest below), NULL if none;
 * *sym_off (may be NULL) gets vaddr's offset from the symbol's start. */
const char *elf_symtab_lookup(const struct elf_symtab *t, uint64_t vaddr, uint64_t *sym_off);
size_t elf_symtab_count(const struct elf_symtab *t);

/* NT_GNU_BUILD_ID as lowercase hex: -ENOENT if none, -ENOSPC if hex is too small (room for
 * any: ELF_BUILD_ID_HEX_MAX, 64 bytes of id as hex). */
#define ELF_BUILD_ID_HEX_MAX 129
int elf_build_id(const char *path, char *hex, size_t len);
int elf_build_id_fd(int fd, char *hex, size_t len);

/* Whether the file has a USDT probe provider:name (a .note.stapsdt note). */
bool elf_has_usdt(const char *path, const char *provider, const char *name);
bool elf_has_usdt_fd(int fd, const char *provider, const char *name);

/* The value of the first of names (NULL-terminated, 8 at most) that the file exports as data
 * (.dynsym: defined, global or weak, OBJECT or NOTYPE), and the vaddr that file offset
 * file_off loads at (a mapping of that offset, less it, is the file's load bias; exec: the
 * mapping is executable, and its segment is taken where two share a page). 0, -ENOENT when
 * none of them is exported or no PT_LOAD holds file_off, or -errno / -ENOEXEC. */
int elf_exported_object_fd(int fd, const char *const *names, uint64_t file_off, bool exec,
			   uint64_t *value, uint64_t *vaddr_of_off);

/* The alternate debug file (dwz's) a debug file names in .gnu_debugaltlink: its path into
 * name and its build-id, as lowercase hex, into hex. -ENOENT if none, -ENOSPC if hex is too
 * small, -ENOEXEC for a malformed section (a name longer than namelen included). */
int elf_debugaltlink_fd(int fd, char *name, size_t namelen, char *hex, size_t hexlen);

/* The shared object's own name (DT_SONAME): -ENOENT if none, -ENOSPC if buf is too small. */
int elf_soname(const char *path, char *buf, size_t len);
int elf_soname_fd(int fd, char *buf, size_t len);

#endif
