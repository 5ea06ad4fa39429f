"""bench/standby.sh's helper (not a test).

  standby_sample.py STATUS.json OUT.csv PID   samples the standby's status file once a
                                              second into OUT.csv while process PID runs
  standby_sample.py --summarize OUT.csv BENCH.json MODE PREFETCH   one JSON row
  standby_sample.py --table ROWS.jsonl                              the markdown table
  standby_sample.py --gnuplot OUT.svg CSV...                        a gnuplot script
  --sync-cost mode:
  standby_sample.py --caught-up SECONDS BYTES STATUS.json...   waits until every standby is
                                              consistent, streaming and at most BYTES behind
                                              in replay (status 1 after SECONDS)
  standby_sample.py --sync-row KEY=VALUE...                    one JSON row for one run
  standby_sample.py --sync-table RUNS.jsonl OUT.json KEY=VALUE...   the markdown tables;
                                              the pairs, means and runs as JSON in OUT.json
"""
import csv
import json
import os
import statistics
import sys
import time

FIELDS = ["time_s", "primary_flushed", "received", "flushed", "replayed", "behind_bytes",
          "seconds_behind", "records_per_second", "pages_read", "prefetch_hits", "connected"]


def read_status(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None  # not written yet, or caught mid-write


def sample(status_path, csv_path, pid):
    started = time.monotonic()
    with open(csv_path, "w") as out:
        out.write(",".join(FIELDS) + "\n")
        while True:
            try:
                os.kill(pid, 0)
            except OSError:
                break
            s = read_status(status_path)
            if s:
                row = [round(time.monotonic() - started, 1), s["primary_flushed"], s["received"],
                       s["flushed"], s["replayed"], s["bytes_behind"]["replayed"],
                       s["seconds_behind"], round(s["records_per_second"]), s["pages_read"],
                       s["prefetch_hits"], int(s["connected"])]
                out.write(",".join(str(v) for v in row) + "\n")
                out.flush()
            time.sleep(1)  # the sampling period


def load_csv(path):
    with open(path) as f:
        head = f.readline().strip().split(",")
        return [dict(zip(head, map(float, line.strip().split(",")))) for line in f if line.strip()]


def slope(points):
    """Least-squares slope of (x, y) points."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


def summarize(csv_path, bench_path, mode, prefetch):
    rows = [r for r in load_csv(csv_path) if r["connected"]]
    with open(bench_path) as f:
        bench = json.load(f)
    second_half = rows[len(rows) // 2:]
    span = (rows[-1]["time_s"] - rows[0]["time_s"]) if len(rows) > 1 else 0
    shipped = (rows[-1]["received"] - rows[0]["received"]) / span if span else 0
    row = {
        "mode": mode, "prefetch": prefetch,
        "tps": bench.get("tps", 0),
        "wal_mb_per_s": shipped / 1e6,
        "lag_kb_mean": sum(r["behind_bytes"] for r in rows) / len(rows) / 1e3 if rows else 0,
        "lag_kb_max": max((r["behind_bytes"] for r in rows), default=0) / 1e3,
        "lag_s_max": max((r["seconds_behind"] for r in rows), default=0),
        "lag_kb_per_min_second_half": slope([(r["time_s"], r["behind_bytes"]) for r in second_half]) * 60 / 1e3,
        "lag_kb_end": rows[-1]["behind_bytes"] / 1e3 if rows else 0,
        "pages_read": rows[-1]["pages_read"] if rows else 0,
        "prefetch_hits": rows[-1]["prefetch_hits"] if rows else 0,
        "samples": len(rows),
    }
    print(json.dumps(row))


def table(rows_path):
    with open(rows_path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    print("| mode | prefetch | primary tps | WAL MB/s | lag mean kB | lag max kB | lag max s "
          "| lag trend, 2nd half (kB/min) | lag at end kB | pages read by replay | prefetch hits |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['mode']} | {r['prefetch']} | {r['tps']:.0f} | {r['wal_mb_per_s']:.1f} "
              f"| {r['lag_kb_mean']:.1f} | {r['lag_kb_max']:.1f} | {r['lag_s_max']:.2f} "
              f"| {r['lag_kb_per_min_second_half']:+.2f} | {r['lag_kb_end']:.1f} "
              f"| {r['pages_read']:.0f} | {r['prefetch_hits']:.0f} |")


def gnuplot(svg, csvs):
    print(f"set terminal svg size 1000,{260 * len(csvs) + 40} dynamic background rgb 'white'")
    print(f"set output '{svg}'")
    print("set datafile separator ','")
    print(f"set multiplot layout {len(csvs)},1")
    for path in csvs:
        title = os.path.basename(path)[len("timeline-"):-len(".csv")]
        print(f"set title '{title}: replay lag' noenhanced")
        print("set xlabel 'seconds'; set ylabel 'kB behind the primary'")
        print(f"plot '{path}' using 1:($6/1e3) every ::1 with lines title 'replay lag (kB)'")
    print("unset multiplot")


# ---- --sync-cost: the tps cost of waiting for synchronous standbys ----

def caught_up(timeout_s, max_bytes, paths):
    """0 once every standby is connected, consistent and at most max_bytes behind in replay."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = [read_status(p) for p in paths]
        if all(s and s.get("connected") and s.get("consistent")
               and s["bytes_behind"]["replayed"] <= max_bytes for s in states):
            return 0
        time.sleep(0.5)
    for p, s in zip(paths, [read_status(p) for p in paths]):
        print(f"{p}: {json.dumps(s) if s else 'no status'}", file=sys.stderr)
    return 1


def read_timeline(path):
    """tidemark bench --timeline rows as dicts of floats (an empty field is None)."""
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.append({k: (float(v) if v not in ("", None) else None) for k, v in r.items()})
    return rows


def key_values(args):
    """KEY=VALUE arguments; a key given more than once collects a list."""
    out = {}
    for a in args:
        k, _, v = a.partition("=")
        if k in out:
            out[k] = (out[k] if isinstance(out[k], list) else [out[k]]) + [v]
        else:
            out[k] = v
    return out


def as_list(v):
    return [] if v is None else (v if isinstance(v, list) else [v])


def number(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def sync_row(args):
    a = key_values(args)
    with open(a["bench"]) as f:
        bench = json.load(f)
    warmup = float(a["warmup"])
    timeline = read_timeline(a["timeline"])
    steady = [r for r in timeline if r["time_s"] > warmup]
    standbys = {}
    for path in as_list(a.get("standby_csv")):
        name = os.path.basename(path)[:-len(".csv")].rsplit("-", 1)[-1]
        rows = [r for r in load_csv(path) if r["connected"]] if os.path.getsize(path) else []
        flushed_lag = [max(r["primary_flushed"] - r["flushed"], 0) for r in rows]
        standbys[name] = {
            "samples": len(rows),
            "flushed_lag_kb_max": max(flushed_lag, default=0) / 1e3,
            "replay_lag_kb_mean": sum(r["behind_bytes"] for r in rows) / len(rows) / 1e3 if rows else None,
            "replay_lag_kb_max": max((r["behind_bytes"] for r in rows), default=0) / 1e3,
            "replay_lag_kb_end": rows[-1]["behind_bytes"] / 1e3 if rows else None,
            "replay_lag_s_max": max((r["seconds_behind"] for r in rows), default=0),
        }
    w = bench["wal"]
    row = {
        "mode": a["mode"], "standbys": int(a["standbys"]), "setting": a["setting"],
        "names": a["names"], "round": int(a["round"]), "seq": int(a["seq"]),
        "tps": sum(r["tps"] for r in steady) / len(steady) if steady else None,
        "tps_whole_run": bench["tps"],
        "transactions": bench["transactions"], "duration_s": bench["duration_s"],
        "latency_ms": {k: bench["latency_ms"][k] for k in ("avg", "p50", "p99", "p999", "max")},
        "worst_second_tps": min((r["tps"] for r in steady), default=None),
        "seconds_without_commit": sum(1 for r in timeline if r["tps"] == 0),
        "wal_fsync_us": {k: w.get("fsync_" + k + "_us") for k in ("avg", "p50", "p99", "max")},
        "wal_fsyncs_per_commit": w.get("fsyncs_per_commit"),
        "wal_mb_per_s": w["bytes"] / bench["duration_s"] / 1e6 if bench["duration_s"] else None,
        "checkpoints": bench["checkpoints"]["timed"] + bench["checkpoints"]["requested"],
        "all_streaming_after_s": number(a.get("connected_s")),
        "bench_exit": int(a["bench_exit"]),
        "standby_exits": [int(x) for x in a.get("standby_exits", "").split(",") if x != ""],
        "primary_log_warnings": int(a.get("primary_warnings", 0)),
        "standby_log_warnings": int(a.get("standby_warnings", 0)),
        "standby_disconnects": int(a.get("disconnects", 0)),
        "standbys_sampled": standbys,
        "started": a.get("started"),
    }
    print(json.dumps(row))
    print(f"  tps {fmt(row['tps'], '.0f')} after the warm-up ({row['tps_whole_run']:.0f} over the run), "
          f"commit p50 {row['latency_ms']['p50']:.2f} ms, p99 {row['latency_ms']['p99']:.2f} ms, "
          f"WAL fdatasync p50 {fmt(row['wal_fsync_us']['p50'], '.0f')} µs, every standby streaming "
          f"{fmt(row['all_streaming_after_s'], '.1f')} s after the WAL sender listened", file=sys.stderr)


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def ratio(a, b):
    return a / b if a is not None and b else None


def config_label(standbys, names):
    return "1 standby (`" + names + "`)" if standbys == 1 else f"3 standbys, `{names}`"


def sync_table(rows_path, json_path, args):
    settings = key_values(args)
    with open(rows_path) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    pairs, means = [], []
    configs = []
    for r in runs:
        if (r["mode"], r["standbys"]) not in configs:
            configs.append((r["mode"], r["standbys"]))
    for mode, n in configs:
        mine = [r for r in runs if r["mode"] == mode and r["standbys"] == n]
        names = next(r["names"] for r in mine if r["setting"] != "off")
        sync_setting = next(r["setting"] for r in mine if r["setting"] != "off")
        rounds = sorted({r["round"] for r in mine})
        group = []
        for rd in rounds:
            off = [r for r in mine if r["round"] == rd and r["setting"] == "off"]
            syn = [r for r in mine if r["round"] == rd and r["setting"] != "off"]
            if not off or not syn:
                continue
            off, syn = off[0], syn[0]
            p = {"mode": mode, "standbys": n, "names": names, "setting": sync_setting, "round": rd,
                 "order": "off first" if off["seq"] < syn["seq"] else f"{sync_setting} first",
                 "off_tps": off["tps"], "sync_tps": syn["tps"], "ratio": ratio(syn["tps"], off["tps"]),
                 "off_latency_ms": {k: off["latency_ms"][k] for k in ("p50", "p99")},
                 "sync_latency_ms": {k: syn["latency_ms"][k] for k in ("p50", "p99")},
                 "off_wal_fsync_p50_us": off["wal_fsync_us"]["p50"],
                 "sync_wal_fsync_p50_us": syn["wal_fsync_us"]["p50"]}
            group.append(p)
        pairs += group
        if group:
            m = {"mode": mode, "standbys": n, "names": names, "setting": sync_setting,
                 "pairs": len(group),
                 "off_tps": mean(p["off_tps"] for p in group),
                 "sync_tps": mean(p["sync_tps"] for p in group)}
            m["ratio_of_means"] = ratio(m["sync_tps"], m["off_tps"])
            m["pair_ratios"] = [p["ratio"] for p in group]
            for side in ("off", "sync"):
                m[side + "_latency_ms"] = {k: mean(p[side + "_latency_ms"][k] for p in group)
                                           for k in ("p50", "p99")}
            means.append(m)
    off_fsync = [r["wal_fsync_us"]["p50"] for r in runs if r["setting"] == "off"
                 and r["wal_fsync_us"]["p50"] is not None]
    all_fsync = [r["wal_fsync_us"]["p50"] for r in runs if r["wal_fsync_us"]["p50"] is not None]
    fsync = {"p50_us_median_of_off_runs": statistics.median(off_fsync) if off_fsync else None,
             "p50_us_range_all_runs": [min(all_fsync), max(all_fsync)] if all_fsync else None}

    warmup = settings.get("warmup", "?")
    lines = []
    lines.append(f"Synchronous standbys: tps with `synchronous_standby=remote_flush` against `off` "
                 f"(scale {settings.get('scale')}, {settings.get('clients')} clients, "
                 f"{settings.get('seconds')} s per run, tps over each run after its first {warmup} s; "
                 f"{settings.get('rounds')} rounds of alternating pairs, ABBA).")
    lines.append("")
    lines.append("| mode | standbys; remote_flush waits for | round (order) | off tps | remote_flush tps "
                 "| remote_flush / off | commit p50 ms, off / sync | commit p99 ms, off / sync |")
    lines.append("|---|---|---|---:|---:|---:|---|---|")
    for m in means:
        label = config_label(m["standbys"], m["names"])
        for p in [p for p in pairs if p["mode"] == m["mode"] and p["standbys"] == m["standbys"]]:
            lines.append(f"| {p['mode']} | {label} | {p['round']} ({p['order']}) | {fmt(p['off_tps'], '.0f')} "
                         f"| {fmt(p['sync_tps'], '.0f')} | {fmt(p['ratio'], '.3f')} "
                         f"| {fmt(p['off_latency_ms']['p50'], '.2f')} / {fmt(p['sync_latency_ms']['p50'], '.2f')} "
                         f"| {fmt(p['off_latency_ms']['p99'], '.2f')} / {fmt(p['sync_latency_ms']['p99'], '.2f')} |")
        lines.append(f"| {m['mode']} | {label} | **mean** | {fmt(m['off_tps'], '.0f')} "
                     f"| {fmt(m['sync_tps'], '.0f')} | **{fmt(m['ratio_of_means'], '.3f')}** "
                     f"| {fmt(m['off_latency_ms']['p50'], '.2f')} / {fmt(m['sync_latency_ms']['p50'], '.2f')} "
                     f"| {fmt(m['off_latency_ms']['p99'], '.2f')} / {fmt(m['sync_latency_ms']['p99'], '.2f')} |")
    lines.append("")
    rng = fsync["p50_us_range_all_runs"]
    lines.append(f"WAL fdatasync p50 on the primary (the disk's speed this day): "
                 f"{fmt(fsync['p50_us_median_of_off_runs'], '.0f')} µs, the median over the off runs; "
                 f"{fmt(rng[0] if rng else None, '.0f')}–{fmt(rng[1] if rng else None, '.0f')} µs over all runs.")
    lines.append("")
    lines.append("Every run, in the order run:")
    lines.append("")
    lines.append("| # | mode | standbys | setting | tps (after warm-up) | tps (whole run) | p50 ms | p99 ms "
                 "| max ms | worst second tps | WAL fdatasync p50 µs | fdatasyncs / commit "
                 "| every standby streaming after s | max flushed lag kB | max replay lag kB | notes |")
    lines.append("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in sorted(runs, key=lambda r: r["seq"]):
        sb = r["standbys_sampled"].values()
        notes = []
        if r["bench_exit"]:
            notes.append(f"bench exit {r['bench_exit']}")
        if any(r["standby_exits"]):
            notes.append("standby exit " + ",".join(map(str, r["standby_exits"])))
        if r["seconds_without_commit"]:
            notes.append(f"{r['seconds_without_commit']} s without a commit")
        if r["all_streaming_after_s"] is None:
            notes.append("a standby never streamed")
        if r.get("standby_disconnects"):
            notes.append(f"{r['standby_disconnects']} standby connection(s) lost during the run")
        if r["primary_log_warnings"] or r["standby_log_warnings"]:
            notes.append(f"log WARNING/ERROR lines: primary {r['primary_log_warnings']}, "
                         f"standbys {r['standby_log_warnings']}")
        lines.append(f"| {r['seq']} | {r['mode']} | {r['standbys']} | {r['setting']} | {fmt(r['tps'], '.0f')} "
                     f"| {fmt(r['tps_whole_run'], '.0f')} | {fmt(r['latency_ms']['p50'], '.2f')} "
                     f"| {fmt(r['latency_ms']['p99'], '.2f')} | {fmt(r['latency_ms']['max'], '.1f')} "
                     f"| {fmt(r['worst_second_tps'], '.0f')} | {fmt(r['wal_fsync_us']['p50'], '.0f')} "
                     f"| {fmt(r['wal_fsyncs_per_commit'], '.3f')} | {fmt(r['all_streaming_after_s'], '.1f')} "
                     f"| {fmt(max((s['flushed_lag_kb_max'] for s in sb), default=None), '.1f')} "
                     f"| {fmt(max((s['replay_lag_kb_max'] for s in sb), default=None), '.1f')} "
                     f"| {'; '.join(notes)} |")
    lines.append("")
    lines.append(f"tps after warm-up: the bench's per-second timeline from second {warmup} on; whole run: "
                 "bench's own figure, which includes the first commits waiting for the standbys to "
                 "connect. Every standby streaming after: seconds from the primary's \"WAL sender "
                 "listening\" until it logged each standby streaming. Lag: sampled every second from "
                 "each standby's status; flushed lag is what remote_flush waits for.")
    lines.append("")
    lines.append("The primary and its standbys share this machine's cores and disk: a standby's "
                 "fdatasync and replay compete with the primary's, which standbys on machines of "
                 "their own would not, so these ratios overstate the cost of waiting. The off runs "
                 "have the same standbys streaming asynchronously: a ratio isolates the waiting.")
    print("\n".join(lines))
    with open(json_path, "w") as f:
        json.dump({"settings": settings, "wal_fdatasync": fsync, "means": means, "pairs": pairs,
                   "runs": runs}, f, indent=1)
        f.write("\n")


def main():
    if sys.argv[1] == "--caught-up":
        sys.exit(caught_up(float(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]))
    elif sys.argv[1] == "--sync-row":
        sync_row(sys.argv[2:])
    elif sys.argv[1] == "--sync-table":
        sync_table(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif sys.argv[1] == "--summarize":
        summarize(*sys.argv[2:6])
    elif sys.argv[1] == "--table":
        table(sys.argv[2])
    elif sys.argv[1] == "--gnuplot":
        gnuplot(sys.argv[2], sys.argv[3:])
    else:
        sample(sys.argv[1], sys.argv[2], int(sys.argv[3]))


if __name__ == "__main__":
    main()
