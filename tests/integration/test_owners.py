"""Who holds it: each process's memory by owning library, the innermost frame outside the CUDA
runtime and driver and outside the call glue. Four libraries built for the test under real
libraries' names (libnccl.so.2, libcublasLt.so.13, libcudnn.so.9, libnvinfer.so.10) each keep
memory of their own, the program keeps 64 KiB; the sums per library must be exact and add up
to the process's. A Python program's memory is owned by its own Python file."""
import json
import shutil
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import (BUILD, GPUMEM, MOCK_LIB_DIR, ROOT, RUN_TIMEOUT, oom_lines,
                      run_snapshot_c, skip_if_end_map_refused)

OWNERS = BUILD / "tests" / "owners"
KIB, MIB = 1 << 10, 1 << 20
# library: (family, kept allocations, size); each also makes one more and frees it
HELD = {
    "libnccl.so.2": ("NCCL", 4, 1 * MIB),
    "libcublasLt.so.13": ("cuBLAS", 3, 256 * KIB),
    "libcudnn.so.9": ("cuDNN", 2, 512 * KIB),
    "libnvinfer.so.10": ("TensorRT", 1, 8 * MIB),
}
PROGRAM_BYTES = 64 * KIB


def owners_args():
    args = [str(OWNERS / "owners")]
    for lib, (_, n, size) in HELD.items():
        args += [str(OWNERS / lib), str(n), str(size)]
    return args


def owners_proc(report):
    skip_if_end_map_refused(report)
    procs = [p for p in report["processes"] if p["comm"] == "owners"]
    assert len(procs) == 1, report["processes"]
    return procs[0]


def test_each_library_holds_exactly_what_it_allocated():
    run = run_snapshot_c(owners_args())
    assert run.returncode == 0, run.stderr
    p = owners_proc(run.report)
    libs = {l["library"]: l for l in p["libraries"]}
    assert set(libs) == set(HELD) | {"owners"}, p["libraries"]
    for name, (family, n, size) in HELD.items():
        l = libs[name]
        assert l["family"] == family, l
        assert (l["current_bytes"], l["current_allocs"]) == (n * size, n), l
        assert (l["alloc_count"], l["free_count"], l["failed_count"]) == (n + 1, 1, 0), l
        assert l["alloc_bytes_total"] == (n + 1) * size, l
        # live, read at least once (at the process's end): its peak is at least what it holds
        assert l["peak_bytes"] is not None and l["peak_bytes"] >= n * size, l
    own = libs["owners"]
    assert own["family"] == "program"
    assert (own["current_bytes"], own["alloc_count"]) == (PROGRAM_BYTES, 1), own
    assert sum(l["current_bytes"] for l in p["libraries"]) == p["current_bytes"]
    assert sum(l["alloc_count"] for l in p["libraries"]) == p["alloc_count"]
    # largest first, and every site names its owner
    held = [l["current_bytes"] for l in p["libraries"]]
    assert held == sorted(held, reverse=True)
    assert held[0] == 8 * MIB
    for s in p["sites"]:
        assert s["library"] in libs, s


def test_the_snapshot_text_says_what_each_library_holds():
    with tempfile.TemporaryDirectory(prefix="gpumem-owners-") as tmp:
        out = Path(tmp) / "report.txt"
        done = subprocess.run([GPUMEM, "snapshot", "-o", out, "-c", *owners_args()],
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert done.returncode == 0, done.stderr
        text = out.read_text()
    line = next(l for l in text.splitlines() if "by library:" in l)
    assert line.split("by library: ")[1] == (
        "libnvinfer.so.10 (TensorRT) 8.0 MiB, libnccl.so.2 (NCCL) 4.0 MiB, "
        "libcudnn.so.9 (cuDNN) 1.0 MiB, libcublasLt.so.13 (cuBLAS) 768 KiB, "
        "owners (program) 64.0 KiB"), text


def test_top_groups_by_library():
    with tempfile.TemporaryDirectory(prefix="gpumem-owners-") as tmp:
        out = Path(tmp) / "out"
        proc = subprocess.Popen([GPUMEM, "top", "-b", "-i", "0.5", "--group", "library",
                                 "--bytes", "-o", out, "-c", owners_args()[0], "--wait",
                                 *owners_args()[1:]],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=dict(os.environ, COLUMNS="80"))
        try:
            # "held": every library has allocated; two tables later, the workload ends, and
            # top with it
            assert proc.stdout.readline().strip() == b"held"
            time.sleep(1.5)
            proc.stdin.close()
            proc.wait(30)
        finally:
            proc.kill() if proc.poll() is None else None
        text = out.read_text()
    tables = [t.splitlines() for t in text.split("\n\n") if t.startswith("gpumem top")]
    assert tables and all(t[1].split() == ["PID", "CURRENT", "PEAK", "LIVE", "FAIL", "LIBRARY"]
                          for t in tables), text
    # a row per library, named with its family (" <ended>" once the workload has ended)
    def rows(t):
        return {" ".join(l.split()[5:]).removesuffix(" <ended>"): l.split() for l in t[2:]
                if l.strip()}
    full = [rows(t) for t in tables if len(rows(t)) == len(HELD) + 1]
    assert full, text
    for name, (family, n, size) in HELD.items():
        row = full[-1][f"{name} ({family})"]
        assert (int(row[1]), int(row[3])) == (n * size, n), row
    assert int(full[-1]["owners (program)"][1]) == PROGRAM_BYTES


def test_a_python_programs_memory_is_owned_by_its_own_file():
    """pyalloc.py calls the runtime through ctypes: libffi, _ctypes and the interpreter are
    glue, so the owner is the innermost Python frame's file."""
    script = ROOT / "tests" / "workloads" / "pyalloc.py"
    with tempfile.TemporaryDirectory(prefix="gpumem-owners-") as tmp:
        run = run_snapshot_c(["/usr/bin/python3", script, MOCK_LIB_DIR / "libcudart.so.13",
                              "shapes", Path(tmp) / "stacks.json"])
    assert run.returncode == 0, run.stderr
    procs = [p for p in run.report["processes"] if p["comm"].startswith("python")]
    assert len(procs) == 1
    libs = procs[0]["libraries"]
    assert [(l["library"], l["family"]) for l in libs] == [(str(script), "program")], libs
    assert libs[0]["alloc_bytes_total"] == procs[0]["alloc_bytes_total"]


def test_pprof_samples_carry_the_library_and_its_family(tmp_path):
    from test_export import pprof_total, pprof_traces
    out = tmp_path / "owners.pb.gz"
    done = subprocess.run([GPUMEM, "export", "--format", "pprof", "-o", out, "-c", *owners_args()],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr
    for name, (family, n, size) in HELD.items():
        assert pprof_total(out, f"-tagfocus=family={family}", "-unit=B") == f"{n * size}B"
    samples = pprof_traces(out, "-sample_index=inuse_space")
    libs = {s["labels"]["library"] for s in samples}
    assert libs == set(HELD) | {"owners"}, samples


def test_a_recording_reports_the_same_libraries_without_peaks(tmp_path):
    db = tmp_path / "owners.db"
    done = subprocess.run([GPUMEM, "record", "-o", db, "-c", *owners_args()],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr
    rep = subprocess.run([GPUMEM, "report", db, "snapshot", "--json"], capture_output=True,
                         text=True, timeout=RUN_TIMEOUT)
    assert rep.returncode == 0, rep.stderr
    p = owners_proc(json.loads(rep.stdout))
    libs = {l["library"]: l for l in p["libraries"]}
    for name, (family, n, size) in HELD.items():
        assert (libs[name]["family"], libs[name]["current_bytes"]) == (family, n * size)
        assert libs[name]["peak_bytes"] is None     # a recording keeps no library's peak
    assert sum(l["current_bytes"] for l in p["libraries"]) == p["current_bytes"]


def test_vmm_mappings_and_reservations_are_no_librarys_memory():
    """cuMemCreate's 2 MiB is counted once: its mapping (2 MiB) and the 8 MiB of address space
    reserved are no memory of the process's own, in no library's sum."""
    run = run_snapshot_c([BUILD / "tests" / "apis", "vmm"])
    assert run.returncode == 0, run.stderr
    p = next(p for p in run.report["processes"] if p["comm"] == "apis")
    assert p["vmm_mapped_bytes"] == 2 * MIB and p["vmm_reserved_bytes"] == 8 * MIB
    total = sum(l["current_bytes"] for l in p["libraries"])
    assert total == p["current_bytes"] + p["by_kind"]["host"] == 2 * MIB, p["libraries"]


def test_a_failure_says_what_each_library_held_then_live_and_from_a_recording(tmp_path):
    """NCCL keeps 4 MiB of a 6 MiB mock device; TensorRT's 8 MiB then fails. The failure
    record names what each library held at that instant, live and from the recording."""
    args = [str(OWNERS / "owners"), str(OWNERS / "libnccl.so.2"), "4", str(MIB),
            str(OWNERS / "libnvinfer.so.10"), "1", str(8 * MIB)]
    env = dict(os.environ, GPUMEM_MOCK_DEVICE_BYTES=str(6 * MIB))
    out, db = tmp_path / "oom.json", tmp_path / "oom.db"
    live = subprocess.run([GPUMEM, "oom", "--json", "-o", out, "-c", *args], env=env,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert live.returncode == 1 and "owner_hold: 2" in live.stderr, live.stderr
    rec = subprocess.run([GPUMEM, "record", "-o", db, "-c", *args], env=env,
                         capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert rec.returncode == 1, rec.stderr
    report = subprocess.run([GPUMEM, "report", db, "oom", "--json"], capture_output=True,
                            text=True, timeout=RUN_TIMEOUT)
    assert report.returncode == 0, report.stderr
    for text in (out.read_text(), report.stdout):
        records, lost = oom_lines(text)
        skip_if_end_map_refused(lost)   # the frames in libnccl would show addresses
        mine = [r for r in records if r["comm"] == "owners"]
        assert len(mine) == 1, records
        assert mine[0]["size"] == 8 * MIB and mine[0]["error_name"] == "cudaErrorMemoryAllocation"
        held = [(l["library"], l["family"], l["current_bytes"]) for l in mine[0]["libraries"]
                if l["current_bytes"]]
        assert held == [("libnccl.so.2", "NCCL", 4 * MIB)], mine[0]["libraries"]


def test_libraries_loaded_after_the_first_call_are_named_while_the_process_lives():
    """NCCL's file is opened after cuDNN's first allocation (as PyTorch opens cuBLAS and cuDNN
    at their first use): snapshot reads the maps a second while CMD runs, so its frames are
    named from the file, not known only by name from the map at the process's exit."""
    args = [str(OWNERS / "owners"), "--wait", str(OWNERS / "libcudnn.so.9"), "2", str(MIB),
            str(OWNERS / "libnccl.so.2"), "4", str(MIB)]
    with tempfile.TemporaryDirectory(prefix="gpumem-owners-") as tmp:
        out = Path(tmp) / "s.json"
        proc = subprocess.Popen([GPUMEM, "snapshot", "--json", "-o", out, "-c", *args],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            assert proc.stdout.readline().strip() == b"held"
            time.sleep(2.5)     # past a read of the maps
            proc.stdin.write(b"\n")
            proc.stdin.close()
            assert proc.wait(RUN_TIMEOUT) == 0
        finally:
            proc.kill() if proc.poll() is None else None
        report = json.loads(out.read_text())
    p = owners_proc(report)
    held = [s for s in p["sites"] if s["current_bytes"] and s["library"] != "owners"]
    assert {s["library"] for s in held} == {"libcudnn.so.9", "libnccl.so.2"}, p["sites"]
    for s in held:
        assert s["frames"][0]["symbol"] == "owner_hold", s["frames"][0]
        assert s["frames"][0]["file"].endswith("owner_lib.c"), s["frames"][0]


def nofp_runs(lib, runs, *flags):
    """The site of TensorRT's 2 MiB in each of runs runs of owners over NCCL's file then lib
    (the library built without frame pointers, as real libraries are), with the report's
    losses. With --unlink (which removes each file it opens), both are copies beside lib."""
    nccl = lib.parent / "libnccl.so.2" if flags else OWNERS / "libnccl.so.2"
    args = [str(OWNERS / "owners"), *flags, str(nccl), "1", str(MIB), str(lib), "1",
            str(2 * MIB)]
    for _ in range(runs):
        if flags:
            shutil.copy(OWNERS / "libnccl.so.2", nccl)
            shutil.copy(OWNERS / "nofp" / "libnvinfer.so.10", lib)
        run = run_snapshot_c(args)
        assert run.returncode == 0, run.stderr
        skip_if_end_map_refused(run.report)
        p = owners_proc(run.report)
        sites = [s for s in p["sites"] if s["current_bytes"] == 2 * MIB]
        assert len(sites) == 1, p["sites"]
        yield sites[0], run.report["lost"]


def skip_on_overlay(path):
    """Skips where path's file is on an overlay (a build tree in a container): the kernel maps
    such a file as its layer's, which the exit map names by its name alone."""
    kind = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True,
                          text=True, timeout=60).stdout.strip()
    if kind == "overlayfs":
        pytest.skip(f"{path} is on an overlay: the exit map names its files by name alone")


def in_mount_namespace(script, setup):
    """`gpumem snapshot -c` of sh -c script in a mount namespace of its own, where setup (a
    mount) is done first; skipped where that mount cannot be made here."""
    probe = subprocess.run(["/usr/bin/unshare", "-m", "/bin/sh", "-c", setup],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode:
        pytest.skip(f"cannot mount in a namespace of its own here: {probe.stderr.strip()}")
    run = run_snapshot_c(["/usr/bin/unshare", "-m", "/bin/sh", "-c", f"{setup} && {script}"])
    assert run.returncode == 0, run.stderr
    skip_if_end_map_refused(run.report)
    return run


def unwound_in(site, lib, lost):
    """Whether site's stack was unwound in lib with its CFI: owner_hold, called from main."""
    frames = site["frames"]
    if frames[0]["module"] != str(lib) or frames[0]["symbol"] is None:
        return False
    assert frames[0]["symbol"] == "owner_hold", frames
    assert frames[1]["symbol"] == "main", frames
    assert site["library"] == "libnvinfer.so.10", site
    assert lost["stacks_not_unwound"] == 0, lost
    return True


def test_a_library_loaded_last_without_frame_pointers_is_unwound_as_its_process_ends():
    """TensorRT's file is opened after NCCL's first allocation, allocates, and the process ends
    at once. gpumem most often handles the stack copy once the process has begun to end, when
    its maps can no longer be read whole, or has ended: the copy waits for the kernel's map of
    the process's exit, whose walk of each file's dentries names TensorRT's file by its path,
    and is unwound with the file's CFI, every time. Several runs: the timing differs from run
    to run."""
    lib = OWNERS / "nofp" / "libnvinfer.so.10"
    skip_on_overlay(lib)
    for site, lost in nofp_runs(lib, 5):
        assert unwound_in(site, lib, lost), site["frames"]


def test_a_library_removed_before_its_process_ends_is_unwound_or_counted(tmp_path):
    """The same, the library's file removed once it is loaded: handled while the process has
    it, its stack is unwound (the file opened through the process); handled after, the path of
    the exit map names no file, and its frames keep their addresses, counted, never silent."""
    lib = tmp_path / "libnvinfer.so.10"
    for site, lost in nofp_runs(lib, 5, "--unlink"):
        if not unwound_in(site, lib, lost):
            assert site["frames"][0]["module"] == str(lib), site["frames"]
            assert site["frames"][0]["symbol"] is None, site["frames"]
            assert lost["stacks_not_unwound"] >= 1, lost
            assert lost["modules_unread"] >= 1, lost


def test_frames_in_a_removed_library_are_named_or_counted(tmp_path):
    """A library with frame pointers (its stack walked in the kernel, nothing to unwind),
    loaded second and removed once loaded, the process ending at once: its frames are named
    where gpumem opened the file while the process had it, else they show the file and offset,
    counted in modules_unread, never silent."""
    first, lib = tmp_path / "libnccl.so.2", tmp_path / "libcublasLt.so.13"
    args = [str(OWNERS / "owners"), "--unlink", str(first), "1", str(MIB), str(lib), "1",
            str(2 * MIB)]
    for _ in range(5):
        shutil.copy(OWNERS / "libnccl.so.2", first)
        shutil.copy(OWNERS / "libcublasLt.so.13", lib)
        run = run_snapshot_c(args)
        assert run.returncode == 0, run.stderr
        skip_if_end_map_refused(run.report)
        [site] = [s for s in owners_proc(run.report)["sites"] if s["current_bytes"] == 2 * MIB]
        top = site["frames"][0]
        assert top["module"] == str(lib), site["frames"]
        if top["symbol"] is None:
            assert run.report["lost"]["modules_unread"] >= 1, run.report["lost"]
        else:
            assert top["symbol"] == "owner_hold", site["frames"]


def test_a_path_in_another_mount_namespace_never_opens_the_hosts_file_there(tmp_path):
    """The same program in a mount namespace of its own, TensorRT's file on a tmpfs mounted
    there over a directory where the host has another file of the same name (a decoy: the mock
    PyTorch allocator, whose c10_mock_alloc lies where TensorRT's owner_hold does). The exit
    map's walk names the file by its path in the process's namespace, which on the host is the
    decoy's: gpumem opens a file at that path only if it is the one mapped (device and inode),
    so the stack is unwound with TensorRT's own CFI (read while the process had it), or is its
    frame-pointer stack, short and counted, its frame named from TensorRT's file if that was
    read in time, else by its address; it is never named from the decoy."""
    skip_on_overlay(tmp_path)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    decoy = shadow / "libnvinfer.so.10"
    shutil.copy(MOCK_LIB_DIR / "libc10_cuda.so", decoy)
    nofp = OWNERS / "nofp" / "libnvinfer.so.10"
    script = (f"cp {nofp} {shadow}/ && "
              f"exec {OWNERS / 'owners'} {OWNERS / 'libnccl.so.2'} 1 {MIB} {decoy} 1 {2 * MIB}")
    for _ in range(3):
        run = in_mount_namespace(script, f"mount -t tmpfs none {shadow}")
        p = owners_proc(run.report)
        sites = [s for s in p["sites"] if s["current_bytes"] == 2 * MIB]
        assert len(sites) == 1, p["sites"]
        frames, lost = sites[0]["frames"], run.report["lost"]
        assert frames[0]["module"].endswith(str(decoy)), frames
        assert frames[0]["symbol"] in (None, "owner_hold"), frames  # never the decoy's
        if [f["symbol"] for f in frames[:2]] == ["owner_hold", "main"]:
            assert lost["stacks_not_unwound"] == 0, lost
        else:
            assert lost["stacks_not_unwound"] >= 1, lost


def test_an_overlays_file_is_named_as_the_process_sees_it_or_by_its_name(tmp_path):
    """TensorRT's file in an overlay's lower layer, loaded through the overlay (as a
    container's image is): the kernel maps it as the layer's file, on a mount of the kernel's
    own, whose path from its root ("/libnvinfer.so.10") no process sees. The exit map gives its
    name alone; a read of /proc, the path through the overlay: never the layer's."""
    for d in ("lower", "upper", "work", "merged"):
        (tmp_path / d).mkdir()
    shutil.copy(OWNERS / "nofp" / "libnvinfer.so.10", tmp_path / "lower")
    lib = tmp_path / "merged" / "libnvinfer.so.10"
    setup = (f"mount -t overlay overlay -o lowerdir={tmp_path}/lower,upperdir={tmp_path}/upper,"
             f"workdir={tmp_path}/work {tmp_path}/merged")
    script = f"exec {OWNERS / 'owners'} {OWNERS / 'libnccl.so.2'} 1 {MIB} {lib} 1 {2 * MIB}"
    for _ in range(3):
        run = in_mount_namespace(script, setup)
        p = owners_proc(run.report)
        sites = [s for s in p["sites"] if s["current_bytes"] == 2 * MIB]
        assert len(sites) == 1, p["sites"]
        assert sites[0]["frames"][0]["module"] in (str(lib), "libnvinfer.so.10"), sites[0]
        assert sites[0]["library"] == "libnvinfer.so.10", sites[0]

