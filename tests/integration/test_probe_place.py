"""Probes placed past a flag-setting entry instruction (discover/probe_place.c), on mock
drivers shaped like NVIDIA's (tests/mock/cuda_stubs.S): where each probe sits (the links'
fdinfo and -v), and that accounting stays exact on every shape, moved or kept at the symbol:
nesting under the mock runtime, every driver kind with its frees, failures (the mock's, and the
stubs' own return of 4 on the je path), many threads, and the process's end; and NVIDIA's own
driver, where it has been unpacked under build/."""
import os
import platform
import subprocess

import pytest

from conftest import (BUILD, MOCK_LIB_DIR, REAL_LIBCUDA, WORKLOAD, SystemWide,
                      assert_nothing_lost, find_proc, nvidia_unavailable_reason, run_snapshot_c,
                      site_by_symbol)
from test_accounting import NESTED_COUNTS, counts

TESTS = BUILD / "tests"
STUBBED = ("cuMemAlloc_v2", "cuMemAllocPitch_v2", "cuMemAllocManaged", "cuMemAllocHost_v2",
           "cuMemHostAlloc", "cuMemAllocAsync", "cuMemAllocAsync_ptsz",
           "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", "cuMemFree_v2",
           "cuMemFreeHost", "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuMemCreate",
           "cuMemRelease")
# Each driver's folder, and how far past each stubbed symbol its probes go (0: at the symbol).
SHAPES = {
    "push-rbp": (MOCK_LIB_DIR, 0, None),      # the C mock: push %rbp first
    "stub": (TESTS / "lib-stub", 10, "after cmpl, on je"),       # NVIDIA's: cmpl $imm32; je rel8
    "stub83": (TESTS / "lib-stub83", 7, "after cmpl, on je"),    # cmpl $imm8; je rel32
    "stubmov": (TESTS / "lib-stubmov", 0, None),           # mov x(%rip),%eax first
}

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64" or not (TESTS / "lib-stub" / "libcuda.so.1").exists(),
    reason="the stub-shaped mock drivers are x86-64 only and built by `make test-progs`")


def driver_env(shape):
    return {"LD_LIBRARY_PATH": str(SHAPES[shape][0])}


def symbol_file_offsets(lib):
    """File offset of each defined dynamic function, through the PT_LOAD that maps it."""
    loads = []
    for line in subprocess.run(["readelf", "-lW", str(lib)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        part = line.split()
        if part and part[0] == "LOAD":
            loads.append((int(part[2], 16), int(part[1], 16), int(part[4], 16)))
    offsets = {}
    for line in subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                               text=True, check=True).stdout.splitlines():
        part = line.split()
        if len(part) == 3 and part[1] in "Tt":
            vaddr = int(part[0], 16)
            for start, off, size in loads:
                if start <= vaddr < start + size:
                    offsets[part[2].split("@")[0]] = vaddr - start + off
    return offsets


def probed_offsets(pid, lib):
    """The offsets of every uprobe_multi link of process pid on lib (their fdinfo)."""
    found = set()
    fd_dir = f"/proc/{pid}/fdinfo"
    for name in os.listdir(fd_dir):
        try:
            with open(os.path.join(fd_dir, name)) as f:
                text = f.read()
        except OSError:
            continue
        if f"path:\t{lib}\n" not in text:
            continue
        rows = text.split("cookie\t offset\t ref_ctr_offset\n", 1)
        for row in rows[1].splitlines() if len(rows) == 2 else ():
            found.add(int(row.split()[1], 16))
    return found


@pytest.mark.parametrize("shape", ["stub", "stub83", "stubmov", "push-rbp"])
def test_probes_sit_past_the_cmpl_on_the_stub_shapes_and_at_the_symbol_otherwise(shape):
    folder, shift, why = SHAPES[shape]
    lib = (folder / "libcuda.so.1").resolve()
    symbols = symbol_file_offsets(lib)
    with SystemWide("-v", "--lib", lib) as gpumem:
        placed = probed_offsets(gpumem.pid, lib)
    said = [line for line in gpumem.stderr.lines if ": probe at +" in line]
    for api in STUBBED:
        assert symbols[api] + shift in placed, (api, hex(symbols[api]), sorted(map(hex, placed)))
        if shift:
            assert symbols[api] not in placed, api
            assert any(line.startswith(f"gpumem: {api}: probe at +{shift} ({why})")
                       for line in said), (api, said)
    # (Where no probe moves, the links above say so for this file; -v's lines name a file by
    # its descriptor, and a host may have other CUDA libraries whose probes move.)
    # The other probed functions (the runtime's, the C mock's) all start at their symbols.
    assert placed <= {off + shift if api in STUBBED else off for api, off in symbols.items()}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_runtime_over_any_driver_shape_counts_each_nested_call_once(shape):
    report, rc = run_snapshot_c([WORKLOAD, "nested", 10, 2048], env=driver_env(shape))
    assert rc == 0
    proc = report["processes"][0]
    assert counts(proc) == NESTED_COUNTS
    assert counts(site_by_symbol(proc, "nested_alloc")) == NESTED_COUNTS
    # Each of the 10 cudaMalloc and 9 cudaFree ran the driver's stub inside it.
    assert report["tracer"]["nested_calls"] == 19
    assert report["tracer"]["stale_inflight"] == 0
    assert_nothing_lost(report)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_driver_kind_and_its_frees_exact_on_any_driver_shape(shape):
    report, rc = run_snapshot_c([WORKLOAD, "driver"], env=driver_env(shape))
    assert rc == 0
    proc = report["processes"][0]
    assert counts(proc) == {"current_bytes": 2133432, "current_allocs": 5, "alloc_count": 11,
                            "free_count": 5, "alloc_bytes_total": 6350336,
                            "failed_count": 0}
    assert proc["by_kind"] == {"device": 20480, "managed": 3100, "host": 5100,
                               "async": 12700, "vmm": 2097152}
    device = site_by_symbol(proc, "driver_device")
    assert (device["api"], device["alloc_bytes_total"], device["free_count"]) == (
        "cuMemAlloc_v2", 1100, 1)
    assert report["tracer"]["nested_calls"] == 0
    assert_nothing_lost(report)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_failure_under_the_runtime_counts_once_on_any_driver_shape(shape):
    env = dict(driver_env(shape), GPUMEM_MOCK_FAIL_AFTER="3")
    run = run_snapshot_c([WORKLOAD, "fail", 4096, 10], env=env)
    report, rc = run
    assert rc == 0
    assert "failure 3 2 cudaErrorMemoryAllocation" in run.stdout
    proc = report["processes"][0]
    assert counts(proc) == {"current_bytes": 12288, "current_allocs": 3, "alloc_count": 3,
                            "free_count": 0, "alloc_bytes_total": 12288, "failed_count": 1}
    assert [(f["api"], f["layer"], f["error"], f["size"]) for f in report["failures"]] == [
        ("cudaMalloc", "runtime", 2, 4096)]


@pytest.mark.parametrize("shape", ["stub", "stub83", "stubmov"])
def test_stub_returning_4_on_its_je_path_is_one_driver_failure(shape):
    # The stub returns CUDA_ERROR_DEINITIALIZED itself: the return probe at the moved place
    # fires on the stub's own ret, the implementation never runs.
    env = dict(driver_env(shape), GPUMEM_MOCK_DEINIT="1")
    run = run_snapshot_c([WORKLOAD, "driver"], env=env)
    report, rc = run
    assert rc == 1, run.stdout  # the workload stops at its first failed call
    assert "call cuMemAlloc_v2 1100 0x0 4" in run.stdout
    proc = report["processes"][0]
    assert counts(proc) == {"current_bytes": 0, "current_allocs": 0, "alloc_count": 0,
                            "free_count": 0, "alloc_bytes_total": 0, "failed_count": 1}
    assert [(f["api"], f["layer"], f["error"], f["error_name"], f["size"])
            for f in report["failures"]] == [
        ("cuMemAlloc_v2", "driver", 4, "CUDA_ERROR_DEINITIALIZED", 1100)]
    assert report["failures"][0]["frames"][0]["symbol"] == "driver_device"


@pytest.mark.parametrize("shape", ["stub", "stubmov"])
def test_four_threads_exact_totals_through_the_stubs(shape):
    run = run_snapshot_c([WORKLOAD, "threads", 4, 20000, 4096], env=driver_env(shape),
                         timeout=120)
    report, rc = run
    assert rc == 0
    assert "threads 4 allocs 80004 frees 80000 bytes 16384 failures 0" in run.stdout
    proc = report["processes"][0]
    assert counts(proc) == {"current_bytes": 16384, "current_allocs": 4,
                            "alloc_count": 80004, "free_count": 80000,
                            "alloc_bytes_total": 80004 * 4096, "failed_count": 0}
    assert report["tracer"]["nested_calls"] == 160004
    assert report["tracer"]["stale_inflight"] == 0
    assert_nothing_lost(report)


@pytest.mark.parametrize("shape", ["stub", "stubmov"])
def test_process_that_ends_holding_memory_keeps_its_final_numbers(shape):
    folder = SHAPES[shape][0]
    env = dict(os.environ, LD_LIBRARY_PATH=str(folder))
    with SystemWide("--lib", MOCK_LIB_DIR / "libcudart.so.13",
                    "--lib", (folder / "libcuda.so.1").resolve()) as gpumem:
        workload = subprocess.Popen([str(WORKLOAD), "leak", "5", "1024"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, err = workload.communicate(timeout=60)
        assert workload.returncode == 0, err
    proc = find_proc(gpumem.report, workload.pid)
    assert proc["alive"] is False
    assert counts(proc) == {"current_bytes": 5 * 1024, "current_allocs": 5, "alloc_count": 10,
                            "free_count": 5, "alloc_bytes_total": 10 * 1024,
                            "failed_count": 0}
    assert counts(site_by_symbol(proc, "keep_feature_map"))["current_bytes"] == 5 * 1024


def test_nvidias_driver_calls_are_exact_failures_with_probes_past_the_cmpl():
    if not (TESTS / "driver_loop").exists():
        pytest.skip(f"{TESTS / 'driver_loop'} is missing: run `make all test-progs` first")
    reason = nvidia_unavailable_reason()
    if reason:
        pytest.skip(reason)
    lib = REAL_LIBCUDA.resolve()
    run = run_snapshot_c([TESTS / "driver_loop", lib, 100], gpumem_args=("-v", "--lib", lib))
    report, rc = run
    assert rc == 0, run.stderr
    assert ", 100 calls, rc 3:" in run.stdout, run.stdout
    for api in STUBBED:
        assert f"gpumem: {api}: probe at +10 (after cmpl, on je)" in run.stderr, api
    proc = report["processes"][0]
    # 2,000 untimed calls and 100 timed ones, each CUDA_ERROR_NOT_INITIALIZED from the real
    # driver: every one a driver failure, counted once, nothing held.
    assert counts(proc) == {"current_bytes": 0, "current_allocs": 0, "alloc_count": 0,
                            "free_count": 0, "alloc_bytes_total": 0, "failed_count": 2100}
    first = report["failures"][0]
    assert (first["api"], first["layer"], first["error"], first["error_name"], first["size"]) == (
        "cuMemAlloc_v2", "driver", 3, "CUDA_ERROR_NOT_INITIALIZED", 512)
    # The return probe on the je hijacked the caller's return address: the stack is the loop's.
    assert first["frames"][0]["symbol"] == "run_calls"
    assert report["tracer"]["nested_calls"] == 0
    assert report["tracer"]["stale_inflight"] == 0


WIDE_SYMBOL = r"""
	.text
	.p2align 4
	.globl cudaMalloc
	.type cudaMalloc,@function
cudaMalloc:
	test %rdi,%rdi
	.globl helper
	.type helper,@function
helper:
	je 1f
	movq $0x1000,(%rdi)
	xor %eax,%eax
	ret
1:	mov $1,%eax
	ret
	.size helper, .-helper
	.size cudaMalloc, .-cudaMalloc
	.section .note.GNU-stack,"",@progbits
"""
WIDE_SYMBOL_CALLER = r"""
#include <stddef.h>
#include <stdio.h>
int helper(void **p, size_t n);
int main(void)
{
	void *p;
	int r = 0;

	for (int i = 0; i < 5; i++)
		r |= helper(&p, 100 + i);	/* never cudaMalloc */
	printf("r=%d\n", r);
	return r;
}
"""


def test_a_probe_never_moves_onto_another_functions_entry(tmp_path):
    """cudaMalloc's symbol covers another function that starts right after its entry `test`
    (hand-written assembly, or a hostile file): moved past the `test`, its probe would sit on
    helper's entry and count each call of helper as a cudaMalloc. It stays on its symbol."""
    lib = tmp_path / "lib" / "libcudart.so.13"
    lib.parent.mkdir()
    (tmp_path / "lib.S").write_text(WIDE_SYMBOL)
    (tmp_path / "main.c").write_text(WIDE_SYMBOL_CALLER)
    subprocess.run(["cc", "-shared", "-o", str(lib), str(tmp_path / "lib.S")], check=True)
    subprocess.run(["cc", "-o", str(tmp_path / "main"), str(tmp_path / "main.c"),
                    str(lib), f"-Wl,-rpath,{lib.parent}"], check=True)
    run = run_snapshot_c([tmp_path / "main"], gpumem_args=("--lib", lib))
    assert run.returncode == 0, run.stderr
    [main] = [p for p in run.report["processes"] if p["comm"] == "main"]
    assert main["alloc_count"] == 0, main["sites"]
