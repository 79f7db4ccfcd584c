/* SPDX-License-Identifier: GPL-2.0 */
/* The one escaping writer of the Prometheus text exposition format (version 0.0.4): a
 * family's HELP and TYPE lines, and samples whose label values come from processes. */
#ifndef GPUMEM_PROM_WRITER_H
#define GPUMEM_PROM_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A label: its name is a constant of gpumem's; its value is untrusted text (NULL: ""). */
struct prom_label {
	const char *name;
	const char *value;
};

#define PROM_MAX_LABELS 12	/* labels of one sample, the most any family has */

/* A sample's label set, built by the family that writes it. */
struct prom_labels {
	struct prom_label l[PROM_MAX_LABELS];
	size_t n;
};

/* Appends a label; one past PROM_MAX_LABELS is dropped (a bug in the caller, not in data). */
void prom_label_add(struct prom_labels *ls, const char *name, const char *value);

/* "# HELP name help" and "# TYPE name type" (type: "gauge" or "counter"); once per family,
 * before its samples, which follow it without another family's lines in between. */
void prom_family(FILE *out, const char *name, const char *type, const char *help);

/* "name{a="x",b="y"} value" (no braces without labels). Label values are escaped: backslash,
 * double quote and line feed as \\, \" and \n; control characters (C0, DEL, C1) and bytes that
 * are not valid UTF-8 become U+FFFD, so a line always parses and stays one line. */
void prom_sample(FILE *out, const char *name, const struct prom_labels *ls, uint64_t value);
/* The same with a value that has a fraction (9 significant digits). */
void prom_sample_double(FILE *out, const char *name, const struct prom_labels *ls, double value);

/* A label value's escaped text alone, without quotes (exposed for the tests). */
void prom_label_value(FILE *out, const char *s);

#endif
