"""bench/standby.sh's helper (not a test).

  standby_sample.py STATUS.json OUT.csv PID   samples the standby's status file once a
                                              second into OUT.csv while process PID runs
  standby_sample.py --summarize OUT.csv BENCH.json MODE PREFETCH   one JSON row
  standby_sample.py --table ROWS.jsonl                              the markdown table
  standby_sample.py --gnuplot OUT.svg CSV...                        a gnuplot script
"""
import json
import os
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


def main():
    if sys.argv[1] == "--summarize":
        summarize(*sys.argv[2:6])
    elif sys.argv[1] == "--table":
        table(sys.argv[2])
    elif sys.argv[1] == "--gnuplot":
        gnuplot(sys.argv[2], sys.argv[3:])
    else:
        sample(sys.argv[1], sys.argv[2], int(sys.argv[3]))


if __name__ == "__main__":
    main()
