"""NVIDIA's own runtime, with no GPU driver here: every cudaMalloc fails with 35
(cudaErrorInsufficientDriver), through real symbol resolution, shared and static."""
import pytest

from conftest import REAL_CUDART_LIB, REAL_CUDART_PROG, STATIC_CUDA_PROG, run_snapshot_c

NO_DRIVER = 35


def assert_one_no_driver_failure(report, size, caller):
    assert len(report["processes"]) == 1
    proc = report["processes"][0]
    assert (proc["current_bytes"], proc["alloc_count"], proc["free_count"],
            proc["failed_count"]) == (0, 0, 0, 1)
    assert len(report["failures"]) == 1
    failure = report["failures"][0]
    assert failure["pid"] == proc["pid"]
    assert (failure["api"], failure["layer"], failure["kind"]) == ("cudaMalloc", "runtime",
                                                                    "device")
    assert failure["size"] == size
    assert failure["error"] == NO_DRIVER
    assert failure["error_name"] == "cudaErrorInsufficientDriver"
    assert failure["process_bytes_at_failure"] == 0
    assert failure["frames"][0]["symbol"] == caller
    assert failure["frames"][1]["symbol"] == "main"


@pytest.mark.skipif(not REAL_CUDART_LIB.exists() or not REAL_CUDART_PROG.exists(),
                    reason=f"needs {REAL_CUDART_LIB} (CUDA Toolkit 13) and {REAL_CUDART_PROG} "
                           "(built by `make test-progs` when the Toolkit is installed)")
def test_real_libcudart_failure_is_recorded_with_error_35_and_caller():
    run = run_snapshot_c([REAL_CUDART_PROG])
    assert run.returncode == 0
    assert f"call cudaMalloc 1048576 0x0 {NO_DRIVER}" in run.stdout
    assert_one_no_driver_failure(run.report, 1 << 20, "real_runtime_alloc")


@pytest.mark.skipif(not STATIC_CUDA_PROG.exists(),
                    reason=f"needs {STATIC_CUDA_PROG} (built by `make test-progs` when nvcc "
                           "is installed)")
def test_static_runtime_in_nvcc_executable_failure_is_recorded_with_error_35():
    run = run_snapshot_c([STATIC_CUDA_PROG])
    assert run.returncode == 0
    assert f"call cudaMalloc 2097152 0x0 {NO_DRIVER}" in run.stdout
    assert_one_no_driver_failure(run.report, 2 << 20, "static_runtime_alloc")
