"""bench/serve.sh's scraper: reads a running `gpumem serve` over HTTP and /proc.

  serve.py wait PORT PIDS ALLOCS TIMEOUT_S
      until one scrape shows every pid of the file PIDS (one a line) with ALLOCS live
      allocations; exit 1 at the timeout, saying what the last scrape had.
  serve.py measure PORT AGENT PIDS WINDOW_S SCRAPE_S LOG OUT.json
      the agent's CPU (utime+stime of all its threads, and each thread's own time from
      schedstat) over WINDOW_S seconds while /metrics is scraped every SCRAPE_S seconds, the
      first at the start; its CPU in each second of the window; each scrape's latency, body
      size and CPU; how many other processes the agent's LOG says ended meanwhile. OUT.json.
  serve.py gone PORT AGENT PIDS LEFT TIMEOUT_S OUT.json
      after holders were told to exit: the seconds until a scrape shows at most LEFT of them,
      and the agent's CPU meanwhile; writes OUT.json.
"""
import http.client
import json
import os
import re
import statistics
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
PID_RE = re.compile(r'\bpid="(\d+)"')


def scrape(port):
    """GET /metrics: (seconds from connect to the body's last byte, status, body)."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    body = resp.read()
    took = time.monotonic() - t0
    conn.close()
    return took, resp.status, body.decode("utf-8", "replace")


def parse(body):
    """Per pid: live allocations and site series; and the number of series in all."""
    live, sites, series = {}, {}, 0
    for line in body.splitlines():
        if not line or line[0] == "#":
            continue
        series += 1
        if line.startswith("gpumem_process_live_allocations{"):
            m = PID_RE.search(line)
            if m:
                live[int(m.group(1))] = int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith("gpumem_site_memory_bytes{"):
            m = PID_RE.search(line)
            if m:
                sites[int(m.group(1))] = sites.get(int(m.group(1)), 0) + 1
    return live, sites, series


def read_pids(path):
    return {int(l) for l in open(path) if l.strip()}


def cpu_s(pid):
    """utime + stime of the whole process (every thread, ended ones too), in seconds."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) / TICK, int(f[12]) / TICK


def threads_ns(pid):
    """Each living thread's time on a CPU (schedstat, ns), by thread id, with its name."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            ns = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
        except OSError:
            continue
        out[int(tid)] = (name, ns)
    return out


def status_kb(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def cmd_wait(port, pids_file, allocs, timeout):
    ours = read_pids(pids_file)
    deadline = time.monotonic() + timeout
    live = {}
    while time.monotonic() < deadline:
        try:
            _, status, body = scrape(port)
        except OSError:
            status = 0
        if status == 200:
            live, _, _ = parse(body)
            if all(live.get(p) == allocs for p in ours):
                return 0
        time.sleep(0.5)
    full = sum(1 for p in ours if live.get(p) == allocs)
    seen = sum(1 for p in ours if p in live)
    print(f"bench-serve: after {timeout} s, the last scrape had {seen} of {len(ours)} holders, "
          f"{full} of them with {allocs} live allocations", file=sys.stderr)
    return 1


LOST_RE = re.compile(r'^gpumem_lost_total\{reason="(\w+)"\} (\d+)$', re.M)
ENDED_RE = re.compile(r"^gpumem: process (\d+) \(.*\) ended,")


def others_ended(log, ours):
    n = 0
    for line in open(log, errors="replace"):
        m = ENDED_RE.match(line)
        if m and int(m.group(1)) not in ours:
            n += 1
    return n


def all_ns(agent):
    return sum(ns for _, ns in threads_ns(agent).values())


def cmd_measure(port, agent, pids_file, window, every, log, out):
    ours = read_pids(pids_file)
    scrapes, seconds = [], []
    ended0 = others_ended(log, ours)
    th0 = threads_ns(agent)
    u0, s0 = cpu_s(agent)
    t0 = time.monotonic()
    last_ns = all_ns(agent)
    # One tick a second: the CPU of that second; a scrape at every SCRAPE_S-th tick.
    for k in range(int(window)):
        time.sleep(max(0.0, t0 + k - time.monotonic()))
        if k:
            now_ns = all_ns(agent)
            seconds.append((now_ns - last_ns) / 1e9)
            last_ns = now_ns
        if k % int(every):
            continue
        before = all_ns(agent)
        took, status, body = scrape(port)
        after = all_ns(agent)
        live, sites, series = parse(body)
        lost = {m.group(1): int(m.group(2)) for m in LOST_RE.finditer(body)}
        scrapes.append({"seconds": took, "status": status, "bytes": len(body.encode()),
                        "series": series, "cpu_s": (after - before) / 1e9,
                        "holders": sum(1 for p in ours if p in live),
                        "others": sum(1 for p in live if p not in ours),
                        "site_series": [sites.get(p, 0) for p in ours],
                        "live": sum(live.get(p, 0) for p in ours), "lost": lost})
    time.sleep(max(0.0, t0 + window - time.monotonic()))
    u1, s1 = cpu_s(agent)
    t1 = time.monotonic()
    th1 = threads_ns(agent)
    seconds.append((all_ns(agent) - last_ns) / 1e9)
    by_name = {}
    for tid, (name, ns) in th1.items():
        by_name[name] = by_name.get(name, 0) + (ns - th0.get(tid, (name, 0))[1]) / 1e9
    lat = [s["seconds"] for s in scrapes]
    last = scrapes[-1]
    res = {
        "wall_s": t1 - t0, "user_s": u1 - u0, "sys_s": s1 - s0,
        "cpu_pct": 100 * ((u1 - u0) + (s1 - s0)) / (t1 - t0),
        "threads_s": by_name,
        "second_min_pct": 100 * min(seconds), "second_median_pct": 100 * statistics.median(seconds),
        "second_max_pct": 100 * max(seconds),
        "others_ended": others_ended(log, ours) - ended0,
        "scrapes": len(scrapes), "failed": sum(1 for s in scrapes if s["status"] != 200),
        "lat_median_ms": 1e3 * statistics.median(lat), "lat_max_ms": 1e3 * max(lat),
        "lat_min_ms": 1e3 * min(lat),
        "scrape_cpu_median_ms": 1e3 * statistics.median(s["cpu_s"] for s in scrapes),
        "bytes": last["bytes"], "series": last["series"], "holders": last["holders"],
        "others": last["others"], "live": last["live"], "lost": lost,
        "lost_in_window": {k: v - scrapes[0]["lost"].get(k, 0) for k, v in lost.items()},
        "site_series_min": min(last["site_series"]), "site_series_max": max(last["site_series"]),
        "rss_kb": status_kb(agent, "VmRSS"), "anon_kb": status_kb(agent, "RssAnon"),
        "file_kb": status_kb(agent, "RssFile"),
    }
    json.dump(res, open(out, "w"), indent=1)
    return 0


def cmd_gone(port, agent, pids_file, want_left, timeout, out):
    ours = read_pids(pids_file)
    u0, s0 = cpu_s(agent)
    t0 = time.monotonic()
    left = len(ours)
    while time.monotonic() - t0 < timeout:
        _, status, body = scrape(port)
        if status == 200:
            live, _, _ = parse(body)
            left = sum(1 for p in ours if p in live)
            if left <= want_left:
                break
        time.sleep(0.2)
    took = time.monotonic() - t0
    u1, s1 = cpu_s(agent)
    json.dump({"seconds": took, "left": left, "cpu_s": (u1 - u0) + (s1 - s0),
               "rss_kb": status_kb(agent, "VmRSS")}, open(out, "w"), indent=1)
    return 0 if left <= want_left else 1


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "wait":
        return cmd_wait(int(args[0]), args[1], int(args[2]), float(args[3]))
    if cmd == "measure":
        return cmd_measure(int(args[0]), int(args[1]), args[2], float(args[3]),
                           float(args[4]), args[5], args[6])
    if cmd == "gone":
        return cmd_gone(int(args[0]), int(args[1]), args[2], int(args[3]), float(args[4]),
                        args[5])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
