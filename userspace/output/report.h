/* SPDX-License-Identifier: GPL-2.0 */
/* The pieces every output writes the same way, each written once: frames, sites, containers,
 * call events and loss counters, in JSON (through the escaping writer) and as text. */
#ifndef GPUMEM_REPORT_H
#define GPUMEM_REPORT_H

#include <stdbool.h>
#include <stdio.h>
#include "model/snapshot.h"
#include "output/json.h"

/* How a site or a call event names its API and kind: a PyTorch tensor's kind is "tensor",
 * its free's API "pytorch:free" (the BPF side numbers both with the "pytorch:malloc" row). */
const char *site_kind_name(const struct snap_site *ss);
const char *event_api_name(const struct gm_call_event *e);
const char *event_kind_name(const struct gm_call_event *e);	/* NULL: an unknown free */
bool event_is_tensor(const struct gm_call_event *e);

/* A library's name as text, its family after it: "libnccl.so.2 (NCCL)", sanitized; a Python
 * file from its package on ("torch/cuda/memory.py"), or by its file name. */
void library_text(char *buf, size_t len, const struct snap_library *l);
/* "libcublasLt.so.13 (cuBLAS) 1.0 GiB, libnccl.so.2 (NCCL) 256 MiB, +2 more": p's libraries
 * that hold memory, at most max of them; nothing when none holds any. */
void text_libraries(FILE *out, const struct snap_proc *p, unsigned int max, bool exact);
/* "        by library: ...\n" (indent first) where a library other than the program itself holds
 * memory of p: the line the text views print. */
void text_libraries_line(FILE *out, const char *indent, const struct snap_proc *p, bool exact);

/* ---- JSON ---- */

/* "frames": an array, innermost first. A NULL stack is an empty array. A stack's text is
 * cached (with a reference to it) until frames_cache_free. */
void json_frames(struct json_writer *w, const struct snap_stack *st);
/* A stack's text in one form, written by write(f, st, arg) at its first use (and again when
 * variant, what else it depends on, changes) and kept with the stack until frames_cache_free;
 * NULL when it could not be (st NULL, out of memory). */
enum frames_form { FRAMES_JSON, FRAMES_TEXT, FRAMES_FORMS };
typedef void (*frames_writer)(FILE *f, const struct snap_stack *st, const void *arg);
const char *frames_cache_text(const struct snap_stack *st, enum frames_form form,
			      unsigned int variant, frames_writer write, const void *arg,
			      size_t *len);
void frames_cache_free(void);
/* "container", "pod", and the names its OCI bundle gave: "pod_name", "namespace",
 * "container_name" (each null when not known; ci NULL: the process was not seen). */
void json_container(struct json_writer *w, const struct container_info *ci);
/* The same with "container_runtime" and "pod_qos". */
void json_container_full(struct json_writer *w, const struct container_info *ci);
/* A site's own fields (api, kind, numbers, oldest age, stack id, frames), inside an object
 * the caller opens: views add theirs around them. */
/* "gpu": the device of a site or event (stored as the device + 1), null: host or not known. */
void json_kv_gpu(struct json_writer *w, uint32_t gpu);
void json_site_fields(struct json_writer *w, const struct snap_proc *p, const struct snap_site *ss);
/* "libraries": p's memory by owning library (model/owners.h), largest first. */
void json_libraries(struct json_writer *w, const struct snap_proc *p);
/* The fields of a call event that trace, oom and failure records share: time, pid, tid, comm,
 * api, layer, kind, size, error and its name. */
void json_call_fields(struct json_writer *w, const struct gm_call_event *e, uint64_t wall_ns);
/* A failure record of the snapshot contract, as one object. */
/* One device of either vendor, as the outputs show it: NVML's by its index, AMD's in HIP's
 * order; "" and -1 for what was not given. */
struct device_row {
	const char *vendor;	/* "nvidia", "amd" */
	unsigned int index;
	const char *name, *uuid, *pci_bus_id;
	int minor;		/* /dev/nvidiaN, /dev/dri/renderDN */
	uint64_t total, used, free;
};
#define DEVICE_ROWS_MAX (NVML_MAX_DEVICES + AMDGPU_MAX_DEVICES)
/* The snapshot's devices, NVML's then AMD's: how many (out holds DEVICE_ROWS_MAX). */
unsigned int device_rows(const struct snapshot *snap, struct device_row *out);
/* "devices" (NVML's and AMD's, each with its "vendor"; [] without either), "nvml": whether
 * it answered, and why not, and "amdgpu": whether KFD is there, and why no AMD devices. */
void json_devices(struct json_writer *w, const struct snapshot *snap);
/* Why the snapshot has no device numbers (NULL when it has): shown beside the "-". */
const char *devices_reason(const struct snapshot *snap);
/* Why it has no AMD devices (NULL when it has). */
const char *amd_devices_reason(const struct snapshot *snap);
/* Each GPU's free and total memory ("GPU 0 free 1.0 GiB of 80 GiB, GPU 1 ..."), or
 * "device free - of - (NVML: REASON)"; then AMD's, where the host has them. */
void text_devices(FILE *out, const struct snapshot *snap, bool exact);
void json_failure(struct json_writer *w, const struct snapshot *snap, const struct snap_failure *f);
/* The loss counters, the kernel's and userspace's, in the order json_lost writes them: their
 * number, the name of the i-th (its JSON key), and its value in snap. */
size_t loss_count(void);
const char *loss_name(size_t i);
uint64_t loss_value(const struct snapshot *snap, size_t i);
/* Whether the i-th is the kernel's (it lives in the BPF maps, an agent's pins included). */
bool loss_is_kernel(size_t i);
/* Sets the i-th (a snapshot read back from a recording). */
void loss_set(struct snapshot *snap, size_t i, uint64_t v);
/* "lost": every loss counter, zero or not. */
void json_lost(struct json_writer *w, const struct snapshot *snap);
/* A string whose value gpumem may not know: null when !valid. */
void json_kv_known(struct json_writer *w, const char *key, const char *s, bool valid);
/* The same for numbers: the value, or null when not valid. */
void json_kv_u64_known(struct json_writer *w, const char *key, uint64_t v, bool valid);
void json_kv_double_known(struct json_writer *w, const char *key, double v, bool valid);

/* ---- text ---- */

/* One frame: `func (file.c:42)`, `func+0x1c`, `libx.so+0x1c40` or its address. */
void frame_text(FILE *out, const struct snap_frame *f);
/* `func (file.c:42) <- caller (main.c:7)`, at most max frames; "[no stack]" when empty. */
void text_frames(FILE *out, const struct snap_stack *st, const char *sep, unsigned int max);
/* The same from the innermost Python frame on, where the stack has one (a PyTorch tensor's
 * native frames are the allocator's own). */
void text_frames_user(FILE *out, const struct snap_stack *st, const char *sep, unsigned int max);
/* The non-zero loss counters on one line, each with the option that fixes it; nothing when
 * all are zero. */
void text_lost(FILE *out, const struct snapshot *snap);
/* The same counters, names and numbers only ("lost: name=N, name=N"), into buf (empty when
 * all are zero): a screen's line, each counter whole (a buffer too short for one more ends
 * with "..."). */
void text_lost_line(const struct snapshot *snap, char *buf, size_t len);
/* What a narrow column shows: the container id's first 12 hex digits, else "pod:" and the
 * pod UID's first 8, else "-". ci NULL: "-". */
const char *container_short(const struct container_info *ci, char *buf, size_t len);
#define CONTAINER_SHORT_LEN 12
/* "HH:MM:SS.uuuuuu" of a wall-clock time. */
void text_clock(char *buf, size_t len, uint64_t wall_ns, bool micros);
/* A string gpumem may not know, sanitized for a terminal: "-" when !valid or empty. */
const char *text_known(char *buf, size_t len, const char *s, bool valid);

#endif
