// SPDX-License-Identifier: GPL-2.0
/* The owning library of a call site and the sums by library of a process (owners.h). */
#include <stdlib.h>
#include <string.h>
#include "base/util.h"
#include "model/owners.h"

static const char *base_name_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

bool owner_is_runtime(const char *module)
{
	static const char *const runtime[] = {
		"libcudart", "libcuda.so", "libcuda-", "libnvidia-", "libnvcuvid",
		"libamdhip64", "libhsa-runtime64", "libhsakmt", "libamd_comgr",
	};
	const char *base = base_name_of(module);

	for (size_t i = 0; i < sizeof(runtime) / sizeof(runtime[0]); i++)
		if (starts(base, runtime[i]))
			return true;
	return false;
}

struct family_rule {
	const char *prefix;
	const char *family;
};

/* Native files by the start of their name. */
static const struct family_rule native_families[] = {
	{ "libnccl", "NCCL" }, { "librccl", "NCCL" },
	{ "libcublas", "cuBLAS" }, { "libcudnn", "cuDNN" }, { "libcufft", "cuFFT" },
	{ "libcusparse", "cuSPARSE" }, { "libcusolver", "cuSOLVER" }, { "libcurand", "cuRAND" },
	{ "libnvinfer", "TensorRT" }, { "libnvonnxparser", "TensorRT" },
	{ "libc10", "PyTorch" }, { "libtorch", "PyTorch" }, { "libcaffe2", "PyTorch" },
	{ "libpaddle", "Paddle" }, { "libphi", "Paddle" },
	{ "libtensorflow", "TensorFlow/XLA" }, { "_pywrap_tensorflow", "TensorFlow/XLA" },
	{ "libxla", "TensorFlow/XLA" }, { "xla_extension", "TensorFlow/XLA" },
	{ "libonnxruntime", "ONNX Runtime" },
};

/* Installed Python packages by their folder under site-packages (or dist-packages). */
static const struct family_rule python_families[] = {
	{ "torch/", "PyTorch" }, { "tensorflow/", "TensorFlow/XLA" }, { "jax/", "TensorFlow/XLA" },
	{ "jaxlib/", "TensorFlow/XLA" }, { "paddle/", "Paddle" }, { "onnxruntime/", "ONNX Runtime" },
	{ "tensorrt/", "TensorRT" }, { "cupy/", "CuPy" }, { "numba/", "Numba" },
	{ "pycuda/", "PyCUDA" },
};

static const char *rule_family(const struct family_rule *rules, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (starts(name, rules[i].prefix))
			return rules[i].family;
	return NULL;
}

const char *owner_family(const char *library, bool python)
{
	const char *pkg;

	if (!python)
		return rule_family(native_families,
				   sizeof(native_families) / sizeof(native_families[0]),
				   base_name_of(library));
	pkg = strstr(library, "/site-packages/");
	if (!pkg)
		pkg = strstr(library, "/dist-packages/");
	if (!pkg)
		return NULL;
	return rule_family(python_families, sizeof(python_families) / sizeof(python_families[0]),
			   strchr(pkg + 1, '/') + 1);
}

/* Whether module is p's executable: its command's first word (or, the command begun with the
 * module's whole path, that path: one with a space in it), or its comm (which the kernel cuts
 * at 15 characters). */
static bool is_executable(const struct snap_proc *p, const char *module)
{
	const char *base = base_name_of(module);
	size_t len = strlen(module);

	if (p && p->cmdline && !strncmp(p->cmdline, module, len) &&
	    (p->cmdline[len] == ' ' || !p->cmdline[len]))
		return true;
	if (p && p->cmdline && p->cmdline[0]) {
		const char *word = p->cmdline, *end = p->cmdline + strcspn(p->cmdline, " ");

		for (const char *c = word; c < end; c++)
			if (*c == '/')
				word = c + 1;
		if ((size_t)(end - word) == strlen(base) && !strncmp(word, base, strlen(base)))
			return true;
	}
	return p && p->comm[0] && !strncmp(base, p->comm, GM_COMM_LEN - 1) &&
	       (strlen(p->comm) >= GM_COMM_LEN - 1 || !strcmp(base, p->comm));
}

/* A Python frame that only carries the call: the standard library's (ctypes, functools,
 * threading), the interpreter's frozen modules, or one with no file. */
static bool python_glue(const struct snap_frame *f)
{
	return !f->file || (snap_frame_is_library(f) && !strstr(f->file, "/site-packages/") &&
			    !strstr(f->file, "/dist-packages/"));
}

const char *owner_short_name(const char *library)
{
	static const char *const roots[] = { "/site-packages/", "/dist-packages/" };

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		const char *at = strstr(library, roots[i]);

		if (at)
			return at + strlen(roots[i]);
	}
	return base_name_of(library);
}

void owner_of_stack(const struct snap_proc *p, const struct snap_stack *st,
		    struct snap_owner *out)
{
	*out = (struct snap_owner){ .library = OWNER_UNKNOWN };
	for (uint32_t i = 0; st && i < st->nframes; i++) {
		const struct snap_frame *f = &st->frames[i];

		if (f->python) {
			if (python_glue(f))
				continue;
			out->library = f->file;
			out->python = true;
			out->family = snap_frame_is_library(f) ? owner_family(f->file, true) :
				      OWNER_PROGRAM;
			return;
		}
		if (!f->module || owner_is_runtime(f->module) || snap_frame_is_glue(f))
			continue;
		out->library = base_name_of(f->module);
		out->family = is_executable(p, f->module) ? OWNER_PROGRAM :
			      owner_family(f->module, false);
		if (!out->family)	/* a package's own module: torch/_C.cpython-311-...so */
			out->family = owner_family(f->module, true);
		return;
	}
}

static void add_stats(struct gm_site_stats *to, const struct gm_site_stats *st)
{
	to->current_bytes += st->current_bytes;
	to->current_allocs += st->current_allocs;
	to->alloc_count += st->alloc_count;
	to->free_count += st->free_count;
	to->alloc_bytes_total += st->alloc_bytes_total;
	to->failed_count += st->failed_count;
}

static int library_cmp(const void *a, const void *b)
{
	const struct snap_library *x = a, *y = b;

	if (x->st.current_bytes != y->st.current_bytes)
		return x->st.current_bytes < y->st.current_bytes ? 1 : -1;
	if (x->st.alloc_bytes_total != y->st.alloc_bytes_total)
		return x->st.alloc_bytes_total < y->st.alloc_bytes_total ? 1 : -1;
	return strcmp(x->library, y->library);
}

void snap_proc_libraries(struct snap_proc *p)
{
	free(p->libraries);
	p->libraries = xcalloc(p->nsites ? p->nsites : 1, sizeof(*p->libraries));
	p->nlibraries = 0;
	for (size_t i = 0; i < p->nsites; i++) {
		struct snap_owner o;
		struct snap_library *l = NULL;

		/* Mappings, reservations and imports are no memory of its own (a handle's memory
		 * is counted at cuMemCreate): counted, they would count it twice. */
		if (p->sites[i].kind >= GM_KIND_MEMORY_COUNT)
			continue;
		owner_of_stack(p, p->sites[i].stack, &o);
		for (size_t j = 0; j < p->nlibraries && !l; j++)
			if (!strcmp(p->libraries[j].library, o.library))
				l = &p->libraries[j];
		if (!l) {
			l = &p->libraries[p->nlibraries++];
			l->library = o.library;
			l->family = o.family;
		}
		l->nsites++;
		add_stats(&l->st, &p->sites[i].st);
	}
	if (p->nlibraries > 1)
		qsort(p->libraries, p->nlibraries, sizeof(*p->libraries), library_cmp);
}

void owner_peaks_apply(struct owner_peaks *pk, struct snap_proc *p)
{
	for (size_t i = 0; i < p->nlibraries; i++) {
		struct snap_library *l = &p->libraries[i];
		struct owner_peak *e = NULL;

		for (size_t j = 0; j < pk->n && !e; j++)
			if (!strcmp(pk->v[j].library, l->library))
				e = &pk->v[j];
		if (!e && pk->n < OWNER_PEAKS_MAX) {
			pk->v = xrealloc(pk->v, (pk->n + 1) * sizeof(*pk->v));
			e = &pk->v[pk->n++];
			*e = (struct owner_peak){ .library = xstrdup(l->library) };
		}
		if (!e)
			continue;
		if (l->st.current_bytes > e->peak)
			e->peak = l->st.current_bytes;
		l->peak_bytes = e->peak;
		l->valid |= SL_PEAK;
	}
}

void owner_peaks_free(struct owner_peaks *pk)
{
	for (size_t i = 0; i < pk->n; i++)
		free(pk->v[i].library);
	free(pk->v);
	*pk = (struct owner_peaks){ 0 };
}
