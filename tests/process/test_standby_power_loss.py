"""Power losses on a streaming standby: a primary under load with
synchronous_standby=remote_flush, a base backup and a standby on the fault-injecting
engine that loses power (torn writes) at a seeded write — while it receives and fsyncs
WAL, replays it, or makes a restartpoint; in some cycles it loses power again during the
recovery of its restart. After each power loss a copy of the standby is promoted offline
(in some cycles that promotion loses power too, and runs again) and verified against the
commits acknowledged so far. Then it restarts without faults and must resume (commits,
which wait for its flush, go on); the primary is killed, the standby promoted, and
`verify --ack-log` on the promoted copy finds every commit acknowledged under remote_flush,
no checksum failure, consistent balances. A standby that acknowledged a flush and then
lost that WAL, or replayed onto a torn page, fails verify. Cycles alternate
full_page_writes and doublewrite (small pool and ring, checkpoint_timeout=1s on both
sides, so replay writes pages and restartpoints happen); --loops sets how many (both
modes at least once). On loopback.

Waits poll observable state (processes' exit, the ack log, the standby's status file, the
primary's log) with deadlines; the polling interval only paces the observer."""
import os
import random
import shutil

from harness import (PROTECTED_MODES, SMALL, Process, Tidemark, ack_count, check, failures, finish,
                     listening_address, parse_args, poll_until, remove, run_settings, scratch,
                     sets, status, verified_clean)

SIMULATED_CRASH = 3
MODES = list(PROTECTED_MODES.items())  # full_page_writes, doublewrite


def where_it_crashed(node, status_file):
    """Where a power loss landed, from the standby's log and its last status report."""
    if "standby streaming from the primary" not in node.text():
        return "in startup (recovery, before it streamed)"
    s = status(status_file) or {"restartpoints": 0}
    if not s["restartpoints"]:
        return "while streaming and replaying, before its first restartpoint"
    return f"while streaming and replaying, after {s['restartpoints']} restartpoint(s)"


def durable_after_crash(tm, label, standby, acks, settings, promote_faults):
    """Right after a power loss (no standby runs, so no commit can be acknowledged until
    one does): a copy of the standby, promoted offline from the WAL it kept, must hold
    every commit acknowledged so far. (The live standby would fetch lost WAL again from
    its primary on restart, hiding the loss; the copy cannot.) With `promote_faults`, the
    copy's promotion first loses power itself (torn writes) and is run again."""
    copy, copy_acks = standby + ".copy", acks + ".copy"
    remove(copy)
    shutil.copytree(standby, copy)
    shutil.copyfile(acks, copy_acks)
    try:
        note = ""
        if promote_faults:
            crashed = tm.run("promote", "-D", copy, *promote_faults, *sets(settings))
            if not check(crashed.returncode in (0, SIMULATED_CRASH),
                         f"{label}: promote of the crashed standby's copy with "
                         f"{' '.join(promote_faults[:2])} exited {crashed.returncode}: "
                         f"{crashed.stderr[-2000:]}"):
                return None
            note = ", its promotion lost power too" if crashed.returncode == SIMULATED_CRASH \
                else ", its promotion finished before the planned power loss"
            if crashed.returncode == 0:
                result, report = tm.verify(copy, copy_acks, settings=settings)
                return report, note, verified_clean(result, report), result
        if os.path.exists(os.path.join(copy, "standby.conf")):
            promoted = tm.run("promote", "-D", copy, *sets(settings))
            if not check(promoted.returncode == 0,
                         f"{label}: promote of the crashed standby's copy failed: "
                         f"{promoted.stderr[-2000:]}"):
                return None
        result, report = tm.verify(copy, copy_acks, settings=settings)
        return report, note, verified_clean(result, report), result
    finally:
        remove(copy)
        remove(copy_acks)


def cycle(tm, work, number, mode, extra, chooser, seed):
    """One cycle; returns (reached the first crash, crash during the restart's recovery)."""
    directory = os.path.join(work, f"cycle.{number}")
    os.mkdir(directory)
    primary, standby = os.path.join(directory, "primary"), os.path.join(directory, "standby")
    acks = os.path.join(directory, "acks")
    open(acks, "w").close()
    settings = run_settings() + extra
    standby_settings = settings + ["replication_listen=''"]
    started = []

    def start_standby(name, faults):
        status_file = os.path.join(directory, f"{name}.status.json")
        node = Process([tm.binary, "standby", "-D", standby, "--json", status_file,
                        "--status-interval", "0.1", *faults, *sets(standby_settings)],
                       os.path.join(directory, f"{name}.log"))
        started.append(node)
        return node, status_file

    def faults(writes, run):
        return ["--crash-after-writes", str(writes), "--crash-mode", "torn",
                "--seed", str(seed * 10 + run)]

    tm.init(primary, settings=SMALL + extra)
    bench = Process([tm.binary, "bench", "-D", primary, "-c", "4", "-T", "600", "--ack-log", acks,
                     *sets(settings + ["replication_listen=127.0.0.1:0",
                                       "synchronous_standby=remote_flush"])],
                    os.path.join(directory, "primary.log"))
    started.append(bench)
    label = f"cycle {number} ({mode})"
    try:
        if not check(poll_until(lambda: "WAL sender listening" in bench.text() or bench.exited(), 60)
                     and not bench.exited(),
                     f"{label}: the primary's WAL sender did not listen: {bench.tail()}"):
            return False, False
        backup = tm.run("basebackup", "-D", standby, "--primary", listening_address(bench.text()))
        if not check(backup.returncode == 0, f"{label}: basebackup failed: {backup.stderr}"):
            return False, False

        # b. A power loss at a seeded write: in WAL receipt, replay or a restartpoint.
        # (~3,000 writes a second; a restartpoint every second from the start on)
        writes = chooser.choice([20, 200, 1000, 3000, 6000, 9000]) + chooser.randrange(0, 2000)
        node, status_file = start_standby("standby.faults", faults(writes, 1))
        reached = poll_until(node.exited, 60)
        if not reached:
            node.kill()  # it did not get that far: counted below
        code = node.process.returncode
        if not check(not reached or code == SIMULATED_CRASH,
                     f"{label}: the standby (crash after {writes} writes) exited {code}: "
                     f"{node.tail()}"):
            return reached, False
        story = [f"power loss after {writes} writes " +
                 (where_it_crashed(node, status_file) if reached else "not reached within 60 s")]

        def kept_every_ack(what, promote_faults=None):
            checked = durable_after_crash(tm, label, standby, acks, standby_settings,
                                          promote_faults)
            if checked is None:
                return False
            report, note, clean, result = checked
            if not check(clean, f"{label}: {'; '.join(story)}: the standby lost acknowledged "
                                f"WAL or data in the power loss {what} (a promoted copy failed "
                                f"verify): {result.stdout[-3000:]} {result.stderr[-2000:]}"):
                return False
            story[-1] += (f" (a promoted copy held all {report['acknowledged']} acknowledged "
                          f"commits{note})")
            return True

        promote_faults = faults(chooser.randrange(1, 60), 3) if number % 2 == 1 else None
        if reached and not kept_every_ack(
                f"after {writes} writes" + (f" (or the copy's promotion's power loss after "
                                            f"{promote_faults[1]} writes)" if promote_faults else ""),
                promote_faults):
            return reached, False

        # c. In some cycles, another power loss during the restart's own recovery.
        in_recovery = False
        if number % 3 != 0:
            again = chooser.randrange(1, 150)
            node, status_file = start_standby("standby.recovery_faults", faults(again, 2))
            ended = poll_until(node.exited, 60)
            if not ended:
                node.kill()
            code = node.process.returncode
            if not check(not ended or code == SIMULATED_CRASH,
                         f"{label}: the restarted standby (crash after {again} writes) exited "
                         f"{code}: {node.tail()}"):
                return reached, False
            in_recovery = ended and "standby streaming from the primary" not in node.text()
            story.append(f"restart lost power after {again} writes " +
                         (where_it_crashed(node, status_file) if ended else "not reached within 60 s"))
            if ended and not kept_every_ack(f"of its restart after {again} writes"):
                return reached, in_recovery

        # The standby restarts without faults and resumes: commits need its flush.
        node, status_file = start_standby("standby", [])
        before = ack_count(acks)
        if not check(poll_until(lambda: ack_count(acks) >= before + 300 or node.exited(), 60)
                     and not node.exited(),
                     f"{label}: commits did not resume after the standby restarted (acks "
                     f"{before} -> {ack_count(acks)}): {node.tail()} {bench.tail()}"):
            return reached, in_recovery
        resumed = status(status_file) or {}

        # d. The primary dies; the standby is promoted and checked.
        bench.kill()
        promoted = tm.run("promote", "-D", standby)
        check(promoted.returncode == 0, f"{label}: promote failed: {promoted.stderr} {node.tail()}")
        code = node.stop()
        if not check(code == 0, f"{label}: the promoted standby exited {code}: {node.tail()}"):
            return reached, in_recovery
        result, report = tm.verify(standby, acks, settings=standby_settings)
        if check(verified_clean(result, report),
                 f"{label}: {'; '.join(story)}: verify of the promoted standby failed: "
                 f"{result.stdout[-3000:]} {result.stderr[-2000:]}"):
            print(f"{label}: {'; '.join(story)}; resumed from restart point "
                  f"{resumed.get('restart_redo')}; promoted after {report['acknowledged']} "
                  f"commits acknowledged under remote_flush, all present, "
                  f"{report['pages_checked']} pages verified", flush=True)
        return reached, in_recovery
    finally:
        for process in started:
            process.kill()
        remove(directory)


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    work = scratch()
    cycles = max(2, args.loops)  # both protection modes
    chooser = random.Random(args.seed)
    reached = in_recovery = ran = 0
    try:
        for number in range(cycles):
            ran += 1
            mode, extra = MODES[number % len(MODES)]
            first, second = cycle(tm, work, number, mode, extra, chooser,
                                  args.seed + 100 * number)
            reached += first
            in_recovery += second
            if failures:
                break
        check(reached >= ran * 9 // 10,
              f"only {reached} of {ran} standbys reached their simulated power loss")
        print(f"{reached} of {ran} standbys lost power as planned, {in_recovery} again "
              f"during their restart's startup; each resumed, was promoted and verified")
    finally:
        remove(work)
    finish("standby power loss")


if __name__ == "__main__":
    main()
