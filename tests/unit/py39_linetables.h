/* Generated with CPython 3.9 by tests/unit/gen_py_linetables.py from tests/workloads/pyalloc.py. */
static const unsigned char py39_table_0[] = { 4, 12, 8, 1, 8, 1, 8, 1, 8, 1, 8, 1, 8, 2, 16, 1, 4, 3, 8, 8, 8, 4, 8, 4, 8, 4, 14, 14, 8, 4, 8, 6, 8, 14, 8, 7, 10, 1, 14, 1, 16, 1, 14, 1, 14, 1, 12, 1, 10, 1, 12, 2 };
static const int py39_lines_0[] = { 1, 1, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 16, 17, 17, 17, 17, 18, 18, 18, 18, 20, 20, 20, 20, 20, 20, 20, 20, 21, 21, 24, 24, 24, 24, 32, 32, 32, 32, 36, 36, 36, 36, 40, 40, 40, 40, 44, 44, 44, 44, 44, 44, 44, 58, 58, 58, 58, 62, 62, 62, 62, 68, 68, 68, 68, 82, 82, 82, 82, 89, 89, 89, 89, 89, 90, 90, 90, 90, 90, 90, 90, 91, 91, 91, 91, 91, 91, 91, 91, 92, 92, 92, 92, 92, 92, 92, 93, 93, 93, 93, 93, 93, 93, 94, 94, 94, 94, 94, 94, 95, 95, 95, 95, 95, 96, 96, 96, 96, 96, 96, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98, 98 };
static const unsigned char py39_table_1[] = { 0, 1, 8, 1, 32, 1, 16, 1, 22, 1 };
static const int py39_lines_1[] = { 25, 25, 25, 25, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 27, 27, 27, 27, 27, 27, 27, 27, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 29, 29, 29 };
static const unsigned char py39_table_2[] = { 0 };
static const int py39_lines_2[] = { 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28 };
static const unsigned char py39_table_3[] = { 0, 1 };
static const int py39_lines_3[] = { 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33 };
static const unsigned char py39_table_4[] = { 0, 1 };
static const int py39_lines_4[] = { 37, 37, 37, 37 };
static const unsigned char py39_table_5[] = { 0, 1 };
static const int py39_lines_5[] = { 41, 41, 41, 41 };
static const unsigned char py39_table_6[] = { 8, 1, 8, 3, 8, 3 };
static const int py39_lines_6[] = { 44, 44, 44, 44, 45, 45, 45, 45, 48, 48, 48, 48, 51, 51, 51, 51, 51, 51 };
static const unsigned char py39_table_7[] = { 0, 1 };
static const int py39_lines_7[] = { 46, 46, 46, 46, 46 };
static const unsigned char py39_table_8[] = { 0, 1 };
static const int py39_lines_8[] = { 49, 49, 49, 49 };
static const unsigned char py39_table_9[] = { 0, 1, 8, 1, 12, 1, 12, 1 };
static const int py39_lines_9[] = { 52, 52, 52, 52, 53, 53, 53, 53, 53, 53, 54, 54, 54, 54, 54, 54, 55, 55, 55, 55, 55, 55 };
static const unsigned char py39_table_10[] = { 0, 1 };
static const int py39_lines_10[] = { 59, 59, 59, 59, 59, 59, 59 };
static const unsigned char py39_table_11[] = { 0, 1, 8, 1, 8, 1 };
static const int py39_lines_11[] = { 63, 63, 63, 63, 64, 64, 64, 64, 65, 65, 65, 65, 65, 65, 65 };
static const unsigned char py39_table_12[] = { 0, 1, 8, 1, 12, 1, 14, 1, 12, 1, 12, 1, 14, 1, 8, 1, 8, 1, 10, 1, 12, 1 };
static const int py39_lines_12[] = { 69, 69, 69, 69, 70, 70, 70, 70, 70, 70, 71, 71, 71, 71, 71, 71, 71, 72, 72, 72, 72, 72, 72, 73, 73, 73, 73, 73, 73, 74, 74, 74, 74, 74, 74, 74, 75, 75, 75, 75, 76, 76, 76, 76, 77, 77, 77, 77, 77, 78, 78, 78, 78, 78, 78, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79, 79 };
static const unsigned char py39_table_13[] = { 0 };
static const int py39_lines_13[] = { 71, 71, 71, 71, 71, 71, 71, 71, 71, 71 };
static const unsigned char py39_table_14[] = { 0 };
static const int py39_lines_14[] = { 73, 73, 73, 73 };
static const unsigned char py39_table_15[] = { 0, 1, 6, 1, 12, 1, 10, 1 };
static const int py39_lines_15[] = { 83, 83, 83, 84, 84, 84, 84, 84, 84, 85, 85, 85, 85, 85, 86, 86, 86, 86, 86, 86, 86, 86, 86, 86 };
static const struct py_fixture py39_fixtures[] = {
	{ "<module>", 1, py39_table_0, 52, py39_lines_0, 149 },
	{ "alloc", 24, py39_table_1, 10, py39_lines_1, 42 },
	{ "<listcomp>", 28, py39_table_2, 0, py39_lines_2, 17 },
	{ "free", 32, py39_table_3, 2, py39_lines_3, 14 },
	{ "outer", 36, py39_table_4, 2, py39_lines_4, 4 },
	{ "middle", 40, py39_table_5, 2, py39_lines_5, 4 },
	{ "Model", 44, py39_table_6, 6, py39_lines_6, 18 },
	{ "__init__", 45, py39_table_7, 2, py39_lines_7, 5 },
	{ "forward", 48, py39_table_8, 2, py39_lines_8, 4 },
	{ "step", 51, py39_table_9, 8, py39_lines_9, 22 },
	{ "gen", 58, py39_table_10, 2, py39_lines_10, 7 },
	{ "recurse", 62, py39_table_11, 6, py39_lines_11, 15 },
	{ "shapes", 68, py39_table_12, 22, py39_lines_12, 88 },
	{ "<listcomp>", 71, py39_table_13, 0, py39_lines_13, 10 },
	{ "<lambda>", 73, py39_table_14, 0, py39_lines_14, 4 },
	{ "leak", 82, py39_table_15, 8, py39_lines_15, 24 },
};
