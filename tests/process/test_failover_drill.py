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

Every other cycle (which ones, the seed says) is a freeze cycle, whose survivors differ:
after the 300 commits one standby is frozen (SIGSTOP, seen stopped in /proc) while 300
more are acknowledged by the other two; then the primary and one of those two are killed
and the frozen one gets SIGCONT. Once both survivors settle, the frozen one must have
flushed less than the other (equal positions fail the test: the freeze did nothing). It
knows of its peers only what the primary's last answer before the freeze said, which never
names one ahead of it (docs/replication.md, runbook step 2: "one that was frozen or cut off
has no news of the others, so compare the positions yourself"); so it is not asked to
promote (it would not refuse, and would lose what it lacks), and the drill's comparison of
flushed positions must pick the other. Should its status name a peer ahead after all,
`promote -D` of it must be refused naming that peer, leaving it a running standby. Then
the other is promoted and verified as in every cycle.

The guarantee checked: under ANY 2 (a, b, c), losing the primary and any one standby
loses no acknowledged commit when the most advanced survivor is promoted, and promote
never refuses that survivor, cycle after cycle and generation after generation, also when
the other survivor is behind it.

--loops cycles (ctest: TIDEMARK_FAILOVER_DRILL_CYCLES); --seed chooses the freeze
cycles, the standby frozen, the standby killed and the order of the kills, and is
printed. On loopback, on ports the system chooses. Waits poll observable state (the ack
log, the status files, the processes and their /proc state, the primary's log) with
deadlines; the polling interval only paces the observer. A frozen standby gets SIGCONT
before anything kills it. A failed run keeps its directory (logs, ack log, data
directories) and prints where."""
import json
import os
import random
import re
import signal
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
FROZEN_ACKS = 300        # ... and in a freeze cycle, after that, with one standby frozen


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


def settle_all(label, survivors):
    """{name: final status} of the survivors once each has settled, or None (after a failed
    check)."""
    final = {}
    for standby in survivors:
        final[standby.name] = settled(standby)
        if not check(final[standby.name] is not None,
                     f"{label}: survivor {standby.name} did not settle after the kills "
                     f"(exited: {standby.process.exited()}): "
                     f"{sample(standby.status_file)[1]} {standby.process.tail()}"):
            return None
    return final


def describe(survivors, final):
    return ", ".join(
        f"{s.name} flushed {lsn(final[s.name]['flushed'])}"
        f" (peer_ahead {final[s.name]['peer_ahead'] or '-'},"
        f" primary_acknowledged {lsn(final[s.name]['primary_acknowledged'])})"
        for s in survivors)


def promote_most_advanced(tm, label, survivors, final, acks, preference):
    """Promotes the most advanced survivor by the runbook, from the settled positions in
    `final` (of two as far, the one first in `preference`), stops the other and verifies
    the promoted one against the ack log. Returns the promoted Standby, or None (after a
    failed check)."""
    chosen = max(survivors, key=lambda s: (final[s.name]["flushed"], -preference.index(s.name)))
    other = next(s for s in survivors if s is not chosen)
    positions = describe(survivors, final)
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


def process_state(process):
    """The state letter /proc gives a process ("T" while stopped by SIGSTOP), or None once
    it is gone."""
    try:
        with open(f"/proc/{process.process.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def freeze(process):
    """SIGSTOP, and True once the process is seen stopped."""
    os.kill(process.process.pid, signal.SIGSTOP)
    return poll_until(lambda: process_state(process) in ("T", "t"), 10)


def thaw(process):
    """SIGCONT to a process that may be stopped (nothing if it is gone)."""
    if not process.exited():
        os.kill(process.process.pid, signal.SIGCONT)


def check_frozen_survivor(tm, label, frozen, other, final):
    """A freeze cycle's checks of the survivor that was frozen, `frozen`, against the one
    that was not, `other`, from their settled statuses: it must be behind (else the freeze
    did nothing), and what it knows of that decides what promote may be asked of it.

    It learns of its peers only from the primary's answers, and the last answer it took
    was sent around the moment it was frozen: the primary answers a fetch with WAL up to
    its own flushed position, which no standby's is past, so that answer names no peer
    ahead of what it brings; after SIGCONT its primary is dead. So it normally names no
    peer ahead (peer_ahead "") and `promote` would promote it: the runbook's "compare the
    positions yourself" is the operator's part, which the drill does (the other is
    promoted). Should it name a peer ahead, `promote -D` of it (running) must be refused,
    naming that peer, and leave it a running standby. Returns what was seen, for the log,
    or None (after a failed check)."""
    mine, theirs = final[frozen.name], final[other.name]
    if not check(mine["flushed"] < theirs["flushed"],
                 f"{label}: the freeze of {frozen.name} did nothing: it flushed "
                 f"{lsn(mine['flushed'])}, as far as {other.name} ({lsn(theirs['flushed'])}), "
                 f"though {FROZEN_ACKS} commits were acknowledged while it was frozen"):
        return None
    behind = (f"{frozen.name} (frozen) flushed {lsn(mine['flushed'])}, {other.name} "
              f"{lsn(theirs['flushed'])}: {theirs['flushed'] - mine['flushed']} bytes behind")
    peer = mine["peer_ahead"]
    if not peer:
        return (f"{behind}; {frozen.name} names no peer ahead (its primary last said: "
                f"acknowledged {lsn(mine['primary_acknowledged'])}), so promote of it would "
                f"not refuse: not attempted, the positions compared instead (runbook)")
    before = sample(frozen.status_file)[0]
    refusal = tm.run("promote", "-D", frozen.directory, timeout=120)
    words = refusal.stderr.strip()
    ok = check(refusal.returncode != 0 and "refused" in words and f'standby "{peer}"' in words,
               f"{label}: promote -D {frozen.name}, behind {peer} by its own status "
               f"({lsn(mine['peer_ahead_flushed'])} against its {lsn(mine['flushed'])}), was "
               f"not refused naming {peer}: exit {refusal.returncode}: {words[-2000:]}")
    ok = check(peer in NAMES and peer != frozen.name,
               f"{label}: {frozen.name} names {peer!r} as ahead, not another standby") and ok
    # Still a standby and still running: standby.conf kept, no request left, and status
    # writes going on after the refusal (a promoted or stopped one writes no more).
    ok = check(os.path.exists(os.path.join(frozen.directory, "standby.conf"))
               and not os.path.exists(os.path.join(frozen.directory, "promote.signal")),
               f"{label}: after the refused promote {frozen.name} is no longer a standby "
               f"(standby.conf, promote.signal): {os.listdir(frozen.directory)}") and ok
    ok = check(poll_until(lambda: sample(frozen.status_file)[0] not in (None, before)
                          or frozen.process.exited(), 10)
               and not frozen.process.exited()
               and not (sample(frozen.status_file)[1] or {}).get("promoted"),
               f"{label}: after the refused promote {frozen.name} did not go on as a standby "
               f"(exited: {frozen.process.exited()}): {sample(frozen.status_file)[1]} "
               f"{frozen.process.tail()}") and ok
    return f"{behind}; promote -D {frozen.name}: exit {refusal.returncode}, {words}" if ok else None


def cycle(tm, work, number, primary, acks, chooser, freezing):
    """One generation: a primary on `primary` and three standbys, the kills, the promotion
    and verify; in a freeze cycle (`freezing`) one standby is frozen for part of the load
    and survives behind the other. Returns the promoted directory (the next primary), or
    None."""
    label = f"cycle {number}"
    victim = chooser.choice(NAMES)
    primary_first = chooser.random() < 0.5
    preference = chooser.sample(NAMES, len(NAMES))  # drawn every cycle: later draws stay put
    frozen_name = chooser.choice([name for name in NAMES if name != victim])  # likewise
    started = []
    frozen = None
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
        froze, streaming = "", ack_count(acks) - mark
        if freezing:
            frozen = standbys[frozen_name]
            if not check(freeze(frozen.process),
                         f"{label}: standby {frozen.name} was not seen stopped after SIGSTOP "
                         f"(state {process_state(frozen.process)})"):
                return None
            at_freeze, frozen_at = ack_count(acks), time.monotonic()
            streaming = at_freeze - mark
            # Under ANY 2 (a, b, c) the other two's flushes acknowledge commits: the frozen
            # one is not waited for (it stays connected, and counts no more as live once
            # silent for wal_sender_timeout). Its peers pass it from the first commit on.
            if not check(poll_until(lambda: ack_count(acks) >= at_freeze + FROZEN_ACKS
                                    or bench.exited(), 60) and not bench.exited(),
                         f"{label}: with {frozen.name} frozen, {FROZEN_ACKS} more commits were "
                         f"not acknowledged by the other two ({at_freeze} -> "
                         f"{ack_count(acks)}): {bench.tail()}"):
                return None
            froze = (f"; froze standby {frozen.name} (SIGSTOP), then "
                     f"{ack_count(acks) - at_freeze} acknowledged by the other two in "
                     f"{time.monotonic() - frozen_at:.1f} s")
        for process in ([bench, standbys[victim].process] if primary_first
                        else [standbys[victim].process, bench]):
            process.kill()
        order = (f"the primary, then standby {victim}" if primary_first
                 else f"standby {victim}, then the primary")
        if frozen:
            thaw(frozen.process)
            order += f"; SIGCONT to {frozen.name}"
        print(f"{label}: {streaming} commits acknowledged with a, b and c streaming{froze} "
              f"({ack_count(acks)} in all); killed {order}", flush=True)
        survivors = [standbys[name] for name in NAMES if name != victim]
        final = settle_all(label, survivors)
        if final is None:
            return None
        if frozen:
            other = next(s for s in survivors if s is not frozen)
            seen = check_frozen_survivor(tm, label, frozen, other, final)
            if seen is None:
                return None
            print(f"{label}: {seen}", flush=True)
        chosen = promote_most_advanced(tm, label, survivors, final, acks, preference)
        return chosen.directory if chosen else None
    finally:
        if frozen:  # a frozen process is let go on before it is killed
            thaw(frozen.process)
        for process in started:
            process.kill()


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    cycles = max(1, args.loops)
    chooser = random.Random(args.seed)
    phase = chooser.randrange(2)  # the freeze cycles: every other one, from cycle `phase`
    print(f"failover drill: {cycles} cycles, seed {args.seed}; a standby frozen in cycles "
          f"{phase}, {phase + 2}, ...", flush=True)
    work = scratch()
    acks = os.path.join(work, "acks")
    try:
        primary = os.path.join(work, "primary")
        tm.init(primary)
        started = time.monotonic()
        for number in range(cycles):
            began = time.monotonic()
            promoted = cycle(tm, work, number, primary, acks, chooser, number % 2 == phase)
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
