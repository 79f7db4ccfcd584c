#!/usr/bin/env python3
"""Compares what a tests/gpu program says it holds with what gpumem reported for it.

  compare.py prog NAME STDOUT SNAPSHOT.json TRACE RESULTS.jsonl
  compare.py torch STDOUT SNAPSHOT.json TRACE TRACE_STDOUT RESULTS.jsonl
  compare.py summary RESULTS.jsonl

Prints a human-readable comparison, and appends one JSON line per program to RESULTS.jsonl,
which `summary` turns into the final block (verdicts and the open questions of DESIGN.md)."""
import json
import os
import sys
from collections import Counter, defaultdict

KINDS = ("device", "managed", "host", "async", "vmm")
GPU_KINDS = ("device", "managed", "async", "vmm")
FIELDS = ("current_bytes", "current_allocs", "peak_bytes", "alloc_count", "free_count",
          "alloc_bytes_total", "failed_count")


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


def pick_process(snap, pid, comm_hint=None):
    procs = (snap or {}).get("processes") or []
    for p in procs:
        if p.get("pid") == pid:
            return p
    if comm_hint:
        same = [p for p in procs if comm_hint.startswith(p.get("comm", "?"))]
        if len(same) == 1:
            return same[0]
    return max(procs, key=lambda p: p.get("alloc_count", 0), default=None)


def frame_name(fr):
    sym = fr.get("symbol")
    mod = os.path.basename(fr.get("module") or "?")
    return f"{sym}" if sym else f"{mod}+0x{fr.get('offset', 0):x}"


def frames_str(frames, n=6):
    return " < ".join(frame_name(f) for f in (frames or [])[:n])


def site_symbols(site):
    return {f.get("symbol") for f in site.get("frames") or [] if f.get("symbol")}


def fmt(n):
    if not isinstance(n, (int, float)):
        return str(n)
    a = abs(n)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if a >= div:
            return f"{n} ({n / div:.2f} {unit})"
    return str(n)


def trace_stats(path):
    """Counts of trace events by event/layer/api, and the bytes the trace says remain."""
    events = json_lines(path)
    by = Counter()
    layers = Counter()
    live = {}
    for e in events:
        ev = e.get("event")
        by[(ev, e.get("layer"), e.get("api"))] += 1
        if ev in ("alloc", "free", "alloc_failed"):
            layers[e.get("layer")] += 1
        key = (e.get("pid"), e.get("addr"), e.get("kind") == "vmm")
        if ev == "alloc":
            live[key] = (e.get("size") or 0, e.get("kind"))
        elif ev == "free":
            live.pop(key, None)
    net = sum(s for s, k in live.values() if k in GPU_KINDS)
    return {"events": len(events), "layers": dict(layers),
            "by_api": {f"{ev}/{layer}/{api}": n for (ev, layer, api), n in sorted(
                by.items(), key=lambda kv: str(kv[0]))},
            "net_gpu_bytes": net}, events


def print_trace(ts):
    print(f"  trace: {ts['events']} events; alloc/free/failed by layer: {ts['layers'] or '{}'}")
    for k, n in ts["by_api"].items():
        print(f"    {k:50s} {n}")


def cmd_prog(name, stdout, snap_path, trace_path, results):
    lines = json_lines(stdout)
    exp = next((l for l in reversed(lines) if "gpumem_expect" in l), None)
    snap = load_json(snap_path)
    ts, _ = trace_stats(trace_path)
    res = {"name": name, "verdict": "NO-RESULT", "diffs": []}
    print(f"== {name}")
    for l in lines:
        if "error" in l or "oom" in l:
            print(f"  program: {json.dumps(l)}")
    if not exp:
        print("  program printed no expectation line")
    proc = pick_process(snap, exp.get("pid") if exp else None, name)
    tracer = (snap or {}).get("tracer") or {}
    lost = (snap or {}).get("lost") or {}
    res.update(tracer={k: tracer.get(k) for k in ("files_attached", "probes_attached",
                                                    "nested_calls", "stale_inflight")},
               lost={k: v for k, v in lost.items() if v}, trace=ts,
               runtime=("vmm" not in name))
    if exp and proc:
        print(f"  {'field':28s} {'program':>26s} {'gpumem':>26s}")
        diffs = []
        rows = [(f, exp.get(f), proc.get(f)) for f in FIELDS]
        rows += [(f"by_kind.{k}", exp["by_kind"].get(k), (proc.get("by_kind") or {}).get(k))
                 for k in KINDS]
        for func, kept in exp.get("sites", {}).items():
            got = sum(s.get("current_bytes", 0) for s in proc.get("sites") or []
                      if func in site_symbols(s))
            rows.append((f"site {func}", kept, got))
        for f, e, g in rows:
            mark = "" if e == g else "   <-- DIFF"
            if e != g:
                diffs.append(f"{f}: program {e} gpumem {g}")
            print(f"  {f:28s} {str(e):>26s} {str(g):>26s}{mark}")
        expected_funcs = set(exp.get("sites", {}))
        extra = [s for s in proc.get("sites") or [] if not (site_symbols(s) & expected_funcs)]
        for s in extra:
            print(f"  site not made by the program: {s.get('api')} {s.get('kind')} "
                  f"current {s.get('current_bytes')} allocs {s.get('alloc_count')} "
                  f"frees {s.get('free_count')} failed {s.get('failed_count')} :: "
                  f"{frames_str(s.get('frames'))}")
        if "oom_failed_size" in exp:
            fails = [f for f in (snap.get("failures") or []) if f.get("pid") == proc.get("pid")]
            for f in fails:
                print(f"  gpumem failure: {f.get('api')} size {fmt(f.get('size'))} error "
                      f"{f.get('error')} {f.get('error_name')} held "
                      f"{fmt(f.get('process_bytes_at_failure'))} :: {frames_str(f.get('frames'))}")
            ok = any(f.get("size") == exp["oom_failed_size"] and f.get("error") == 2 and
                     f.get("process_bytes_at_failure") == exp["oom_held_bytes"] for f in fails)
            print(f"  failure matches (1 GiB, error 2, held {fmt(exp['oom_held_bytes'])}): "
                  f"{'yes' if ok else 'NO'}")
            if not ok:
                diffs.append("oom failure record does not match")
        if ts["events"]:
            tn = ts["net_gpu_bytes"]
            print(f"  trace net GPU bytes (alloc - free) {tn} vs program current "
                  f"{exp.get('current_bytes')}{'' if tn == exp.get('current_bytes') else '   <-- DIFF'}")
            if tn != exp.get("current_bytes"):
                diffs.append(f"trace net bytes {tn}")
        res["diffs"] = diffs
        res["verdict"] = "PASS" if not diffs else "DIFF"
        if exp.get("errors"):  # the program's own numbers are then not what it meant to do
            diffs.append(f"program reported {exp['errors']} CUDA errors")
            res["verdict"] = "CUDA-ERROR"
    elif exp and not proc:
        print("  gpumem reported no process")
    if exp:
        for k in ("device_name", "driver_version", "runtime_version", "granularity", "pitch",
                  "default_pool", "own_pool"):
            if k in exp:
                print(f"  {k}: {exp[k]}")
        mb, me = exp.get("mem_before"), exp.get("mem_at_exit")
        if mb and me:
            print(f"  cudaMemGetInfo free before {fmt(mb['free'])}, at exit {fmt(me['free'])}, "
                  f"drop {fmt(mb['free'] - me['free'])}, total {fmt(mb['total'])}")
        if exp.get("mem_at_failure"):
            print(f"  cudaMemGetInfo at failure: free {fmt(exp['mem_at_failure']['free'])}")
    print(f"  tracer: {res['tracer']}  lost (non-zero): {res['lost'] or 'none'}")
    print_trace(ts)
    print(f"  verdict: {res['verdict']}" + (f" ({'; '.join(res['diffs'])})" if res["diffs"] else ""))
    with open(results, "a") as f:
        f.write(json.dumps(res) + "\n")


def site_key(frames):
    # The whole stack, as gpumem's sites: in PyTorch every allocation shares the caching
    # allocator's first frames and differs only deeper down.
    return tuple(frame_name(f) for f in frames or [])


def cmd_torch(stdout, snap_path, trace_path, trace_stdout, results):
    lines = json_lines(stdout)
    steps = [l for l in lines if "step" in l]
    exp = next((l for l in reversed(lines) if "torch_expect" in l), None)
    snap = load_json(snap_path)
    res = {"name": "torch_leak", "verdict": "NO-RESULT", "diffs": []}
    print("== torch_leak")
    for s in steps:
        print(f"  step {s['step']:3d} allocated {s['allocated']:>12d} reserved {s['reserved']:>12d}"
              f" nvml {s.get('nvml_used')}")
    if not exp or "error" in exp:
        print(f"  torch: {json.dumps(exp)}")
    proc = pick_process(snap, exp.get("pid") if exp else None, "python")
    if exp and proc and "reserved" in exp:
        cur, rsv = proc.get("current_bytes", 0), exp["reserved"]
        print(f"  gpumem current_bytes {fmt(cur)}")
        print(f"  torch memory_reserved {fmt(rsv)}  (allocated {fmt(exp['allocated'])}, "
              f"max_reserved {fmt(exp['max_reserved'])})")
        nv = exp.get("nvml_used") or {}
        print(f"  NVML used ({exp.get('nvml_source')}): this process {fmt(nv.get('self'))}, all "
              f"compute processes {fmt(nv.get('all'))} (includes the CUDA context, which no "
              f"allocation call makes)")
        print(f"  gpumem - reserved = {fmt(cur - rsv)}; peak_bytes {fmt(proc.get('peak_bytes'))}; "
              f"by_kind {proc.get('by_kind')}; allocs {proc.get('alloc_count')} "
              f"frees {proc.get('free_count')} failed {proc.get('failed_count')}")
        res.update(gpumem_current=cur, torch_reserved=rsv, nvml_used=exp.get("nvml_used"),
                   torch_version=exp.get("torch_version"))
        res["verdict"] = "PASS" if cur == rsv else "DIFF"
        if cur != rsv:
            res["diffs"].append(f"current_bytes {cur} vs reserved {rsv}")
        sites = sorted(proc.get("sites") or [], key=lambda s: -s.get("current_bytes", 0))
        print("  largest sites at exit (gpumem snapshot):")
        for s in sites[:5]:
            print(f"    {fmt(s.get('current_bytes')):>24s} in {s.get('current_allocs')} allocs "
                  f"({s.get('api')}, {s.get('kind')}) :: {frames_str(s.get('frames'), 30)}")
    elif exp:
        print("  gpumem reported no process for the torch run")
    tracer = (snap or {}).get("tracer") or {}
    res["tracer"] = {k: tracer.get(k) for k in ("files_attached", "probes_attached",
                                                "nested_calls")}
    print(f"  tracer: {res['tracer']}  lost: "
          f"{ {k: v for k, v in ((snap or {}).get('lost') or {}).items() if v} or 'none'}")
    # Growth per site from the trace, step by step (torch prints CLOCK_REALTIME like gpumem).
    ts, events = trace_stats(trace_path)
    if events:
        print_trace(ts)
    # The trace run is a second run of the loop: its own stdout gives its step times.
    tsteps = [l for l in json_lines(trace_stdout) if "step" in l]
    if events and tsteps:
        bounds = [s["t_ns"] for s in tsteps]
        live, per_site = {}, defaultdict(lambda: [0] * len(bounds))
        cur = defaultdict(int)
        i = 0
        for e in sorted((e for e in events if e.get("event") in ("alloc", "free")),
                        key=lambda e: e.get("time_ns", 0)):
            while i < len(bounds) and e.get("time_ns", 0) > bounds[i]:
                for k, v in cur.items():
                    per_site[k][i] = v
                i += 1
            if e["event"] == "alloc":
                k = site_key(e.get("frames"))
                live[(e.get("pid"), e.get("addr"))] = (k, e.get("size") or 0)
                cur[k] += e.get("size") or 0
            else:
                got = live.pop((e.get("pid"), e.get("addr")), None)
                if got:
                    cur[got[0]] -= got[1]
        while i < len(bounds):
            for k, v in cur.items():
                per_site[k][i] = v
            i += 1
        if per_site:
            a = min(3, len(bounds) - 1)
            grow = max(per_site.items(), key=lambda kv: kv[1][-1] - kv[1][a])
            k, series = grow
            print(f"  site that grows most from step {a} to {len(bounds) - 1} (trace): "
                  f"+{fmt(series[-1] - series[a])}, "
                  f"{fmt((series[-1] - series[a]) // max(1, len(bounds) - 1 - a))} per step")
            print(f"    frames: {' < '.join(k[:30])}")
            print(f"    live bytes per step: {series}")
            res["growing_site"] = {"frames": list(k), "per_step": series}
    print(f"  verdict: {res['verdict']}" + (f" ({'; '.join(res['diffs'])})" if res["diffs"] else ""))
    with open(results, "a") as f:
        f.write(json.dumps(res) + "\n")


def cmd_summary(results):
    rs = json_lines(results)
    for r in rs:
        d = f" - {'; '.join(r['diffs'])}" if r.get("diffs") else ""
        print(f"  {r['verdict']:9s} {r['name']}{d}")
    print("open question 1: do driver cuMem* probes fire inside runtime calls?")
    rt = [r for r in rs if r.get("runtime") and r["name"] != "torch_leak" and r.get("tracer")]
    drv = [r for r in rs if r["name"].startswith("vmm")]
    for r in rt:
        t = r.get("tracer") or {}
        print(f"  {r['name']:14s} nested_calls {t.get('nested_calls')}  trace alloc/free/failed "
              f"by layer {r.get('trace', {}).get('layers')}  files_attached "
              f"{t.get('files_attached')}")
    nested = [r for r in rt if (r.get("tracer") or {}).get("nested_calls")]
    drv_ok = any((r.get("trace") or {}).get("layers", {}).get("driver") for r in drv)
    if not rt:
        print("  answer: unknown (no runtime program ran)")
    elif nested:
        print("  answer: YES - the runtime calls exported cuMem* symbols; gpumem skipped "
              f"nested driver calls in {', '.join(r['name'] for r in nested)}")
    elif drv_ok:
        print("  answer: NO - driver probes work (vmm program saw driver events) but never "
              "fired inside runtime calls: the runtime uses internal entry points "
              "(cuGetProcAddress), so the runtime probes cannot be dropped")
    else:
        print("  answer: inconclusive - nested_calls 0, and the driver-only program produced "
              "no driver events to show the driver probes work")


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "prog" and len(sys.argv) == 7:
        cmd_prog(*sys.argv[2:])
    elif cmd == "torch" and len(sys.argv) == 7:
        cmd_torch(*sys.argv[2:])
    elif cmd == "summary" and len(sys.argv) == 3:
        cmd_summary(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
