#!/usr/bin/env python3
"""The report of bench/ycsb.sh: tables (OUT/ycsb.md), JSON (OUT/ycsb.json) and one SVG chart
per size and phase (OUT/ycsb-<size>-<phase>.svg, ops/s per system, drawn by gnuplot).

usage: ycsb_report.py ROWS.jsonl OUT MACHINE-NOTE

Each row is one phase's JSON line from a driver (ycsb_common.hpp), with what ycsb.sh added:
system, size, command (load, run, verify, crash), device_bytes and syncs (fsync and
fdatasync calls)."""
import json
import os
import subprocess
import sys


def writes_of(row):
    """Records written by the phase: the load's records, or the run's write operations."""
    return row["ops"] if row["command"] == "load" else row["writes"]["count"]


def per(value, count):
    return value / count if count else 0.0


def latency(h):
    return f'{h["p50_us"]} / {h["p99_us"]} / {h["p999_us"]} / {h["max_us"]}' if h["count"] else "–"


def phase_table(rows, size, phase):
    lines = [f"#### {size}, {'load' if phase == 'load' else 'workload ' + phase}", "",
             "| system | ops/s | reads p50 / p99 / p99.9 / max µs | writes p50 / p99 / p99.9 / max µs "
             "| retries | device bytes / op | syncs / write |",
             "|---|---:|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f'| {r["system"]} | {r["ops_per_s"]:,.0f} | {latency(r["reads"])} | '
                     f'{latency(r["writes"])} | {r["retries"]} | '
                     f'{per(r["device_bytes"], r["ops"]):,.0f} | '
                     f'{per(r["syncs"], writes_of(r)):.3f} |')
    return lines + [""]


def chart(rows, size, phase, out):
    data = os.path.join(out, f"ycsb-{size}-{phase}.dat")
    with open(data, "w") as f:
        for r in rows:
            f.write(f'"{r["system"]}" {r["ops_per_s"]:.1f}\n')
    svg = os.path.join(out, f"ycsb-{size}-{phase}.svg")
    title = f"durable YCSB, {size}, {'load' if phase == 'load' else 'workload ' + phase}"
    script = (f'set terminal svg size 720,360 dynamic\nset output "{svg}"\n'
              f'set title "{title}"\nset ylabel "operations per second"\nset style fill solid 0.6\n'
              'set boxwidth 0.6\nset yrange [0:*]\nset grid ytics\nunset key\n'
              f'plot "{data}" using 0:2:xtic(1) with boxes\n')
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)


def main():
    rows_path, out, machine = sys.argv[1:4]
    rows = [json.loads(line) for line in open(rows_path) if line.strip()]
    md = ["### Durable YCSB", "", f"Machine: {machine}.", ""]
    runs = [r for r in rows if r.get("command") == "run" and "failed" not in r]
    if runs:
        seconds = sorted({round(r["seconds"]) for r in runs})
        warmups = sorted({r.get("warmup_seconds", 0) for r in runs})
        md += [f"Each workload: {', '.join(f'{s:g}' for s in warmups)} s of unmeasured reads, "
               f"then {', '.join(str(s) for s in seconds)} s measured.", ""]
    sizes = [s for s in ("cached", "beyond") if any(r["size"] == s for r in rows)]
    for size in sizes:
        measured = [r for r in rows if r["size"] == size and r["command"] in ("load", "run")
                    and "failed" not in r]
        phases = []
        for r in measured:
            if r["phase"] not in phases:
                phases.append(r["phase"])
        systems = []
        for r in measured:
            if r["system"] not in systems:
                systems.append(r["system"])
        md += [f"### {size}: operations per second", "",
               "| system | " + " | ".join(phases) + " |", "|---|" + "---:|" * len(phases)]
        for s in systems:
            cells = []
            for p in phases:
                found = [r for r in measured if r["system"] == s and r["phase"] == p]
                cells.append(f'{found[0]["ops_per_s"]:,.0f}' if found else "–")
            md.append(f"| {s} | " + " | ".join(cells) + " |")
        md.append("")
        for p in phases:
            in_phase = [r for r in measured if r["phase"] == p]
            md += phase_table(in_phase, size, p)
            chart(in_phase, size, p, out)
    failed = [r for r in rows if "failed" in r]
    if failed:
        md += ["### Phases that failed", "", "| system | size | phase | why |", "|---|---|---|---|"]
        md += [f'| {r["system"]} | {r["size"]} | {r["phase"]} | {r["failed"]} |' for r in failed]
        md.append("")
    checks = [r for r in rows if r["command"] in ("verify", "crash") and "failed" not in r]
    if checks:
        md += ["### No acknowledged write lost", "",
               "| system | after | records read | acknowledged writes | lost |", "|---|---|---:|---:|---:|"]
        for r in checks:
            after = "kill -9 in workload A" if r["command"] == "crash" else f'the {r["size"]} run'
            md.append(f'| {r["system"]} | {after} | {r["verified_records"]:,} | '
                      f'{r["acknowledged_writes"]:,} | {r["lost"]} |')
        md.append("")
    configs = {}
    for r in rows:
        if "config" in r:
            configs.setdefault(r["system"], r["config"])
    md += ["### Configurations", ""] + [f"- **{s}**: {c}" for s, c in configs.items()] + [""]
    with open(os.path.join(out, "ycsb.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(out, "ycsb.json"), "w") as f:
        json.dump({"machine": machine, "rows": rows}, f, indent=1)
    print("\n".join(md))


main()
