"""gpumem's CPython offsets against each installed interpreter's own headers: a C program
(tests/workloads/pylayout.c) compiled with Py_BUILD_CORE against them compares offsetof() with
gpumem's table, and from 3.13 with the _Py_DebugOffsets of the libpython it links. A version
without its internal headers installed is a skip."""
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from conftest import ROOT
from test_python import DEBIAN, SUPPORTED, interpreter_params

SOURCES = [ROOT / "tests" / "workloads" / "pylayout.c", ROOT / "userspace" / "symbols" / "pycode.c",
           ROOT / "userspace" / "host" / "procs.c", ROOT / "userspace" / "base" / "util.c"]


def config_of(python):
    code = ("import sysconfig, sys; print(sysconfig.get_paths()['include']); "
            "print(sysconfig.get_config_var('LIBDIR')); print('%d.%d' % sys.version_info[:2]); "
            "print(sysconfig.get_config_var('Py_ENABLE_SHARED') or 0)")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    include, libdir, version, shared = out.stdout.split()
    return Path(include), Path(libdir), version, shared == "1"


@pytest.mark.parametrize("python", interpreter_params(SUPPORTED, debian=True))
def test_python_layout_table_equals_the_headers(python, tmp_path):
    include, libdir, version, shared = config_of(python)
    if not (include / "internal" / "pycore_runtime.h").exists():
        pytest.skip(f"{python}: no internal headers under {include}")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    args = [cc, "-std=gnu11", "-D_GNU_SOURCE", f"-I{include}", f"-I{include}/internal",
            f"-I{ROOT}/bpf", f"-I{ROOT}/userspace",
            "-o", str(tmp_path / "pylayout"), *map(str, SOURCES)]
    if tuple(map(int, version.split("."))) >= (3, 13) and shared:
        args += ["-DCHECK_DEBUG_OFFSETS", f"-L{libdir}", f"-lpython{version}",
                 f"-Wl,-rpath,{libdir}"]
    built = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    done = subprocess.run([str(tmp_path / "pylayout")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
