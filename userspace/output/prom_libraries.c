// SPDX-License-Identifier: GPL-2.0
/* The library metric family: what each process's owning libraries (model/owners.h) hold, its
 * largest ones by bytes, the rest as one "other" series so that a process's series add up. */
#include <stdlib.h>
#include <string.h>

#include "model/owners.h"
#include "output/json.h"
#include "output/prom.h"
#include "output/prom_families.h"

#define PROM_LIBRARY_LEN 128	/* bytes of a library label */
#define PROM_LIBRARY_OTHER "other"

static const char LIBRARY_FAMILY[] = "gpumem_library_memory_bytes";

struct lib_row {
	char label[PROM_LIBRARY_LEN];
	const char *family;
	uint64_t bytes;
};

/* label: the library as text names it (a Python file from its package on), cut to
 * PROM_LIBRARY_LEN bytes without splitting a UTF-8 character. */
static void library_label(const char *library, char *label)
{
	const char *name = owner_short_name(library);
	size_t len = strlen(name), i = 0, n;

	while (i < len) {
		n = utf8_seq_len((const unsigned char *)name + i, len - i);
		if (!n)
			n = 1;
		if (i + n > PROM_LIBRARY_LEN - 1)
			break;
		i += n;
	}
	memcpy(label, name, i);
	label[i] = '\0';
}

/* p's rows: at most per_proc libraries, those whose labels read the same as one (two files
 * alike up to the cut: one series, never two with one label set), the rest in *other. */
static size_t proc_rows(const struct snap_proc *p, unsigned int per_proc, struct lib_row *rows,
			uint64_t *other)
{
	char label[PROM_LIBRARY_LEN];
	size_t n = 0;

	*other = 0;
	for (size_t i = 0; i < p->nlibraries; i++) {
		const struct snap_library *l = &p->libraries[i];
		const char *family = l->family ? l->family : "";
		size_t r;

		if (!l->st.current_bytes)
			continue;
		library_label(l->library, label);
		for (r = 0; r < n; r++)
			if (!strcmp(rows[r].label, label) && !strcmp(rows[r].family, family))
				break;
		if (r < n) {
			rows[r].bytes += l->st.current_bytes;
		} else if (n < per_proc && strcmp(label, PROM_LIBRARY_OTHER)) {
			memcpy(rows[n].label, label, sizeof(label));
			rows[n].family = family;
			rows[n++].bytes = l->st.current_bytes;
		} else {
			*other += l->st.current_bytes;
		}
	}
	return n;
}

static void write_proc(FILE *out, const struct snap_proc *p, unsigned int per_proc,
		       struct lib_row *rows)
{
	struct proc_labels pl;
	uint64_t other;
	size_t base, n = proc_rows(p, per_proc, rows, &other);

	prom_proc_labels(p, &pl);
	base = pl.ls.n;
	for (size_t r = 0; r < n; r++) {
		pl.ls.n = base;
		prom_label_add(&pl.ls, "library", rows[r].label);
		prom_label_add(&pl.ls, "family", rows[r].family);
		prom_sample(out, LIBRARY_FAMILY, &pl.ls, rows[r].bytes);
	}
	if (!other)
		return;
	pl.ls.n = base;
	prom_label_add(&pl.ls, "library", PROM_LIBRARY_OTHER);
	prom_label_add(&pl.ls, "family", "");
	prom_sample(out, LIBRARY_FAMILY, &pl.ls, other);
}

void prom_write_libraries(FILE *out, const struct snapshot *s, unsigned int per_proc)
{
	struct lib_row *rows;

	prom_family(out, LIBRARY_FAMILY, "gauge",
		    "Memory a process holds now by owning library (the innermost frame of its call "
		    "sites outside the GPU runtime, driver and call glue), its largest libraries "
		    "by bytes, the rest as library=\"other\"; family names a known one (NCCL, "
		    "cuBLAS, cuDNN, TensorRT, PyTorch...), empty when none.");
	if (!per_proc)
		return;
	rows = calloc(per_proc, sizeof(*rows));
	if (!rows)
		return;	/* the family with no samples: the scrape still parses */
	for (size_t i = 0; i < s->nprocs; i++)
		if (prom_proc_shown(s, i))
			write_proc(out, &s->procs[i], per_proc, rows);
	free(rows);
}
