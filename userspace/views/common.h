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

struct container_info;
/* "container" and "pod" keys (null when not known); ci NULL: process not seen. */
void container_kv_json(struct json_writer *w, const struct container_info *ci);
/* What a narrow column shows: the container id's first 12 hex digits, else "pod:" and the
 * pod UID's first 8, else "-". ci NULL: "-". */
const char *container_short(const struct container_info *ci, char *buf, size_t len);
#define CONTAINER_SHORT_LEN 12

#endif
