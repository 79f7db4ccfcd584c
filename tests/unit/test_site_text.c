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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_python_site_reads_from_the_users_line),
		cmocka_unit_test(test_a_native_site_skips_the_glue_and_keeps_library_code),
		cmocka_unit_test(test_only_library_python_lines_are_shown_when_there_is_no_other),
		cmocka_unit_test(test_rows_that_share_their_first_frames_get_the_frames_that_differ),
		cmocka_unit_test(test_glue_is_what_carries_calls_and_nothing_else),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
