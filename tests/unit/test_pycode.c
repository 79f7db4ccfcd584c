// SPDX-License-Identifier: GPL-2.0
/* The 3.11 location-table decoder against what CPython itself says (co_lines()) for every
 * instruction of real code objects, and the layout table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "pycode.h"
#include "py311_linetables.h"

static void test_line_of_every_instruction_matches_cpython(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(py_fixtures) / sizeof(py_fixtures[0]); i++) {
		const struct py_fixture *f = &py_fixtures[i];

		for (unsigned int k = 0; k < f->nlines; k++) {
			int got = py_line_of(f->table, f->ntable, f->firstlineno, (int)k * 2);

			if (got != f->lines[k])
				fail_msg("%s: instruction %u: line %d, CPython says %d", f->name, k,
					 got, f->lines[k]);
		}
	}
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
}

static void test_layouts_only_for_versions_gpumem_knows(void **state)
{
	(void)state;
	assert_non_null(py_layout_find(3, 11));
	assert_int_equal(py_layout_find(3, 11)->walk.frame_code, 32);
	assert_null(py_layout_find(3, 12));
	assert_null(py_layout_find(2, 7));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_of_every_instruction_matches_cpython),
		cmocka_unit_test(test_past_the_table_and_corrupt_tables_have_no_line),
		cmocka_unit_test(test_layouts_only_for_versions_gpumem_knows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
