/* SPDX-License-Identifier: GPL-2.0 */
/* What every view prints the same way: frames, loss counters, sizes and times. */
#ifndef GPUMEM_VIEWS_COMMON_H
#define GPUMEM_VIEWS_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include "json.h"
#include "session.h"

extern const struct view_ops snapshot_view;
extern const struct view_ops trace_view;
extern const struct view_ops top_batch_view;
extern const struct view_ops top_view;
extern const struct view_ops leaks_view;
extern const struct view_ops oom_view;

/* Frames of one stack as the process saw them; innermost (the call site) first. */
void frames_json(struct session *s, struct json_writer *w, int pid, const uint64_t *ips,
		 uint32_t n);
void frames_text(struct session *s, FILE *out, int pid, const uint64_t *ips, uint32_t n,
		 const char *sep, unsigned int max);
/* Non-zero loss counters, each with the option that fixes it; on the text stream given. */
void lost_text(struct session *s, FILE *out);
void lost_json(struct session *s, struct json_writer *w);
uint64_t wall_ns(struct session *s, uint64_t mono_ns);
void format_bytes(char *buf, size_t len, uint64_t bytes);

#endif
