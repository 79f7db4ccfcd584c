#!/usr/bin/env python3
"""Sets gpumem's numbers beside what each program of the real-GPU check says it did, and
appends one verdict per check to RESULTS (JSON lines: verdict, name, detail, data):
PASS (equal), DIFF (both numbers in the detail), SKIP (why), INFO (a measurement or an
answer, not a comparison), FAIL (the check itself could not run).

  compare.py preflight STDOUT SNAPSHOT.json RESULTS    the mock workload's own `call` lines
  compare.py prog NAME STDOUT SNAPSHOT.json TRACE RESULTS
  compare.py loop MODE STDOUT RESULTS                   torch_check.py loop's checkpoints
  compare.py seed STDOUT LEAKS.json RESULTS             torch_check.py seed under gpumem leaks
  compare.py cost RESULTS LABEL=STDOUT...               torch_check.py cost, untraced first
  compare.py note VERDICT NAME DETAIL RESULTS
  compare.py summary RESULTS                            the verdicts, then the open questions

Standard library only: it runs with whatever python3 the GPU machine has."""
import json
import os
import statistics
import sys

KINDS = ("device", "managed", "host", "async", "vmm")
GPU_KINDS = ("device", "managed", "async", "vmm")
FIELDS = ("current_bytes", "current_allocs", "peak_bytes", "alloc_count", "free_count",
          "alloc_bytes_total", "failed_count")
ROUND = 512  # PyTorch's caching allocator rounds every block to 512 bytes (kMinBlockSize)


def json_lines(path):
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"  (no usable gpumem report in {path}: {e})")
        return None


def fmt(n):
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return str(n)
    a = abs(n)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if a >= div:
            return f"{n} ({n / div:.2f} {unit})"
    return str(n)


def record(results, verdict, name, detail, **data):
    print(f"  => {verdict} {name}: {detail}")
    with open(results, "a") as f:
        f.write(json.dumps({"verdict": verdict, "name": name, "detail": detail, **data}) + "\n")


def pick_process(snap, pid):
    for p in (snap or {}).get("processes") or []:
        if pid in (p.get("pid"), p.get("ns_pid")):
            return p
    return None


def frame_name(fr):
    if fr.get("lang") == "python":
        return f"{fr.get('function') or fr.get('symbol')} " \
               f"({os.path.basename(fr.get('file') or '?')}:{fr.get('line')})"
    sym = fr.get("symbol")
    return sym if sym else f"{os.path.basename(fr.get('module') or '?')}+0x{fr.get('offset', 0):x}"


def frames_str(frames, n=6):
    return " < ".join(frame_name(f) for f in (frames or [])[:n])


def site_symbols(site):
    return {f.get("symbol") for f in site.get("frames") or [] if f.get("symbol")}


def trace_stats(path):
    """Counts of trace events by event/layer/api, and the GPU bytes the trace says remain."""
    by, layers, live = {}, {}, {}
    events = json_lines(path)
    for e in events:
        ev = e.get("event")
        k = f"{ev}/{e.get('layer')}/{e.get('api')}"
        by[k] = by.get(k, 0) + 1
        if ev in ("alloc", "free", "alloc_failed"):
            layers[e.get("layer")] = layers.get(e.get("layer"), 0) + 1
        key = (e.get("pid"), e.get("addr"), e.get("kind") == "vmm")
        if ev == "alloc":
            live[key] = (e.get("size") or 0, e.get("kind"))
        elif ev == "free":
            live.pop(key, None)
    net = sum(s for s, k in live.values() if k in GPU_KINDS)
    return {"events": len(events), "layers": layers, "by_api": dict(sorted(by.items())),
            "net_gpu_bytes": net}


# ---- preflight: the mock workload, no GPU involved -------------------------------------------

def cmd_preflight(stdout, snap_path, results):
    """`workload leak` prints `call API SIZE ADDR RC` per call: what it holds is the sum."""
    held = allocs = frees = 0
    with open(stdout, errors="replace") as f:
        for line in f:
            w = line.split()
            if len(w) == 5 and w[0] == "call" and w[4] == "0":
                if w[1] == "cudaMalloc":
                    held, allocs = held + int(w[2]), allocs + 1
                elif w[1] == "cudaFree":
                    held, frees = held - int(w[2]), frees + 1
    snap = load_json(snap_path)
    procs = (snap or {}).get("processes") or []
    proc = max(procs, key=lambda p: p.get("alloc_count", 0), default=None)
    if not allocs:
        return record(results, "FAIL", "preflight", "the mock workload made no allocation")
    if not proc:
        return record(results, "DIFF", "preflight",
                      f"BPF loaded, but gpumem saw none of the mock workload's {allocs} "
                      f"allocations: uprobes did not fire")
    tracer = snap.get("tracer") or {}
    got = (proc.get("current_bytes"), proc.get("alloc_count"), proc.get("free_count"))
    want = (held, allocs, frees)
    detail = (f"gpumem loaded its BPF programs and {tracer.get('probes_attached')} uprobes; "
              f"the mock workload's (bytes held, allocs, frees): program {want}, gpumem {got}")
    record(results, "PASS" if got == want else "DIFF", "preflight", detail)


# ---- the CUDA programs -----------------------------------------------------------------------

def cmd_prog(name, stdout, snap_path, trace_path, results):
    lines = json_lines(stdout)
    exp = next((l for l in reversed(lines) if "gpumem_expect" in l), None)
    snap = load_json(snap_path)
    ts = trace_stats(trace_path)
    print(f"== {name}")
    for l in lines:
        if "error" in l or "oom" in l:
            print(f"  program: {json.dumps(l)}")
    tracer = (snap or {}).get("tracer") or {}
    data = {"tracer": {k: tracer.get(k) for k in ("files_attached", "probes_attached",
                                                   "nested_calls", "stale_inflight")},
            "lost": {k: v for k, v in ((snap or {}).get("lost") or {}).items() if v},
            "trace": ts, "runtime": not name.startswith("vmm")}
    print(f"  tracer: {data['tracer']}  lost (non-zero): {data['lost'] or 'none'}")
    print(f"  trace: {ts['events']} events; alloc/free/failed by layer: {ts['layers']}")
    for k, n in ts["by_api"].items():
        print(f"    {k:50s} {n}")
    if not exp and os.environ.get("GPU_TEST_FORCE") == "1":
        return record(results, "SKIP", name, "dry run: the program did not start without a "
                      f"GPU's driver ({os.path.basename(stdout)})", **data)
    if not exp:
        return record(results, "FAIL", name, "the program printed no expectation line", **data)
    if exp.get("errors") and os.environ.get("GPU_TEST_FORCE") == "1":
        return record(results, "SKIP", name, f"dry run: its CUDA calls failed, as they must "
                      f"without a GPU ({exp['errors']} errors)", **data)
    if exp.get("errors"):
        return record(results, "FAIL", name, f"the program's own CUDA calls failed "
                      f"({exp['errors']} errors; see {os.path.basename(stdout)})", **data)
    proc = pick_process(snap, exp.get("pid"))
    if not proc:
        return record(results, "DIFF", name, f"gpumem reported no process {exp.get('pid')}",
                      **data)
    rows = [(f, exp.get(f), proc.get(f)) for f in FIELDS]
    rows += [(f"by_kind.{k}", exp["by_kind"].get(k), (proc.get("by_kind") or {}).get(k))
             for k in KINDS]
    for func, kept in exp.get("sites", {}).items():
        got = sum(s.get("current_bytes", 0) for s in proc.get("sites") or []
                  if func in site_symbols(s))
        rows.append((f"site {func}", kept, got))
    # The trace's events, alloc minus free, leave what the program holds.
    rows.append(("trace: GPU bytes left", exp.get("current_bytes"),
                 ts["net_gpu_bytes"] if ts["events"] else "no events"))
    print(f"  {'field':28s} {'program':>26s} {'gpumem':>26s}")
    diffs = []
    for f, e, g in rows:
        print(f"  {f:28s} {str(e):>26s} {str(g):>26s}{'' if e == g else '   <-- DIFF'}")
        if e != g:
            diffs.append(f"{f} program {e} gpumem {g}")
    expected_funcs = set(exp.get("sites", {}))
    for s in proc.get("sites") or []:
        if not site_symbols(s) & expected_funcs:
            print(f"  site not made by the program: {s.get('api')} {s.get('kind')} current "
                  f"{s.get('current_bytes')} allocs {s.get('alloc_count')} :: "
                  f"{frames_str(s.get('frames'))}")
    if "oom_failed_size" in exp:
        fails = [f for f in (snap.get("failures") or []) if f.get("pid") == proc.get("pid")]
        for f in fails:
            print(f"  gpumem failure: {f.get('api')} size {fmt(f.get('size'))} error "
                  f"{f.get('error')} {f.get('error_name')} held "
                  f"{fmt(f.get('process_bytes_at_failure'))}")
        ok = any(f.get("size") == exp["oom_failed_size"] and f.get("error") == exp["oom_error"]
                 and f.get("process_bytes_at_failure") == exp["oom_held_bytes"] for f in fails)
        if not ok:
            diffs.append(f"failure record: program (size {exp['oom_failed_size']}, error "
                         f"{exp['oom_error']}, held {exp['oom_held_bytes']}), gpumem "
                         f"{[(f.get('size'), f.get('error'), f.get('process_bytes_at_failure')) for f in fails]}")
    for k in ("device_name", "driver_version", "runtime_version", "granularity", "pitch",
              "default_pool", "own_pool"):
        if k in exp:
            print(f"  {k}: {exp[k]}")
    if diffs:
        return record(results, "DIFF", name, "; ".join(diffs), **data)
    what = f"{len(rows)} numbers equal (bytes, counts, kinds, sites" + \
        (", the failure record" if "oom_failed_size" in exp else "") + ")"
    record(results, "PASS", name, what, **data)


# ---- PyTorch: the loop's checkpoints ---------------------------------------------------------

def cmd_loop(mode, stdout, results):
    lines = json_lines(stdout)
    head = next((l for l in lines if "backend" in l), None)
    err = next((l for l in lines if "error" in l and "checkpoint" not in l), None)
    cps = [l for l in lines if "checkpoint" in l]
    name = {"first_contact": "torch, the first process the agent sees"}.get(mode, f"torch {mode}")
    name += " (MOCK: no PyTorch)" if head and head["backend"] == "mock" else ""
    print(f"== {name}: {json.dumps(head)}")
    if not cps:
        return record(results, "FAIL", name, f"no checkpoint: {err or 'see the log'}")
    bad = [c for c in cps if "error" in (c.get("gpumem") or {})]
    if bad:
        return record(results, "FAIL", name, f"gpumem's numbers unread at "
                      f"{len(bad)} checkpoints: {bad[0]['gpumem']['error']}")
    is_async = bool(head and head.get("allocator_backend") == "cudaMallocAsync")
    torch = bool(head and head.get("backend") == "torch")
    print(f"  {'checkpoint':16s} {'reserved':>14s} {'allocated':>14s} {'gpumem GPU':>14s} "
          f"{'gpumem tensors':>14s} {'NVML self':>14s}")
    for c in cps:
        g, nv = c["gpumem"], c.get("nvml") or {}
        print(f"  {c['checkpoint']:16s} {c['reserved']:>14d} {c['allocated']:>14d} "
              f"{g.get('current_bytes'):>14} {str(g.get('tensor_bytes')):>14s} "
              f"{str(nv.get('self')):>14s}")
    # What gpumem's GPU bytes must equal: the caching allocator's segments (reserved); with
    # cudaMallocAsync, gpumem counts the sizes asked of cudaMallocAsync, and the pool's used
    # memory (memory_allocated) rounds each up: within 511 bytes an allocation.
    want_key = "allocated" if is_async else "reserved"
    if is_async:
        diffs = [c for c in cps
                 if not (c["allocated"] - (ROUND - 1) * (c["gpumem"].get("current_allocs") or 0)
                         <= (c["gpumem"].get("current_bytes") or 0) <= c["allocated"])]
    else:
        diffs = [c for c in cps if c["gpumem"].get("current_bytes") != c[want_key]]
    if mode == "first_contact" and diffs:
        # What the first process misses depends on when its libraries are mapped: a
        # measurement of the agent's attach race, not an accounting error.
        c = diffs[0]
        record(results, "INFO", f"{name}: GPU bytes = memory_{want_key}()",
               f"differ at {len(diffs)} of {len(cps)} checkpoints; first at '{c['checkpoint']}': "
               f"memory_{want_key} {fmt(c[want_key])}, gpumem "
               f"{fmt(c['gpumem'].get('current_bytes'))} "
               f"({c['gpumem'].get('absent') or 'by kind %s' % c['gpumem'].get('by_kind')})")
    elif diffs:
        c = diffs[0]
        record(results, "DIFF", f"{name}: GPU bytes = memory_{want_key}()",
               f"{len(diffs)} of {len(cps)} checkpoints differ; first at '{c['checkpoint']}': "
               f"memory_{want_key} {fmt(c[want_key])}, gpumem {fmt(c['gpumem'].get('current_bytes'))}"
               f" ({c['gpumem'].get('absent') or 'by kind %s' % c['gpumem'].get('by_kind')})")
    else:
        record(results, "PASS", f"{name}: GPU bytes = memory_{want_key}()",
               f"{'within the pool rounding' if is_async else 'equal'} at {len(cps)} "
               f"checkpoints ({', '.join(c['checkpoint'] for c in cps)}); "
               f"largest {fmt(max(c[want_key] for c in cps))}")
    if mode == "expandable_segments" and torch:
        # Expandable segments map cuMemCreate's handles: gpumem's vmm bytes, no device ones.
        off = [c for c in cps if (c["gpumem"].get("by_kind") or {}).get("vmm") != c["reserved"]
               or (c["gpumem"].get("by_kind") or {}).get("device")]
        if off:
            c = off[0]
            record(results, "DIFF", f"{name}: reserved is cuMemCreate's",
                   f"at '{c['checkpoint']}' reserved {fmt(c['reserved'])} but gpumem's kinds "
                   f"are {c['gpumem'].get('by_kind')}: expandable segments not in effect, or "
                   f"their handles not seen")
        else:
            record(results, "PASS", f"{name}: reserved is cuMemCreate's",
                   f"gpumem's vmm bytes = reserved and no cudaMalloc bytes at {len(cps)} "
                   f"checkpoints")
    tensors = [c for c in cps if c["gpumem"].get("tensor_bytes")]
    requested = all(c.get("requested") is not None for c in cps)
    if not torch:
        pass
    elif not tensors and is_async:
        record(results, "SKIP", f"{name}: tensor bytes",
               "the cudaMallocAsync backend has no pytorch:malloc probe")
    elif not tensors:
        record(results, "SKIP", f"{name}: tensor bytes = memory_allocated()",
               "gpumem saw no tensor (no pytorch:malloc probe in this wheel, or it did not fire)")
    elif requested:
        # pytorch:malloc passes the size asked for: memory_stats' requested_bytes.
        out = [c for c in cps if c["gpumem"].get("tensor_bytes") != c["requested"]]
        if out:
            c = out[0]
            record(results, "DIFF", f"{name}: tensor bytes = requested_bytes",
                   f"{len(out)} of {len(cps)} checkpoints differ; first at '{c['checkpoint']}': "
                   f"requested {fmt(c['requested'])}, gpumem tensors "
                   f"{fmt(c['gpumem'].get('tensor_bytes'))} (allocated {fmt(c['allocated'])})")
        else:
            record(results, "PASS", f"{name}: tensor bytes = requested_bytes",
                   f"equal at {len(cps)} checkpoints; memory_allocated() rounds them up to "
                   f"its blocks: {fmt(cps[-1]['allocated'] - cps[-1]['requested'])} more at "
                   f"the last")
    else:
        # PyTorch's probe passes the size asked for; memory_allocated() counts the block,
        # rounded up to 512 bytes: allocated - 511 * tensors <= tensor bytes <= allocated.
        out = [c for c in cps
               if not (c["allocated"] - (ROUND - 1) * (c["gpumem"].get("tensor_allocs") or 0)
                       <= (c["gpumem"].get("tensor_bytes") or 0) <= c["allocated"])]
        exact = sum(c["gpumem"].get("tensor_bytes") == c["allocated"] for c in cps)
        if out:
            c = out[0]
            record(results, "DIFF", f"{name}: tensor bytes = memory_allocated()",
                   f"{len(out)} of {len(cps)} checkpoints outside PyTorch's 512-byte rounding; "
                   f"first at '{c['checkpoint']}': allocated {fmt(c['allocated'])}, gpumem "
                   f"tensors {fmt(c['gpumem'].get('tensor_bytes'))} in "
                   f"{c['gpumem'].get('tensor_allocs')}")
        else:
            record(results, "PASS", f"{name}: tensor bytes = memory_allocated()",
                   f"{exact} of {len(cps)} checkpoints exactly equal, the rest within the "
                   f"512-byte rounding of each live tensor")
    if mode == "default" and torch:
        overhead(cps, results)


def overhead(cps, results):
    """NVML's used memory less gpumem's: the context and what no allocation call makes."""
    name = "context overhead (NVML used - gpumem)"
    per = [c for c in cps if (c.get("nvml") or {}).get("self") is not None]
    if per:
        series = [c["nvml"]["self"] - c["gpumem"]["current_bytes"] for c in per]
        src = f"this process, {per[0]['nvml']['source']}"
    else:
        per = [c for c in cps if c.get("device_used") is not None]
        series = [c["device_used"] - c["gpumem"]["current_bytes"] for c in per]
        src = "the whole device (cudaMemGetInfo): NVML did not list this pid"
    if len(series) < 3:
        return record(results, "SKIP", name, "fewer than three checkpoints with NVML's number")
    # After the first step the kernels are loaded (lazy loading adds to the context before).
    later = series[1:]
    spread = max(later) - min(later)
    detail = (f"{src}: {', '.join(fmt(s) for s in series)} at "
              f"{', '.join(c['checkpoint'] for c in per)}; spread after the first step "
              f"{fmt(spread)} ({'flat' if spread <= 4 << 20 else 'not flat: lazily loaded kernels grow the context'})")
    record(results, "INFO", name, detail, series=series, flat=spread <= 4 << 20)


# ---- PyTorch: the seed scenario under gpumem leaks -----------------------------------------

def cmd_seed(stdout, leaks_path, results):
    lines = json_lines(stdout)
    head = next((l for l in lines if "backend" in l), {})
    seed = next((l["seed"] for l in lines if "seed" in l), None)
    done = next((l["seed_done"] for l in lines if "seed_done" in l), None)
    name = "seed: a kept feature map" + (" (MOCK: no PyTorch)" if head.get("backend") == "mock"
                                          else "")
    if not seed or not done:
        return record(results, "FAIL", name, f"the scenario did not run: "
                      f"{next((l for l in lines if 'error' in l), 'see the log')}")
    reports = [r for r in json_lines(leaks_path) if "processes" in r]
    final = next((r for r in reversed(reports) if r.get("final")), reports[-1] if reports else None)
    proc = pick_process(final, seed["pid"])
    if not proc:
        return record(results, "DIFF", name, f"gpumem leaks reported no process {seed['pid']}")
    base = os.path.basename(seed["file"])

    def names_line(site):
        return any(f.get("lang") == "python" and os.path.basename(f.get("file") or "") == base
                   and f.get("line") == seed["line"] for f in site.get("frames") or [])
    step = proc.get("step") or {}
    print(f"  {done['steps']} steps of {seed['period_ms']} ms, feature map "
          f"{fmt(seed['feature_bytes'])}, line {base}:{seed['line']}; gpumem's step: {step}")
    for s in proc.get("sites") or []:
        print(f"  {s.get('verdict'):8s} {s.get('kind'):7s} {fmt(s.get('current_bytes')):>24s} "
              f"per step {fmt(s.get('growth_bytes_per_step'))} :: {frames_str(s.get('frames'), 12)}")
    for kind, label in (("segments", "segment site (cudaMalloc)"), ("tensor", "tensor site")):
        sites = [s for s in proc.get("sites") or []
                 if (s.get("kind") == "tensor") == (kind == "tensor") and names_line(s)
                 and s.get("verdict") == "growing"]
        nm = f"{name}: {label}"
        if kind == "tensor" and not any(s.get("kind") == "tensor" for s in proc.get("sites") or []):
            record(results, "SKIP", nm, "no tensor sites (no pytorch:malloc probe fired)")
            continue
        if not sites:
            record(results, "DIFF", nm, f"no growing {label} names {base}:{seed['line']}")
            continue
        g = max(sites, key=lambda s: s.get("current_bytes", 0))
        per = g.get("growth_bytes_per_step")
        ok = per is not None and abs(per - seed["feature_bytes"]) <= seed["feature_bytes"] // 10
        record(results, "PASS" if ok else "DIFF", nm,
               f"leaks names {base}:{seed['line']}, growth per step {fmt(per)} against the "
               f"feature map's {fmt(seed['feature_bytes'])} (within 10%: {ok}); holds "
               f"{fmt(g.get('current_bytes'))} after {done['steps']} steps")


# ---- cost ------------------------------------------------------------------------------------

def cmd_cost(results, pairs):
    rates = {}
    for pair in pairs:
        label, path = pair.split("=", 1)
        for l in json_lines(path):
            if "cost" in l:
                rates.setdefault(label, []).append(l["cost"]["steps_per_s"])
    base = rates.get("untraced")
    if not base:
        return record(results, "FAIL", "cost", "the untraced loop gave no figure")
    b = statistics.median(base)
    parts = [f"untraced {b:.0f} steps/s"]
    for label, r in rates.items():
        if label != "untraced":
            m = statistics.median(r)
            parts.append(f"{label} {m:.0f} ({m / b:.3f} of untraced)")
    record(results, "INFO", "cost on a training loop", "; ".join(parts) +
           f" (medians of {len(base)} runs each)", rates=rates)


def cmd_summary(results):
    rs = json_lines(results)
    for r in rs:
        print(f"{r['verdict']:5s} {r['name']}: {r['detail']}")
    # Do driver probes fire inside runtime calls (the nesting rule's premise)?
    rt = [r for r in rs if r.get("runtime") and r.get("tracer") and r["verdict"] in ("PASS", "DIFF")]
    drv = [r for r in rs if r["name"].startswith("vmm") and r.get("trace")]
    nested = [r for r in rt if (r.get("tracer") or {}).get("nested_calls")]
    drv_ok = any((r.get("trace") or {}).get("layers", {}).get("driver") for r in drv)
    name = "INFO  driver probes inside runtime calls"
    if not rt:
        return
    if nested:
        print(f"{name}: yes - nested driver calls skipped in "
              f"{', '.join(r['name'] + ' (' + str(r['tracer']['nested_calls']) + ')' for r in nested)}")
    elif drv_ok:
        print(f"{name}: no - driver probes fire (vmm), never inside a runtime call: the runtime "
              f"reaches the driver by private entry points, so its probes cannot be dropped")
    else:
        print(f"{name}: inconclusive - no nested call, and no driver event from the driver-only "
              f"program to show the driver probes fire")


def main():
    a = sys.argv[1:]
    cmds = {"preflight": (3, cmd_preflight), "prog": (5, cmd_prog), "loop": (3, cmd_loop),
            "seed": (3, cmd_seed), "note": (4, lambda v, n, d, r: record(r, v, n, d)),
            "summary": (1, cmd_summary)}
    if a and a[0] == "cost" and len(a) >= 2:
        return cmd_cost(a[1], a[2:])
    if not a or a[0] not in cmds or len(a) - 1 != cmds[a[0]][0]:
        sys.exit(__doc__)
    cmds[a[0]][1](*a[1:])


if __name__ == "__main__":
    main()
