"""A failover drill, by the runbook (docs/replication.md, "Failover runbook"): a primary
under load (`tidemark bench --ack-log`) with three standbys a, b and c streaming,
synchronous_standby=remote_flush and synchronous_standby_names=ANY 2 (a, b, c). Each cycle
waits for 300 more acknowledged commits, then kills (kill -9) the primary and one standby
chosen at random, in a random order, one right after the other. The two survivors'
`flushed` positions are read from their status files (`tidemark standby --json`) once
each has settled: disconnected from the dead primary, all it received flushed, and the
same positions in two consecutive writes of the file. The more advanced survivor is
promoted while it runs (`tidemark promote -D`, never --force: a refusal fails the test
and says why), and `verify --ack-log` must find on it every commit acknowledged in every
generation so far (one ack log for the whole drill). The other survivor is stopped; the
promoted directory is the next cycle's primary, and a, b and c are seeded again from it
with basebackup (a standby of the old generation would be refused).

The guarantee checked: under ANY 2 (a, b, c), losing the primary and any one standby
loses no acknowledged commit when the most advanced survivor is promoted, and promote
never refuses that survivor, cycle after cycle and generation after generation.

--loops cycles (ctest: TIDEMARK_FAILOVER_DRILL_CYCLES); --seed chooses the standby killed
and the order of the kills, and is printed. On loopback, on ports the system chooses.
Waits poll observable state (the ack log, the status files, the processes, the primary's
log) with deadlines; the polling interval only paces the observer. A failed run keeps its
directory (logs, ack log, data directories) and prints where."""
import json
import os
import random
import re
import time

from harness import (Process, Tidemark, ack_count, check, failures, finish, listening_address,
                     parse_args, poll_until, remove, run_settings, scratch, sets, verified_clean)

NAMES = ("a", "b", "c")
PRIMARY_SETTINGS = run_settings() + ["replication_listen=127.0.0.1:0",
                                     "synchronous_standby=remote_flush",
                                     "synchronous_standby_names=ANY 2 (a, b, c)",
                                     "wal_sender_timeout=2s"]
STANDBY_SETTINGS = run_settings() + ["replication_listen=''"]
STATUS_INTERVAL = "0.1"  # seconds between a standby's status writes
NEW_ACKS = 300           # commits acknowledged in each cycle before the kills


def lsn(position):
    """A WAL position as the program prints it (X/XXXXXXXX)."""
    return f"{position >> 32:X}/{position & 0xffffffff:08X}"


def sample(path):
    """(identity, status) of a standby's status file, or (None, None) before the first
    write. Each write is a new file renamed into place, so its inode and modification time
    tell one write from the next; both come from the file read (fstat), not a later one."""
    try:
        with open(path) as f:
            info = os.fstat(f.fileno())
            return (info.st_ino, info.st_mtime_ns), json.loads(f.read())
    except (FileNotFoundError, json.JSONDecodeError):
        return None, None


def settled(standby, limit_s=30):
    """A survivor's final status once its primary is dead: not connected, everything it
    received flushed, and the same received and flushed positions in two consecutive
    writes of its status file. None if that does not come within `limit_s` or it exited."""
    state = {"seen": None, "last": None, "final": None}

    def final():
        if standby.process.exited():
            return True
        identity, s = sample(standby.status_file)
        if s is None or identity == state["seen"]:
            return False
        state["seen"] = identity
        position = (s["received"], s["flushed"])
        if s["connected"] or s["received"] != s["flushed"]:
            state["last"] = None
            return False
        if position == state["last"]:
            state["final"] = s
            return True
        state["last"] = position
        return False

    poll_until(final, limit_s)
    return state["final"]


class Standby:
    """A standby seeded from the primary at `address` under `name`, then running with a
    status file."""

    def __init__(self, tm, work, number, name, address, started):
        self.name = name
        self.directory = os.path.join(work, f"cycle{number}.{name}")
        self.status_file = os.path.join(work, f"cycle{number}.{name}.status.json")
        self.process = None
        backup = tm.run("basebackup", "-D", self.directory, "--primary", address, "--name", name)
        self.seeded = backup.returncode == 0
        self.backup_error = backup.stderr[-2000:]
        if self.seeded:
            self.process = Process([tm.binary, "standby", "-D", self.directory, "--json",
                                    self.status_file, "--status-interval", STATUS_INTERVAL,
                                    *sets(STANDBY_SETTINGS)],
                                   os.path.join(work, f"cycle{number}.{name}.log"))
            started.append(self.process)

    def streaming(self):
        """Connected to its primary, and replayed past its base backup's end."""
        s = sample(self.status_file)[1]
        return s is not None and s["connected"] and s["consistent"]


def start_generation(tm, work, number, primary, acks, label, started):
    """The primary's bench on `primary` and a, b and c seeded from it and streaming: the
    bench and {name: Standby}, or None (after a failed check)."""
    bench = Process([tm.binary, "bench", "-D", primary, "-c", "4", "-T", "600", "--ack-log", acks,
                     *sets(PRIMARY_SETTINGS)], os.path.join(work, f"cycle{number}.primary.log"))
    started.append(bench)
    if not check(poll_until(lambda: listening_address(bench.text()) or bench.exited(), 60)
                 and not bench.exited(),
                 f"{label}: the primary in {primary} did not listen: {bench.tail()}"):
        return None
    address = listening_address(bench.text())
    standbys = {}
    for name in NAMES:
        standbys[name] = Standby(tm, work, number, name, address, started)
        if not check(standbys[name].seeded,
                     f"{label}: basebackup of {name} from {address} failed: "
                     f"{standbys[name].backup_error}"):
            return None
    everyone = list(standbys.values())
    if not check(poll_until(lambda: all(s.streaming() for s in everyone)
                            or any(s.process.exited() for s in everyone) or bench.exited(), 120)
                 and all(s.streaming() for s in everyone),
                 f"{label}: a, b and c did not all stream: "
                 + "; ".join(f"{s.name}: {sample(s.status_file)[1]} {s.process.tail()}"
                             for s in everyone) + f"; primary: {bench.tail()}"):
        return None
    return bench, standbys


def generation_of(log_text):
    """The generation a promoted standby's log names ("now generation N"), or "?"."""
    found = re.search(r"now generation (\d+)", log_text)
    return found.group(1) if found else "?"


def promote_most_advanced(tm, label, survivors, acks, preference):
    """Reads the survivors' settled positions, promotes the most advanced one by the
    runbook (of two as far, the one first in `preference`), stops the other and verifies
    the promoted one against the ack log. Returns the promoted Standby, or None (after a
    failed check)."""
    final = {}
    for standby in survivors:
        final[standby.name] = settled(standby)
        if not check(final[standby.name] is not None,
                     f"{label}: survivor {standby.name} did not settle after the kills "
                     f"(exited: {standby.process.exited()}): "
                     f"{sample(standby.status_file)[1]} {standby.process.tail()}"):
            return None
    chosen = max(survivors, key=lambda s: (final[s.name]["flushed"], -preference.index(s.name)))
    other = next(s for s in survivors if s is not chosen)
    positions = ", ".join(
        f"{s.name} flushed {lsn(final[s.name]['flushed'])}"
        f" (peer_ahead {final[s.name]['peer_ahead'] or '-'},"
        f" primary_acknowledged {lsn(final[s.name]['primary_acknowledged'])})"
        for s in survivors)
    confirmed = max(final[s.name]["primary_acknowledged"] for s in survivors)
    check(final[chosen.name]["flushed"] >= confirmed,
          f"{label}: the most advanced survivor {chosen.name} flushed only "
          f"{lsn(final[chosen.name]['flushed'])}, below the {lsn(confirmed)} the quorum had "
          f"confirmed: {positions}")
    promoted = tm.run("promote", "-D", chosen.directory, timeout=120)
    if not check(promoted.returncode == 0,
                 f"{label}: promote of the most advanced survivor {chosen.name} failed "
                 f"({positions}): {promoted.stderr[-2000:]} {chosen.process.tail()}"):
        return None
    if not check(poll_until(chosen.process.exited, 60) and chosen.process.process.returncode == 0,
                 f"{label}: the promoted standby {chosen.name} did not exit with status 0 "
                 f"(exit {chosen.process.process.poll()}): {chosen.process.tail()}"):
        return None
    stopped = other.process.stop()
    check(stopped == 0, f"{label}: the other survivor {other.name} exited with {stopped} on "
                        f"SIGTERM: {other.process.tail()}")
    result, report = tm.verify(chosen.directory, acks, settings=STANDBY_SETTINGS)
    if not check(verified_clean(result, report),
                 f"{label}: verify --ack-log of the promoted {chosen.name} failed ({positions}): "
                 f"{result.stdout[-3000:]} {result.stderr[-2000:]}"):
        return None
    print(f"{label}: survivors {positions}; promoted {chosen.name} (now generation "
          f"{generation_of(chosen.process.text())}); verify: all {report['acknowledged']} "
          f"acknowledged commits there, {report['lost_commits']} lost", flush=True)
    return chosen


def cycle(tm, work, number, primary, acks, chooser):
    """One generation: a primary on `primary` and three standbys, the kills, the promotion
    and verify. Returns the promoted directory (the next primary), or None."""
    label = f"cycle {number}"
    victim = chooser.choice(NAMES)
    primary_first = chooser.random() < 0.5
    preference = chooser.sample(NAMES, len(NAMES))  # drawn every cycle: later draws stay put
    started = []
    try:
        running = start_generation(tm, work, number, primary, acks, label, started)
        if running is None:
            return None
        bench, standbys = running
        mark = ack_count(acks)
        if not check(poll_until(lambda: ack_count(acks) >= mark + NEW_ACKS or bench.exited(), 120)
                     and not bench.exited(),
                     f"{label}: {NEW_ACKS} more commits were not acknowledged ({mark} -> "
                     f"{ack_count(acks)}): {bench.tail()}"):
            return None
        for process in ([bench, standbys[victim].process] if primary_first
                        else [standbys[victim].process, bench]):
            process.kill()
        order = (f"the primary, then standby {victim}" if primary_first
                 else f"standby {victim}, then the primary")
        print(f"{label}: {ack_count(acks) - mark} commits acknowledged with a, b and c "
              f"streaming ({ack_count(acks)} in all); killed {order}", flush=True)
        survivors = [standbys[name] for name in NAMES if name != victim]
        chosen = promote_most_advanced(tm, label, survivors, acks, preference)
        return chosen.directory if chosen else None
    finally:
        for process in started:
            process.kill()


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    cycles = max(1, args.loops)
    chooser = random.Random(args.seed)
    print(f"failover drill: {cycles} cycles, seed {args.seed}", flush=True)
    work = scratch()
    acks = os.path.join(work, "acks")
    try:
        primary = os.path.join(work, "primary")
        tm.init(primary)
        started = time.monotonic()
        for number in range(cycles):
            began = time.monotonic()
            promoted = cycle(tm, work, number, primary, acks, chooser)
            if promoted is None:
                break
            print(f"cycle {number}: {time.monotonic() - began:.1f} s", flush=True)
            # The old primary and the standbys not promoted are gone for good: the next
            # cycle seeds a, b and c again from the promoted one.
            remove(primary)
            for name in NAMES:
                directory = os.path.join(work, f"cycle{number}.{name}")
                if directory != promoted:
                    remove(directory)
            primary = promoted
        print(f"failover drill: {ack_count(acks)} commits acknowledged over the drill, "
              f"{time.monotonic() - started:.1f} s", flush=True)
    finally:
        if failures:
            print(f"kept {work} (logs, ack log, data directories); seed {args.seed}", flush=True)
        else:
            remove(work)
    finish("failover drill")


if __name__ == "__main__":
    main()
