"""`tidemark bench --json --timeline` reports what bench/compare.sh and plot_timeline.sh
read: the WAL fdatasync latency spread (p50 <= p99 <= max, its average inside it), and one
timeline row per second whose columns are all present and numeric, whose commit and fsync
maxima are positive while transactions commit, and whose steal share is a percentage; in
doublewrite mode, the ring fdatasyncs' spread the same way."""
import csv
import json
import os
import tempfile

from harness import Tidemark, check, finish, parse_args, remove, scratch

TIMELINE_COLUMNS = ["time_s", "tps", "p99_ms", "wal_bytes", "checkpoint_phase", "dirty_buffers",
                    "written_checkpoint", "written_bgwriter", "written_backend", "max_ms",
                    "wal_fsync_max_ms", "steal_pct"]


def bench_report(tm, directory, report_path, label, *args):
    """Runs a bench of 4 clients writing its JSON report to report_path; returns the report
    (empty when the bench failed)."""
    result = tm.run("bench", "-D", directory, "-c", "4", "--json", report_path, *args, timeout=120)
    if not check(result.returncode == 0, f"{label}: bench exited {result.returncode}: "
                                         f"{result.stderr[-2000:]}"):
        return {}
    with open(report_path) as f:
        return json.load(f)


def spread_in_order(section, label):
    """fsyncs were counted, and their p50 <= p99 <= max."""
    check(section.get("fsyncs", 0) > 0, f"{label}: no fsyncs counted: {section}")
    check(0 < section.get("fsync_p50_us", 0) <= section.get("fsync_p99_us", 0)
          <= section.get("fsync_max_us", 0), f"{label}: fsync quantiles out of order: {section}")


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    directory = scratch()
    report_path = tempfile.mktemp(suffix=".json")
    timeline_path = tempfile.mktemp(suffix=".csv")
    try:
        result = tm.run("init", "-D", directory, "-s", "1")
        check(result.returncode == 0, f"init failed: {result.stderr[-2000:]}")
        wal = bench_report(tm, directory, report_path, "WAL", "-T", "3",
                           "--timeline", timeline_path).get("wal", {})
        print(f"wal: {wal}", flush=True)
        spread_in_order(wal, "WAL under synchronous commit")
        # The average lies between the smallest and largest fsync; the quantiles are bucket
        # edges (5 % wide), so allow that much.
        check(wal.get("fsync_avg_us", 0) <= wal.get("fsync_max_us", 0) * 1.05,
              f"average above the maximum: {wal}")

        with open(timeline_path) as f:
            rows = list(csv.reader(f))
        check(rows and rows[0] == TIMELINE_COLUMNS, f"timeline header: {rows[:1]}")
        body = rows[1:]
        check(len(body) >= 2, f"expected a row per second of a 3 s run, got {len(body)}")
        for row in body:
            if not check(len(row) == len(TIMELINE_COLUMNS), f"row has {len(row)} fields: {row}"):
                continue
            values = dict(zip(TIMELINE_COLUMNS, row))
            numbers = {k: float(v) for k, v in values.items() if v != ""}
            check(set(values) - set(numbers) <= {"steal_pct"}, f"empty fields: {row}")
            if numbers["tps"] > 0:
                check(numbers["max_ms"] > 0, f"commits but no commit latency: {row}")
                check(numbers["wal_fsync_max_ms"] > 0, f"commits but no WAL fsync latency: {row}")
            if "steal_pct" in numbers:
                check(0 <= numbers["steal_pct"] <= 100, f"steal share not a percentage: {row}")
        print(f"timeline: {len(body)} rows, last {body[-1] if body else None}", flush=True)

        # Doublewrite: the ring's fdatasyncs have their own spread.
        dw = bench_report(tm, directory, report_path, "doublewrite", "-T", "2",
                          "--set", "torn_page_protection=doublewrite",
                          "--set", "shared_buffers=1MB").get("doublewrite", {})
        print(f"doublewrite: {dw}", flush=True)
        spread_in_order(dw, "doublewrite ring with a 1 MB pool")
    finally:
        remove(directory)
        remove(report_path)
        remove(timeline_path)
    finish("bench report")


if __name__ == "__main__":
    main()
