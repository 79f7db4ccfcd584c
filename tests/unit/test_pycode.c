// SPDX-License-Identifier: GPL-2.0
/* The line-table decoders (3.9's lnotab, 3.10's line table, 3.11's location table) against
 * what CPython itself says for every instruction of real code objects; the layout tables and
 * 3.13's _Py_DebugOffsets read over them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>
#include "symbols/pycode.h"
#include "base/util.h"
#include "py311_linetables.h"	/* defines struct py_fixture */
#include "py39_linetables.h"
#include "py310_linetables.h"

typedef int (*line_fn)(const uint8_t *, size_t, int, int);

static void check_fixtures(const struct py_fixture *fx, size_t n, line_fn line_of,
			   const char *version)
{
	for (size_t i = 0; i < n; i++) {
		const struct py_fixture *f = &fx[i];

		for (unsigned int k = 0; k < f->nlines; k++) {
			int got = line_of(f->table, f->ntable, f->firstlineno, (int)k * 2);

			if (got != f->lines[k])
				fail_msg("%s %s: instruction %u: line %d, CPython says %d", version,
					 f->name, k, got, f->lines[k]);
		}
	}
}

static void test_line_of_every_instruction_matches_cpython(void **state)
{
	(void)state;
	check_fixtures(py_fixtures, ARRAY_SIZE(py_fixtures), py_line_of, "3.11");
	check_fixtures(py310_fixtures, ARRAY_SIZE(py310_fixtures), py_line_of_310, "3.10");
	check_fixtures(py39_fixtures, ARRAY_SIZE(py39_fixtures), py_line_of_lnotab, "3.9");
}

static void test_past_the_table_and_corrupt_tables_have_no_line(void **state)
{
	static const unsigned char not_an_entry[] = { 0x01, 0x02 };
	const struct py_fixture *f = &py_fixtures[0];

	(void)state;
	assert_int_equal(py_line_of(f->table, f->ntable, f->firstlineno, (int)f->nlines * 2 + 100),
			 -1);
	assert_int_equal(py_line_of(not_an_entry, sizeof(not_an_entry), 5, 0), -1);
	assert_int_equal(py_line_of(NULL, 0, 5, 0), -1);
	assert_int_equal(py_line_of(f->table, f->ntable, 7, -1), 7);
	assert_int_equal(py_line_of_310(py310_fixtures[0].table, py310_fixtures[0].ntable, 5,
					100000), -1);
	assert_int_equal(py_line_of_310(NULL, 0, 5, 0), -1);
}

static void test_layouts_only_for_versions_gpumem_knows(void **state)
{
	(void)state;
	for (unsigned int minor = 9; minor <= 13; minor++) {
		const struct py_layout *l = py_layout_find(3, minor);

		assert_non_null(l);
		assert_null(py_layout_check(l));
		assert_int_equal(l->qualname, minor >= 11);
		assert_int_equal(l->frame_per_eval, minor <= 10);
	}
	assert_int_equal(py_layout_find(3, 11)->walk.frame_code, 32);
	assert_int_equal(py_layout_find(3, 9)->walk.thread_id_kind, GM_PY_TID_PTHREAD);
	assert_null(py_layout_find(3, 8));
	assert_null(py_layout_find(3, 14));
	assert_null(py_layout_find(2, 7));
}

static void test_layout_check_refuses_offsets_outside_what_is_read(void **state)
{
	struct py_layout l = *py_layout_find(3, 12);

	(void)state;
	l.walk.tstate_thread_id = GM_PY_TSTATE_READ;
	assert_non_null(py_layout_check(&l));
	l = *py_layout_find(3, 12);
	l.walk.frame_instr = l.walk.frame_read - 4;	/* an 8-byte pointer past the read */
	assert_non_null(py_layout_check(&l));
	l = *py_layout_find(3, 12);
	l.walk.frame_read = GM_PY_FRAME_READ + 8;
	assert_non_null(py_layout_check(&l));
	l = *py_layout_find(3, 12);
	l.walk.frame_previous = 12;			/* misaligned */
	assert_non_null(py_layout_check(&l));
	l = *py_layout_find(3, 12);
	l.code_filename = 1u << 20;
	assert_non_null(py_layout_check(&l));
}

/* 3.13.0's _Py_DebugOffsets as its headers make it (a uint64_t a field), the offsets moved a
 * little from the table's, so that taking them is seen. */
static void debug_offsets(uint64_t *d)
{
	memset(d, 0, PY_DEBUG_OFFSETS_LEN);
	memcpy(d, "xdebugpy", 8);
	d[1] = 0x030d00f0;		/* version 3.13.0 final */
	d[2] = 0;			/* free_threaded */
	d[3] = 2000; d[5] = 640;	/* runtime_state: size, interpreters_head */
	d[6] = 8000; d[9] = 7352;	/* interpreter_state: size, threads_head */
	d[19] = 300;			/* thread_state: size */
	d[21] = 8; d[22] = 16; d[23] = 80;	/* next, interp, current_frame */
	d[25] = 168; d[26] = 232;	/* native_thread_id, datastack_chunk */
	d[28] = 80; d[29] = 8; d[30] = 0; d[31] = 56; d[33] = 70;	/* frame */
	d[34] = 220; d[35] = 120; d[37] = 136; d[38] = 144; d[39] = 72; d[43] = 208; /* code */
	d[44] = 16; d[45] = 8;		/* pyobject: size, ob_type */
	d[46] = 400; d[47] = 24;	/* type_object: size, tp_name */
	d[64] = 33; d[65] = 16; d[66] = 32;	/* bytes_object: size, ob_size, ob_sval */
	d[67] = 56; d[68] = 32; d[69] = 16; d[70] = 40;	/* unicode_object */
}

/* 3.13's table with the offsets of d over it: 0 or -EINVAL. */
static int from_debug(const uint64_t *d, size_t len, struct py_layout *l)
{
	const char *why = NULL;
	int err = py_layout_from_debug(d, len, py_layout_find(3, 13), l, &why);

	assert_true(err ? why != NULL : why == NULL);
	return err;
}

static void test_debug_offsets_are_taken_over_the_table(void **state)
{
	uint64_t d[PY_DEBUG_OFFSETS_LEN / 8];
	struct py_layout l;

	(void)state;
	debug_offsets(d);
	assert_int_equal(from_debug(d, sizeof(d), &l), 0);
	assert_int_equal(l.walk.runtime_interp_head, 640);
	assert_int_equal(l.walk.interp_threads_head, 7352);
	assert_int_equal(l.walk.cframe_frame, 80);
	assert_int_equal(l.walk.tstate_thread_id, 168);
	assert_int_equal(l.walk.tstate_datastack_top, 240);
	assert_int_equal(l.walk.code_units, 208);
	assert_int_equal(l.code_filename, 120);
	assert_int_equal(l.code_name, 136);
	assert_int_equal(l.code_firstlineno, 72);
	assert_int_equal(l.str_compact_data, 56);
	assert_int_equal(l.walk.owner_cstack, 3);
}

static void test_debug_offsets_of_another_build_are_refused(void **state)
{
	uint64_t d[PY_DEBUG_OFFSETS_LEN / 8];
	struct py_layout l;

	(void)state;
	debug_offsets(d);
	memcpy(d, "xdebugpz", 8);
	assert_int_equal(from_debug(d, sizeof(d), &l), -EINVAL);
	debug_offsets(d);
	d[1] = 0x030e00f0;		/* 3.14's */
	assert_int_equal(from_debug(d, sizeof(d), &l), -EINVAL);
	debug_offsets(d);
	d[2] = 1;			/* free-threaded */
	assert_int_equal(from_debug(d, sizeof(d), &l), -EINVAL);
	debug_offsets(d);
	d[25] = 400;			/* native_thread_id past its structure */
	assert_int_equal(from_debug(d, sizeof(d), &l), -EINVAL);
	debug_offsets(d);
	d[19] = 1u << 21; d[25] = 1u << 20;	/* inside a huge "structure", past what BPF reads */
	assert_int_equal(from_debug(d, sizeof(d), &l), -EINVAL);
	assert_int_equal(from_debug(d, 64, &l), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_of_every_instruction_matches_cpython),
		cmocka_unit_test(test_past_the_table_and_corrupt_tables_have_no_line),
		cmocka_unit_test(test_layouts_only_for_versions_gpumem_knows),
		cmocka_unit_test(test_layout_check_refuses_offsets_outside_what_is_read),
		cmocka_unit_test(test_debug_offsets_are_taken_over_the_table),
		cmocka_unit_test(test_debug_offsets_of_another_build_are_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
