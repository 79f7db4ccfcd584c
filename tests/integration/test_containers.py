"""Per-container accounting on hand-built "containers": cgroups named like Docker's and like a
kubelet pod's, a new pid and mount namespace, and a copy of the mock runtime on an overlayfs
mount that only that namespace sees. No container engine is needed."""
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import (GPUMEM, MOCK_LIB_ARGS, MOCK_LIB_DIR, WORKLOAD, WORKLOAD_DL, SystemWide,
                      Workload, find_proc, has_proc, late_attached_files, lines_about,
                      run_trace_c)


def cgroup2_mount():
    # Bytes: another user's mount point need not be UTF-8.
    for line in Path("/proc/self/mountinfo").read_bytes().decode(errors="replace").splitlines():
        fields = line.split()
        sep = fields.index("-")
        if fields[sep + 1] == "cgroup2":
            return Path(fields[4])
    return None


CGROUP2 = cgroup2_mount()
pytestmark = pytest.mark.skipif(CGROUP2 is None, reason="no cgroup v2 file system is mounted")


class Cgroup:
    """A cgroup directory made for one test and removed after it (parents included)."""

    def __init__(self, relative):
        self.relative = "/" + relative.strip("/")
        self.path = CGROUP2 / relative.strip("/")
        self.made = []

    def __enter__(self):
        parts = Path(self.relative.strip("/")).parts
        for i in range(len(parts)):
            d = CGROUP2.joinpath(*parts[: i + 1])
            if not d.exists():
                d.mkdir()
                self.made.append(d)
        return self

    def add(self, pid):
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def __exit__(self, *exc):
        for d in reversed(self.made):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    import time
                    time.sleep(0.1)


def docker_id():
    return uuid.uuid4().hex + uuid.uuid4().hex


def child_pid(parent):
    """The pid of parent's only child (unshare --fork's), as the host sees it."""
    out = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True,
                         timeout=10).stdout.split()
    assert len(out) == 1, f"children of {parent}: {out}"
    return int(out[0])


def overlay_dirs(tmp_path):
    lower = tmp_path / "lower"
    lower.mkdir()
    for name in ("libcudart.so.13", "libcuda.so.1"):
        shutil.copy2(MOCK_LIB_DIR / name, lower / name)
    for d in ("upper", "work", "merged"):
        (tmp_path / d).mkdir()
    return lower


def test_docker_and_pod_containers_with_their_own_runtime_copies(tmp_path):
    dock = docker_id()
    cri = docker_id()
    pod_uid = str(uuid.uuid4())
    pod_path = ("kubepods.slice/kubepods-burstable.slice/"
                f"kubepods-burstable-pod{pod_uid.replace('-', '_')}.slice/"
                f"cri-containerd-{cri}.scope")
    overlay_dirs(tmp_path)
    mount_then_run = (
        f"mount -t overlay overlay -o lowerdir={tmp_path}/lower,upperdir={tmp_path}/upper,"
        f"workdir={tmp_path}/work {tmp_path}/merged && "
        f"exec {WORKLOAD_DL} --wait dlopen {tmp_path}/merged/libcudart.so.13 131072")
    # Held at its dlopen of the overlay copy, the pod's process has its first call seen: it is
    # this gpumem's own target, in a container and a pod it selected.
    with Cgroup(f"system.slice/docker-{dock}.scope") as docker_cg, Cgroup(pod_path) as pod_cg, \
            SystemWide("-v", "--container", dock, "--pod", pod_uid, hold=True) as gpumem:
        with Workload("--wait", "hold", 65536) as docker_wl, \
                Workload("--pid", "--fork", "--mount", "--propagation", "private", "sh", "-c",
                         mount_then_run, program=Path("/usr/bin/unshare")) as pod_wl:
            docker_wl.wait_for("ready")
            docker_cg.add(docker_wl.pid)
            docker_wl.release()
            docker_wl.wait_for("holding")

            assert pod_wl.wait_for("ready").split()[1] == "1"    # pid 1 of its namespace
            pod_host_pid = child_pid(pod_wl.pid)
            pod_cg.add(pod_host_pid)
            pod_wl.release()
            pod_wl.wait_for("waiting")
            pod_wl.release()
            assert pod_wl.wait_for("call ").split()[1:3] == ["cudaMalloc", "131072"]
            assert pod_wl.finish() == 0
            docker_wl.release()
            assert docker_wl.finish() == 0
    report = gpumem.report

    docker = find_proc(report, docker_wl.pid)
    assert (docker["container"], docker["container_runtime"], docker["pod"]) == (
        dock, "docker", None)
    assert docker["cgroup"] == f"/system.slice/docker-{dock}.scope"
    assert docker["current_bytes"] == 65536

    assert has_proc(report, pod_host_pid), lines_about(gpumem, pod_host_pid)
    pod = find_proc(report, pod_host_pid)
    assert (pod["container"], pod["container_runtime"], pod["pod"], pod["pod_qos"]) == (
        cri, "containerd", pod_uid, "burstable")
    assert pod["ns_pid"] == 1
    assert pod["current_bytes"] == 131072 and pod["alloc_count"] == 1
    # The overlay copies of the runtime and driver are files of their own: attached late, when
    # the pod's process mapped them.
    assert late_attached_files(gpumem, pod_host_pid) == ["libcuda.so.1", "libcudart.so.13"], \
        lines_about(gpumem, pod_host_pid)


def test_container_filter_traces_only_that_container():
    dock_a, dock_b = docker_id(), docker_id()
    with Cgroup(f"system.slice/docker-{dock_a}.scope") as cg_a, \
            Cgroup(f"system.slice/docker-{dock_b}.scope") as cg_b:
        with SystemWide("--container", dock_a[:12], *MOCK_LIB_ARGS) as gpumem:
            with Workload("--wait", "hold", 4096) as wl_a, \
                    Workload("--wait", "hold", 8192) as wl_b:
                wl_a.wait_for("ready")
                wl_b.wait_for("ready")
                cg_a.add(wl_a.pid)
                cg_b.add(wl_b.pid)
                wl_a.release()
                wl_b.release()
                wl_a.wait_for("holding")
                wl_b.wait_for("holding")
                wl_a.release()
                wl_b.release()
                assert wl_a.finish() == 0 and wl_b.finish() == 0
    report = gpumem.report
    a = find_proc(report, wl_a.pid)
    assert (a["container"], a["current_bytes"]) == (dock_a, 4096)
    assert not has_proc(report, wl_b.pid)


def test_pod_filter_selects_the_pods_containers():
    pod_uid = str(uuid.uuid4())
    pod = f"kubepods.slice/kubepods-pod{pod_uid.replace('-', '_')}.slice"
    cid = docker_id()
    with Cgroup(f"{pod}/cri-containerd-{cid}.scope") as cg, \
            Cgroup(f"system.slice/docker-{docker_id()}.scope") as other:
        with SystemWide("--pod", pod_uid, *MOCK_LIB_ARGS) as gpumem:
            with Workload("--wait", "hold", 12288) as inside, \
                    Workload("--wait", "hold", 4096) as outside:
                inside.wait_for("ready")
                outside.wait_for("ready")
                cg.add(inside.pid)
                other.add(outside.pid)
                inside.release()
                outside.release()
                inside.wait_for("holding")
                outside.wait_for("holding")
                assert inside.finish() == 0 and outside.finish() == 0
    report = gpumem.report
    p = find_proc(report, inside.pid)
    assert (p["pod"], p["pod_qos"], p["container"], p["current_bytes"]) == (
        pod_uid, "guaranteed", cid, 12288)
    assert not has_proc(report, outside.pid)


def test_selection_that_matches_nothing_is_an_error():
    out = subprocess.run(["build/gpumem", "snapshot", "--no-hold", "--container", "ffffffffffff",
                          "--duration", "1"], capture_output=True, text=True, timeout=30,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 1
    assert "no cgroup matches --container ffffffffffff" in out.stderr


def test_trace_names_the_container_of_each_event():
    dock = docker_id()
    with Cgroup(f"system.slice/docker-{dock}.scope") as cg:
        with SystemWide(*MOCK_LIB_ARGS, mode="trace") as gpumem:
            with Workload("--wait", "hold", 4096) as inside, \
                    Workload("--wait", "hold", 8192) as outside:
                inside.wait_for("ready")
                outside.wait_for("ready")
                cg.add(inside.pid)
                inside.release()
                outside.release()
                inside.wait_for("holding")
                outside.wait_for("holding")
                assert inside.finish() == 0 and outside.finish() == 0
    events = gpumem.report
    mine = [e for e in events if e["pid"] == inside.pid]
    theirs = [e for e in events if e["pid"] == outside.pid]
    assert [(e["event"], e.get("size")) for e in mine if e["event"] == "alloc"] == [
        ("alloc", 4096)]
    assert {(e["container"], e["pod"]) for e in mine} == {(dock, None)}
    assert theirs and {(e["container"], e["pod"]) for e in theirs} == {(None, None)}


def test_leaks_json_names_container_and_pod():
    pod_uid = str(uuid.uuid4())
    cid = docker_id()
    pod = f"kubepods.slice/kubepods-pod{pod_uid.replace('-', '_')}.slice/cri-containerd-{cid}.scope"
    with Cgroup(pod) as cg:
        with SystemWide(*MOCK_LIB_ARGS, mode="leaks") as gpumem:
            with Workload("--wait", "hold", 12288) as wl:
                wl.wait_for("ready")
                cg.add(wl.pid)
                wl.release()
                wl.wait_for("holding")
                assert wl.finish() == 0
    final = gpumem.report
    (proc,) = [p for p in final["processes"] if p["pid"] == wl.pid]
    assert (proc["container"], proc["pod"]) == (cid, pod_uid)


def top_tables(text):
    return [t.splitlines() for t in text.split("\n\n") if t.startswith("gpumem top")]


def test_top_groups_processes_by_container_with_totals(tmp_path):
    dock = docker_id()
    with Cgroup(f"system.slice/docker-{dock}.scope") as cg:
        join = f"echo $$ > {cg.path}/cgroup.procs && exec {WORKLOAD} hold"
        script = (f"sleep 2 | sh -c '{join} 4096' & sleep 2 | sh -c '{join} 8192' & "
                  f"sleep 2 | {WORKLOAD} hold 1000 & wait")
        out = tmp_path / "top.txt"
        done = subprocess.run(["build/gpumem", "top", "-b", "-i", "0.5", "--bytes", "--group",
                               "container", "-o", str(out), "-c", "sh", "-c", script],
                              capture_output=True, text=True, timeout=60,
                              cwd=Path(__file__).resolve().parents[2])
        assert done.returncode == 0, done.stderr
    tables = top_tables(out.read_text())
    assert tables and all(t[1].split()[:7] == ["CONTAINER", "PROCS", "CURRENT", "PEAK",
                                               "ALLOC/s", "FREE/s", "FAIL"] for t in tables)
    # While all three hold their memory: one row per container, with the totals of its processes.
    holding = [t for t in tables if "held 13288" in t[0]]
    assert holding, tables
    rows = sorted(line.split()[:4] for line in holding[-1][2:])
    assert rows == [["-", "1", "1000", "1000"], [dock[:12], "2", "12288", "12288"]]
    assert holding[-1][2].endswith(f"docker {dock}")


def test_top_names_a_containers_pod_and_container_from_its_bundle(tmp_path):
    cid, pod = docker_id(), str(uuid.uuid4())
    bundles = tmp_path / "containerd"
    write_bundle(bundles / "k8s.io" / cid / "config.json",
                 bundle_config(CONTAINERD_KEYS, "trainer-7d9f-x2x", "ml", "cuda"))
    with Cgroup(pod_cgroup("burstable", pod, f"cri-containerd-{cid}.scope")) as cg:
        join = f"echo $$ > {cg.path}/cgroup.procs && exec {WORKLOAD} hold 4096"
        out = tmp_path / "top.txt"
        done = subprocess.run(["build/gpumem", "top", "-b", "-i", "0.5", "--bytes", "--group",
                               "container", "--bundle-dir", str(bundles), "-o", str(out), "-c",
                               "sh", "-c", f"sleep 2 | sh -c '{join}'"],
                              capture_output=True, text=True, timeout=60,
                              cwd=Path(__file__).resolve().parents[2])
        assert done.returncode == 0, done.stderr
    rows = [line for t in top_tables(out.read_text()) for line in t[2:]
            if line.split()[:3] == [cid[:12], "1", "4096"]]
    assert rows, out.read_text()
    assert rows[-1].endswith(f"ml/trainer-7d9f-x2x cuda  containerd {cid}  pod {pod} burstable")


def test_one_library_reached_under_two_inodes_counts_once(tmp_path):
    """An overlayfs copy and its lower file are one file to uprobes: attached both ways (by
    --lib and when the process maps the overlay path), every call is still counted once."""
    lower = overlay_dirs(tmp_path)
    merged = tmp_path / "merged"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={lower},upperdir={tmp_path}/upper,workdir={tmp_path}/work",
                    str(merged)], check=True, timeout=10)
    try:
        out = tmp_path / "report.json"
        done = subprocess.run(
            [str(GPUMEM), "snapshot", "--json", "-o", str(out),
             "--lib", str(lower / "libcudart.so.13"), "--lib", str(lower / "libcuda.so.1"),
             "-c", "env", f"LD_LIBRARY_PATH={merged}", str(WORKLOAD), "threads", "2", "2000",
             "4096"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        report = json.loads(out.read_text())
    finally:
        subprocess.run(["umount", "-l", str(merged)], timeout=10)
    proc = [p for p in report["processes"] if p["comm"] == "workload"][0]
    assert (proc["current_bytes"], proc["alloc_count"], proc["free_count"]) == (8192, 4002, 4000)
    assert report["lost"]["unknown_frees"] == 0


# ---- Pod and container names from OCI bundles (--bundle-dir), without the API server ----

CONTAINERD_KEYS = ("io.kubernetes.cri.sandbox-name", "io.kubernetes.cri.sandbox-namespace",
                   "io.kubernetes.cri.container-name")
CRIO_KEYS = ("io.kubernetes.pod.name", "io.kubernetes.pod.namespace",
             "io.kubernetes.container.name")


def bundle_config(keys, pod_name, namespace, container_name):
    """A config.json as a runtime writes it, trimmed to what matters here."""
    return json.dumps({"ociVersion": "1.1.0", "process": {"args": ["/workload"], "cwd": "/"},
                       "root": {"path": "rootfs"},
                       "annotations": {"io.kubernetes.cri.container-type": "container",
                                       **dict(zip(keys, (pod_name, namespace, container_name)))}})


def write_bundle(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def pod_cgroup(qos, pod_uid, scope):
    """A kubelet (systemd driver) pod's container cgroup."""
    slug = pod_uid.replace("-", "_")
    return f"kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{slug}.slice/{scope}"


def names_of(entry):
    return (entry["pod_name"], entry["namespace"], entry["container_name"])


def run_in_cgroups(gpumem_args, cgroups, size=4096):
    """One `workload hold SIZE` per cgroup, each moved into its cgroup before its first call,
    under a system-wide snapshot with gpumem_args; returns (report, workloads, gpumem)."""
    with SystemWide(*gpumem_args, *MOCK_LIB_ARGS) as gpumem:
        workloads = [Workload("--wait", "hold", size) for _ in cgroups]
        try:
            for wl, cg in zip(workloads, cgroups):
                wl.wait_for("ready")
                cg.add(wl.pid)
                wl.release()
            for wl in workloads:
                wl.wait_for("holding")
            for wl in workloads:
                wl.release()
                assert wl.finish() == 0
        finally:
            for wl in workloads:
                wl.kill()
    return gpumem.report, workloads, gpumem


def test_snapshot_names_pods_and_containers_from_their_oci_bundles(tmp_path):
    cd_id, crio_id, dock_id = docker_id(), docker_id(), docker_id()
    cd_pod, crio_pod = str(uuid.uuid4()), str(uuid.uuid4())
    containerd, crio = tmp_path / "containerd", tmp_path / "crio"
    write_bundle(containerd / "k8s.io" / cd_id / "config.json",
                 bundle_config(CONTAINERD_KEYS, "trainer-7d9f-x2x", "ml", "cuda"))
    write_bundle(crio / crio_id / "userdata" / "config.json",
                 bundle_config(CRIO_KEYS, "infer-0", "serving", "server"))
    with Cgroup(pod_cgroup("burstable", cd_pod, f"cri-containerd-{cd_id}.scope")) as cd_cg, \
            Cgroup(pod_cgroup("besteffort", crio_pod, f"crio-{crio_id}.scope")) as crio_cg, \
            Cgroup(f"system.slice/docker-{dock_id}.scope") as dock_cg:
        report, (cd_wl, crio_wl, dock_wl), _ = run_in_cgroups(
            ("--bundle-dir", containerd, "--bundle-dir", crio), (cd_cg, crio_cg, dock_cg))

    cd = find_proc(report, cd_wl.pid)
    assert (cd["container"], cd["pod"], cd["container_runtime"]) == (cd_id, cd_pod, "containerd")
    assert names_of(cd) == ("trainer-7d9f-x2x", "ml", "cuda")
    assert cd["current_bytes"] == 4096
    crio_proc = find_proc(report, crio_wl.pid)
    assert (crio_proc["container"], crio_proc["pod"]) == (crio_id, crio_pod)
    assert names_of(crio_proc) == ("infer-0", "serving", "server")
    # A container whose runtime keeps no bundle under the roots given: its names are unknown.
    dock = find_proc(report, dock_wl.pid)
    assert dock["container"] == dock_id and names_of(dock) == (None, None, None)
    assert report["lost"]["oci_bundles_rejected"] == 0


def test_hostile_bundles_give_no_names_and_are_counted(tmp_path):
    """A symlinked config.json (to a good one), a 5 MB file, 100,000-deep nesting and a file
    that is not JSON: each container keeps its id and pod, no names, and counts once."""
    ids = {kind: docker_id() for kind in ("symlink", "huge", "deep", "not-json")}
    root = tmp_path / "bundles"
    good = tmp_path / "elsewhere" / "config.json"
    write_bundle(good, bundle_config(CONTAINERD_KEYS, "stolen", "kube-system", "not-mine"))
    (root / "k8s.io" / ids["symlink"]).mkdir(parents=True)
    (root / "k8s.io" / ids["symlink"] / "config.json").symlink_to(good)
    valid = bundle_config(CONTAINERD_KEYS, "big", "default", "c")
    write_bundle(root / "k8s.io" / ids["huge"] / "config.json",
                 valid[:-1] + ', "pad": "' + "x" * (5 << 20) + '"}')
    write_bundle(root / "k8s.io" / ids["deep"] / "config.json",
                 valid[:-1] + ', "a": ' + "[" * 100000 + "]" * 100000 + "}")
    write_bundle(root / "k8s.io" / ids["not-json"] / "config.json", "this is not json {")
    pod_uid = str(uuid.uuid4())
    cgroups = [Cgroup(pod_cgroup("besteffort", pod_uid, f"cri-containerd-{cid}.scope"))
               for cid in ids.values()]
    for cg in cgroups:
        cg.__enter__()
    try:
        report, workloads, gpumem = run_in_cgroups(("-v", "--bundle-dir", root), cgroups)
    finally:
        for cg in cgroups:
            cg.__exit__(None, None, None)

    for (kind, cid), wl in zip(ids.items(), workloads):
        proc = find_proc(report, wl.pid)
        assert (proc["container"], proc["pod"]) == (cid, pod_uid), kind
        assert names_of(proc) == (None, None, None), kind
        assert proc["current_bytes"] == 4096, kind
    assert report["lost"]["oci_bundles_rejected"] == 4
    reasons = {kind: [line for line in gpumem.stderr.lines
                      if f"OCI bundle of container {cid[:12]} " in line]
               for kind, cid in ids.items()}
    assert [line.rsplit(": ", 1)[1] for kind in ids for line in reasons[kind]] == [
        "a symlink on its way", "larger than 1 MiB", "nested too deep", "not a JSON object"], \
        reasons


def test_trace_events_carry_the_bundle_names(tmp_path):
    cid, pod_uid = docker_id(), str(uuid.uuid4())
    crio = tmp_path / "crio"
    write_bundle(crio / cid / "userdata" / "config.json",
                 bundle_config(CRIO_KEYS, "web-5c8f", "shop", "api"))
    with Cgroup(pod_cgroup("burstable", pod_uid, f"crio-{cid}.scope")) as cg:
        join = f"echo $$ > {cg.path}/cgroup.procs && exec {WORKLOAD} hold 8192 </dev/null"
        events, rc = run_trace_c(["sh", "-c", join], gpumem_args=("--bundle-dir", crio))
    assert rc == 0
    allocs = [e for e in events if e["event"] == "alloc" and e["size"] == 8192]
    assert len(allocs) == 1, events
    assert (allocs[0]["container"], allocs[0]["pod"]) == (cid, pod_uid)
    assert names_of(allocs[0]) == ("web-5c8f", "shop", "api")


def test_snapshot_text_shows_the_pod_and_container_names(tmp_path):
    cid, pod_uid = docker_id(), str(uuid.uuid4())
    containerd = tmp_path / "containerd"
    write_bundle(containerd / "k8s.io" / cid / "config.json",
                 bundle_config(CONTAINERD_KEYS, "trainer-0", "ml", "cuda"))
    out = tmp_path / "snapshot.txt"
    with Cgroup(pod_cgroup("burstable", pod_uid, f"cri-containerd-{cid}.scope")) as cg:
        join = f"echo $$ > {cg.path}/cgroup.procs && exec {WORKLOAD} hold 4096 </dev/null"
        done = subprocess.run([str(GPUMEM), "snapshot", "--bundle-dir", str(containerd), "-o",
                               str(out), "-c", "sh", "-c", join], capture_output=True,
                              text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    (row,) = [i for i, line in enumerate(lines) if line.split()[1:2] == ["workload"]]
    assert lines[row + 1] == "        pod ml/trainer-0, container cuda", lines
