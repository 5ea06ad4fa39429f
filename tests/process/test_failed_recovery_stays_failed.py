"""A recovery that fails must leave the directory needing recovery.

With torn_page_protection=off a torn data page stops redo (detected, named). The failed
start must not be closed like a healthy one: no shutdown checkpoint, no control file
change, no WAL removed or recycled. So a second `verify` retries recovery and fails the
same way, instead of finding a "clean" directory whose unreplayed WAL is gone.

Opening the WAL for appending zeroes the end segment past the last valid record and
removes later segments (stale WAL must never follow new records: storage rule 16), so the
first failed start may change those (and a segment that was being created ahead, a
"*.new" file, may be left or removed); every segment before the end stays byte for byte,
and the second failed start changes nothing at all."""
import hashlib
import os
import re

from harness import Tidemark, check, finish, parse_args, remove, scratch, sets

SETTINGS = ["shared_buffers=32", "log_checkpoints=on"]


# WAL segment files: 16 hex digits (a "*.new" file is a segment being created, not WAL).
SEGMENT = re.compile(r"^wal/[0-9A-F]{16}$")


def kept_wal_unchanged(before, after):
    """The control file is the same; the WAL segments left are the first ones of before,
    each unchanged except the last (the end segment, zeroed past the valid end)."""
    wal_before = sorted(k for k in before if SEGMENT.match(k))
    wal_after = sorted(k for k in after if SEGMENT.match(k))
    return (before["global/tidemark.control"] == after["global/tidemark.control"]
            and len(wal_after) >= 1 and wal_after == wal_before[:len(wal_after)]
            and all(before[k] == after[k] for k in wal_after[:-1]))


def wal_and_control(directory):
    """The WAL segment names with their bytes' digest, and the control file's digest."""
    state = {}
    for sub, names in (("wal", None), ("global", ["tidemark.control"])):
        path = os.path.join(directory, sub)
        for name in sorted(names or os.listdir(path)):
            with open(os.path.join(path, name), "rb") as f:
                state[f"{sub}/{name}"] = hashlib.sha256(f.read()).hexdigest()
    return state


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    failed_recoveries = 0
    for seed in range(3001, 3013):
        directory = scratch()
        ack_log = directory + ".acks"
        try:
            tm.init(directory, settings=SETTINGS)
            open(ack_log, "w").close()
            bench = tm.run("bench", "-D", directory, "-c", "4", "-T", "30", "--ack-log", ack_log,
                           "--crash-after-writes", str(seed), "--crash-mode", "torn",
                           "--seed", str(seed),
                           *sets(["torn_page_protection=off", "checkpoint_timeout=3600s"]))
            check(bench.returncode == 3, f"seed {seed}: bench exited {bench.returncode}")
            before = wal_and_control(directory)
            first, first_report = tm.verify(directory, ack_log)
            if first.returncode == 0:
                continue # no torn page needed redo this time; the next seed tears more
            failed_recoveries += 1
            named = re.search(r"base/\d+\.\d+ block \d+", first.stdout + first.stderr)
            check(named is not None, f"seed {seed}: the failure names no file and block: "
                                     f"{first.stdout} {first.stderr}")
            check("checkpoint complete" not in first.stderr,
                  f"seed {seed}: a checkpoint ran after recovery failed: {first.stderr[-2000:]}")
            after_first = wal_and_control(directory)
            check(kept_wal_unchanged(before, after_first),
                  f"seed {seed}: the failed recovery changed the control file or removed WAL: "
                  f"{sorted(before)} -> {sorted(after_first)}")
            second, _ = tm.verify(directory, ack_log)
            check(second.returncode == 1,
                  f"seed {seed}: the second start did not fail again (exit {second.returncode}): "
                  f"{second.stdout[-2000:]}")
            again = re.search(r"base/\d+\.\d+ block \d+", second.stdout + second.stderr)
            check(again is not None and named is not None and again.group(0) == named.group(0),
                  f"seed {seed}: the second start failed differently: {second.stdout[-1500:]}")
            check(wal_and_control(directory) == after_first,
                  f"seed {seed}: the second failed recovery changed the WAL or the control file")
            print(f"seed {seed}: recovery failed twice at {named.group(0) if named else '?'}, "
                  f"WAL and control file unchanged", flush=True)
        finally:
            remove(directory)
            remove(ack_log)
        if failed_recoveries >= 2:
            break
    check(failed_recoveries >= 1, "no crash left a torn page for redo to stop at")
    finish("failed recovery stays failed")


if __name__ == "__main__":
    main()
