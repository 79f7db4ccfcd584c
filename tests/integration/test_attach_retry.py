"""A library whose attach failed is not taken as examined (issue 9 D1): with --no-hold, the next
process that maps it has it attached, and its calls are counted.

The failure is made by the kernel, every time: a uprobe already registered at the same file
offset with another reference-counter offset (a perf uprobe event this test holds open) makes
every other registration there fail with EINVAL. Closing the event ends the conflict."""
import ctypes
import mmap
import os
import platform
import shutil
import signal
import struct
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import MOCK_LIB_ARGS, MOCK_LIB_DIR, WORKLOAD_DL, SystemWide, Workload, \
    lines_about

SIZE = 4096
ATTACH_TIMEOUT = 10
NR_PERF_EVENT_OPEN = 298    # x86_64
UPROBE_PMU = Path("/sys/bus/event_source/devices/uprobe")

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64" or not UPROBE_PMU.exists(),
                                reason="needs x86_64 (the syscall number) and the uprobe PMU")


def file_offset_of(path, symbol):
    """The file offset of a dynamic symbol's code (what a uprobe is placed at)."""
    syms = subprocess.run(["readelf", "-sW", "--dyn-syms", str(path)], capture_output=True,
                          text=True, check=True).stdout
    vaddr = next(int(f[1], 16) for f in map(str.split, syms.splitlines())
                 if len(f) >= 8 and f[7].split("@")[0] == symbol and f[3] == "FUNC")
    phdrs = subprocess.run(["readelf", "-lW", str(path)], capture_output=True, text=True,
                           check=True).stdout
    for f in map(str.split, phdrs.splitlines()):
        if f and f[0] == "LOAD":
            offset, start, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if start <= vaddr < start + filesz:
                return vaddr - start + offset
    raise AssertionError(f"{symbol} of {path} is in no PT_LOAD segment")


@contextmanager
def conflicting_uprobe(path, offset):
    """A disabled perf uprobe at path:offset with a reference counter at file offset 0x10
    (the ELF header, which no writable mapping holds, so no process's memory is written)."""
    attr = bytearray(128)
    c_path = ctypes.create_string_buffer(os.fsencode(path))
    pmu_type = int((UPROBE_PMU / "type").read_text())
    struct.pack_into("IIQ", attr, 0, pmu_type, len(attr), 0x10 << 32)  # config: ref_ctr_offset
    struct.pack_into("Q", attr, 40, 1)                                  # flags: disabled
    struct.pack_into("QQ", attr, 56, ctypes.addressof(c_path), offset)  # config1, config2
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(NR_PERF_EVENT_OPEN, (ctypes.c_char * len(attr)).from_buffer(attr), -1, 0,
                      -1, 0)
    err = ctypes.get_errno()
    assert fd >= 0, f"perf_event_open(uprobe {path}:{offset:#x}): {os.strerror(err)}"
    try:
        yield
    finally:
        os.close(fd)


@contextmanager
def dlopened(cudart):
    """workload_dl with cudart dlopened and nothing called yet; the block's end lets it
    allocate SIZE bytes and end.

    Until its first call nothing else is opened, so the descriptor number the kernel's
    event names cannot have gone to another file (the driver the runtime opens at its first
    call) by the time gpumem looks at it."""
    with Workload("dlopenstep", cudart, SIZE, program=WORKLOAD_DL) as workload:
        workload.wait_for("waiting")
        workload.release()
        workload.wait_for("opened")
        yield workload
        workload.release()
        workload.wait_for("holding")
        assert workload.finish() == 0


def late_attaches_of(gpumem, name):
    """The pids of the processes whose mapping of file name made gpumem attach it."""
    return [int(line.split("(PID ", 1)[1].split(":", 1)[0]) for line in gpumem.stderr.lines
            if "attached a new CUDA file" in line and line.endswith(f": {name})")]


def wait_for_late_attach(gpumem, name):
    deadline = time.monotonic() + ATTACH_TIMEOUT
    while not late_attaches_of(gpumem, name) and time.monotonic() < deadline:
        time.sleep(0.05)
    return late_attaches_of(gpumem, name)


def handled_so_far(gpumem, lib_dir):
    """Returns once gpumem has handled every library event the kernel reported before the
    call. Its ring buffer is read in order, one event after another: a file mapped now (a copy
    of the mock driver, by this process) is attached after every event before it was handled,
    an attach that began then included (it may end after the process that caused it)."""
    marker = lib_dir / f"libcuda.so.1.mark-{os.getpid()}-{time.monotonic_ns()}"
    shutil.copy2(MOCK_LIB_DIR / "libcuda.so.1", marker)
    with open(marker, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ):
        assert wait_for_late_attach(gpumem, marker.name), \
            [line for line in gpumem.stderr.lines if marker.name in line]


def apis_of(report, pid):
    [proc] = [p for p in report["processes"] if p["pid"] == pid]
    return [(s["api"], s["alloc_count"], s["alloc_bytes_total"]) for s in proc["sites"]]


def test_a_library_whose_attach_failed_is_attached_when_next_mapped(tmp_path):
    # A copy of the mock runtime no gpumem has seen, under a name of its own; the driver
    # beside it is the one attached at start-up, so that the runtime is the only new file.
    (tmp_path / "lib").mkdir()
    cudart = tmp_path / "lib" / f"libcudart.so.13.d1-{os.getpid()}"
    shutil.copy2(MOCK_LIB_DIR / "libcudart.so.13", cudart)
    (tmp_path / "lib" / "libcuda.so.1").symlink_to(MOCK_LIB_DIR / "libcuda.so.1")
    offset = file_offset_of(cudart, "cudaMalloc")
    with SystemWide("-v", *MOCK_LIB_ARGS) as gpumem:
        with conflicting_uprobe(cudart, offset):
            with dlopened(cudart) as refused:
                # Not silent: said (once a minute at most) and counted.
                line = gpumem.stderr.wait_for("gpumem: a CUDA file in use (device ")
                assert f"inode {cudart.stat().st_ino}) is left without probes: attaching " \
                       "failed: Invalid argument" in line, line
            # Its later mappings' events, handled while the conflict stands: not held
            # (--no-hold), they may wait in the ring buffer past its end, and an attach that
            # began while it lived holds the file open and may register after the conflict.
            handled_so_far(gpumem, tmp_path / "lib")
        # Mapped again, nothing in the way now: attached before the process's first call.
        # Whose mapping gets it attached is the first to map it: this process, or another
        # that opens the libraries it sees (another gpumem on the host does).
        with dlopened(cudart) as mapped_again:
            assert wait_for_late_attach(gpumem, cudart.name), \
                lines_about(gpumem, mapped_again.pid)
    assert refused.pid not in late_attaches_of(gpumem, cudart.name), \
        [line for line in gpumem.stderr.lines if cudart.name in line or "not attached" in line]
    assert gpumem.report["lost"]["files_not_attached"] >= 1
    # The refused one's call was counted where the driver, attached at start-up, saw it; the
    # next one's where the runtime, attached since, did.
    assert apis_of(gpumem.report, refused.pid) == [("cuMemAlloc_v2", 1, SIZE)]
    assert apis_of(gpumem.report, mapped_again.pid) == [("cudaMalloc", 1, SIZE)]


def test_a_descriptor_reused_before_gpumem_looks_does_not_lose_the_library(tmp_path):
    """Not held (--no-hold), a process's library-open event names a descriptor the loader has
    closed by the time gpumem reads it, and another file may have it: gpumem must see that it
    is not the library (its device and inode) and find the library in the mappings."""
    (tmp_path / "lib").mkdir()
    cudart = tmp_path / "lib" / f"libcudart.so.13.fd-{os.getpid()}"
    shutil.copy2(MOCK_LIB_DIR / "libcudart.so.13", cudart)
    (tmp_path / "lib" / "libcuda.so.1").symlink_to(MOCK_LIB_DIR / "libcuda.so.1")
    with SystemWide("-v", *MOCK_LIB_ARGS) as gpumem:
        with Workload("dlopenfd", cudart, SIZE, program=WORKLOAD_DL) as w:
            w.wait_for("waiting")
            gpumem.proc.send_signal(signal.SIGSTOP)   # its event waits while the fd moves on
            try:
                w.release()
                w.wait_for("opened")
            finally:
                gpumem.proc.send_signal(signal.SIGCONT)
            assert wait_for_late_attach(gpumem, cudart.name), lines_about(gpumem, w.pid)
            w.release()
            w.wait_for("holding")
            assert w.finish() == 0
    assert apis_of(gpumem.report, w.pid) == [("cudaMalloc", 1, SIZE)]
