/* SPDX-License-Identifier: GPL-2.0 */
/* --cgroup, --container and --pod: the cgroup directories they select, for the BPF filter. */
#ifndef GPUMEM_SELECT_H
#define GPUMEM_SELECT_H

#include <stddef.h>

struct selection {
	const char *kind;	/* "cgroup", "container" or "pod" */
	const char *value;
};

/* The cgroup v2 directories (absolute paths) selected; each must match at least one. Returns
 * 0 (and *dirs, *n, to free with selection_free) or -errno after printing why. */
int select_cgroups(const struct selection *sel, size_t nsel, char ***dirs, size_t *n);
void selection_free(char **dirs, size_t n);

#endif
