// SPDX-License-Identifier: GPL-2.0
/* Frames, sites, containers, call events and loss counters, as JSON and as text: the one
 * place each is written. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/util.h"
#include "model/owners.h"
#include "model/python.h"
#include "output/report.h"
#include "output/units.h"
#include "probes/table.h"

bool event_is_tensor(const struct gm_call_event *e)
{
	return e->layer == GM_LAYER_TENSOR;
}

const char *site_kind_name(const struct snap_site *ss)
{
	return probe_is_tensor(ss->api) ? "tensor" : kind_name(ss->kind);
}

const char *event_api_name(const struct gm_call_event *e)
{
	if (event_is_tensor(e) && (e->type == GM_REC_FREE || e->type == GM_REC_UNKNOWN_FREE))
		return "pytorch:free";
	return probe_api_name(e->api);
}

const char *event_kind_name(const struct gm_call_event *e)
{
	if (event_is_tensor(e))
		return "tensor";
	return e->type == GM_REC_UNKNOWN_FREE ? NULL : kind_name(e->kind);
}

/* ---- JSON ---- */

static void frames_array(struct json_writer *w, const struct snap_stack *st)
{
	jw_array_begin(w);
	for (uint32_t i = 0; st && i < st->nframes; i++) {
		const struct snap_frame *f = &st->frames[i];

		jw_object_begin(w);
		jw_kv_string(w, "lang", f->python ? "python" : "native");
		jw_kv_hex(w, "addr", f->addr);
		jw_kv_string(w, "module", f->module);
		jw_kv_string(w, "symbol", f->symbol);
		jw_kv_u64(w, "offset", f->offset);
		if (f->symbol && !f->inlined)
			jw_kv_u64(w, "symbol_offset", f->symbol_offset);
		jw_kv_string(w, "file", f->file);
		if (f->line)
			jw_kv_u64(w, "line", f->line);
		else
			jw_kv_null(w, "line");
		if (f->inlined)
			jw_kv_bool(w, "inlined", true);
		if (snap_frame_is_glue(f))
			jw_kv_bool(w, "glue", true);
		jw_object_end(w);
	}
	jw_array_end(w);
}

/* A stack's frames as JSON and as a text view's site, each written once and kept while the
 * cache holds the stack: every event of a site prints the same frames (trace writes little
 * else). */
#define FRAMES_CACHE_SIZE 4096	/* stacks whose text is kept; all go when it is full */

static struct frames_text {
	struct snap_stack *stack;	/* a reference: the address is never reused meanwhile */
	struct {
		char *text;	/* NULL until first asked for */
		size_t len;
		unsigned int variant;	/* what the form's text was written with */
	} form[FRAMES_FORMS];
} frames_cache[FRAMES_CACHE_SIZE];
static size_t frames_cached;

static void frames_cache_clear(void)
{
	for (size_t i = 0; i < FRAMES_CACHE_SIZE; i++) {
		snap_stack_put(frames_cache[i].stack);
		for (size_t f = 0; f < FRAMES_FORMS; f++)
			free(frames_cache[i].form[f].text);
		frames_cache[i] = (struct frames_text){ 0 };
	}
	frames_cached = 0;
}

/* The stack's entry, found or made (empty). */
static struct frames_text *frames_entry_of(const struct snap_stack *st)
{
	size_t h = ((uintptr_t)st >> 4) % FRAMES_CACHE_SIZE, i = h;
	struct frames_text *e;

	do {
		e = &frames_cache[i];
		if (e->stack == st)
			return e;
		if (!e->stack)
			break;
		i = (i + 1) % FRAMES_CACHE_SIZE;
	} while (i != h);
	if (e->stack || frames_cached >= FRAMES_CACHE_SIZE / 2) {
		frames_cache_clear();
		e = &frames_cache[h];
	}
	e->stack = snap_stack_get((struct snap_stack *)st);
	frames_cached++;
	return e;
}

const char *frames_cache_text(const struct snap_stack *st, enum frames_form form,
			      unsigned int variant, frames_writer write, const void *arg,
			      size_t *len)
{
	struct frames_text *e = st ? frames_entry_of(st) : NULL;
	FILE *f;

	if (!e)
		return NULL;
	if (e->form[form].text && e->form[form].variant != variant) {
		free(e->form[form].text);
		e->form[form].text = NULL;
	}
	if (!e->form[form].text) {
		f = open_memstream(&e->form[form].text, &e->form[form].len);
		if (!f)
			return NULL;
		write(f, st, arg);
		if (fclose(f)) {
			free(e->form[form].text);
			e->form[form].text = NULL;
			return NULL;
		}
		e->form[form].variant = variant;
	}
	*len = e->form[form].len;
	return e->form[form].text;
}

static void write_json_frames(FILE *f, const struct snap_stack *st, const void *arg)
{
	struct json_writer *w = jw_new(f);

	(void)arg;
	if (w)
		frames_array(w, st);
	jw_free(w);
}

void json_frames(struct json_writer *w, const struct snap_stack *st)
{
	size_t len;
	const char *json = frames_cache_text(st, FRAMES_JSON, 0, write_json_frames, NULL, &len);

	if (json)
		jw_raw(w, json, len);
	else
		frames_array(w, st);
}

void frames_cache_free(void)
{
	frames_cache_clear();
}

void json_container(struct json_writer *w, const struct container_info *ci)
{
	static const char none[] = "\"container\":null,\"pod\":null,\"pod_name\":null,"
				   "\"namespace\":null,\"container_name\":null";

	/* A process in no container (most, and every event of theirs): in one piece. */
	if (!ci || (!ci->has_id && !ci->has_pod && !ci->pod_name[0] && !ci->pod_namespace[0] &&
		    !ci->container_name[0])) {
		jw_members(w, none, sizeof(none) - 1);
		return;
	}
	jw_kv_string(w, "container", ci && ci->has_id ? ci->id : NULL);
	jw_kv_string(w, "pod", ci && ci->has_pod ? ci->pod_uid : NULL);
	jw_kv_string(w, "pod_name", ci && ci->pod_name[0] ? ci->pod_name : NULL);
	jw_kv_string(w, "namespace", ci && ci->pod_namespace[0] ? ci->pod_namespace : NULL);
	jw_kv_string(w, "container_name", ci && ci->container_name[0] ? ci->container_name : NULL);
}

void json_container_full(struct json_writer *w, const struct container_info *ci)
{
	json_container(w, ci);
	jw_kv_string(w, "container_runtime", ci && ci->runtime[0] ? ci->runtime : NULL);
	jw_kv_string(w, "pod_qos", ci && ci->has_pod && ci->qos[0] ? ci->qos : NULL);
}

void json_kv_known(struct json_writer *w, const char *key, const char *s, bool valid)
{
	jw_kv_string(w, key, valid ? s : NULL);
}

void json_kv_u64_known(struct json_writer *w, const char *key, uint64_t v, bool valid)
{
	if (valid)
		jw_kv_u64(w, key, v);
	else
		jw_kv_null(w, key);
}

void json_kv_double_known(struct json_writer *w, const char *key, double v, bool valid)
{
	if (valid)
		jw_kv_double(w, key, v);
	else
		jw_kv_null(w, key);
}

void json_kv_gpu(struct json_writer *w, uint32_t gpu)
{
	if (gpu)	/* the device + 1 */
		jw_kv_u64(w, "gpu", gpu - 1);
	else
		jw_kv_null(w, "gpu");
}

/* The counts a site and a library share (struct gm_site_stats). */
static void stats_json(struct json_writer *w, const struct gm_site_stats *st)
{
	jw_kv_u64(w, "current_bytes", st->current_bytes);
	jw_kv_u64(w, "current_allocs", st->current_allocs);
	jw_kv_u64(w, "alloc_count", st->alloc_count);
	jw_kv_u64(w, "free_count", st->free_count);
	jw_kv_u64(w, "alloc_bytes_total", st->alloc_bytes_total);
	jw_kv_u64(w, "failed_count", st->failed_count);
}

void json_site_fields(struct json_writer *w, const struct snap_proc *p, const struct snap_site *ss)
{
	struct snap_owner o;

	jw_kv_string(w, "api", probe_api_name(ss->api));
	jw_kv_string(w, "vendor", probe_api_vendor(ss->api));
	jw_kv_string(w, "kind", site_kind_name(ss));
	json_kv_gpu(w, ss->gpu);
	stats_json(w, &ss->st);
	/* 0 when it holds nothing, as the contract has it; unknown (not walked) is null. */
	if ((ss->valid & SS_OLDEST) || !ss->st.current_allocs)
		jw_kv_u64(w, "oldest_age_ns", snap_site_oldest_age(p, ss));
	else
		jw_kv_null(w, "oldest_age_ns");
	jw_kv_i64(w, "stack_id", ss->stack_id);
	owner_of_stack(p, ss->stack, &o);
	jw_kv_string(w, "library", o.library);
	json_kv_known(w, "family", o.family, o.family != NULL);
	jw_key(w, "frames");
	json_frames(w, ss->stack);
}

void json_libraries(struct json_writer *w, const struct snap_proc *p)
{
	jw_key(w, "libraries");
	jw_array_begin(w);
	for (size_t i = 0; i < p->nlibraries; i++) {
		const struct snap_library *l = &p->libraries[i];

		jw_object_begin(w);
		jw_kv_string(w, "library", l->library);
		json_kv_known(w, "family", l->family, l->family != NULL);
		stats_json(w, &l->st);
		json_kv_u64_known(w, "peak_bytes", l->peak_bytes, l->valid & SL_PEAK);
		jw_kv_u64(w, "sites", l->nsites);
		jw_object_end(w);
	}
	jw_array_end(w);
}

void library_text(char *buf, size_t len, const struct snap_library *l)
{
	char name[256];

	text_sanitize(name, sizeof(name), owner_short_name(l->library));
	if (l->family)
		snprintf(buf, len, "%s (%s)", name, l->family);
	else
		snprintf(buf, len, "%s", name);
}

void text_libraries_line(FILE *out, const char *indent, const struct snap_proc *p, bool exact)
{
	bool others = false;

	for (size_t i = 0; i < p->nlibraries; i++)
		others |= p->libraries[i].st.current_bytes &&
			  (!p->libraries[i].family || strcmp(p->libraries[i].family, OWNER_PROGRAM));
	if (!others)
		return;
	fprintf(out, "%sby library: ", indent);
	text_libraries(out, p, 6, exact);
	fputc('\n', out);
}

void text_libraries(FILE *out, const struct snap_proc *p, unsigned int max, bool exact)
{
	unsigned int shown = 0, held = 0;
	char name[300], size[32];

	for (size_t i = 0; i < p->nlibraries; i++)
		held += p->libraries[i].st.current_bytes > 0;
	for (size_t i = 0; i < p->nlibraries && shown < max; i++) {
		const struct snap_library *l = &p->libraries[i];

		if (!l->st.current_bytes)
			break;	/* largest first: the rest hold nothing */
		library_text(name, sizeof(name), l);
		fmt_size(size, sizeof(size), l->st.current_bytes, exact);
		fprintf(out, "%s%s %s", shown++ ? ", " : "", name, size);
	}
	if (held > shown)
		fprintf(out, ", +%u more", held - shown);
}

void json_call_fields(struct json_writer *w, const struct gm_call_event *e, uint64_t wall_ns)
{
	jw_kv_u64(w, "time_ns", wall_ns);
	jw_kv_i64(w, "pid", e->pid);
	jw_kv_i64(w, "tid", e->tid);
	jw_key(w, "comm");
	jw_string_len(w, e->comm, strnlen(e->comm, GM_COMM_LEN));
	/* Names from gpumem's tables. */
	jw_key(w, "api");
	jw_string_spelled(w, event_api_name(e));
	jw_key(w, "layer");
	jw_string_spelled(w, probe_layer_name(e->layer));
	jw_key(w, "vendor");
	jw_string_spelled(w, probe_vendor(e->layer));
	jw_key(w, "kind");
	jw_string_spelled(w, event_kind_name(e));
	jw_kv_u64(w, "size", e->size);
	json_kv_gpu(w, e->gpu);
	jw_kv_i64(w, "error", e->error);
	if (e->type == GM_REC_ALLOC_FAILED)
		jw_kv_string(w, "error_name", gpu_error_name(e->layer, e->error));
}

/* Why a source gave no devices: its own reason, else whether they were asked for. */
static const char *source_reason(const struct snapshot *snap, bool have, const char *reason)
{
	if (have)
		return NULL;
	if (reason[0])
		return reason;
	return snap->wants & SNAP_DEVICES ? "no answer" : "not read for this report";
}

const char *devices_reason(const struct snapshot *snap)
{
	return source_reason(snap, snap->devices_valid, snap->nvml.reason);
}

const char *amd_devices_reason(const struct snapshot *snap)
{
	return source_reason(snap, snap->namd_devices > 0, snap->amd.reason);
}

unsigned int device_rows(const struct snapshot *snap, struct device_row *out)
{
	unsigned int n = 0;

	for (unsigned int i = 0; snap->devices_valid && i < snap->ndevices; i++) {
		const struct nvml_device *d = &snap->devices[i];

		out[n++] = (struct device_row){
			.vendor = "nvidia", .index = d->index, .name = d->name, .uuid = d->uuid,
			.pci_bus_id = d->pci_bus_id, .minor = d->minor, .total = d->total,
			.used = d->used, .free = d->free,
		};
	}
	for (unsigned int i = 0; i < snap->namd_devices; i++) {
		const struct amd_device *d = &snap->amd_devices[i];

		out[n++] = (struct device_row){
			.vendor = "amd", .index = d->index, .name = d->name, .uuid = d->uuid,
			.pci_bus_id = d->pci_bus_id, .minor = d->render_minor, .total = d->total,
			.used = d->used, .free = d->free,
		};
	}
	return n;
}


void json_devices(struct json_writer *w, const struct snapshot *snap)
{
	struct device_row rows[DEVICE_ROWS_MAX];
	unsigned int n = device_rows(snap, rows);

	jw_key(w, "devices");
	jw_array_begin(w);
	for (unsigned int i = 0; i < n; i++) {
		const struct device_row *d = &rows[i];

		jw_object_begin(w);
		jw_kv_string(w, "vendor", d->vendor);
		jw_kv_u64(w, "index", d->index);
		jw_kv_string(w, "name", d->name);
		json_kv_known(w, "uuid", d->uuid, d->uuid[0]);
		json_kv_known(w, "pci_bus_id", d->pci_bus_id, d->pci_bus_id[0]);
		if (d->minor >= 0)
			jw_kv_i64(w, "minor", d->minor);
		else
			jw_kv_null(w, "minor");
		jw_kv_u64(w, "free_bytes", d->free);
		jw_kv_u64(w, "total_bytes", d->total);
		jw_object_end(w);
	}
	jw_array_end(w);
	jw_key(w, "nvml");
	jw_object_begin(w);
	jw_kv_bool(w, "loaded", snap->nvml.loaded);
	if (snap->nvml.error_valid)
		jw_kv_i64(w, "error", snap->nvml.error);
	else
		jw_kv_null(w, "error");
	jw_kv_string(w, "reason", devices_reason(snap));
	jw_object_end(w);
	jw_key(w, "amdgpu");
	jw_object_begin(w);
	jw_kv_bool(w, "present", snap->amd.present);
	jw_kv_string(w, "reason", amd_devices_reason(snap));
	jw_object_end(w);
}

void text_devices(FILE *out, const struct snapshot *snap, bool exact)
{
	struct device_row rows[DEVICE_ROWS_MAX];
	unsigned int n = device_rows(snap, rows);
	char free_b[32], total[32];

	if (!snap->devices_valid)
		fprintf(out, "device free - of - (NVML: %s)", devices_reason(snap));
	/* AMD's only where the host has them: an NVIDIA host reads no word about KFD. */
	for (unsigned int i = 0; i < n; i++) {
		const struct device_row *d = &rows[i];
		bool amd = !strcmp(d->vendor, "amd");

		fmt_size(free_b, sizeof(free_b), d->free, exact);
		fmt_size(total, sizeof(total), d->total, exact);
		fprintf(out, "%s%sGPU %u %s %s free %s of %s",
			!i ? (snap->devices_valid ? "" : "; ") : ", ", amd ? "AMD " : "", d->index,
			d->name, amd ? (d->pci_bus_id[0] ? d->pci_bus_id : "-") :
			(d->uuid[0] ? d->uuid : "-"), free_b, total);
	}
}

void json_failure(struct json_writer *w, const struct snapshot *snap, const struct snap_failure *f)
{
	jw_object_begin(w);
	json_call_fields(w, &f->ev, snapshot_wall_ns(snap, f->ev.time_ns));
	json_container(w, f->has_container ? &f->container : NULL);
	jw_kv_u64(w, "process_bytes_at_failure", f->ev.process_bytes);
	jw_kv_u64(w, "process_tensor_bytes_at_failure", f->ev.tensor_bytes);
	jw_key(w, "frames");
	json_frames(w, f->stack);
	jw_object_end(w);
}

/* Every loss counter, the kernel's and userspace's, with the option that fixes it. */
static const struct {
	bool user;		/* snapshot->lost[which], else snapshot->counters[which] */
	unsigned int which;
	const char *name;
	const char *fix;
} losses[] = {
	{ false, GM_CNT_ALLOC_MAP_FULL, "alloc_map_full", "raise --max-allocs" },
	{ false, GM_CNT_STACK_ERRORS, "stack_errors", "raise --max-stacks" },
	{ false, GM_CNT_RINGBUF_DROPPED, "ringbuf_dropped", "raise --ringbuf-mb" },
	{ false, GM_CNT_UNKNOWN_FREES, "unknown_frees", "allocated before gpumem attached" },
	{ false, GM_CNT_SITE_MAP_FULL, "site_map_full", "raise --max-sites" },
	{ false, GM_CNT_PROC_MAP_FULL, "proc_map_full", "raise --max-procs" },
	{ false, GM_CNT_INFLIGHT_FULL, "inflight_full",
	  "the kernel had no memory for a thread record" },
	{ false, GM_CNT_REPLACED_ALLOCS, "replaced_allocs", "freed by an API gpumem does not probe" },
	{ true, SNAP_LOST_BAD_RECORDS, "bad_records", "BPF object and binary differ" },
	{ true, SNAP_LOST_ENDED_DROPPED, "ended_procs_dropped",
	  "raise --keep-ended or --keep-ended-for" },
	{ true, SNAP_LOST_FAILURES_DROPPED, "failure_records_dropped",
	  "counts stay exact; raise --keep-failures" },
	{ false, GM_CNT_PY_STACK_ERRORS, "python_stack_errors", "raise --max-stacks" },
	{ false, GM_CNT_PY_MISMATCH, "python_mismatch",
	  "interpreter unlike gpumem's offsets: native frames only (-v says which)" },
	{ true, SNAP_LOST_PY_REFUSED, "python_refused",
	  "interpreter version without offsets, or checks failed: native frames only (-v)" },
	{ true, SNAP_LOST_OCI_REJECTED, "oci_bundles_rejected",
	  "a container's config.json was malformed, too big, too deep or a symlink: its pod "
	  "and container names are unknown (-v names it)" },
	{ false, GM_CNT_UNKNOWN_TENSOR_FREES, "unknown_tensor_frees",
	  "PyTorch tensor allocated before gpumem attached" },
	{ false, GM_CNT_CTX_MAP_FULL, "ctx_map_full",
	  "more live contexts than gpumem follows: their allocations' device is unknown" },
	{ false, GM_CNT_UNSIZED_ARRAYS, "unsized_arrays",
	  "an array's descriptor was unreadable or of a format gpumem cannot size: held as 0 bytes" },
	{ true, SNAP_LOST_NOT_UNWOUND, "stacks_not_unwound",
	  "a stack copy could not be unwound with CFI (its files unreadable, -v says which) and "
	  "its frame-pointer stack, shown instead, is short" },
	{ true, SNAP_LOST_FILES_NOT_ATTACHED, "files_not_attached",
	  "CUDA files in use got no probes: --max-files were attached, or attaching failed (out "
	  "of file descriptors?); the log says which" },
	{ true, SNAP_LOST_UNHELD_LATE, "late_attach_unheld",
	  "a process mapped a CUDA file gpumem had not attached and ran on (not paused: "
	  "system-wide, serve, --no-hold): its calls before the probes were on are not seen; "
	  "--lib FILE attaches it at start, -c/-p/--cgroup pause it" },
	{ true, SNAP_LOST_NAMES_DROPPED, "names_dropped",
	  "function and file names past what gpumem keeps (SYM_NAMES_MAX_BYTES): those frames "
	  "show addresses" },
	{ true, SNAP_LOST_MODULE_MAPS_MISSED, "module_maps_missed",
	  "a process ended (or exec'd) and the kernel could not walk its map then (another task "
	  "held its mmap_lock): its frames in libraries loaded after gpumem last read its maps "
	  "show addresses" },
	{ false, GM_CNT_TARGETS_FULL, "targets_full",
	  "children of -c/-p not followed: " STRINGIFY(GM_DEFAULT_MAX_PROCS) " of its processes "
	  "(or --max-procs, if more) were live at once; raise --max-procs" },
	{ true, SNAP_LOST_PY_STACKS_UNNAMED, "python_stacks_unnamed",
	  "a process had " STRINGIFY(PY_MAX_NAMED) " Python stacks named: the sites of its later "
	  "ones show the interpreter's native frames" },
	{ true, SNAP_LOST_STACKS_CUT, "stacks_cut",
	  "a site's stack went on past the bytes copied to unwind it: its outer frames are "
	  "missing; raise --stack-bytes" },
	{ true, SNAP_LOST_MODULES_UNREAD, "modules_unread",
	  "a file frames lie in could not be opened (deleted, or known by its name alone once its "
	  "process ended): those frames show the file and offset, no names; -v says which" },
};

size_t loss_count(void)
{
	return sizeof(losses) / sizeof(losses[0]);
}

const char *loss_name(size_t i)
{
	return i < loss_count() ? losses[i].name : "unknown";
}

uint64_t loss_value(const struct snapshot *snap, size_t i)
{
	if (i >= loss_count())
		return 0;
	return losses[i].user ? snap->lost[losses[i].which] : snap->counters[losses[i].which];
}

bool loss_is_kernel(size_t i)
{
	return i < loss_count() && !losses[i].user;
}

void loss_set(struct snapshot *snap, size_t i, uint64_t v)
{
	if (i >= loss_count())
		return;
	if (losses[i].user)
		snap->lost[losses[i].which] = v;
	else
		snap->counters[losses[i].which] = v;
}

void json_lost(struct json_writer *w, const struct snapshot *snap)
{
	jw_object_begin(w);
	for (size_t i = 0; i < sizeof(losses) / sizeof(losses[0]); i++)
		jw_kv_u64(w, losses[i].name, loss_value(snap, i));
	jw_object_end(w);
}

/* ---- text ---- */

void frame_text(FILE *out, const struct snap_frame *f)
{
	char name[512], file[256];
	const char *base;

	if (f->symbol) {
		text_sanitize(name, sizeof(name), f->symbol);
		if (f->file) {
			base = strrchr(f->file, '/');
			text_sanitize(file, sizeof(file), base ? base + 1 : f->file);
			if (f->line)
				fprintf(out, "%s (%s:%u)", name, file, f->line);
			else
				fprintf(out, "%s (%s)", name, file);
		} else if (f->inlined) {
			fputs(name, out);
		} else {
			fprintf(out, "%s+0x%" PRIx64, name, f->symbol_offset);
		}
		if (f->inlined)
			fputs(" [inlined]", out);
	} else if (f->module) {
		base = strrchr(f->module, '/');
		text_sanitize(name, sizeof(name), base ? base + 1 : f->module);
		fprintf(out, "%s+0x%" PRIx64, name, f->offset);
	} else {
		fprintf(out, "0x%" PRIx64, f->addr);
	}
}

void text_frames(FILE *out, const struct snap_stack *st, const char *sep, unsigned int max)
{
	if (!st || !st->nframes) {
		fputs("[no stack]", out);
		return;
	}
	for (uint32_t i = 0; i < st->nframes && i < max; i++) {
		if (i)
			fputs(sep, out);
		frame_text(out, &st->frames[i]);
	}
	if (st->nframes > max)
		fprintf(out, "%s...", sep);
}

void text_frames_user(FILE *out, const struct snap_stack *st, const char *sep, unsigned int max)
{
	uint32_t first = 0;

	while (st && first < st->nframes && !st->frames[first].python)
		first++;
	if (!st || first == st->nframes) {
		text_frames(out, st, sep, max);
		return;
	}
	for (uint32_t i = first; i < st->nframes && i - first < max; i++) {
		if (i > first)
			fputs(sep, out);
		frame_text(out, &st->frames[i]);
	}
	if (st->nframes - first > max)
		fprintf(out, "%s...", sep);
}

void text_lost(FILE *out, const struct snapshot *snap)
{
	bool any = false;

	for (size_t i = 0; i < sizeof(losses) / sizeof(losses[0]); i++) {
		uint64_t v = loss_value(snap, i);

		if (!v)
			continue;
		fprintf(out, "%s %s=%" PRIu64 " (%s)", any ? "," : "lost:", losses[i].name, v,
			losses[i].fix);
		any = true;
	}
	if (any)
		fputc('\n', out);
}

void text_lost_line(const struct snapshot *snap, char *buf, size_t len)
{
	size_t o = 0;
	int n;

	if (!len)
		return;
	buf[0] = 0;
	for (size_t i = 0; i < sizeof(losses) / sizeof(losses[0]); i++) {
		uint64_t v = loss_value(snap, i);

		if (!v)
			continue;
		n = snprintf(buf + o, len - o, "%s %s=%" PRIu64, o ? "," : "lost:", losses[i].name,
			     v);
		if (n < 0 || (size_t)n >= len - o) {
			buf[o] = 0;
			if (o + 5 <= len)
				strcpy(buf + o, " ...");
			return;
		}
		o += (size_t)n;
	}
}

const char *container_short(const struct container_info *ci, char *buf, size_t len)
{
	if (ci && ci->has_id)
		snprintf(buf, len, "%.*s", CONTAINER_SHORT_LEN, ci->id);
	else if (ci && ci->has_pod)
		snprintf(buf, len, "pod:%.8s", ci->pod_uid);
	else
		snprintf(buf, len, "-");
	return buf;
}

void text_clock(char *buf, size_t len, uint64_t wall_ns, bool micros)
{
	static time_t last_secs = -1;	/* a stream's lines: the same second many times */
	static char hms[16];
	time_t secs = (time_t)(wall_ns / 1000000000ull);
	struct tm tm;

	if (secs != last_secs) {
		localtime_r(&secs, &tm);
		strftime(hms, sizeof(hms), "%H:%M:%S", &tm);
		last_secs = secs;
	}
	if (micros)
		snprintf(buf, len, "%s.%06" PRIu64, hms, (wall_ns / 1000) % 1000000);
	else
		snprintf(buf, len, "%s", hms);
}

const char *text_known(char *buf, size_t len, const char *s, bool valid)
{
	if (!valid || !s || !s[0])
		snprintf(buf, len, "-");
	else
		text_sanitize(buf, len, s);
	return buf;
}
