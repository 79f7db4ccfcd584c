// SPDX-License-Identifier: GPL-2.0
/* The Prometheus exposition of a synthetic snapshot: escaping of hostile names, one HELP and
 * TYPE per family, no repeated label set, no series of ended processes, sites that share a
 * short stack merged, exact numbers, and what promtool says of the text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "output/json.h"
#include "probes/table.h"
#include "output/prom.h"
#include "output/prom_writer.h"
#include "output/report.h"

#define R "\xef\xbf\xbd"	/* U+FFFD, as the writer puts it for what it cannot carry */
#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define PUID "8c2f1a3e-5b6d-4e7f-9a0b-1c2d3e4f5a6b"
/* The labels of process 100, whose comm and names are hostile, as they must come out. */
#define P100                                                                                   \
	"pid=\"100\",comm=\"q\\\"b\\\\s\\nx" R R "\",container=\"" CID "\",pod=\"" PUID        \
	"\",namespace=\"ns\\\"1\",pod_name=\"pod" R "(\\n\",container_name=\"train" R "\""
#define P300                                                                                   \
	"pid=\"300\",comm=\"plain\",container=\"" CID "\",pod=\"" PUID                         \
	"\",namespace=\"\",pod_name=\"\",container_name=\"\""

/* Processes 100 (hostile names; eight sites, two with the same short stack, two with api
 * numbers gpumem has no name for), 200 (ended), 300 (alive, same container) and 400 (alive, no
 * accounted call). */
struct fake {
	struct snapshot snap;
	struct snap_proc proc[4];
	struct snap_site sites[8];
	struct snap_site site300;
	struct snap_stack *stacks[6];
};

static struct snap_stack *named_stack(unsigned int n, const char *const *syms)
{
	struct snap_stack *st = calloc(1, sizeof(*st) + n * sizeof(st->frames[0]));

	assert_non_null(st);
	st->refs = 1;
	st->nframes = n;
	for (unsigned int i = 0; i < n; i++) {
		st->frames[i].addr = 0x401000 + i * 0x10;
		st->frames[i].symbol = syms[i];
		st->frames[i].module = "/opt/app/train";
	}
	return st;
}

static void set_site(struct snap_site *ss, const char *api, unsigned int kind,
		     struct snap_stack *st, uint64_t bytes)
{
	int a = probe_find(api);

	assert_true(a >= 0);
	ss->api = (uint32_t)a;
	ss->kind = kind;
	ss->stack = st;
	ss->st.current_bytes = bytes;
	ss->st.current_allocs = 1;
	ss->st.alloc_count = 1;
}

static void fake_stacks(struct fake *f)
{
	static const char *const a[] = { "leaf(int)", "mid", "top", "main" };
	static const char *const b[] = { "leaf(int)", "mid", "top", "other_caller" };
	static const char *const c[] = { "alloc_managed", "main" };
	static const char *const d[] = { "pin_buffer", "main" };

	f->stacks[0] = named_stack(4, a);
	f->stacks[1] = named_stack(4, b);
	f->stacks[2] = named_stack(2, c);
	f->stacks[3] = named_stack(2, d);
	f->stacks[4] = named_stack(1, (const char *const[]){ NULL });
	f->stacks[4]->frames[0].module = "/usr/lib/libfoo.so";
	f->stacks[4]->frames[0].offset = 0x10;
	f->stacks[5] = named_stack(1, (const char *const[]){ "small" });
}

static void fake_proc100(struct fake *f)
{
	struct snap_proc *p = &f->proc[0];
	struct container_info *ci = &p->container;

	p->pid = 100;
	snprintf(p->comm, sizeof(p->comm), "q\"b\\s\nx\xff\xfe");
	ci->has_id = ci->has_pod = true;
	snprintf(ci->id, sizeof(ci->id), CID);
	snprintf(ci->pod_uid, sizeof(ci->pod_uid), PUID);
	snprintf(ci->pod_namespace, sizeof(ci->pod_namespace), "ns\"1");
	snprintf(ci->pod_name, sizeof(ci->pod_name), "pod\xc3(\n");
	snprintf(ci->container_name, sizeof(ci->container_name), "train\x01");
	p->st = (struct gm_proc_stats){ .current_bytes = 1230, .current_allocs = 5,
					.peak_bytes = 5000, .alloc_count = 9, .free_count = 4,
					.alloc_bytes_total = 12345, .failed_count = 2,
					.tensor_peak_bytes = 700 };
	p->st.by_kind[GM_KIND_DEVICE] = 1000;
	p->st.by_kind[GM_KIND_MANAGED] = 200;
	p->st.by_kind[GM_KIND_HOST] = 4096;
	p->st.by_kind[GM_KIND_ASYNC] = 30;
	set_site(&f->sites[0], "cudaMalloc", GM_KIND_DEVICE, f->stacks[0], 600);
	set_site(&f->sites[1], "cudaMalloc", GM_KIND_DEVICE, f->stacks[1], 400);
	set_site(&f->sites[2], "cudaMallocManaged", GM_KIND_MANAGED, f->stacks[2], 200);
	set_site(&f->sites[3], "cudaMallocHost", GM_KIND_HOST, f->stacks[3], 4096);
	set_site(&f->sites[4], "cudaMallocAsync", GM_KIND_ASYNC, f->stacks[4], 30);
	set_site(&f->sites[5], "cudaMalloc", GM_KIND_DEVICE, NULL, 0);
	/* Two api numbers gpumem has no name for: one label text, so one series. */
	set_site(&f->sites[6], "cudaMalloc", GM_KIND_DEVICE, f->stacks[5], 1);
	set_site(&f->sites[7], "cudaMalloc", GM_KIND_DEVICE, f->stacks[5], 2);
	f->sites[6].api = probe_count + 1;
	f->sites[7].api = probe_count + 7;
	p->sites = f->sites;
	p->nsites = 8;
}

static void fake_init(struct fake *f)
{
	static const int pids[] = { 100, 200, 300, 400 };
	static const char *const comms[] = { "", "ended", "plain", "idle" };

	memset(f, 0, sizeof(*f));
	fake_stacks(f);
	f->snap.refs = 1;
	f->snap.procs = f->proc;
	f->snap.nprocs = 4;
	for (size_t i = 0; i < 4; i++) {
		f->proc[i].pid = pids[i];
		f->proc[i].alive = i != 1;
		f->proc[i].valid = SP_COMM | (i != 3 ? SP_STATS : 0);
		snprintf(f->proc[i].comm, sizeof(f->proc[i].comm), "%s", comms[i]);
		f->proc[i].st.by_kind[GM_KIND_DEVICE] = 50;
	}
	fake_proc100(f);
	f->proc[2].container = f->proc[0].container;
	f->proc[2].container.pod_name[0] = f->proc[2].container.pod_namespace[0] = '\0';
	f->proc[2].container.container_name[0] = '\0';
	set_site(&f->site300, "cudaMalloc", GM_KIND_DEVICE, f->stacks[5], 50);
	f->proc[2].sites = f->proc[1].sites = &f->site300;
	f->proc[2].nsites = f->proc[1].nsites = 1;
	f->snap.counters[GM_CNT_RINGBUF_DROPPED] = 7;
	f->snap.counters[GM_CNT_HOLDS] = 2;
	f->snap.lost[SNAP_LOST_ENDED_DROPPED] = 3;
}

static int fake_setup(void **state)
{
	struct fake *f = malloc(sizeof(*f));

	if (!f)
		return -1;
	fake_init(f);
	*state = f;
	return 0;
}

static int fake_teardown(void **state)
{
	struct fake *f = *state;

	for (size_t i = 0; i < 6; i++)
		free(f->stacks[i]);
	free(f);
	return 0;
}

static char *render(const struct snapshot *s, const struct prom_opts *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(prom_write(f, s, o), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

/* How many lines of text are exactly line. */
static int count_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	int count = 0;

	for (const char *p = text; *p;) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		count += len == n && !memcmp(p, line, n);
		p += len + (end != NULL);
	}
	return count;
}

/* How many lines start with prefix. */
static int count_prefix(const char *text, const char *prefix)
{
	int count = 0;

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		count += !strncmp(p, prefix, strlen(prefix));
	return count;
}

static void test_label_values_escape_quotes_backslashes_newlines_and_bad_utf8(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(f);
	prom_label_value(f, "a\"b\\c\nd\xff\x01" "e\xc2\x85" "f\t\x7f" "caf\xc3\xa9 \xe2\x82");
	fclose(f);
	assert_string_equal(buf, "a\\\"b\\\\c\\nd" R R "e" R "f" R R "caf\xc3\xa9 " R R);
	free(buf);
}

static void test_help_keeps_quotes_and_escapes_backslash_and_newline(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(f);
	prom_family(f, "gpumem_x", "gauge", "say \"hi\" \\ now\nnext");
	fclose(f);
	assert_string_equal(buf, "# HELP gpumem_x say \"hi\" \\\\ now\\nnext\n"
				 "# TYPE gpumem_x gauge\n");
	free(buf);
}

/* A line's metric name: up to '{' or ' '. */
static size_t name_len_of(const char *line)
{
	return strcspn(line, "{ ");
}

static void check_line_bytes(const char *line, size_t len)
{
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq_len((const unsigned char *)line + i, len - i);

		assert_true(n > 0);
		assert_false((unsigned char)line[i] < 0x20 || line[i] == 0x7f);
		i += n;
	}
}

/* The format's rules on the whole text: every line valid UTF-8 without control characters;
 * HELP then TYPE once per family; a family's samples right after its TYPE, named after it;
 * no label set twice. */
static void check_exposition(const char *text)
{
	char family[128] = "", help[128] = "";
	const char *seen[256], *samples[1024];
	size_t nseen = 0, nsamples = 0;

	for (const char *p = text; *p;) {
		const char *end = strchr(p, '\n');
		size_t len;

		assert_non_null(end);	/* the last line ends too */
		len = (size_t)(end - p);
		check_line_bytes(p, len);
		if (!strncmp(p, "# HELP ", 7)) {
			snprintf(help, sizeof(help), "%.*s", (int)name_len_of(p + 7), p + 7);
		} else if (!strncmp(p, "# TYPE ", 7)) {
			snprintf(family, sizeof(family), "%.*s", (int)name_len_of(p + 7), p + 7);
			assert_string_equal(family, help);
			for (size_t i = 0; i < nseen; i++)
				assert_true(strncmp(seen[i], family, strlen(family) + 1) != 0);
			assert_true(nseen < 256);
			seen[nseen++] = strdup(family);
		} else {
			const char *value = memrchr(p, ' ', len);

			assert_non_null(value);
			assert_int_equal(name_len_of(p), strlen(family));
			assert_memory_equal(p, family, strlen(family));
			for (size_t i = 0; i < nsamples; i++)
				assert_false(strlen(samples[i]) == (size_t)(value - p) &&
					     !memcmp(samples[i], p, (size_t)(value - p)));
			assert_true(nsamples < 1024);
			samples[nsamples++] = strndup(p, (size_t)(value - p));
		}
		p = end + 1;
	}
	for (size_t i = 0; i < nseen; i++)
		free((void *)seen[i]);
	for (size_t i = 0; i < nsamples; i++)
		free((void *)samples[i]);
}

static void test_exposition_has_one_help_and_type_per_family_and_no_repeated_series(void **state)
{
	struct fake *f = *state;
	char *text = render(&f->snap, NULL);

	check_exposition(text);
	/* with VMM, per-GPU, per host GPU and attached-file families */
	assert_int_equal(count_prefix(text, "# TYPE "), 35);
	free(text);
}

static void test_ended_and_unaccounted_processes_write_no_series(void **state)
{
	struct fake *f = *state;
	char *text = render(&f->snap, NULL);

	assert_null(strstr(text, "pid=\"200\""));
	assert_null(strstr(text, "pid=\"400\""));
	assert_null(strstr(text, "comm=\"ended\""));
	assert_null(strstr(text, "comm=\"idle\""));
	assert_int_equal(count_line(text, "gpumem_processes 2"), 1);
	free(text);
}

static void test_process_series_carry_exact_numbers_and_escaped_labels(void **state)
{
	struct fake *f = *state;
	char *text = render(&f->snap, NULL);

	assert_int_equal(count_line(text, "gpumem_process_memory_bytes{" P100 ",kind=\"device\"} 1000"), 1);
	assert_int_equal(count_line(text, "gpumem_process_memory_bytes{" P100 ",kind=\"managed\"} 200"), 1);
	assert_int_equal(count_line(text, "gpumem_process_memory_bytes{" P100 ",kind=\"async\"} 30"), 1);
	assert_int_equal(count_line(text, "gpumem_process_memory_bytes{" P100 ",kind=\"vmm\"} 0"), 1);
	/* Pinned host memory has its own family: no sum over kind counts it. */
	assert_null(strstr(text, "kind=\"host\""));
	assert_int_equal(count_line(text, "gpumem_process_host_pinned_memory_bytes{" P100 "} 4096"), 1);
	assert_int_equal(count_line(text, "gpumem_process_live_allocations{" P100 "} 5"), 1);
	assert_int_equal(count_line(text, "gpumem_process_peak_memory_bytes{" P100 "} 5000"), 1);
	assert_int_equal(count_line(text, "gpumem_process_allocations_total{" P100 "} 9"), 1);
	assert_int_equal(count_line(text, "gpumem_process_frees_total{" P100 "} 4"), 1);
	assert_int_equal(count_line(text, "gpumem_process_failed_allocations_total{" P100 "} 2"), 1);
	assert_int_equal(count_line(text, "gpumem_process_allocated_bytes_total{" P100 "} 12345"), 1);
	assert_int_equal(count_line(text, "gpumem_process_tensor_peak_memory_bytes{" P100 "} 700"), 1);
	assert_int_equal(count_line(text, "gpumem_process_memory_bytes{" P300 ",kind=\"device\"} 50"), 1);
	assert_int_equal(count_line(text, "# TYPE gpumem_process_frees_total counter"), 1);
	assert_int_equal(count_line(text, "# TYPE gpumem_process_memory_bytes gauge"), 1);
	free(text);
}

static void test_sites_with_the_same_short_stack_are_one_series(void **state)
{
	struct fake *f = *state;
	char *text = render(&f->snap, NULL);
	const char *site = "gpumem_site_memory_bytes{" P100;

	/* Two stacks that differ below their first three named frames: 600 + 400. */
	assert_int_equal(count_line(text, "gpumem_site_memory_bytes{" P100 ",site=\"leaf<-mid<-top\","
					  "api=\"cudaMalloc\",vendor=\"nvidia\",kind=\"device\",gpu=\"unknown\"} 1000"), 1);
	assert_int_equal(count_line(text, "gpumem_site_memory_bytes{" P100 ",site=\"alloc_managed<-main\","
					  "api=\"cudaMallocManaged\",vendor=\"nvidia\",kind=\"managed\",gpu=\"unknown\"} 200"), 1);
	assert_int_equal(count_line(text, "gpumem_site_memory_bytes{" P100 ",site=\"libfoo.so+0x10\","
					  "api=\"cudaMallocAsync\",vendor=\"nvidia\",kind=\"async\",gpu=\"unknown\"} 30"), 1);
	assert_int_equal(count_line(text, "gpumem_site_memory_bytes{" P100 ",site=\"[no stack]\","
					  "api=\"cudaMalloc\",vendor=\"nvidia\",kind=\"device\",gpu=\"unknown\"} 0"), 1);
	assert_int_equal(count_line(text, "gpumem_site_memory_bytes{" P100 ",site=\"small\","
					  "api=\"unknown\",vendor=\"unknown\",kind=\"device\",gpu=\"unknown\"} 3"), 1);
	assert_int_equal(count_prefix(text, site), 5);
	assert_int_equal(count_line(text, "gpumem_site_host_pinned_memory_bytes{" P100 ",site=\"pin_buffer<-main\","
					  "api=\"cudaMallocHost\",vendor=\"nvidia\"} 4096"), 1);
	assert_int_equal(count_line(text, "gpumem_site_memory_bytes{" P300 ",site=\"small\","
					  "api=\"cudaMalloc\",vendor=\"nvidia\",kind=\"device\",gpu=\"unknown\"} 50"), 1);
	free(text);
}

static void test_site_series_keep_the_largest_sites_up_to_the_bound(void **state)
{
	struct fake *f = *state;
	struct prom_opts o = { .site_series = 2 };
	char *text = render(&f->snap, &o);

	assert_int_equal(count_prefix(text, "gpumem_site_memory_bytes{" P100), 2);
	assert_int_equal(count_prefix(text, "gpumem_site_memory_bytes{" P100 ",site=\"leaf<-mid<-top\""), 1);
	assert_int_equal(count_prefix(text, "gpumem_site_memory_bytes{" P100 ",site=\"alloc_managed<-main\""), 1);
	free(text);
	o.site_series = 0;
	text = render(&f->snap, &o);
	check_exposition(text);
	assert_int_equal(count_prefix(text, "gpumem_site_"), 0);
	assert_int_equal(count_line(text, "# TYPE gpumem_site_memory_bytes gauge"), 1);
	free(text);
}

static void test_containers_and_pods_sum_their_processes(void **state)
{
	struct fake *f = *state;
	char *text = render(&f->snap, NULL);
	const char *c = "container=\"" CID "\",pod=\"" PUID "\",namespace=\"ns\\\"1\",pod_name=\"pod" R
			"(\\n\",container_name=\"train" R "\"";
	const char *pod = "pod=\"" PUID "\",namespace=\"ns\\\"1\",pod_name=\"pod" R "(\\n\"";
	char line[1024];

	snprintf(line, sizeof(line), "gpumem_container_memory_bytes{%s,kind=\"device\"} 1050", c);
	assert_int_equal(count_line(text, line), 1);
	snprintf(line, sizeof(line), "gpumem_container_host_pinned_memory_bytes{%s} 4096", c);
	assert_int_equal(count_line(text, line), 1);
	snprintf(line, sizeof(line), "gpumem_container_processes{%s} 2", c);
	assert_int_equal(count_line(text, line), 1);
	snprintf(line, sizeof(line), "gpumem_pod_memory_bytes{%s,kind=\"managed\"} 200", pod);
	assert_int_equal(count_line(text, line), 1);
	snprintf(line, sizeof(line), "gpumem_pod_processes{%s} 2", pod);
	assert_int_equal(count_line(text, line), 1);
	assert_int_equal(count_prefix(text, "gpumem_container_processes{"), 1);
	free(text);
}

static void test_containers_and_sites_have_their_bytes_per_gpu(void **state)
{
	struct fake *f = *state;
	const char *c = "container=\"" CID "\",pod=\"" PUID "\",namespace=\"ns\\\"1\",pod_name=\"pod" R
			"(\\n\",container_name=\"train" R "\"";
	char *text, line[1024];

	f->proc[0].visible.known = f->proc[2].visible.known = true;
	gpu_list_parse("1,0", 3, false, &f->proc[2].visible.cuda);	/* its GPU 1 is host 0 */
	f->proc[0].st.gpu_bytes[0] = 1000;
	f->proc[0].st.gpu_bytes[1] = 230;
	f->proc[2].st.gpu_bytes[1] = 50;
	f->proc[2].st.gpu_bytes[GM_MAX_GPUS] = 7;	/* a device not known */
	f->site300.gpu = 2;				/* its GPU 1 */
	text = render(&f->snap, NULL);
	check_exposition(text);
	/* Summed by host device, each process's ordinals mapped first. */
	snprintf(line, sizeof(line), "gpumem_container_gpu_memory_bytes{%s,vendor=\"nvidia\",gpu=\"0\"} 1050", c);
	assert_int_equal(count_line(text, line), 1);
	snprintf(line, sizeof(line), "gpumem_container_gpu_memory_bytes{%s,vendor=\"nvidia\",gpu=\"1\"} 230", c);
	assert_int_equal(count_line(text, line), 1);
	snprintf(line, sizeof(line), "gpumem_container_gpu_memory_bytes{%s,vendor=\"\",gpu=\"unknown\"} 7", c);
	assert_int_equal(count_line(text, line), 1);
	assert_int_equal(count_prefix(text, "gpumem_container_gpu_memory_bytes{"), 3);
	assert_int_equal(count_prefix(text, "gpumem_pod_gpu_memory_bytes{"), 3);
	assert_int_equal(count_line(text, "gpumem_site_memory_bytes{" P300 ",site=\"small\","
					  "api=\"cudaMalloc\",vendor=\"nvidia\",kind=\"device\",gpu=\"1\"} 50"), 1);
	free(text);
}

static void test_every_loss_counter_has_a_reason_and_build_info_its_version(void **state)
{
	struct fake *f = *state;
	char *text = render(&f->snap, NULL);
	char line[256];

	assert_int_equal(count_line(text, "gpumem_build_info{version=\"" GPUMEM_VERSION "\"} 1"), 1);
	assert_int_equal(count_line(text, "gpumem_lost_total{reason=\"ringbuf_dropped\"} 7"), 1);
	assert_int_equal(count_line(text, "gpumem_lost_total{reason=\"ended_procs_dropped\"} 3"), 1);
	assert_int_equal(count_prefix(text, "gpumem_lost_total{"), (int)loss_count());
	for (size_t i = 0; i < loss_count(); i++) {
		snprintf(line, sizeof(line), "gpumem_lost_total{reason=\"%s\"} ", loss_name(i));
		assert_int_equal(count_prefix(text, line), 1);
	}
	assert_int_equal(count_line(text, "gpumem_tracer_events_total{event=\"holds\"} 2"), 1);
	assert_int_equal(count_line(text, "gpumem_tracer_events_total{event=\"nested_calls\"} 0"), 1);
	assert_int_equal(count_line(text, "# TYPE gpumem_lost_total counter"), 1);
	free(text);
}

/* Where NVML was asked: up 1 with empty labels, or 0 with its return code and reason. */
static void test_nvml_up_says_why_nvml_gave_no_numbers(void **state)
{
	struct fake *f = *state;
	char *text;

	text = render(&f->snap, NULL);
	assert_null(strstr(text, "gpumem_nvml_up"));	/* not asked: no series */
	free(text);
	f->snap.wants |= SNAP_DEVICES;
	f->snap.nvml.loaded = true;
	f->snap.nvml.error_valid = true;
	f->snap.nvml.error = 9;
	snprintf(f->snap.nvml.reason, sizeof(f->snap.nvml.reason),
		 "nvmlInit_v2 returned 9 (Driver \"Not\" Loaded)");
	text = render(&f->snap, NULL);
	check_exposition(text);
	assert_int_equal(count_line(text, "gpumem_nvml_up{error=\"9\",reason=\"nvmlInit_v2 "
				    "returned 9 (Driver \\\"Not\\\" Loaded)\"} 0"), 1);
	free(text);
	f->snap.devices_valid = true;
	f->snap.ndevices = 1;
	text = render(&f->snap, NULL);
	assert_int_equal(count_line(text, "gpumem_nvml_up{error=\"\",reason=\"\"} 1"), 1);
	free(text);
}

static void test_site_text_is_short_named_and_bounded(void **state)
{
	static const char *const cxx[] = { "std::vector<float>::push_back(float const&)",
					   "Net::operator()(int) const", "main" };
	char longname[300], buf[PROM_SITE_LEN];
	struct snap_stack *st;

	(void)state;
	st = named_stack(3, cxx);
	prom_site_text(st, buf, sizeof(buf));
	assert_string_equal(buf, "std::vector<float>::push_back<-Net::operator()<-main");
	free(st);
	/* 299 bytes of two-byte characters: each frame cut at 64 bytes, between characters. */
	for (size_t i = 0; i + 2 < sizeof(longname); i += 2)
		memcpy(longname + i, "\xc3\xa9", 2);
	longname[sizeof(longname) - 2] = 'x';
	longname[sizeof(longname) - 1] = '\0';
	st = named_stack(3, (const char *const[]){ longname, longname, longname });
	prom_site_text(st, buf, sizeof(buf));
	assert_int_equal(strlen(buf), 3 * PROM_SITE_FRAME_LEN + 4);
	assert_memory_equal(buf + PROM_SITE_FRAME_LEN, "<-\xc3\xa9", 4);
	free(st);
	prom_site_text(NULL, buf, sizeof(buf));
	assert_string_equal(buf, "[no stack]");
}

#define UUID0 "GPU-8f6b0000-aaaa-bbbb-cccc-000000000000"
#define UUID1 "GPU-8f6b1111-aaaa-bbbb-cccc-111111111111"

/* Two NVML devices; process 100 started with CUDA_VISIBLE_DEVICES=1,0 holds 1000 bytes on its
 * ordinal 0 (host GPU 1) and 230 on its 1 (host 0); 300, whose environment was not read, 50
 * on its ordinal 0 (host not known). */
static void fake_gpus(struct fake *f)
{
	static const char *const uuids[] = { UUID0, UUID1 };
	struct snap_proc *p = &f->proc[0];

	f->snap.wants |= SNAP_DEVICES;
	f->snap.devices_valid = true;
	f->snap.ndevices = 2;
	for (unsigned int i = 0; i < 2; i++) {
		struct nvml_device *d = &f->snap.devices[i];

		memset(d, 0, sizeof(*d));
		d->index = i;
		snprintf(d->name, sizeof(d->name), "NVIDIA H200");
		snprintf(d->uuid, sizeof(d->uuid), "%s", uuids[i]);
		d->total = 150000000000ull;
		d->used = 1000 * (i + 1);
		d->minor = i ? -1 : 0;	/* NVML did not say device 1's */
	}
	snprintf(f->snap.devices[0].pci_bus_id, NVML_BUS_ID_LEN, "00000000:17:00.0");
	p->visible.known = true;
	gpu_list_parse("1,0", 3, false, &p->visible.cuda);
	p->st.gpu_bytes[0] = 1000;
	p->st.gpu_bytes[1] = 230;
	f->proc[2].st.gpu_bytes[0] = 50;
	f->proc[1].st.gpu_bytes[0] = 7;		/* ended: in no sum */
}

static void test_gpu_series_name_the_host_device_of_each_ordinal(void **state)
{
	struct fake *f = *state;
	char *text;

	fake_gpus(f);
	text = render(&f->snap, NULL);
	check_exposition(text);
	assert_int_equal(count_line(text, "gpumem_process_gpu_memory_bytes{" P100 ",gpu=\"0\","
				    "host_gpu=\"1\",uuid=\"" UUID1 "\",name=\"NVIDIA H200\",vendor=\"nvidia\"} 1000"), 1);
	assert_int_equal(count_line(text, "gpumem_process_gpu_memory_bytes{" P100 ",gpu=\"1\","
				    "host_gpu=\"0\",uuid=\"" UUID0 "\",name=\"NVIDIA H200\",vendor=\"nvidia\"} 230"), 1);
	assert_int_equal(count_line(text, "gpumem_process_gpu_memory_bytes{" P300 ",gpu=\"0\","
				    "host_gpu=\"\",uuid=\"\",name=\"\",vendor=\"nvidia\"} 50"), 1);
	/* Who holds each host GPU: the sums over live processes, the unknown apart. */
	assert_int_equal(count_line(text, "gpumem_gpu_traced_bytes{vendor=\"nvidia\",gpu=\"0\",uuid=\"" UUID0
				    "\",name=\"NVIDIA H200\"} 230"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_traced_bytes{vendor=\"nvidia\",gpu=\"1\",uuid=\"" UUID1
				    "\",name=\"NVIDIA H200\"} 1000"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_traced_bytes{vendor=\"\",gpu=\"\",uuid=\"\","
				    "name=\"\"} 50"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_info{vendor=\"nvidia\",gpu=\"0\",uuid=\"" UUID0 "\","
				    "name=\"NVIDIA H200\",pci_bus_id=\"00000000:17:00.0\","
				    "minor=\"0\"} 1"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_info{vendor=\"nvidia\",gpu=\"1\",uuid=\"" UUID1 "\","
				    "name=\"NVIDIA H200\",pci_bus_id=\"\",minor=\"\"} 1"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_memory_used_bytes{vendor=\"nvidia\",gpu=\"1\",uuid=\"" UUID1
				    "\",name=\"NVIDIA H200\"} 2000"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_memory_total_bytes{vendor=\"nvidia\",gpu=\"0\",uuid=\""
				    UUID0 "\",name=\"NVIDIA H200\"} 150000000000"), 1);
	free(text);
	/* Without NVML the integer list still names host GPUs, without uuid or name. */
	f->snap.devices_valid = false;
	f->snap.ndevices = 0;
	text = render(&f->snap, NULL);
	check_exposition(text);
	assert_int_equal(count_line(text, "gpumem_process_gpu_memory_bytes{" P100 ",gpu=\"0\","
				    "host_gpu=\"1\",uuid=\"\",name=\"\",vendor=\"nvidia\"} 1000"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_traced_bytes{vendor=\"nvidia\",gpu=\"1\",uuid=\"\","
				    "name=\"\"} 1000"), 1);
	assert_null(strstr(text, "gpumem_gpu_info{"));
	free(text);
}

/* AMD's GPUs beside NVIDIA's: the same families, told apart by vendor; KFD's count of each
 * AMD program's VRAM; and why there are none. */
static void test_amd_devices_share_the_device_families_by_vendor(void **state)
{
	struct fake *f = *state;
	struct amd_device *d = &f->snap.amd_devices[0];
	char *text;

	fake_gpus(f);
	f->snap.wants |= SNAP_DEVICES;
	snprintf(f->snap.amd.reason, sizeof(f->snap.amd.reason), "KFD lists no GPU");
	text = render(&f->snap, NULL);
	assert_int_equal(count_line(text, "gpumem_amdgpu_up{reason=\"KFD lists no GPU\"} 0"), 1);
	assert_null(strstr(text, "gpumem_process_kfd_vram_bytes"));
	free(text);
	f->snap.amd.present = true;
	f->snap.amd.reason[0] = 0;
	f->snap.namd_devices = 1;
	*d = (struct amd_device){ .index = 0, .gpu_id = 43690, .total = 64ull << 30,
				  .used = 5ull << 30, .render_minor = 128 };
	snprintf(d->name, sizeof(d->name), "gfx90a");
	snprintf(d->pci_bus_id, sizeof(d->pci_bus_id), "0000:c1:00.0");
	f->proc[0].kfd_vram = 9000;
	f->proc[0].valid |= SP_KFD_VRAM;
	text = render(&f->snap, NULL);
	check_exposition(text);
	assert_int_equal(count_line(text, "gpumem_amdgpu_up{reason=\"\"} 1"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_info{vendor=\"amd\",gpu=\"0\",uuid=\"\","
				    "name=\"gfx90a\",pci_bus_id=\"0000:c1:00.0\",minor=\"128\"} 1"),
			 1);
	assert_int_equal(count_line(text, "gpumem_gpu_memory_total_bytes{vendor=\"amd\",gpu=\"0\","
				    "uuid=\"\",name=\"gfx90a\"} 68719476736"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_memory_used_bytes{vendor=\"nvidia\",gpu=\"1\","
				    "uuid=\"" UUID1 "\",name=\"NVIDIA H200\"} 2000"), 1);
	assert_int_equal(count_line(text, "gpumem_process_kfd_vram_bytes{" P100 "} 9000"), 1);
	free(text);
	/* A HIP program beside the CUDA one: its ordinal 0 is KFD's GPU 1 through
	 * ROCR_VISIBLE_DEVICES, never NVML's GPU 0 or 1. */
	f->snap.namd_devices = 2;
	f->snap.amd_devices[1] = *d;
	f->snap.amd_devices[1].index = 1;
	f->snap.amd_devices[1].gpu_id = 43691;
	set_site(&f->site300, "hipMalloc", GM_KIND_DEVICE, f->stacks[5], 50);
	f->proc[2].visible.known = true;
	gpu_list_parse("1", 1, false, &f->proc[2].visible.rocr);
	text = render(&f->snap, NULL);
	check_exposition(text);
	assert_int_equal(count_line(text, "gpumem_process_gpu_memory_bytes{" P300 ",gpu=\"0\","
				    "host_gpu=\"1\",uuid=\"\",name=\"gfx90a\",vendor=\"amd\"} 50"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_traced_bytes{vendor=\"amd\",gpu=\"1\","
				    "uuid=\"\",name=\"gfx90a\"} 50"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_traced_bytes{vendor=\"amd\",gpu=\"0\","
				    "uuid=\"\",name=\"gfx90a\"} 0"), 1);
	assert_int_equal(count_line(text, "gpumem_gpu_traced_bytes{vendor=\"nvidia\",gpu=\"0\","
				    "uuid=\"" UUID0 "\",name=\"NVIDIA H200\"} 230"), 1);
	free(text);
}

/* promtool's own parser and linter on the text; skipped where promtool is not installed. */
static void test_promtool_check_metrics_accepts_the_exposition(void **state)
{
	struct fake *f = *state;
	char path[] = "/tmp/gpumem-prom-XXXXXX", cmd[256], out[4096];
	char *text;
	size_t n;
	FILE *p;
	int fd;

	fake_gpus(f);	/* the device families too */
	text = render(&f->snap, NULL);

	if (system("command -v promtool >/dev/null 2>&1")) {
		fprintf(stderr, "skipped: promtool is not installed (Debian package prometheus)\n");
		free(text);
		skip();
	}
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	if (n)
		fprintf(stderr, "promtool: %s", out);
	assert_int_equal(pclose(p), 0);
	assert_int_equal(n, 0);
	unlink(path);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_label_values_escape_quotes_backslashes_newlines_and_bad_utf8),
		cmocka_unit_test(test_help_keeps_quotes_and_escapes_backslash_and_newline),
		cmocka_unit_test(test_site_text_is_short_named_and_bounded),
#define FAKE(t) cmocka_unit_test_setup_teardown(t, fake_setup, fake_teardown)
		FAKE(test_exposition_has_one_help_and_type_per_family_and_no_repeated_series),
		FAKE(test_ended_and_unaccounted_processes_write_no_series),
		FAKE(test_process_series_carry_exact_numbers_and_escaped_labels),
		FAKE(test_sites_with_the_same_short_stack_are_one_series),
		FAKE(test_site_series_keep_the_largest_sites_up_to_the_bound),
		FAKE(test_containers_and_pods_sum_their_processes),
		FAKE(test_containers_and_sites_have_their_bytes_per_gpu),
		FAKE(test_every_loss_counter_has_a_reason_and_build_info_its_version),
		FAKE(test_promtool_check_metrics_accepts_the_exposition),
		FAKE(test_nvml_up_says_why_nvml_gave_no_numbers),
		FAKE(test_gpu_series_name_the_host_device_of_each_ordinal),
		FAKE(test_amd_devices_share_the_device_families_by_vendor),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
