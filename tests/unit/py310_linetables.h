/* Generated with CPython 3.10 by tests/unit/gen_py_linetables.py from tests/workloads/pyalloc.py. */
static const unsigned char py310_table_0[] = { 4, 0, 8, 12, 8, 1, 8, 1, 8, 1, 8, 1, 8, 1, 16, 2, 4, 1, 8, 3, 8, 8, 8, 4, 8, 4, 14, 4, 8, 14, 8, 4, 8, 6, 8, 14, 8, 7, 14, 1, 18, 1, 14, 1, 14, 1, 12, 1, 10, 1, 14, 1, 46, 2, 4, 247 };
static const int py310_lines_0[] = { 1, 1, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 16, 17, 17, 17, 17, 18, 18, 18, 18, 20, 20, 20, 20, 20, 20, 20, 20, 21, 21, 24, 24, 24, 24, 32, 32, 32, 32, 36, 36, 36, 36, 40, 40, 40, 40, 44, 44, 44, 44, 44, 44, 44, 58, 58, 58, 58, 62, 62, 62, 62, 68, 68, 68, 68, 82, 82, 82, 82, 89, 89, 89, 89, 90, 90, 90, 90, 90, 90, 90, 91, 91, 91, 91, 91, 91, 91, 91, 91, 92, 92, 92, 92, 92, 92, 92, 93, 93, 93, 93, 93, 93, 93, 94, 94, 94, 94, 94, 94, 95, 95, 95, 95, 95, 96, 96, 96, 96, 96, 96, 96, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 89, 89 };
static const unsigned char py310_table_1[] = { 8, 1, 32, 1, 16, 1, 22, 1, 6, 1 };
static const int py310_lines_1[] = { 25, 25, 25, 25, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 27, 27, 27, 27, 27, 27, 27, 27, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 29, 29, 29 };
static const unsigned char py310_table_2[] = { 34, 0 };
static const int py310_lines_2[] = { 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28 };
static const unsigned char py310_table_3[] = { 28, 1 };
static const int py310_lines_3[] = { 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33 };
static const unsigned char py310_table_4[] = { 8, 1 };
static const int py310_lines_4[] = { 37, 37, 37, 37 };
static const unsigned char py310_table_5[] = { 8, 1 };
static const int py310_lines_5[] = { 41, 41, 41, 41 };
static const unsigned char py310_table_6[] = { 8, 0, 8, 1, 8, 3, 12, 3 };
static const int py310_lines_6[] = { 44, 44, 44, 44, 45, 45, 45, 45, 48, 48, 48, 48, 51, 51, 51, 51, 51, 51 };
static const unsigned char py310_table_7[] = { 10, 1 };
static const int py310_lines_7[] = { 46, 46, 46, 46, 46 };
static const unsigned char py310_table_8[] = { 8, 1 };
static const int py310_lines_8[] = { 49, 49, 49, 49 };
static const unsigned char py310_table_9[] = { 8, 1, 12, 1, 12, 1, 12, 1 };
static const int py310_lines_9[] = { 52, 52, 52, 52, 53, 53, 53, 53, 53, 53, 54, 54, 54, 54, 54, 54, 55, 55, 55, 55, 55, 55 };
static const unsigned char py310_table_10[] = { 2, 128, 14, 1 };
static const int py310_lines_10[] = { -1, 59, 59, 59, 59, 59, 59, 59 };
static const unsigned char py310_table_11[] = { 8, 1, 8, 1, 14, 1 };
static const int py310_lines_11[] = { 63, 63, 63, 63, 64, 64, 64, 64, 65, 65, 65, 65, 65, 65, 65 };
static const unsigned char py310_table_12[] = { 8, 1, 12, 1, 14, 1, 12, 1, 12, 1, 14, 1, 8, 1, 8, 1, 10, 1, 12, 1, 34, 1, 34, 255 };
static const int py310_lines_12[] = { 69, 69, 69, 69, 70, 70, 70, 70, 70, 70, 71, 71, 71, 71, 71, 71, 71, 72, 72, 72, 72, 72, 72, 73, 73, 73, 73, 73, 73, 74, 74, 74, 74, 74, 74, 74, 75, 75, 75, 75, 76, 76, 76, 76, 77, 77, 77, 77, 77, 78, 78, 78, 78, 78, 78, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 78, 78, 78, 78, 78, 78, 78, 78, 78, 78, 78, 78, 78, 78, 78, 78, 78 };
static const unsigned char py310_table_13[] = { 20, 0 };
static const int py310_lines_13[] = { 71, 71, 71, 71, 71, 71, 71, 71, 71, 71 };
static const unsigned char py310_table_14[] = { 8, 0 };
static const int py310_lines_14[] = { 73, 73, 73, 73 };
static const unsigned char py310_table_15[] = { 6, 1, 12, 1, 10, 1, 16, 1, 4, 254 };
static const int py310_lines_15[] = { 83, 83, 83, 84, 84, 84, 84, 84, 84, 85, 85, 85, 85, 85, 86, 86, 86, 86, 86, 86, 86, 86, 84, 84 };
static const struct py_fixture py310_fixtures[] = {
	{ "<module>", 1, py310_table_0, 56, py310_lines_0, 152 },
	{ "alloc", 24, py310_table_1, 10, py310_lines_1, 42 },
	{ "<listcomp>", 28, py310_table_2, 2, py310_lines_2, 17 },
	{ "free", 32, py310_table_3, 2, py310_lines_3, 14 },
	{ "outer", 36, py310_table_4, 2, py310_lines_4, 4 },
	{ "middle", 40, py310_table_5, 2, py310_lines_5, 4 },
	{ "Model", 44, py310_table_6, 8, py310_lines_6, 18 },
	{ "__init__", 45, py310_table_7, 2, py310_lines_7, 5 },
	{ "forward", 48, py310_table_8, 2, py310_lines_8, 4 },
	{ "step", 51, py310_table_9, 8, py310_lines_9, 22 },
	{ "gen", 58, py310_table_10, 4, py310_lines_10, 8 },
	{ "recurse", 62, py310_table_11, 6, py310_lines_11, 15 },
	{ "shapes", 68, py310_table_12, 24, py310_lines_12, 89 },
	{ "<listcomp>", 71, py310_table_13, 2, py310_lines_13, 10 },
	{ "<lambda>", 73, py310_table_14, 2, py310_lines_14, 4 },
	{ "leak", 82, py310_table_15, 10, py310_lines_15, 24 },
};
