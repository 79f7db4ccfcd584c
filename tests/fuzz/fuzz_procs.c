// SPDX-License-Identifier: GPL-2.0
/* Fuzzes the /proc parsers of model/procs.c: every input is read as a maps file, a cmdline, a
 * cgroup file and a stat line, into buffers of exact sizes so ASan sees any overrun. */
#include <errno.h>

#include "fuzz.h"
#include "host/procs.h"

static const size_t buf_lens[] = { 1, 2, 16, 256 };

static void check_module_map(const uint8_t *data, size_t size)
{
	const struct mapping *m;
	struct module_map mm;
	char *copy = fuzz_strndup(data, size);
	size_t i;
	FILE *f;
	int err;

	f = fmemopen(copy, size, "r");
	if (!f)
		abort();
	err = module_map_parse(f, &mm);
	fclose(f);
	fuzz_check(err == 0 || err == -EINVAL || err == -ENOMEM, "module_map_parse: %d", err);
	if (err) {
		fuzz_check(!mm.maps && !mm.count, "a failed parse left %zu mappings", mm.count);
		free(copy);
		return;
	}
	for (i = 0; i < mm.count; i++) {
		fuzz_check(mm.maps[i].path && mm.maps[i].path[0] == '/',
			   "mapping %zu is not file-backed", i);
		/* A line's own end is never kept; a newline comes only from the kernel's
		 * escape of one, \012. */
		fuzz_check(!strchr(mm.maps[i].path, '\n') || memmem(data, size, "\\012", 4),
			   "newline kept in \"%s\"", mm.maps[i].path);
		fuzz_check(i == 0 || mm.maps[i - 1].start <= mm.maps[i].start,
			   "mapping %zu starts below mapping %zu", i, i - 1);
		m = module_map_find(&mm, mm.maps[i].start);
		fuzz_check(!m || (m->start <= mm.maps[i].start && mm.maps[i].start < m->end),
			   "module_map_find(%#llx) gave a mapping that does not hold it",
			   (unsigned long long)mm.maps[i].start);
		module_map_find(&mm, mm.maps[i].end);
		module_map_find(&mm, mm.maps[i].start - 1);
	}
	module_map_free(&mm);
	fuzz_check(!mm.maps && !mm.count, "module_map_free left %zu mappings", mm.count);
	free(copy);
}

/* NULs become spaces, a trailing one is dropped, and nothing else changes. */
static void check_cmdline(const uint8_t *data, size_t size, size_t len)
{
	char *buf = malloc(len);
	size_t n, i;
	int err;

	if (!buf)
		abort();
	err = proc_parse_cmdline((const char *)data, size, buf, len);
	fuzz_check(err == 0, "proc_parse_cmdline: %d", err);
	n = strnlen(buf, len);
	fuzz_check(n < len, "cmdline not terminated in %zu bytes", len);
	fuzz_check(n <= size, "cmdline of %zu bytes from %zu", n, size);
	for (i = 0; i < n; i++)
		fuzz_check(buf[i] == (data[i] ? (char)data[i] : ' '), "cmdline byte %zu changed",
			   i);
	fuzz_check(n == 0 || data[n - 1] != '\0', "cmdline ends in a separator");
	free(buf);
}

/* Whether some line of text is "0::" followed by the n bytes of path (and more if cut). */
static bool has_v2_line(const char *text, const char *path, size_t n)
{
	const char *line = text;

	while (line) {
		if (strncmp(line, "0::", 3) == 0 && strncmp(line + 3, path, n) == 0)
			return true;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return false;
}

static void check_cgroup(const char *text, size_t len)
{
	char *buf = malloc(len);
	size_t n;
	int err;

	if (!buf)
		abort();
	err = proc_parse_cgroup(text, buf, len);
	n = strnlen(buf, len);
	fuzz_check(n < len, "cgroup path not terminated in %zu bytes", len);
	switch (err) {
	case 0:
		fuzz_check(!strchr(buf, '\n'), "newline in cgroup path");
		fuzz_check(has_v2_line(text, buf, n), "cgroup path not from a 0:: line");
		break;
	case -ENAMETOOLONG:
		fuzz_check(n == len - 1, "a cut cgroup path of %zu bytes in %zu", n, len);
		fuzz_check(has_v2_line(text, buf, n), "cut cgroup path not from a 0:: line");
		break;
	case -ENOENT:
		fuzz_check(n == 0, "no 0:: line but a path of %zu bytes", n);
		break;
	default:
		fuzz_check(false, "proc_parse_cgroup: %d", err);
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_strndup(data, size);
	uint64_t ticks;
	size_t i;
	int err;

	check_module_map(data, size);
	for (i = 0; i < sizeof(buf_lens) / sizeof(buf_lens[0]); i++) {
		check_cmdline(data, size, buf_lens[i]);
		check_cgroup(text, buf_lens[i]);
	}
	check_cmdline(data, size, size + 1);
	fuzz_check(proc_parse_cmdline((const char *)data, size, NULL, 0) == -EINVAL,
		   "proc_parse_cmdline took a buffer of 0 bytes");
	err = proc_parse_stat_start_time(text, &ticks);
	fuzz_check(err == 0 || err == -EINVAL, "proc_parse_stat_start_time: %d", err);
	err = proc_parse_stat_ending(text);
	fuzz_check(err == 0 || err == 1 || err == -EINVAL, "proc_parse_stat_ending: %d", err);
	free(text);
	return 0;
}
