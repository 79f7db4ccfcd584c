// SPDX-License-Identifier: GPL-2.0
/* The trap's cost, measured on gpumem's own function, and the programs' mean run time from the
 * kernel's statistics (calibrate.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "base/util.h"
#include "host/procs.h"
#include "loader/calibrate.h"
#include "loader/uprobe_multi.h"

#define CALIBRATE_CALLS 2000
#define CALIBRATE_ROUNDS 3

/* The function the calibration probes, beginning as NVIDIA's entry points do: push %rbp, which
 * the kernel emulates (an instruction it cannot emulate, such as a lone ret, is stepped out of
 * line: ten times the cost here). */
void gm_calibration_target(void);
#if defined(__x86_64__)
__asm__(".text\n"
	".globl gm_calibration_target\n"
	".type gm_calibration_target, @function\n"
	"gm_calibration_target:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	pop %rbp\n"
	"	ret\n"
	".size gm_calibration_target, .-gm_calibration_target\n");
#else
__attribute__((noinline, used)) void gm_calibration_target(void)
{
	__asm__ volatile("" ::: "memory");
}
#endif

/* The fastest of the rounds, per call. */
static double per_call_ns(void)
{
	void (*volatile target)(void) = gm_calibration_target;
	double best = 0;

	for (int r = 0; r < CALIBRATE_ROUNDS; r++) {
		uint64_t t0 = now_ns();

		for (int i = 0; i < CALIBRATE_CALLS; i++)
			target();
		double ns = (double)(now_ns() - t0) / CALIBRATE_CALLS;

		if (!r || ns < best)
			best = ns;
	}
	return best;
}

/* The file and offset a uprobe on gpumem_calibration_target takes. */
static int target_offset(char *path, size_t len, __u64 *offset)
{
	struct module_map mm = { 0 };
	const struct mapping *m;
	uint64_t addr = (uint64_t)(uintptr_t)gm_calibration_target;
	int err = module_map_read(getpid(), &mm);

	if (err)
		return err;
	m = module_map_find(&mm, addr);
	if (m && m->path && !m->deleted) {
		snprintf(path, len, "%s", m->path);
		*offset = addr - m->start + m->pgoff;
	} else {
		err = -ENOENT;
	}
	module_map_free(&mm);
	return err;
}

/* A program's runs and their time so far, from the kernel's statistics. */
static int prog_runs(int fd, uint64_t *runs, uint64_t *ns)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
		return -ENOENT;
	*runs = info.run_cnt;
	*ns = info.run_time_ns;
	return 0;
}

int calibrate_trap(struct bpf_program *prog, struct calibration *out)
{
	char path[4096];
	__u64 offset;
	uint64_t runs0 = 0, ns0 = 0, runs1 = 0, ns1 = 0;
	double bare, probed;
	int fd, err = target_offset(path, sizeof(path), &offset);

	if (err)
		return err;
	bare = per_call_ns();
	/* This process's only: another gpumem calibrating at once takes no hit of it. */
	fd = uprobe_multi_link_pid(prog, path, offset, getpid());
	if (fd < 0)
		return fd;
	prog_runs(bpf_program__fd(prog), &runs0, &ns0);
	probed = per_call_ns();
	prog_runs(bpf_program__fd(prog), &runs1, &ns1);
	close(fd);
	*out = (struct calibration){
		.trap_ns = probed > bare ? probed - bare : 0,
		.runs = runs1 - runs0, .run_ns = ns1 - ns0,
	};
	return 0;
}

int bpf_extra_run_ns(const struct bpf_object *obj, const struct calibration *c, double *ns)
{
	struct bpf_program *prog;
	uint64_t run_ns = 0, runs = 0, prog_ns, prog_cnt;
	double mean, own;
	char on[8] = "";
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "re");

	if (f) {
		if (!fgets(on, sizeof(on), f))
			on[0] = 0;
		fclose(f);
	}
	if (on[0] != '1')
		return -ENODATA;
	bpf_object__for_each_program(prog, obj) {
		/* The probes' programs: a tracepoint's run is no hit of a traced thread. */
		if (bpf_program__type(prog) != BPF_PROG_TYPE_KPROBE ||
		    prog_runs(bpf_program__fd(prog), &prog_cnt, &prog_ns))
			continue;
		run_ns += prog_ns;
		runs += prog_cnt;
	}
	if (runs > c->runs) {	/* the calibration's own runs left out */
		runs -= c->runs;
		run_ns = run_ns > c->run_ns ? run_ns - c->run_ns : 0;
	}
	if (!runs)
		return -ENODATA;
	mean = (double)run_ns / (double)runs;
	own = c->runs ? (double)c->run_ns / (double)c->runs : 0;
	*ns = mean > own ? mean - own : 0;
	return 0;
}
