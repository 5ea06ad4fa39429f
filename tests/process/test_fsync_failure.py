"""W3: an fsync that fails (injected EIO, and the file's unsynced writes dropped as the
kernel may do) is never retried: the run stops with a clear error naming the fsync and
exit status 1; after restart and recovery no acknowledged commit is missing. Failures are
injected at several points so both WAL fsyncs (group commit) and data-file fsyncs (the
sync worker, in a checkpoint's sync phase) fail in the course of the test."""
from harness import (Tidemark, check, finish, parse_args, remove, run_settings, scratch, sets)


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    failed_files = set()
    cases = [(3, None), (25, None), (140, None), (1, "/base/"), (4, "/base/"), (2, "/xact/")]
    for fail_after, match in cases:
        directory = scratch()
        ack_log = directory + ".acks"
        try:
            tm.init(directory)
            open(ack_log, "w").close()
            only = ["--fail-fsync-match", match] if match else []
            bench = tm.run("bench", "-D", directory, "-c", "4", "-T", "60", "--ack-log", ack_log,
                           "--fail-fsync-after", str(fail_after), *only, *sets(run_settings()))
            output = bench.stdout + bench.stderr
            check(bench.returncode == 1, f"fail after {fail_after}: bench exited {bench.returncode}")
            check("injected EIO" in output and "fsync" in output,
                  f"fail after {fail_after}: no clear fsync error: {output[-1500:]}")
            for word in output.split("'"):
                if "/wal/" in word:
                    failed_files.add("wal")
                elif "/base/" in word or "/xact/" in word:
                    failed_files.add("data")
            result, report = tm.verify(directory, ack_log, settings=run_settings())
            ok = result.returncode == 0 and report and report["ok"] and report["lost_commits"] == 0
            check(ok, f"fail after {fail_after}: verify after restart failed: {result.stdout[-2000:]}"
                      f" {result.stderr[-1500:]}")
            if report:
                print(f"fail after {fail_after} fsyncs of {match or 'any file'}: stopped with exit 1; recovery replayed "
                      f"{report['recovery']['records']} records; {report['acknowledged']} "
                      f"acknowledged commits, none lost", flush=True)
        finally:
            remove(directory)
            remove(ack_log)
    check(failed_files == {"wal", "data"},
          f"expected both WAL and data-file fsync failures, saw {sorted(failed_files)}")
    finish("fsync failure")


if __name__ == "__main__":
    main()
