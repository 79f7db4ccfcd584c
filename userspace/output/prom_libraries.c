// SPDX-License-Identifier: GPL-2.0
/* The library metric family: what each process's owning libraries (model/owners.h) hold, its
 * largest ones by bytes, the rest as one "other" series so that a process's series add up. */
#include <stdlib.h>
#include <string.h>

#include "output/json.h"
#include "output/prom.h"
#include "output/prom_families.h"

#define PROM_LIBRARY_LEN 128	/* bytes of a library label (a Python file's path may be long) */
#define PROM_LIBRARY_OTHER "other"

static const char LIBRARY_FAMILY[] = "gpumem_library_memory_bytes";

/* label: library cut to PROM_LIBRARY_LEN bytes without splitting a UTF-8 character. */
static void library_label(const char *library, char *label)
{
	size_t len = strlen(library), i = 0, n;

	while (i < len) {
		n = utf8_seq_len((const unsigned char *)library + i, len - i);
		if (!n)
			n = 1;
		if (i + n > PROM_LIBRARY_LEN - 1)
			break;
		i += n;
	}
	memcpy(label, library, i);
	label[i] = '\0';
}

static void write_proc(FILE *out, const struct snap_proc *p, unsigned int per_proc)
{
	struct proc_labels pl;
	char label[PROM_LIBRARY_LEN];
	uint64_t other = 0;
	size_t base, shown = 0;

	prom_proc_labels(p, &pl);
	base = pl.ls.n;
	for (size_t i = 0; i < p->nlibraries; i++) {
		const struct snap_library *l = &p->libraries[i];

		if (shown >= per_proc || !l->st.current_bytes) {
			other += l->st.current_bytes;
			continue;
		}
		library_label(l->library, label);
		pl.ls.n = base;
		prom_label_add(&pl.ls, "library", label);
		prom_label_add(&pl.ls, "family", l->family ? l->family : "");
		prom_sample(out, LIBRARY_FAMILY, &pl.ls, l->st.current_bytes);
		shown++;
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
	prom_family(out, LIBRARY_FAMILY, "gauge",
		    "Memory a process holds now by owning library (the innermost frame of its call "
		    "sites outside the GPU runtime, driver and call glue), its largest libraries "
		    "by bytes, the rest as library=\"other\"; family names a known one (NCCL, "
		    "cuBLAS, cuDNN, TensorRT, PyTorch...), empty when none.");
	for (size_t i = 0; per_proc && i < s->nprocs; i++)
		if (prom_proc_shown(s, i))
			write_proc(out, &s->procs[i], per_proc);
}
