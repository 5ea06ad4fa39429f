"""`tidemark check -D DIR` checks a directory of any layout without changing it: a clean
directory passes (exit 0) and is byte-for-byte unchanged; a damaged page, a damaged
control file and a damaged WAL record (before WAL that was durable) are each reported,
named, with exit 1; a missing directory is bad usage (exit 2)."""
import json
import os
import shutil

from harness import (Tidemark, check, finish, parse_args, remove, run_settings, scratch, sets,
                     tree_digest)

NO_CHECKPOINTS = ["checkpoint_timeout=1h", "max_wal_size=1GB"]


def run_check(tm, directory):
    result = tm.run("check", "-D", directory)
    report = None
    try:
        report = json.loads(result.stdout)
    except ValueError:
        pass
    return result, report


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    directory = scratch()
    crashed = scratch()
    try:
        tm.init(directory, schema="pages")  # base/3.0 holds the accounts
        bench = tm.run("bench", "-D", directory, "-c", "2", "-T", "2", *sets(run_settings()))
        check(bench.returncode == 0, f"bench failed: {bench.stderr}")
        before = tree_digest(directory)
        result, report = run_check(tm, directory)
        check(result.returncode == 0 and report and report["ok"],
              f"check of a clean directory failed: {result.stdout} {result.stderr}")
        check(report and report["pages_checked"] > 1000 and report["control_file_ok"],
              f"check read too little: {result.stdout}")
        check(tree_digest(directory) == before, "check changed the directory")

        flip(os.path.join(directory, "base", "3.0"), 5 * 8192 + 300)
        result, report = run_check(tm, directory)
        check(result.returncode == 1 and report and not report["ok"],
              f"a damaged page passed: {result.stdout}")
        check("base/3.0 block 5" in result.stderr, f"the damaged page is not named: {result.stderr}")

        flip(os.path.join(directory, "global", "tidemark.control"), 20)
        result, report = run_check(tm, directory)
        check(result.returncode == 1 and "control file" in result.stderr,
              f"a damaged control file passed: {result.stdout} {result.stderr}")

        # WAL: a crash keeps WAL past the redo point; damage a record early in it, with
        # durable WAL after it.
        remove(crashed)
        tm.init(crashed, schema="pages")  # its WAL starts in segment 0
        settings = run_settings() + NO_CHECKPOINTS
        bench = tm.run("bench", "-D", crashed, "-c", "2", "-T", "30", "--crash-after-writes",
                       "3000", "--crash-mode", "lose-unsynced", *sets(settings))
        check(bench.returncode == 3, f"the crash did not happen: {bench.returncode} {bench.stderr}")
        result, report = run_check(tm, crashed)
        check(report and report["needs_recovery"] and report["wal_records"] > 100,
              f"the crashed directory's WAL was not scanned: {result.stdout}")
        flip(os.path.join(crashed, "wal", "0000000000000000"), 20000)
        result, report = run_check(tm, crashed)
        check(result.returncode == 1 and "WAL" in result.stderr,
              f"damaged WAL passed: {result.stdout} {result.stderr}")

        result = tm.run("check", "-D", directory + "-missing")
        check(result.returncode == 2 and "does not exist" in result.stderr,
              f"a missing directory: exit {result.returncode}: {result.stderr}")
    finally:
        remove(directory)
        remove(crashed)
    finish("check command")


if __name__ == "__main__":
    main()
