"""`tidemark recover --json` and the end-of-recovery log line say what recovery did, in
each protection mode, with WAL prefetch on and off: the WAL replayed (bytes and records),
the pages redo read itself and those prefetch read ahead (and how many of those redo used;
with prefetch off, none),
the pages written by redo, the bgwriter and the end-of-recovery checkpoint, the doublewrite
repair's images and ring bytes (bounded by the ring's horizon), and the time of each step. A process crash (every write in place, as
kill -9 leaves them) after the same number of writes gives each run the same WAL."""
import json
import os
import shutil
import tempfile

from harness import SMALL, Tidemark, check, finish, parse_args, remove, scratch, sets

MODES = {
    "full_page_writes": ["torn_page_protection=full_page_writes"],
    "doublewrite": ["torn_page_protection=doublewrite"],
}


def crashed_directory(tm, directory, mode_settings):
    """A scale-1 directory whose load crashed the process after 4 000 writes."""
    tm.init(directory)
    result = tm.run("bench", "-D", directory, "-c", "4", "-T", "60",
                    "--crash-after-writes", "4000", "--crash-mode", "process",
                    *sets(SMALL + mode_settings))
    check(result.returncode == 3, f"the load did not crash as asked: exit {result.returncode}, "
                                  f"{result.stderr[-2000:]}")


def recover(tm, directory, settings):
    out = tempfile.mktemp(suffix=".json")
    result = tm.run("recover", "-D", directory, "--json", out, *sets(settings))
    if not check(result.returncode == 0, f"recover failed: {result.stderr[-2000:]}"):
        return {}, ""
    with open(out) as f:
        report = json.load(f)
    remove(out)
    return report, result.stderr


def check_report(report, log, label, mode, prefetch):
    rec = report.get("recovery", {})
    repair = report.get("repair", {})
    check(rec.get("needed") is True, f"{label}: recovery not needed? {rec}")
    check(rec.get("records", 0) > 0 and rec.get("wal_bytes", 0) > rec.get("records", 0),
          f"{label}: WAL replayed not reported: {rec}")
    reads = rec.get("pages_read", 0) + rec.get("pages_prefetched", 0)
    check(reads > 0, f"{label}: a 64-page pool over ~1 250 pages read nothing? {rec}")
    if prefetch:
        # How far prefetch gets ahead of a redo this short depends on thread scheduling
        # (the storage tests check that it reads ahead); its counts must agree.
        check(rec.get("prefetch_hits", 0) <= rec.get("pages_prefetched", 0),
              f"{label}: more prefetch hits than pages prefetched: {rec}")
    else:
        check(rec.get("pages_prefetched", -1) == 0 and rec.get("prefetch_hits", -1) == 0,
              f"{label}: prefetch off, yet pages prefetched: {rec}")
    check(rec.get("prefetch_error") == "", f"{label}: prefetch stopped: {rec}")
    written = (rec.get("pages_written_by_redo", 0) + rec.get("pages_written_by_bgwriter", 0)
               + rec.get("pages_written_by_checkpoint", 0))
    check(written > 0, f"{label}: redo into a 64-page pool wrote no page? {rec}")
    check(rec.get("checkpoint_seconds", 0) > 0 and rec.get("seconds", 0) > 0,
          f"{label}: step times missing: {rec}")
    if mode == "doublewrite":
        check(repair.get("images_read", 0) > 0, f"{label}: repair read no ring image: {repair}")
        check(repair.get("bounded") is True and repair.get("bytes_read", 0) > 0,
              f"{label}: repair not bounded by the ring's horizon: {repair}")
    else:
        check(repair.get("images_read", -1) == 0, f"{label}: repair ran outside doublewrite")
    line = [l for l in log.splitlines() if "recovery complete" in l]
    check(len(line) == 1, f"{label}: no end-of-recovery log line: {log[-2000:]}")
    if line:
        for part in ("pages read by redo", "prefetched", "pages written by redo",
                     "by the bgwriter", "end-of-recovery checkpoint", "doublewrite repair"):
            check(part in line[0], f"{label}: log line lacks '{part}': {line[0]}")


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    base = scratch()
    try:
        for mode, mode_settings in MODES.items():
            crashed = os.path.join(base, f"{mode}-crashed")
            crashed_directory(tm, crashed, mode_settings)
            for prefetch in (True, False):
                label = f"{mode}, prefetch {'on' if prefetch else 'off'}"
                copy = os.path.join(base, f"{mode}-{prefetch}")
                shutil.copytree(crashed, copy)
                report, log = recover(tm, copy, SMALL + mode_settings + [
                    f"recovery_prefetch={'on' if prefetch else 'off'}"])
                print(f"{label}: {json.dumps(report.get('recovery', {}))}", flush=True)
                check_report(report, log, label, mode, prefetch)
    finally:
        remove(base)
    finish("recovery reports what it did in both modes, prefetch on and off")


if __name__ == "__main__":
    main()
