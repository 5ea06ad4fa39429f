"""A standby whose WAL reads back wrong, through the tidemark program (docs/replication.md,
"When a standby cannot read its WAL back"). A primary under remote_flush load; a base
backup; `tidemark standby` on the fault-injecting engine whose reads of the WAL it just
received and fsynced go bad and stay bad (zeros, short reads or EIO by cycle; no WAL
prefetch, so redo itself meets them). The standby must stop by itself with exit status 1,
its status file saying failed, with the error naming where redo stopped, and its log an
ERROR line. Then the primary is killed, and `tidemark promote -D` (no standby running: a
fresh read of its WAL) must promote it, and `verify --ack-log` find every commit the
primary acknowledged. In the other half of the cycles the bad reads heal after a re-read:
the standby counts them (wal_rereads), goes on streaming, and is promoted while it runs.
Cycles alternate the protection modes. On loopback, on a port the system chooses.

Waits poll observable state (processes' exit, the ack log, the standby's status file) with
deadlines; the polling interval only paces the observer."""
import os
import random

from harness import (PROTECTED_MODES, SMALL, Process, Tidemark, ack_count, check, failures, finish,
                     listening_address, parse_args, poll_until, remove, run_settings, scratch,
                     sets, status, verified_clean)

KINDS = ["zeros", "short", "error"]


def cycle(tm, work, number, mode, extra, chooser):
    directory = os.path.join(work, f"cycle.{number}")
    os.mkdir(directory)
    primary, standby = os.path.join(directory, "primary"), os.path.join(directory, "standby")
    acks, status_file = os.path.join(directory, "acks"), os.path.join(directory, "status.json")
    settings = run_settings() + extra
    kind = KINDS[number % len(KINDS)]
    stays_bad = number % 2 == 0
    label = (f"cycle {number} ({mode}, {kind}, " +
             ("for good" if stays_bad else "healed by a re-read") + ")")
    started = []
    tm.init(primary, settings=SMALL + extra)
    bench = Process([tm.binary, "bench", "-D", primary, "-c", "4", "-T", "600", "--ack-log", acks,
                     *sets(settings + ["replication_listen=127.0.0.1:0",
                                       "synchronous_standby=remote_flush"])],
                    os.path.join(directory, "primary.log"))
    started.append(bench)
    try:
        if not check(poll_until(lambda: listening_address(bench.text()) or bench.exited(), 60)
                     and not bench.exited(),
                     f"{label}: the primary's WAL sender did not listen: {bench.tail()}"):
            return
        address = listening_address(bench.text())
        backup = tm.run("basebackup", "-D", standby, "--primary", address)
        if not check(backup.returncode == 0, f"{label}: basebackup failed: {backup.stderr}"):
            return
        faults = ["--bad-read-after", str(chooser.randrange(1, 200)), "--bad-read", kind,
                  "--bad-read-repeats", "0" if stays_bad else str(chooser.randrange(1, 4))]
        node = Process([tm.binary, "standby", "-D", standby, "--json", status_file,
                        "--status-interval", "0.1", *faults,
                        *sets(settings + ["replication_listen=''", "recovery_prefetch=off"])],
                       os.path.join(directory, "standby.log"))
        started.append(node)
        if stays_bad:
            if not check(poll_until(node.exited, 60),
                         f"{label}: the standby did not stop: {node.tail()}"):
                return
            code = node.process.returncode
            s = status(status_file) or {}
            check(code == 1, f"{label}: the stopped standby exited {code}: {node.tail()}")
            check(s.get("failed") is True and "cannot be read back" in s.get("error", "")
                  and "standby redo stopped at" in s.get("error", ""),
                  f"{label}: the status file does not show the stop: {s}")
            check("ERROR:  standby redo stopped at" in node.text(),
                  f"{label}: no ERROR line in the standby's log: {node.tail()}")
            bench.kill()
            promoted = tm.run("promote", "-D", standby, *sets(settings + ["replication_listen=''"]))
            if not check(promoted.returncode == 0,
                         f"{label}: offline promotion of the stopped standby failed: "
                         f"{promoted.stderr[-2000:]}"):
                return
        else:
            before = ack_count(acks)
            if not check(poll_until(lambda: ((status(status_file) or {}).get("wal_rereads", 0) > 0
                                             and ack_count(acks) >= before + 300)
                                    or node.exited(), 60) and not node.exited(),
                         f"{label}: the standby did not re-read and go on: {node.tail()}"):
                return
            bench.kill()
            promoted = tm.run("promote", "-D", standby)
            check(promoted.returncode == 0, f"{label}: promote failed: {promoted.stderr}")
            code = node.stop()
            check(code == 0, f"{label}: the promoted standby exited {code}: {node.tail()}")
        result, report = tm.verify(standby, acks, settings=settings + ["replication_listen=''"])
        if check(verified_clean(result, report),
                 f"{label}: verify of the promoted standby failed: {result.stdout[-3000:]} "
                 f"{result.stderr[-2000:]}"):
            print(f"{label}: promoted with all {report['acknowledged']} acknowledged commits",
                  flush=True)
    finally:
        for process in started:
            process.kill()
        remove(directory)


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    work = scratch()
    chooser = random.Random(args.seed)
    modes = list(PROTECTED_MODES.items())
    try:
        for number in range(4):  # both modes, stopped and healed
            mode, extra = modes[number // 2 % len(modes)]
            cycle(tm, work, number, mode, extra, chooser)
            if failures:
                break
    finally:
        remove(work)
    finish("standby bad read")


if __name__ == "__main__":
    main()
