"""`tidemark bench` with asynchronous commit finishes on time (commit c91b9ef: before the
scheduler's max-throughput was bounded, sessions whose next run message was always queued
kept their scheduler threads and the stop request never ran), also on one actor thread and
with the sharing scheduler; group commit with 1 and 3 syncers and idle polling off
commits and stays consistent; bad wal_sync_concurrency / idle_poll values are refused with
a message naming the setting; `verify` then finds the data directory clean."""
import json
import os
import subprocess
import tempfile
import time

from harness import (Tidemark, check, finish, parse_args, remove, scratch, tree_digest,
                     verified_clean)

BENCH_TIMEOUT_S = 60


def bench(tm, directory, label, settings, clients=4, seconds=2):
    """Runs a timed bench; checks it exits 0 well within the timeout and that its JSON
    report counts transactions. Returns the report (or None)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        report_path = out.name
    args = ["bench", "-D", directory, "-c", str(clients), "-T", str(seconds),
            "--json", report_path]
    args += [x for s in settings for x in ("--set", s)]
    started = time.monotonic()
    report = None
    try:
        result = tm.run(*args, timeout=BENCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        check(False, f"{label}: bench -T {seconds} did not finish within {BENCH_TIMEOUT_S} s")
        remove(report_path)
        return None
    took = time.monotonic() - started
    check(result.returncode == 0,
          f"{label}: bench exited {result.returncode}: {result.stderr[-2000:]}")
    if os.path.getsize(report_path) > 0:
        with open(report_path) as f:
            report = json.load(f)
    remove(report_path)
    check(report is not None, f"{label}: no JSON report")
    if report:
        check(report["transactions"] > 0, f"{label}: no transactions: {report}")
        check(report["clients"] == clients, f"{label}: report shows {report['clients']} clients")
        print(f"{label}: exit {result.returncode} after {took:.1f} s, "
              f"{report['transactions']} transactions, {report['tps']:.0f} tps, "
              f"{report['wal']['fsyncs']} WAL fsyncs", flush=True)
    return report


def refused(tm, directory, label, setting, *needles):
    before = tree_digest(directory)
    result = tm.run("bench", "-D", directory, "-t", "5", "--set", setting, timeout=BENCH_TIMEOUT_S)
    output = result.stdout + result.stderr
    check(result.returncode == 2, f"{label}: exit {result.returncode}, expected 2: {output[-1500:]}")
    for needle in needles:
        check(needle in output, f"{label}: message does not mention {needle!r}: {output[-1500:]}")
    check(tree_digest(directory) == before, f"{label}: the data directory was modified")
    print(f"{label}: exit {result.returncode}: {output.strip().splitlines()[0][:160]}", flush=True)


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    directory = scratch()
    try:
        result = tm.run("init", "-D", directory, "-s", "1")
        check(result.returncode == 0, f"init failed: {result.stderr[-2000:]}")

        # The case that used to hang: asynchronous commit, four sessions.
        bench(tm, directory, "synchronous_commit=off", ["synchronous_commit=off"])
        # The same with every session on one scheduler thread, and with the sharing policy.
        bench(tm, directory, "synchronous_commit=off, actor_threads=1",
              ["synchronous_commit=off", "actor_threads=1"])
        bench(tm, directory, "synchronous_commit=off, actor_scheduler=sharing",
              ["synchronous_commit=off", "actor_scheduler=sharing", "actor_threads=1"])
        # Group commit with one and with three syncers, with and without idle polling.
        for setting in (["wal_sync_concurrency=1"], ["wal_sync_concurrency=3"],
                        ["wal_sync_concurrency=3", "idle_poll=off"],
                        ["wal_sync_concurrency=16", "io_method=sync"]):
            report = bench(tm, directory, ", ".join(setting), setting, clients=4, seconds=1)
            if report:
                check(report["wal"]["fsyncs"] > 0, f"{setting}: no WAL fsync with synchronous commit")

        refused(tm, directory, "wal_sync_concurrency=0", "wal_sync_concurrency=0",
                "wal_sync_concurrency", "1 .. 16")
        refused(tm, directory, "wal_sync_concurrency=17", "wal_sync_concurrency=17",
                "wal_sync_concurrency", "1 .. 16")
        refused(tm, directory, "wal_sync_concurrency=many", "wal_sync_concurrency=many",
                "wal_sync_concurrency", "not a number")
        refused(tm, directory, "idle_poll=sometimes", "idle_poll=sometimes", "idle_poll",
                "on or off")

        result, report = tm.verify(directory)
        check(verified_clean(result, report),
              f"verify after the benches failed: {result.stdout[-3000:]} {result.stderr[-2000:]}")
        if report:
            print(f"verify: ok={report['ok']}, lost_commits={report['lost_commits']}, "
                  f"checksum_failures={report['checksum_failures']}", flush=True)
    finally:
        remove(directory)
    finish("asynchronous-commit bench")


if __name__ == "__main__":
    main()
