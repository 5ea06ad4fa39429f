"""Crashes during recovery: a simulated power loss during the load, then another
at a random write of the recovery that follows — during doublewrite repair, redo (the redo
loop's and the bgwriter's writes) or the end-of-recovery checkpoint — then a recovery
that completes and `verify --ack-log`: no acknowledged commit lost, no checksum failure,
balances consistent. In full_page_writes and doublewrite mode (a two-batch ring and a
16-page pool in doublewrite, so redo's writes keep the ring full)."""
import json
import random
import shutil

from harness import check, each_mode, remove, run_settings, scratch, sets, verified_clean


def recovery_writes(tm, directory, settings):
    """How many writes a recovery of `directory` issues (counted on a copy, on the fault
    engine without a crash), so that a crash point can be picked inside it."""
    copy = directory + ".copy"
    report_path = directory + ".recover.json"
    remove(copy)
    shutil.copytree(directory, copy)
    try:
        result = tm.run("recover", "-D", copy, "--json", report_path,
                        "--crash-after-writes", str(1 << 40), *sets(settings))
        check(result.returncode == 0, f"recover of a copy failed: {result.stderr[-2000:]}")
        with open(report_path) as f:
            return json.load(f)["faults"]["writes_issued"]
    finally:
        remove(copy)
        remove(report_path)


def crash_loop(tm, mode, extra, loops, seed):
    directory = scratch()
    ack_log = directory + ".acks"
    crashed_in_recovery = 0
    try:
        tm.init(directory)
        open(ack_log, "w").close()
        chooser = random.Random(seed)
        settings = run_settings() + extra
        for loop in range(loops):
            writes = chooser.choice([40, 200, 700, 1500, 3000]) + chooser.randrange(0, 100)
            bench = tm.run("bench", "-D", directory, "-c", "4", "-T", "60", "--ack-log", ack_log,
                           "--crash-after-writes", str(writes), "--crash-mode", "torn",
                           "--seed", str(seed + loop), *sets(settings))
            if not check(bench.returncode in (0, 3), f"{mode} loop {loop}: bench exited "
                                                     f"{bench.returncode}: {bench.stderr[-2000:]}"):
                break
            point = chooser.randrange(1, recovery_writes(tm, directory, settings) + 1)
            recover = tm.run("recover", "-D", directory, "--crash-after-writes", str(point),
                             "--crash-mode", "torn", "--seed", str(seed + loop), *sets(settings))
            if not check(recover.returncode in (0, 3), f"{mode} loop {loop}: recover exited "
                                                       f"{recover.returncode}: {recover.stderr[-2000:]}"):
                break
            crashed_in_recovery += recover.returncode == 3
            result, report = tm.verify(directory, ack_log, settings=settings)
            if not check(verified_clean(result, report),
                         f"{mode} loop {loop} (load crash after {writes} writes, recovery crash "
                         f"after {point}): verify failed: {result.stdout[-3000:]} "
                         f"{result.stderr[-2000:]}"):
                break
            state = "crashed" if recover.returncode == 3 else "completed first"
            print(f"{mode} loop {loop}: load crash after {writes} writes, recovery {state} "
                  f"(power loss at write {point}), {report['pages_repaired']} pages repaired, "
                  f"{report['acknowledged']} acknowledged commits verified", flush=True)
        check(crashed_in_recovery >= loops * 8 // 10,
              f"{mode}: only {crashed_in_recovery} of {loops} recoveries crashed")
    finally:
        remove(directory)
        remove(ack_log)
    return crashed_in_recovery


def main():
    each_mode(crash_loop, 7000, "power losses during recovery, each recovered and verified", "crash during recovery")


if __name__ == "__main__":
    main()
