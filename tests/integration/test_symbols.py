"""Call sites a person can read: function names, file:line of every level, inlined calls,
C++ names, libraries loaded with dlopen or deleted, debug info split off and found by build-id,
and the CUDA libraries' own frames hidden unless asked for.

The expected lines come from `/* LINE:name */` markers in tests/workloads/sym/, never from
numbers written here."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import (BUILD, GPUMEM, MOCK_LIB_ARGS, MOCK_LIB_DIR, ROOT, RUN_TIMEOUT, WORKLOAD,
                      SystemWide, Workload, find_proc, run_snapshot_c)

SYM_SRC = ROOT / "tests" / "workloads" / "sym"
SYM_OUT = BUILD / "tests" / "sym"
SYM_FP = SYM_OUT / "sym_fp"
SYM_NOFP = SYM_OUT / "sym_nofp"
SYM_SPLIT = SYM_OUT / "sym_split"
SYM_SPLIT_DEBUG = BUILD / "tests" / "sym-debug" / "sym_split.debug"
SYM_DL = SYM_OUT / "sym_dl"
SYM_DL_LIB = SYM_OUT / "libsymdl.so"
SYM_CPP = SYM_OUT / "sym_cpp"



@pytest.fixture(scope="module", autouse=True)
def sym_programs():
    for path in (SYM_FP, SYM_NOFP, SYM_SPLIT, SYM_SPLIT_DEBUG, SYM_DL, SYM_DL_LIB, SYM_CPP):
        if not path.exists():
            pytest.skip(f"{path} is missing: run `make test-progs` first")


def marker_line(source, name):
    """The line of `/* LINE:name */` in a workload source."""
    lines = (SYM_SRC / source).read_text().splitlines()
    found = [i + 1 for i, text in enumerate(lines) if f"/* LINE:{name} */" in text]
    assert len(found) == 1, f"marker LINE:{name} appears {len(found)} times in {source}"
    return found[0]


def only_proc(report):
    assert len(report["processes"]) == 1, report["processes"]
    return report["processes"][0]


def site_from(proc, symbol):
    """The one site whose innermost frame is symbol."""
    found = [s for s in proc["sites"] if s["frames"] and s["frames"][0]["symbol"] == symbol]
    assert len(found) == 1, (f"{len(found)} sites from {symbol}; innermost frames: "
                             f"{[s['frames'][:1] for s in proc['sites']]}")
    return found[0]


def assert_frame(frame, symbol, source, marker, module=None, inlined=False):
    where = f"frame {frame}"
    assert frame["symbol"] == symbol, where
    assert frame["file"] is not None and frame["file"].endswith(source), where
    assert frame["line"] == marker_line(source, marker), where
    assert frame.get("inlined", False) is inlined, where
    if module is not None:
        assert frame["module"] == str(module), where


def snapshot(program, *args, env=None, gpumem_args=()):
    run = run_snapshot_c([program, *args], env=env, gpumem_args=gpumem_args)
    assert run.returncode == 0, run.stderr
    return only_proc(run.report)


def test_frame_pointer_build_names_every_level_with_its_line():
    proc = snapshot(SYM_FP)
    frames = site_from(proc, "sym_level3")["frames"]
    assert_frame(frames[0], "sym_level3", "sym_levels.c", "sym_level3", module=SYM_FP)
    assert_frame(frames[1], "sym_level2", "sym_levels.c", "sym_level2", module=SYM_FP)
    assert_frame(frames[2], "sym_level1", "sym_levels.c", "sym_level1", module=SYM_FP)
    assert_frame(frames[3], "main", "sym_levels.c", "main_level1", module=SYM_FP)
    # offset is the ELF vaddr of the return address, symbol_offset its distance from entry
    assert all(f["offset"] > 0 and f["symbol_offset"] > 0 for f in frames[:4])


def test_inlined_call_is_a_frame_of_its_own():
    proc = snapshot(SYM_FP)
    frames = site_from(proc, "sym_inlined_alloc")["frames"]
    assert_frame(frames[0], "sym_inlined_alloc", "sym_levels.c", "sym_inlined_alloc",
                 inlined=True)
    assert_frame(frames[1], "sym_inline_caller", "sym_levels.c", "sym_inline_caller")
    assert_frame(frames[2], "main", "sym_levels.c", "main_inline")
    # one return address, two frames
    assert frames[0]["addr"] == frames[1]["addr"]
    assert "symbol_offset" not in frames[0]


def test_no_frame_pointer_build_names_the_immediate_caller_with_its_line():
    proc = snapshot(SYM_NOFP)
    frames = site_from(proc, "sym_level3")["frames"]
    assert_frame(frames[0], "sym_level3", "sym_levels.c", "sym_level3", module=SYM_NOFP)
    inl = site_from(proc, "sym_inlined_alloc")["frames"]
    assert_frame(inl[0], "sym_inlined_alloc", "sym_levels.c", "sym_inlined_alloc",
                 inlined=True)
    assert_frame(inl[1], "sym_inline_caller", "sym_levels.c", "sym_inline_caller")


def test_no_frame_pointer_build_names_every_level():
    # Several runs: the program often ends before gpumem unwinds its stack copy, and then its
    # files are opened by their host path (device and inode checked), its root being gone.
    for _ in range(4):
        run = run_snapshot_c([SYM_NOFP])
        assert run.returncode == 0, run.stderr
        frames = site_from(only_proc(run.report), "sym_level3")["frames"]
        assert_frame(frames[1], "sym_level2", "sym_levels.c", "sym_level2")
        assert_frame(frames[2], "sym_level1", "sym_levels.c", "sym_level1")
        assert_frame(frames[3], "main", "sym_levels.c", "main_level1")
        assert run.report["lost"]["stacks_not_unwound"] == 0


def test_a_stack_near_the_top_of_the_main_threads_stack_is_unwound_whole(tmp_path):
    """12 frames of 176 bytes near the stack's top (an empty environment): the 8 KiB stack copy
    would run past the mapping's end. It reads up to that end, and the unwound stack reaches
    _start; a copy cut to 1 KiB ended it at the sixth frame, with no count."""
    for _ in range(3):
        out = tmp_path / "s.json"
        done = subprocess.run([str(GPUMEM), "snapshot", "--json", "-o", str(out), "-c",
                               str(WORKLOAD), "deep", "12", "4096"], capture_output=True,
                              text=True, env={}, timeout=RUN_TIMEOUT)
        assert done.returncode == 0, done.stderr
        report = json.loads(out.read_text())
        (site,) = [s for p in report["processes"] for s in p["sites"]]
        symbols = [f["symbol"] for f in site["frames"]]
        assert symbols.count("deep_step") == 13 and symbols[-1] == "_start", symbols
        assert report["lost"]["stacks_cut"] == 0


def test_a_stack_deeper_than_the_bytes_copied_is_counted_cut_and_whole_with_more(tmp_path):
    """51 frames of 176 bytes (8.8 KiB) from the call: the default 8 KiB copy ends inside them,
    and the site shows the frames it held, counted in stacks_cut; --stack-bytes 16384 holds
    them all, down to _start, and nothing is counted."""
    def site_and_lost(*args):
        out = tmp_path / "s.json"
        done = subprocess.run([str(GPUMEM), "snapshot", "--json", "-o", str(out), *args, "-c",
                               str(WORKLOAD), "deep", "50", "4096"], capture_output=True,
                              text=True, timeout=RUN_TIMEOUT)
        assert done.returncode == 0, done.stderr
        report = json.loads(out.read_text())
        (site,) = [s for p in report["processes"] for s in p["sites"]]
        return [f["symbol"] for f in site["frames"]], report["lost"]

    symbols, lost = site_and_lost()
    assert 40 < symbols.count("deep_step") < 51 and "_start" not in symbols, symbols
    assert (lost["stacks_cut"], lost["stacks_not_unwound"]) == (1, 0), lost
    symbols, lost = site_and_lost("--stack-bytes", "16384")
    assert symbols.count("deep_step") == 51 and symbols[-1] == "_start", symbols
    assert (lost["stacks_cut"], lost["stacks_not_unwound"]) == (0, 0), lost


def test_the_frame_pointer_walk_reads_a_deep_stack_whole(tmp_path):
    """Two allocations of one thread, each 8 to 30 levels deep, first through 496-byte frames
    (up to 15 KiB), then through 176-byte ones over the same stack addresses: the in-kernel
    walk reads the stack in windows past its first, and the second walk must not take what the
    first read. At every depth each site of --unwind fp holds every frame the DWARF unwinder
    finds, in the same order (the frame-pointer chain ends at libc's start, where DWARF goes on
    to _start; its copy of the stack made 16 KiB, its most, to hold the deepest whole), and no
    stack error is counted."""
    def sites(depth, unwind):
        out = tmp_path / f"{unwind}.json"
        done = subprocess.run([str(GPUMEM), "snapshot", "--json", "-o", str(out), "--unwind",
                               unwind, "--stack-bytes", "16384", "-c", str(WORKLOAD),
                               "deeptwice", str(depth), "4096"],
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert done.returncode == 0, done.stderr
        report = json.loads(out.read_text())
        assert (report["lost"]["stack_errors"], report["lost"]["stacks_cut"]) == (0, 0), \
            report["lost"]
        found = {}
        for site in (s for p in report["processes"] for s in p["sites"]):
            frames = [(f["symbol"], f["offset"]) for f in site["frames"]]
            found[frames[0][0]] = frames
        assert sorted(found) == ["deep_step", "deep_wide"], found
        return found

    for depth in (8, 10, 16, 30):
        fp, dwarf = sites(depth, "fp"), sites(depth, "dwarf")
        for level in ("deep_step", "deep_wide"):
            symbols = [s for s, _ in fp[level]]
            assert symbols.count(level) == depth + 1, symbols
            assert symbols[-3:] == ["run_deeptwice", "main", "__libc_start_call_main"], symbols
            assert fp[level] == dwarf[level][:len(fp[level])], (fp[level], dwarf[level])


def build_id(path):
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True,
                         check=True).stdout
    found = re.search(r"Build ID: ([0-9a-f]+)", out)
    assert found, f"{path} has no build-id: {out}"
    return found.group(1)


def test_split_debug_info_is_found_by_build_id_under_debug_root(tmp_path):
    bid = build_id(SYM_SPLIT)
    assert build_id(SYM_SPLIT_DEBUG) == bid
    place = tmp_path / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
    place.parent.mkdir(parents=True)
    shutil.copy(SYM_SPLIT_DEBUG, place)
    proc = snapshot(SYM_SPLIT, env={"GPUMEM_DEBUG_ROOT": str(tmp_path)})
    frames = site_from(proc, "sym_level3")["frames"]
    assert_frame(frames[0], "sym_level3", "sym_levels.c", "sym_level3", module=SYM_SPLIT)
    assert_frame(frames[1], "sym_level2", "sym_levels.c", "sym_level2")
    assert_frame(frames[2], "sym_level1", "sym_levels.c", "sym_level1")
    assert_frame(frames[3], "main", "sym_levels.c", "main_level1")
    inl = site_from(proc, "sym_inlined_alloc")["frames"]
    assert_frame(inl[0], "sym_inlined_alloc", "sym_levels.c", "sym_inlined_alloc",
                 inlined=True)


def test_stripped_binary_without_its_debug_file_has_no_lines(tmp_path):
    proc = snapshot(SYM_SPLIT, env={"GPUMEM_DEBUG_ROOT": str(tmp_path)})
    for site in proc["sites"]:
        top = site["frames"][0]
        assert top["module"] == str(SYM_SPLIT)
        assert top["file"] is None and top["line"] is None


def assert_dl_levels(frames, module):
    assert_frame(frames[0], "symdl_level3", "symdl.c", "symdl_level3", module=module)
    assert_frame(frames[1], "symdl_level2", "symdl.c", "symdl_level2", module=module)
    assert_frame(frames[2], "symdl_level1", "symdl.c", "symdl_level1", module=module)
    assert frames[3]["symbol"] == "main" and frames[3]["module"] == str(SYM_DL)
    assert frames[3]["file"].endswith("sym_dl.c") and frames[3]["line"] > 0


def test_library_loaded_with_dlopen_names_every_level():
    proc = snapshot(SYM_DL, SYM_DL_LIB)
    assert_dl_levels(site_from(proc, "symdl_level3")["frames"], SYM_DL_LIB)


def lib_copy(tmp_path, name):
    copy = tmp_path / name
    shutil.copy(SYM_DL_LIB, copy)
    return copy


def test_library_deleted_after_loading_resolves_while_the_process_lives(tmp_path):
    lib = lib_copy(tmp_path, "libsymdl-gone.so")
    env = {"LD_LIBRARY_PATH": str(MOCK_LIB_DIR)}
    with SystemWide(*MOCK_LIB_ARGS) as gm:
        with Workload(lib, "--delete", "--wait", program=SYM_DL, env=env) as w:
            w.wait_for("allocated")
            assert not lib.exists()
            gm.stop()
            assert w.finish() == 0
    proc = find_proc(gm.report, w.pid)
    assert_dl_levels(site_from(proc, "symdl_level3")["frames"], lib)


def test_library_deleted_after_loading_resolves_after_the_process_ends(tmp_path):
    lib = lib_copy(tmp_path, "libsymdl-gone.so")
    proc = snapshot(SYM_DL, lib, "--delete", env={"LD_LIBRARY_PATH": str(MOCK_LIB_DIR)})
    assert not lib.exists()
    assert_dl_levels(site_from(proc, "symdl_level3")["frames"], lib)


CXX_GRAB = "gmsym::Pool::grab(unsigned long)"
CXX_MAKE = "double* gmsym::make_array<double>(unsigned long)"


def test_cxx_frames_have_demangled_names_and_lines():
    proc = snapshot(SYM_CPP)
    frames = site_from(proc, CXX_GRAB)["frames"]
    assert_frame(frames[0], CXX_GRAB, "sym_cpp.cc", "Pool::grab", module=SYM_CPP)
    assert_frame(frames[1], CXX_MAKE, "sym_cpp.cc", "make_array", module=SYM_CPP)
    assert_frame(frames[2], "main", "sym_cpp.cc", "main_cpp", module=SYM_CPP)


def test_no_demangle_keeps_names_as_the_binary_spells_them():
    proc = snapshot(SYM_CPP, gpumem_args=["--no-demangle"])
    frames = site_from(proc, "_ZN5gmsym4Pool4grabEm")["frames"]
    assert frames[1]["symbol"] == "_ZN5gmsym10make_arrayIdEEPT_m"
    assert frames[2]["symbol"] == "main"


def test_frames_inside_cuda_libraries_are_hidden_unless_all_frames(tmp_path):
    # A library whose name says CUDA (libcuda*): its three levels are CUDA's own frames.
    lib = lib_copy(tmp_path, "libcudawrap.so")
    env = {"LD_LIBRARY_PATH": str(MOCK_LIB_DIR)}
    hidden = snapshot(SYM_DL, lib, env=env)
    assert len(hidden["sites"]) == 1
    frames = hidden["sites"][0]["frames"]
    assert frames[0]["symbol"] == "main" and frames[0]["module"] == str(SYM_DL)
    assert all(f["module"] != str(lib) for f in frames)
    shown = snapshot(SYM_DL, lib, env=env, gpumem_args=["--all-frames"])
    assert_dl_levels(site_from(shown, "symdl_level3")["frames"], lib)


def test_text_report_shows_function_and_file_line(tmp_path):
    out = tmp_path / "report.txt"
    done = subprocess.run([str(BUILD / "gpumem"), "snapshot", "-o", str(out), "-c",
                           str(SYM_FP)], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    for name, marker in (("sym_level3", "sym_level3"), ("sym_level2", "sym_level2"),
                         ("sym_level1", "sym_level1")):
        assert f"{name} (sym_levels.c:{marker_line('sym_levels.c', marker)})" in text, text
    assert (f"sym_inlined_alloc (sym_levels.c:{marker_line('sym_levels.c', 'sym_inlined_alloc')})"
            " [inlined]") in text, text


def debuglinked_copy(lib, sub):
    """A copy of lib in sub, its DWARF split off beside it and named by .gnu_debuglink: the
    debug file's path is the library's directory's, which its owner chooses."""
    sub.mkdir()
    (sub.parent / "lib").symlink_to(MOCK_LIB_DIR)      # the copy's RUNPATH: $ORIGIN/../lib
    copy, debug = sub / "libq.so", sub / "libq.debug"
    shutil.copy(lib, copy)
    for args in (["--only-keep-debug", str(copy), str(debug)],
                 ["--strip-debug", "--remove-section=.gnu_debuglink",
                  f"--add-gnu-debuglink={debug}", str(copy)]):
        subprocess.run(["objcopy", *args], check=True, cwd=sub)
    return copy, debug


def test_a_debuglink_to_a_fifo_is_never_opened_and_the_right_file_is_read(tmp_path):
    """The .gnu_debuglink name beside a library is its owner's to make anything: a FIFO
    there, which libdwfl's own open() waited on for ever (gpumem with it, SIGINT and all),
    is passed over; the real debug file there gives the frame its line."""
    copy, debug = debuglinked_copy(BUILD / "tests" / "owners" / "libnccl.so.2",
                                   tmp_path / "sub")
    kept = debug.rename(tmp_path / "kept.debug")
    os.mkfifo(debug)
    frame = owners_site(copy)["frames"][0]
    assert frame["line"] is None, frame
    debug.unlink()
    kept.rename(debug)
    frame = owners_site(copy)["frames"][0]
    assert frame["file"].endswith("owner_lib.c") and frame["line"] > 0, frame


INLINED_LIB = r"""
#include <stddef.h>
int cudaMalloc(void **p, size_t size);
int cudaFree(void *p);
static inline __attribute__((always_inline)) int kept_alloc(void **p, size_t size)
{
	return cudaMalloc(p, size);     /* LINE:kept_alloc */
}
__attribute__((visibility("default"), noinline)) int owner_hold(unsigned int n, size_t size)
{
	void *p = NULL;
	int rc = 0;

	for (unsigned int i = 0; i < n && !rc; i++)
		rc = kept_alloc(&p, size);
	return rc ? rc : cudaMalloc(&p, size) || cudaFree(p);
}
"""


def test_debug_info_shared_by_dwz_is_read_from_its_alternate_file(tmp_path):
    """Debian's debug packages are made smaller with dwz: what two debug files share (here an
    inlined function's own entry, its name) moves to an alternate file that each names, with
    its build-id, in .gnu_debugaltlink. The alternate is looked for as the debug file was
    (userspace/symbols/debuginfo.c) and taken by that build-id: the inlined call is named."""
    if not shutil.which("dwz"):
        pytest.skip("dwz is not installed (Debian dwz: scripts/deps.sh installs it)")
    src = tmp_path / "inl.c"
    src.write_text(INLINED_LIB)
    (tmp_path / "lib").symlink_to(MOCK_LIB_DIR)
    libs = []
    for copy in ("a", "b"):     # two debug files with all in common: dwz moves it out
        (tmp_path / copy).mkdir()
        lib = tmp_path / copy / "libq.so"
        subprocess.run(["cc", "-g", "-O2", "-fno-omit-frame-pointer", "-fPIC", "-shared",
                        "-o", str(lib), str(src), f"-L{MOCK_LIB_DIR}", "-l:libcudart.so.13",
                        "-Wl,-rpath,$ORIGIN/../lib"], check=True)
        subprocess.run(["objcopy", "--only-keep-debug", str(lib), f"{lib}.debug"], check=True)
        libs.append(lib)
    common = tmp_path / "common.debug"
    subprocess.run(["dwz", "-m", str(common), "-M", str(common),
                    *[f"{lib}.debug" for lib in libs]], check=True)
    for lib in libs:
        subprocess.run(["objcopy", "--strip-debug", f"--add-gnu-debuglink={lib}.debug",
                        str(lib)], check=True, cwd=lib.parent)
    site = owners_site(libs[0])
    line = next(i + 1 for i, text in enumerate(INLINED_LIB.splitlines())
                if "LINE:kept_alloc" in text)
    top, caller = site["frames"][:2]
    assert (top["symbol"], top["inlined"], top["line"]) == ("kept_alloc", True, line), top
    assert top["file"].endswith("inl.c"), top
    assert caller["symbol"] == "owner_hold", caller
    # The alternate's path is the debug file's to name: a FIFO there is never opened, by
    # gpumem or by libdw (whose own look for it gpumem forestalls); the inlined call's name,
    # which is there, is not known.
    common.rename(tmp_path / "kept.debug")
    os.mkfifo(common)
    site = owners_site(libs[0])
    assert site["frames"][0]["symbol"] != "kept_alloc", site["frames"]
    # A file with the alternate's build-id but no DWARF, where a build-id finds it: libdw
    # cannot take it, and is still told there is no alternate (it would open the FIFO).
    kept = tmp_path / "kept.debug"
    bid = build_id(kept)
    fake = tmp_path / "root" / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
    fake.parent.mkdir(parents=True)
    subprocess.run(["objcopy", "--only-section=.note.gnu.build-id", str(kept), str(fake)],
                   check=True)
    assert build_id(fake) == bid
    site = owners_site(libs[0], env={"GPUMEM_DEBUG_ROOT": str(tmp_path / "root")})
    assert site["frames"][0]["symbol"] != "kept_alloc", site["frames"]


def test_a_debug_file_under_dot_debug_with_the_files_own_name_is_found(tmp_path):
    """GDB's layout: DIR/.debug/NAME for DIR/NAME, its debuglink NAME itself. The file itself,
    first in the places looked at, is passed over (it has the build-id, not the DWARF)."""
    sub = tmp_path / "sub"
    copy, debug = debuglinked_copy(BUILD / "tests" / "owners" / "libnccl.so.2", sub)
    (sub / ".debug").mkdir()
    debug.rename(sub / ".debug" / copy.name)
    subprocess.run(["objcopy", "--remove-section=.gnu_debuglink",
                    f"--add-gnu-debuglink={sub / '.debug' / copy.name}", str(copy)],
                   check=True, cwd=sub)
    frame = owners_site(copy)["frames"][0]
    assert frame["file"].endswith("owner_lib.c") and frame["line"] > 0, frame


def test_split_debug_info_is_found_by_its_debuglink_in_a_flat_debug_root(tmp_path):
    """GPUMEM_DEBUG_ROOT holding the debug file by its debuglink name, no directories."""
    shutil.copy(SYM_SPLIT_DEBUG, tmp_path / SYM_SPLIT_DEBUG.name)
    proc = snapshot(SYM_SPLIT, env={"GPUMEM_DEBUG_ROOT": str(tmp_path)})
    frames = site_from(proc, "sym_level3")["frames"]
    assert_frame(frames[0], "sym_level3", "sym_levels.c", "sym_level3", module=SYM_SPLIT)


def owners_site(lib, env=None):
    """The site of owners' one kept allocation through lib's owner_hold, reported (within the
    stop timeout) while owners still lives."""
    with SystemWide(*MOCK_LIB_ARGS, env=env) as gpumem:
        owners = subprocess.Popen([str(BUILD / "tests" / "owners" / "owners"), "--wait",
                                   str(lib), "1", "4096"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert owners.stdout.readline() == "held\n"
            gpumem.stop()
        finally:
            owners.kill()
            owners.wait(10)
    mine = find_proc(gpumem.report, owners.pid)
    [site] = [s for s in mine["sites"] if s["current_allocs"] == 1 and s["frames"][0]["module"]
              == str(lib)]
    return site



def test_split_dwarf_names_lines_from_the_skeleton_and_never_opens_a_dwo(tmp_path):
    """-gsplit-dwarf leaves the line table in the library and the rest in a .dwo file whose
    path the library names. gpumem reads lines from the library alone and never opens the
    .dwo (libdw would, with a plain open(), only if asked for a skeleton's split unit): a FIFO
    there costs nothing, and the line is still known."""
    src = tmp_path / "inl.c"
    src.write_text(INLINED_LIB)
    (tmp_path / "lib").symlink_to(MOCK_LIB_DIR)
    (tmp_path / "a").mkdir()
    lib = tmp_path / "a" / "libq.so"
    subprocess.run(["cc", "-g", "-gsplit-dwarf", "-O2", "-fno-omit-frame-pointer", "-fPIC",
                    "-shared", "-o", str(lib), str(src), f"-L{MOCK_LIB_DIR}",
                    "-l:libcudart.so.13", "-Wl,-rpath,$ORIGIN/../lib"], check=True, cwd=tmp_path)
    [dwo] = tmp_path.rglob("*.dwo")
    dwo.unlink()
    os.mkfifo(dwo)
    line = next(i + 1 for i, text in enumerate(INLINED_LIB.splitlines())
                if "LINE:kept_alloc" in text)
    top = owners_site(lib)["frames"][0]
    assert (top["symbol"], top["line"]) == ("owner_hold", line), top
    assert top["file"].endswith("inl.c"), top
