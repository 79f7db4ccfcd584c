// SPDX-License-Identifier: GPL-2.0
/* How a site reads in text (site_text.h): from the user's code on, past the glue that carried
 * the call (libffi, ctypes, the interpreter, libc), with as many frames as tell the rows of a
 * listing apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "model/owners.h"
#include "output/site_text.h"
#include "base/util.h"

#define NATIVE(m, s, f, l) { .module = m, .symbol = s, .file = f, .line = l }
#define PY(f, s, l) { .python = true, .file = f, .symbol = s, .line = l }

static struct snap_stack *stack_of(const struct snap_frame *f, uint32_t n)
{
	struct snap_stack *st = xcalloc(1, sizeof(*st) + n * sizeof(*f));

	st->refs = 1;
	st->nframes = n;
	memcpy(st->frames, f, n * sizeof(*f));
	return st;
}

static char *text_of(const struct snap_stack *st, unsigned int max, bool all)
{
	static char buf[2048];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	text_site(f, st, max, all);
	fclose(f);
	return buf;
}

/* A model's line reached through ctypes: what CPython's eval loop calls native code with. */
static const struct snap_frame ctypes_call[] = {
	NATIVE("/usr/lib/x86_64-linux-gnu/libffi.so.8.1.2", NULL, NULL, 0),
	NATIVE("/usr/lib/x86_64-linux-gnu/libffi.so.8.1.2", "ffi_call", NULL, 0),
	NATIVE("/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so",
	       "_ctypes_callproc", "callproc.c", 1262),
	PY("/usr/lib/python3.11/ctypes/__init__.py", "CFuncPtr.__call__", 10),
	PY("/home/me/model.py", "cuda_malloc", 8),
	PY("/usr/lib/python3/dist-packages/torch/nn/modules/module.py", "_call_impl", 1750),
	PY("/home/me/model.py", "Net.forward", 20),
	PY("/home/me/train.py", "main", 40),
	NATIVE("/usr/bin/python3.11", "_PyEval_EvalFrameDefault", "ceval.c", 5000),
	NATIVE("/usr/lib/x86_64-linux-gnu/libc.so.6", "__libc_start_main", NULL, 0),
};

static void test_a_python_site_reads_from_the_users_line(void **state)
{
	struct snap_stack *st = stack_of(ctypes_call, ARRAY_SIZE(ctypes_call));

	(void)state;
	assert_string_equal(text_of(st, 4, false),
			    "cuda_malloc (model.py:8) <- Net.forward (model.py:20) <- "
			    "main (train.py:40)");
	assert_string_equal(text_of(st, 2, false),
			    "cuda_malloc (model.py:8) <- Net.forward (model.py:20) <- ...");
	/* --all-frames: every frame, the glue included */
	assert_non_null(strstr(text_of(st, 4, true), "libffi.so.8.1.2+0x0 <- ffi_call+0x0"));
	snap_stack_put(st);
}

static void test_a_native_site_skips_the_glue_and_keeps_library_code(void **state)
{
	static const struct snap_frame f[] = {
		NATIVE("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "operator new", NULL, 0),
		NATIVE("/opt/app/libnccl.so.2", "ncclCommInit", "init.cc", 90),
		NATIVE("/opt/app/app", "main", "app.c", 12),
		NATIVE("/usr/lib/x86_64-linux-gnu/libc.so.6", "__libc_start_call_main", NULL, 0),
	};
	struct snap_stack *st = stack_of(f, ARRAY_SIZE(f));

	(void)state;
	assert_string_equal(text_of(st, 4, false),
			    "ncclCommInit (init.cc:90) <- main (app.c:12)");
	snap_stack_put(st);
}

static void test_only_library_python_lines_are_shown_when_there_is_no_other(void **state)
{
	static const struct snap_frame f[] = {
		NATIVE("/usr/lib/libtorch_python.so", "THPVariable_new", NULL, 0),
		PY("/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", "Linear.forward", 125),
		NATIVE("/usr/bin/python3.11", "_PyEval_EvalFrameDefault", "ceval.c", 5000),
	};
	struct snap_stack *st = stack_of(f, ARRAY_SIZE(f));

	(void)state;
	assert_string_equal(text_of(st, 4, false), "Linear.forward (linear.py:125)");
	snap_stack_put(st);
}

static void test_rows_that_share_their_first_frames_get_the_frames_that_differ(void **state)
{
	struct snap_frame a[8], b[8], c[2];
	const struct snap_stack *st[3];
	unsigned int depth[3];

	(void)state;
	/* a and b share six frames and differ at the seventh; c differs at once. */
	for (unsigned int i = 0; i < 8; i++) {
		a[i] = (struct snap_frame)NATIVE("/opt/app/app", "helper", "app.c", 10 + i);
		b[i] = a[i];
	}
	b[6].line = 99;
	c[0] = (struct snap_frame)NATIVE("/opt/app/app", "other", "app.c", 1);
	c[1] = (struct snap_frame)NATIVE("/opt/app/app", "main", "app.c", 2);
	st[0] = stack_of(a, 8);
	st[1] = stack_of(b, 8);
	st[2] = stack_of(c, 2);
	site_text_depths(st, 3, 4, depth);
	assert_int_equal(depth[0], 7);
	assert_int_equal(depth[1], 7);
	assert_int_equal(depth[2], 4);
	assert_non_null(strstr(text_of(st[1], depth[1], false), "helper (app.c:99) <- ..."));
	for (int i = 0; i < 3; i++)
		snap_stack_put((struct snap_stack *)st[i]);
}

static void test_glue_is_what_carries_calls_and_nothing_else(void **state)
{
	static const struct snap_frame glue[] = {
		NATIVE("/usr/lib/x86_64-linux-gnu/libffi.so.8", NULL, NULL, 0),
		NATIVE("/lib64/ld-linux-x86-64.so.2", NULL, NULL, 0),
		NATIVE("/usr/bin/python3.12", NULL, NULL, 0),
		NATIVE("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", NULL, NULL, 0),
	};
	static const struct snap_frame not_glue[] = {
		NATIVE("/opt/app/libnccl.so.2", NULL, NULL, 0),
		NATIVE("/home/me/python_tools/bin/train", NULL, NULL, 0),
		NATIVE(NULL, NULL, NULL, 0),
		PY("/home/me/model.py", "f", 1),
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(glue); i++)
		assert_true(snap_frame_is_glue(&glue[i]));
	for (size_t i = 0; i < ARRAY_SIZE(not_glue); i++)
		assert_false(snap_frame_is_glue(&not_glue[i]));
}

/* ---- owners (model/owners.h) ---- */

static const char *owner_text(const struct snap_proc *p, const struct snap_frame *f, uint32_t n)
{
	static char buf[512];
	struct snap_stack *st = n ? stack_of(f, n) : NULL;
	struct snap_owner o;

	owner_of_stack(p, st, &o);
	snprintf(buf, sizeof(buf), "%s|%s", o.library, o.family ? o.family : "-");
	snap_stack_put(st);
	return buf;
}

static void test_the_owner_is_the_innermost_frame_past_runtime_and_glue(void **state)
{
	static const struct snap_frame cublas[] = {
		NATIVE("/usr/local/cuda/lib64/libcudart.so.13", "cudaMallocAsync", NULL, 0),
		NATIVE("/usr/lib/x86_64-linux-gnu/libcuda.so.1", NULL, NULL, 0),
		NATIVE("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "operator()", NULL, 0),
		NATIVE("/opt/trt/lib/libcublasLt.so.13", "cublasLtMatmul", NULL, 0),
		NATIVE("/opt/trt/lib/libnvinfer.so.10", "enqueue", NULL, 0),
	};
	static const struct snap_frame c10[] = {
		NATIVE("/usr/lib/x86_64-linux-gnu/libc.so.6", "malloc", NULL, 0),
		NATIVE("/venv/lib/python3.11/site-packages/torch/lib/libc10_cuda.so", "alloc", NULL, 0),
		PY("/home/me/model.py", "Net.forward", 20),
	};
	static const struct snap_frame torch_py[] = {
		NATIVE("/usr/lib/x86_64-linux-gnu/libffi.so.8", "ffi_call", NULL, 0),
		PY("/venv/lib/python3.11/site-packages/torch/cuda/memory.py", "caching", 10),
		PY("/home/me/model.py", "Net.forward", 20),
	};
	static const struct snap_frame exe[] = {
		NATIVE("/usr/lib/x86_64-linux-gnu/libcudart.so.12", NULL, NULL, 0),
		NATIVE("/opt/app/bin/trtexec", "main", "main.cpp", 7),
	};
	static const struct snap_frame exe_spaced[] = {
		NATIVE("/usr/lib/x86_64-linux-gnu/libcudart.so.12", NULL, NULL, 0),
		NATIVE("/opt/my app/bin/trtexec", "main", "main.cpp", 7),
	};
	static const struct snap_frame glue_only[] = {
		NATIVE("/usr/lib/x86_64-linux-gnu/libc.so.6", NULL, NULL, 0),
		NATIVE(NULL, NULL, NULL, 0),
	};
	struct snap_proc p = { .cmdline = "/opt/app/bin/trtexec --onnx=m.onnx", .comm = "trtexec" };

	(void)state;
	assert_string_equal(owner_text(&p, cublas, ARRAY_SIZE(cublas)), "libcublasLt.so.13|cuBLAS");
	assert_string_equal(owner_text(&p, c10, ARRAY_SIZE(c10)), "libc10_cuda.so|PyTorch");
	assert_string_equal(owner_text(&p, torch_py, ARRAY_SIZE(torch_py)),
			    "/venv/lib/python3.11/site-packages/torch/cuda/memory.py|PyTorch");
	/* ctypes' own Python frame (the standard library) carries the call: the program's line
	 * owns it */
	assert_string_equal(owner_text(&p, ctypes_call, ARRAY_SIZE(ctypes_call)),
			    "/home/me/model.py|program");
	assert_string_equal(owner_text(&p, exe, ARRAY_SIZE(exe)), "trtexec|program");
	assert_string_equal(owner_text(NULL, exe, ARRAY_SIZE(exe)), "trtexec|-");
	/* A program at a path with a space, renamed (its comm another): its whole path begins
	 * the command. */
	p = (struct snap_proc){ .cmdline = "/opt/my app/bin/trtexec --onnx=m.onnx", .comm = "w" };
	assert_string_equal(owner_text(&p, exe_spaced, ARRAY_SIZE(exe_spaced)), "trtexec|program");
	p.cmdline = "/opt/my app/bin/trtexecs";
	assert_string_equal(owner_text(&p, exe_spaced, ARRAY_SIZE(exe_spaced)), "trtexec|-");
	p = (struct snap_proc){ .cmdline = "/opt/app/bin/trtexec --onnx=m.onnx", .comm = "trtexec" };
	assert_string_equal(owner_text(&p, glue_only, ARRAY_SIZE(glue_only)), "(unknown)|-");
	assert_string_equal(owner_text(&p, NULL, 0), "(unknown)|-");
}

static void test_families_are_known_by_file_name(void **state)
{
	static const char *const known[][2] = {
		{ "libnccl.so.2", "NCCL" }, { "libcublas.so.12", "cuBLAS" },
		{ "libcudnn_ops.so.9", "cuDNN" }, { "libcufft.so.11", "cuFFT" },
		{ "libcusparse.so.12", "cuSPARSE" }, { "libcusolver.so.11", "cuSOLVER" },
		{ "libcurand.so.10", "cuRAND" }, { "libnvinfer_plugin.so.10", "TensorRT" },
		{ "libtorch_cuda.so", "PyTorch" }, { "libpaddle.so", "Paddle" },
		{ "libtensorflow_framework.so.2", "TensorFlow/XLA" },
		{ "xla_extension.so", "TensorFlow/XLA" }, { "libonnxruntime.so.1", "ONNX Runtime" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		assert_string_equal(owner_family(known[i][0], false), known[i][1]);
	assert_null(owner_family("libfoo.so", false));
	assert_null(owner_family("/home/me/model.py", true));
	assert_string_equal(owner_family("/usr/lib/python3/dist-packages/cupy/cuda/memory.py", true),
			    "CuPy");
	assert_true(owner_is_runtime("/usr/lib/libcuda.so.1"));
	assert_true(owner_is_runtime("/opt/rocm/lib/libamdhip64.so.5"));
	assert_false(owner_is_runtime("/usr/lib/libcudnn.so.9"));
}

static void test_a_process_sums_its_sites_by_library_and_keeps_each_peak(void **state)
{
	static const struct snap_frame nccl[] = { NATIVE("/l/libnccl.so.2", NULL, NULL, 0) };
	static const struct snap_frame nccl2[] = { NATIVE("/l/libnccl.so.2", "b", NULL, 0) };
	static const struct snap_frame cudnn[] = { NATIVE("/l/libcudnn.so.9", NULL, NULL, 0) };
	struct snap_site sites[3] = {
		{ .st = { .current_bytes = 100, .current_allocs = 1, .alloc_count = 2 } },
		{ .st = { .current_bytes = 300, .current_allocs = 3, .alloc_count = 3 } },
		{ .st = { .current_bytes = 50, .current_allocs = 1, .alloc_count = 1,
			  .free_count = 4 } },
	};
	struct snap_proc p = { .sites = sites, .nsites = 3 };
	struct owner_peaks pk = { 0 };

	(void)state;
	sites[0].stack = stack_of(nccl, 1);
	sites[1].stack = stack_of(cudnn, 1);
	sites[2].stack = stack_of(nccl2, 1);
	snap_proc_libraries(&p);
	assert_int_equal(p.nlibraries, 2);
	assert_string_equal(p.libraries[0].library, "libcudnn.so.9");	/* largest first */
	assert_int_equal(p.libraries[1].st.current_bytes, 150);
	assert_int_equal(p.libraries[1].st.current_allocs, 2);
	assert_int_equal(p.libraries[1].st.free_count, 4);
	assert_int_equal(p.libraries[1].nsites, 2);
	owner_peaks_apply(&pk, &p);
	assert_int_equal(p.libraries[0].peak_bytes, 300);
	sites[1].st.current_bytes = 10;	/* cuDNN lets most go: its peak stays */
	snap_proc_libraries(&p);
	owner_peaks_apply(&pk, &p);
	assert_string_equal(p.libraries[1].library, "libcudnn.so.9");
	assert_int_equal(p.libraries[1].st.current_bytes, 10);
	assert_int_equal(p.libraries[1].peak_bytes, 300);
	assert_true(p.libraries[1].valid & SL_PEAK);
	owner_peaks_free(&pk);
	free(p.libraries);
	for (int i = 0; i < 3; i++)
		snap_stack_put(sites[i].stack);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_python_site_reads_from_the_users_line),
		cmocka_unit_test(test_a_native_site_skips_the_glue_and_keeps_library_code),
		cmocka_unit_test(test_only_library_python_lines_are_shown_when_there_is_no_other),
		cmocka_unit_test(test_rows_that_share_their_first_frames_get_the_frames_that_differ),
		cmocka_unit_test(test_glue_is_what_carries_calls_and_nothing_else),
		cmocka_unit_test(test_the_owner_is_the_innermost_frame_past_runtime_and_glue),
		cmocka_unit_test(test_families_are_known_by_file_name),
		cmocka_unit_test(test_a_process_sums_its_sites_by_library_and_keeps_each_peak),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
