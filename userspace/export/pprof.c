// SPDX-License-Identifier: GPL-2.0
/* --format pprof: the final snapshot as a gzipped profile.proto (github.com/google/pprof,
 * proto/profile.proto) for go tool pprof, Pyroscope and speedscope. One sample per process and
 * call site, with four values: inuse_space and inuse_objects (held at the end; for a process
 * that ended, when it ended), alloc_space and alloc_objects (totals over the run). Each named
 * frame is a location whose line names a function (name, file, line); its module is the
 * mapping. Labels: pid (a number), comm, container, pod, names from the OCI bundle, api and
 * kind (kind=host is pinned host memory, which the GPU totals elsewhere leave out). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "base/util.h"
#include "export/exporters.h"
#include "export/intern.h"
#include "export/protobuf.h"
#include "model/owners.h"
#include "output/json.h"
#include "output/report.h"
#include "probes/table.h"

/* Field numbers of profile.proto. */
enum {
	PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE, PROFILE_MAPPING, PROFILE_LOCATION,
	PROFILE_FUNCTION, PROFILE_STRING_TABLE, PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS,
	PROFILE_COMMENT = 13, PROFILE_DEFAULT_SAMPLE_TYPE,
};
enum { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT };
enum { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE, SAMPLE_LABEL };
enum { LABEL_KEY = 1, LABEL_STR, LABEL_NUM };
enum { MAPPING_ID = 1, MAPPING_FILENAME = 5, MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES,
       MAPPING_HAS_LINE_NUMBERS };
enum { LOCATION_ID = 1, LOCATION_MAPPING_ID, LOCATION_ADDRESS, LOCATION_LINE };
enum { LINE_FUNCTION_ID = 1, LINE_LINE };
enum { FUNCTION_ID = 1, FUNCTION_NAME, FUNCTION_SYSTEM_NAME, FUNCTION_FILENAME };

#define PPROF_VALUES 8		/* inuse/alloc space/objects, then the same of tensors */

struct pprof {
	FILE *out;
	uint64_t end_wall_ns;
	char lost[1024];	/* the source's loss counters, a comment ("lost: name=N, ..."); "" */
	struct intern strings, functions, locations, mappings;
	struct pb_buf body;	/* samples, mappings, locations, functions as they are made */
	struct pb_buf msg, sub;	/* scratch */
};

struct function_key {
	uint32_t name, file;
};

struct location_key {
	uint64_t addr;
	uint32_t mapping, function;
	uint64_t line;
};

/* Every string of the profile, each once: sanitized here, the one way in (paths, source
 * files, labels, names: a process's own, and control characters or bytes that are no UTF-8
 * would reach the terminal of `go tool pprof -traces`, or break a line of -raw). */
static uint64_t str_id(struct pprof *pp, const char *s)
{
	char clean[8192];

	if (!s)
		return intern_str(&pp->strings, s);
	text_sanitize(clean, sizeof(clean), s);
	return intern_str(&pp->strings, clean);
}

static void value_type(struct pprof *pp, uint32_t field, const char *type, const char *unit)
{
	pb_reset(&pp->msg);
	pb_field_varint(&pp->msg, VALUE_TYPE_TYPE, str_id(pp, type));
	pb_field_varint(&pp->msg, VALUE_TYPE_UNIT, str_id(pp, unit));
	pb_field_message(&pp->body, field, &pp->msg);
}

/* A mapping per module (id from 1); 0 for a frame whose module is not known. */
static uint64_t mapping_id(struct pprof *pp, const char *module)
{
	uint64_t file = str_id(pp, module);
	bool added;
	uint32_t id;

	if (!module)
		return 0;
	id = intern(&pp->mappings, &file, sizeof(file), &added) + 1;
	if (added) {
		pb_reset(&pp->msg);
		pb_field_varint(&pp->msg, MAPPING_ID, id);
		pb_field_varint(&pp->msg, MAPPING_FILENAME, file);
		/* named by gpumem already: nothing for pprof to symbolize */
		pb_field_varint(&pp->msg, MAPPING_HAS_FUNCTIONS, 1);
		pb_field_varint(&pp->msg, MAPPING_HAS_FILENAMES, 1);
		pb_field_varint(&pp->msg, MAPPING_HAS_LINE_NUMBERS, 1);
		pb_field_message(&pp->body, PROFILE_MAPPING, &pp->msg);
	}
	return id;
}

static uint32_t function_id(struct pprof *pp, const struct snap_frame *f)
{
	char name[512];
	struct function_key key = {
		.name = (uint32_t)str_id(pp, export_frame_name(f, name, sizeof(name))),
		.file = (uint32_t)str_id(pp, f->file ? f->file : f->module),
	};
	bool added;
	uint32_t id = intern(&pp->functions, &key, sizeof(key), &added) + 1;

	if (added) {
		pb_reset(&pp->msg);
		pb_field_varint(&pp->msg, FUNCTION_ID, id);
		pb_field_varint(&pp->msg, FUNCTION_NAME, key.name);
		pb_field_varint(&pp->msg, FUNCTION_SYSTEM_NAME, key.name);
		pb_field_varint(&pp->msg, FUNCTION_FILENAME, key.file);
		pb_field_message(&pp->body, PROFILE_FUNCTION, &pp->msg);
	}
	return id;
}

static uint64_t location_id(struct pprof *pp, const struct snap_frame *f)
{
	struct location_key key = { .addr = f->addr, .line = f->line };
	bool added;
	uint32_t id;

	key.mapping = (uint32_t)mapping_id(pp, f->module);
	key.function = function_id(pp, f);
	id = intern(&pp->locations, &key, sizeof(key), &added) + 1;
	if (added) {
		pb_reset(&pp->sub);
		pb_field_varint(&pp->sub, LINE_FUNCTION_ID, key.function);
		pb_field_varint(&pp->sub, LINE_LINE, key.line);
		pb_reset(&pp->msg);
		pb_field_varint(&pp->msg, LOCATION_ID, id);
		if (key.mapping)
			pb_field_varint(&pp->msg, LOCATION_MAPPING_ID, key.mapping);
		pb_field_varint(&pp->msg, LOCATION_ADDRESS, key.addr);
		pb_field_message(&pp->msg, LOCATION_LINE, &pp->sub);
		pb_field_message(&pp->body, PROFILE_LOCATION, &pp->msg);
	}
	return id;
}

/* A string label into msg (the sample being made); nothing for an unknown value. */
static void label_str(struct pprof *pp, const char *key, const char *value)
{
	if (!value || !value[0])
		return;
	pb_reset(&pp->sub);
	pb_field_varint(&pp->sub, LABEL_KEY, str_id(pp, key));
	pb_field_varint(&pp->sub, LABEL_STR, str_id(pp, value));
	pb_field_message(&pp->msg, SAMPLE_LABEL, &pp->sub);
}

static void labels(struct pprof *pp, const struct snap_proc *p, const struct snap_site *ss)
{
	const struct container_info *ci = &p->container;
	struct snap_owner o;

	pb_reset(&pp->sub);
	pb_field_varint(&pp->sub, LABEL_KEY, str_id(pp, "pid"));
	pb_field_varint(&pp->sub, LABEL_NUM, (uint64_t)(int64_t)p->pid);
	pb_field_message(&pp->msg, SAMPLE_LABEL, &pp->sub);
	label_str(pp, "comm", p->valid & SP_COMM ? p->comm : NULL);
	label_str(pp, "container", ci->has_id ? ci->id : NULL);
	label_str(pp, "pod", ci->has_pod ? ci->pod_uid : NULL);
	label_str(pp, "pod_name", ci->pod_name);
	label_str(pp, "namespace", ci->pod_namespace);
	label_str(pp, "container_name", ci->container_name);
	label_str(pp, "api", probe_api_name(ss->api));
	label_str(pp, "kind", site_kind_name(ss));
	label_str(pp, "vendor", probe_api_vendor(ss->api));
	owner_of_stack(p, ss->stack, &o);
	label_str(pp, "library", o.library);
	label_str(pp, "family", o.family);
	if (ss->gpu) {	/* the device of its memory: -tagfocus gpu=1 */
		char gpu[16];

		snprintf(gpu, sizeof(gpu), "%u", ss->gpu - 1);
		label_str(pp, "gpu", gpu);
	}
}

/* A "[no stack]" location for a site whose stack was not recorded. */
static uint64_t no_stack_location(struct pprof *pp)
{
	struct snap_frame f = { .symbol = "[no stack]" };

	return location_id(pp, &f);
}

/* A site's four values, as segment (reserved) values or, for a tensor site, as the tensor_*
 * ones: a tensor's bytes are inside a segment's, never added to them. */
static void sample(struct pprof *pp, const struct snap_proc *p, const struct snap_site *ss,
		   bool tensor)
{
	const struct gm_site_stats *st = &ss->st;
	uint64_t values[PPROF_VALUES] = { 0 }, *v = values + (tensor ? 4 : 0);
	uint32_t n = 0, nframes = ss->stack ? ss->stack->nframes : 0;
	/* Every frame: native ones with their inlined calls, and the Python ones. */
	uint64_t *locs = xcalloc(nframes ? nframes : 1, sizeof(*locs));

	v[0] = st->current_bytes;
	v[1] = st->current_allocs;
	v[2] = st->alloc_bytes_total;
	v[3] = st->alloc_count;
	if (!v[0] && !v[1] && !v[2] && !v[3]) {
		free(locs);
		return;	/* only failed calls: nothing to weigh */
	}
	for (; n < nframes; n++)
		locs[n] = location_id(pp, &ss->stack->frames[n]);	/* the leaf first */
	if (!n)
		locs[n++] = no_stack_location(pp);
	pb_reset(&pp->msg);
	pb_field_packed(&pp->msg, SAMPLE_LOCATION_ID, locs, n);
	pb_field_packed(&pp->msg, SAMPLE_VALUE, values, PPROF_VALUES);
	labels(pp, p, ss);
	pb_field_message(&pp->body, PROFILE_SAMPLE, &pp->msg);
	free(locs);
}

static void pprof_snapshot(struct exporter *x, const struct snapshot *snap, bool final)
{
	struct pprof *pp = x->priv;

	if (!final)
		return;
	pp->end_wall_ns = snapshot_wall_ns(snap, snap->time_ns);
	text_lost_line(snap, pp->lost, sizeof(pp->lost));
	for (size_t i = 0; i < snap->nprocs; i++) {
		const struct snap_proc *p = &snap->procs[i];

		for (size_t j = 0; (p->valid & SP_STATS) && j < p->nsites; j++)
			sample(pp, p, &p->sites[j], false);
		for (size_t j = 0; (p->valid & SP_STATS) && j < p->ntensor_sites; j++)
			sample(pp, p, &p->tensor_sites[j], true);
	}
}

static int pprof_begin(struct exporter *x)
{
	struct pprof *pp = xcalloc(1, sizeof(*pp));

	pp->out = outfile_create(x->path);
	if (!pp->out) {
		free(pp);
		return -EIO;
	}
	intern_str(&pp->strings, "");	/* string_table[0] must be "" */
	value_type(pp, PROFILE_SAMPLE_TYPE, "inuse_space", "bytes");
	value_type(pp, PROFILE_SAMPLE_TYPE, "inuse_objects", "count");
	value_type(pp, PROFILE_SAMPLE_TYPE, "alloc_space", "bytes");
	value_type(pp, PROFILE_SAMPLE_TYPE, "alloc_objects", "count");
	value_type(pp, PROFILE_SAMPLE_TYPE, "tensor_inuse_space", "bytes");
	value_type(pp, PROFILE_SAMPLE_TYPE, "tensor_inuse_objects", "count");
	value_type(pp, PROFILE_SAMPLE_TYPE, "tensor_alloc_space", "bytes");
	value_type(pp, PROFILE_SAMPLE_TYPE, "tensor_alloc_objects", "count");
	x->priv = pp;
	return 0;
}

/* The profile's own fields, then the string table, which every index above points into. */
static void finish_profile(struct exporter *x, struct pprof *pp)
{
	uint64_t comment = str_id(pp, "gpumem: inuse_* = held at the end (a process that ended: "
				  "when it ended); alloc_* = totals over the run; label kind=host is "
				  "pinned host memory; tensor_* = PyTorch tensors (allocated, "
				  "inside the segments inuse_space counts), label kind=tensor");

	pb_field_varint(&pp->body, PROFILE_COMMENT, comment);
	if (pp->lost[0])	/* what the source could not see, said in the file too */
		pb_field_varint(&pp->body, PROFILE_COMMENT, str_id(pp, pp->lost));
	pb_field_varint(&pp->body, PROFILE_DEFAULT_SAMPLE_TYPE, str_id(pp, "inuse_space"));
	pb_field_varint(&pp->body, PROFILE_TIME_NANOS, x->start_wall_ns);
	if (pp->end_wall_ns > x->start_wall_ns)
		pb_field_varint(&pp->body, PROFILE_DURATION_NANOS,
				pp->end_wall_ns - x->start_wall_ns);
	for (size_t i = 0; i < pp->strings.n; i++)
		pb_field_bytes(&pp->body, PROFILE_STRING_TABLE, pp->strings.keys[i].data,
			       pp->strings.keys[i].len);
}

/* The profile, gzipped (pprof reads both, and writes gzip). */
static int write_gzip(FILE *out, const struct pb_buf *b)
{
	unsigned char chunk[1 << 16];
	z_stream zs = { .next_in = b->data, .avail_in = (uInt)b->len };
	int zerr, err = 0;

	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	do {
		zs.next_out = chunk;
		zs.avail_out = sizeof(chunk);
		zerr = deflate(&zs, Z_FINISH);
		if (zerr == Z_STREAM_ERROR ||
		    fwrite(chunk, 1, sizeof(chunk) - zs.avail_out, out) != sizeof(chunk) - zs.avail_out)
			err = -EIO;
	} while (!err && zerr != Z_STREAM_END);
	deflateEnd(&zs);
	return err;
}

static int pprof_end(struct exporter *x)
{
	struct pprof *pp = x->priv;
	int err;

	finish_profile(x, pp);
	err = write_gzip(pp->out, &pp->body);
	if (err == -ENOMEM)
		p_err("cannot compress the profile for %s: zlib has no memory", x->path);
	err = outfile_close(pp->out, x->path) ? -EIO : err;
	intern_free(&pp->strings);
	intern_free(&pp->functions);
	intern_free(&pp->locations);
	intern_free(&pp->mappings);
	pb_free(&pp->body);
	pb_free(&pp->msg);
	pb_free(&pp->sub);
	free(pp);
	x->priv = NULL;
	return err;
}

const struct exporter_ops pprof_exporter = {
	.name = "pprof",
	.what = "gzipped profile.proto for go tool pprof",
	.begin = pprof_begin,
	.on_snapshot = pprof_snapshot,
	.end = pprof_end,
};
