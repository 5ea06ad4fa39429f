"""A standby whose WAL reads back wrong, through the tidemark program (docs/replication.md,
"When a standby cannot read its WAL back"). A primary under remote_flush load; a base
backup; `tidemark standby` on the fault-injecting engine whose reads of the WAL it just
received and fsynced go bad (zeros, short reads or EIO, from a random read on, for one to
three reads or for good; with or without WAL prefetch). Bytes a re-read heals are counted
(wal_rereads) and the standby goes on; it is promoted while it streams. Bytes that stay
bad stop it by itself (with prefetch, the prefetcher may have met them first and left redo
the right bytes): exit status 1, its status file saying failed with the error naming
where redo stopped, an ERROR line in its log; then `tidemark promote -D` (no standby
running: a fresh read of its WAL) promotes it. Either way the primary was killed first,
and `verify --ack-log` must find every commit the primary acknowledged. --loops cycles
per protection mode, alternating. On loopback, on a port the system chooses.

Waits poll observable state (processes' exit, the ack log, the standby's status file) with
deadlines; the polling interval only paces the observer."""
import os
import random

from harness import (PROTECTED_MODES, SMALL, Process, Tidemark, ack_count, check, failures, finish,
                     listening_address, parse_args, poll_until, poll_while_advancing, remove,
                     run_settings, scratch, sets, status, verified_clean)

KINDS = ["zeros", "short", "error"]


def cycle(tm, work, number, mode, extra, chooser):
    directory = os.path.join(work, f"cycle.{number}")
    os.mkdir(directory)
    primary, standby = os.path.join(directory, "primary"), os.path.join(directory, "standby")
    acks, status_file = os.path.join(directory, "acks"), os.path.join(directory, "status.json")
    settings = run_settings() + extra
    kind = chooser.choice(KINDS)
    repeats = chooser.randrange(0, 4)  # 0: the bytes stay bad; 1-3: a re-read heals them
    prefetch = chooser.random() < 0.5
    after = chooser.randrange(1, 200)
    label = (f"cycle {number} ({mode}, {kind} from the {after}th read, " +
             ("for good" if repeats == 0 else f"{repeats} time(s)") +
             (", with prefetch)" if prefetch else ", without prefetch)"))
    started = []
    tm.init(primary, settings=SMALL + extra)
    bench = Process([tm.binary, "bench", "-D", primary, "-c", "4", "-T", "600", "--ack-log", acks,
                     *sets(settings + ["replication_listen=127.0.0.1:0",
                                       "synchronous_standby=remote_flush"])],
                    os.path.join(directory, "primary.log"))
    started.append(bench)
    standby_settings = settings + ["replication_listen=''"]
    try:
        if not check(poll_until(lambda: listening_address(bench.text()) or bench.exited(), 60)
                     and not bench.exited(),
                     f"{label}: the primary's WAL sender did not listen: {bench.tail()}"):
            return None
        backup = tm.run("basebackup", "-D", standby, "--primary", listening_address(bench.text()))
        if not check(backup.returncode == 0, f"{label}: basebackup failed: {backup.stderr}"):
            return None
        node = Process([tm.binary, "standby", "-D", standby, "--json", status_file,
                        "--status-interval", "0.1", "--bad-read-after", str(after),
                        "--bad-read", kind, "--bad-read-repeats", str(repeats),
                        *sets(standby_settings +
                              [f"recovery_prefetch={'on' if prefetch else 'off'}"])],
                       os.path.join(directory, "standby.log"))
        started.append(node)
        def rereads():
            return (status(status_file) or {}).get("wal_rereads", 0)

        def replayed():
            return (status(status_file) or {}).get("replayed", 0)

        # Redo first replays the base backup's WAL, which the fault engine never spoils
        # (only bytes this run fsynced): on a busy machine that takes a while, so the
        # wait lasts while redo advances.
        if not check(poll_while_advancing(lambda: node.exited() or rereads() > 0, replayed, 60),
                     f"{label}: the bad read did not show: {node.tail()}"):
            return None
        before = ack_count(acks)
        poll_until(lambda: node.exited() or ack_count(acks) >= before + 300, 60)
        bench.kill()
        how = "promoted while streaming"
        if not node.exited():
            promoted = tm.run("promote", "-D", standby)
            if promoted.returncode != 0:  # redo met the bad bytes only now: it stopped
                check(poll_until(node.exited, 60), f"{label}: promote failed, the standby runs: "
                                                   f"{promoted.stderr} {node.tail()}")
            else:
                check(node.stop() == 0, f"{label}: the promoted standby failed: {node.tail()}")
        stopped = node.exited() and node.process.returncode != 0
        if stopped:
            # Stopped by itself, visibly: exit status 1, the status file, an ERROR line.
            s = status(status_file) or {}
            check(node.process.returncode == 1,
                  f"{label}: the stopped standby exited {node.process.returncode}: {node.tail()}")
            check(s.get("failed") is True and "cannot be read back" in s.get("error", "")
                  and "standby redo stopped at" in s.get("error", ""),
                  f"{label}: the status file does not show the stop: {s}")
            check("ERROR:  standby redo stopped at" in node.text(),
                  f"{label}: no ERROR line in the standby's log: {node.tail()}")
            # No standby runs: promote reads its WAL afresh.
            promoted = tm.run("promote", "-D", standby, *sets(standby_settings))
            if not check(promoted.returncode == 0, f"{label}: offline promotion of the stopped "
                                                   f"standby failed: {promoted.stderr[-2000:]}"):
                return None
            how = "stopped, promoted offline"
        if repeats > 0:
            check(not stopped, f"{label}: a standby stopped on bytes a re-read heals")
        elif not prefetch:
            check(stopped, f"{label}: the standby went on past bytes that stay bad")
        result, report = tm.verify(standby, acks, settings=standby_settings)
        if check(verified_clean(result, report),
                 f"{label}: verify of the promoted standby failed: {result.stdout[-3000:]} "
                 f"{result.stderr[-2000:]}"):
            print(f"{label}: {how} with all {report['acknowledged']} acknowledged commits",
                  flush=True)
        return stopped
    finally:
        for process in started:
            process.kill()
        remove(directory)


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    work = scratch()
    chooser = random.Random(args.seed)
    cycles = max(1, args.loops)  # per protection mode
    stopped = 0
    try:
        for number in range(2 * cycles):
            mode, extra = list(PROTECTED_MODES.items())[number % 2]
            stopped += bool(cycle(tm, work, number, mode, extra, chooser))
            if failures:
                break
    finally:
        remove(work)
    print(f"{2 * cycles} cycles ({cycles} per protection mode): {stopped} standbys stopped on "
          f"WAL that stayed unreadable and were promoted offline, the others re-read it")
    finish("standby bad read")


if __name__ == "__main__":
    main()
