"""Quorum commits (synchronous_standby_names): a primary under load with three standbys a,
b and c, synchronous_standby=remote_flush and an ack log.

1. ANY 2 (a, b, c): c is killed (kill -9) and commits go on, acknowledged by a and b.
   Then the primary is killed, and copies of a and of b are each promoted offline and
   verified against the ack log: every acknowledged commit is on both.
2. FIRST 2 (a, b, c), wal_sender_timeout=2s: a is frozen with SIGSTOP. Its connection
   stays open, but once it has been silent for the timeout it no longer counts and c
   takes its place: commits go on (before, a frozen standby kept commits waiting for
   good). Copies of b and c, promoted, hold every acknowledged commit.

Waits poll observable state (the ack log, the processes) with deadlines; the polling
interval only paces the observer."""
import os
import shutil
import signal

from harness import (SMALL, Process, Tidemark, ack_count, check, finish, listening_address,
                     parse_args, poll_until, remove, run_settings, scratch, sets, verified_clean)

NAMES = ("a", "b", "c")


def promoted_copy_holds_every_ack(tm, label, standby, acks, settings):
    """A copy of `standby` (stopped), promoted offline, verified against `acks`."""
    copy = standby + ".copy"
    remove(copy)
    shutil.copytree(standby, copy)
    try:
        promoted = tm.run("promote", "-D", copy, *sets(settings))
        if not check(promoted.returncode == 0,
                     f"{label}: promote of a copy of {standby} failed: {promoted.stderr[-2000:]}"):
            return False
        result, report = tm.verify(copy, acks, settings=settings)
        if not check(verified_clean(result, report),
                     f"{label}: the promoted copy of {os.path.basename(standby)} lost "
                     f"acknowledged commits: {result.stdout[-3000:]} {result.stderr[-2000:]}"):
            return False
        print(f"{label}: a promoted copy of {os.path.basename(standby)} holds all "
              f"{report['acknowledged']} acknowledged commits", flush=True)
        return True
    finally:
        remove(copy)


def run(tm, work, label, quorum, disturb, survivors):
    """A primary with three standbys under `quorum`; `disturb(standbys)` harms one of them;
    commits must go on; then copies of the `survivors` are promoted and verified."""
    os.mkdir(work)
    primary, acks = os.path.join(work, "primary"), os.path.join(work, "acks")
    settings = run_settings()
    standby_settings = settings + ["replication_listen=''"]
    tm.init(primary, settings=SMALL)
    bench = Process([tm.binary, "bench", "-D", primary, "-c", "4", "-T", "600", "--ack-log", acks,
                     *sets(settings + ["replication_listen=127.0.0.1:0",
                                       "synchronous_standby=remote_flush",
                                       f"synchronous_standby_names={quorum}",
                                       "wal_sender_timeout=2s"])],
                    os.path.join(work, "primary.log"))
    standbys = {}
    try:
        if not check(poll_until(lambda: "WAL sender listening" in bench.text() or bench.exited(), 60)
                     and not bench.exited(), f"{label}: the primary did not listen: {bench.tail()}"):
            return
        address = listening_address(bench.text())
        for name in NAMES:
            directory = os.path.join(work, name)
            backup = tm.run("basebackup", "-D", directory, "--primary", address, "--name", name)
            if not check(backup.returncode == 0, f"{label}: basebackup {name}: {backup.stderr}"):
                return
            standbys[name] = Process([tm.binary, "standby", "-D", directory,
                                      *sets(standby_settings)], os.path.join(work, f"{name}.log"))
        if not check(poll_until(lambda: ack_count(acks) >= 300 or bench.exited(), 120)
                     and not bench.exited(),
                     f"{label}: no commits acknowledged with three standbys: {bench.tail()}"):
            return
        harmed = disturb(standbys)
        before = ack_count(acks)
        if not check(poll_until(lambda: ack_count(acks) >= before + 1000 or bench.exited(), 120),
                     f"{label}: commits stopped after {harmed} ({before} -> {ack_count(acks)} "
                     f"acknowledged): {bench.tail()}"):
            return
        print(f"{label}: after {harmed}, commits went on ({before} -> {ack_count(acks)})",
              flush=True)
        bench.kill()
        for process in standbys.values():
            process.kill()
        for name in survivors:
            promoted_copy_holds_every_ack(tm, label, os.path.join(work, name), acks,
                                          standby_settings)
    finally:
        bench.kill()
        for process in standbys.values():
            if not process.exited():
                os.kill(process.process.pid, signal.SIGCONT)  # a frozen one, so that it dies
            process.kill()
        remove(work)


def kill_c(standbys):
    standbys["c"].kill()
    return "c was killed"


def freeze_a(standbys):
    os.kill(standbys["a"].process.pid, signal.SIGSTOP)
    return "a was frozen (SIGSTOP)"


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    work = scratch()
    try:
        run(tm, os.path.join(work, "any"), "ANY 2 (a, b, c)", "ANY 2 (a, b, c)", kill_c, ("a", "b"))
        run(tm, os.path.join(work, "first"), "FIRST 2 (a, b, c)", "FIRST 2 (a, b, c)", freeze_a,
            ("b", "c"))
    finally:
        remove(work)
    finish("standby quorum")


if __name__ == "__main__":
    main()
