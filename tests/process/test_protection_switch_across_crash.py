"""Torn-page protection may change between runs, but not under a crashed run's pages.
Pages written since the redo point rely on the crashed run's mode
— images in the WAL, or copies in the doublewrite ring — and so do the pages recovery
writes. A start with another setting therefore recovers and stops cleanly in the recorded
mode first, then runs in the new one. Each switch here crashes the load in one mode, then
restarts in the other with a power loss at a random write of that restart (during repair,
redo, the end-of-recovery checkpoint, or the clean stop and new start), then verifies."""
import json
import os
import random

from harness import (DOUBLEWRITE_SMALL_RING, Tidemark, check, finish, parse_args, remove,
                     run_settings, scratch, sets, verified_clean)

SWITCHES = [
    ("doublewrite", DOUBLEWRITE_SMALL_RING, "full_page_writes",
     ["torn_page_protection=full_page_writes"]),
    ("full_page_writes", ["torn_page_protection=full_page_writes"], "doublewrite",
     DOUBLEWRITE_SMALL_RING),
    ("doublewrite", DOUBLEWRITE_SMALL_RING, "off", ["torn_page_protection=off"]),
]


def switch_loop(tm, crashed_mode, crashed, new_mode, new, loops, seed):
    directory = scratch()
    ack_log = directory + ".acks"
    report_path = directory + ".recover.json"
    label = f"{crashed_mode} -> {new_mode}"
    switched = 0
    try:
        tm.init(directory)
        open(ack_log, "w").close()
        chooser = random.Random(seed)
        for loop in range(loops):
            writes = chooser.choice([300, 1200, 2500]) + chooser.randrange(0, 200)
            bench = tm.run("bench", "-D", directory, "-c", "4", "-T", "60", "--ack-log", ack_log,
                           "--crash-after-writes", str(writes), "--crash-mode", "torn",
                           "--seed", str(seed + loop), *sets(run_settings() + crashed))
            if not check(bench.returncode == 3, f"{label} loop {loop}: bench exited "
                                                f"{bench.returncode}: {bench.stderr[-2000:]}"):
                break
            point = chooser.randrange(1, 400)
            remove(report_path)
            recover = tm.run("recover", "-D", directory, "--json", report_path,
                             "--crash-after-writes", str(point), "--crash-mode", "torn",
                             "--seed", str(seed + loop), *sets(run_settings() + new))
            if not check(recover.returncode in (0, 3), f"{label} loop {loop}: recover exited "
                                                       f"{recover.returncode}: {recover.stderr[-2000:]}"):
                break
            if recover.returncode == 0:
                with open(report_path) as f:
                    recovery = json.load(f)["recovery"]
                switched += 1
                check(recovery["protection"] == crashed_mode and recovery["protection_switched"],
                      f"{label} loop {loop}: recovery ran in {recovery['protection']}, "
                      f"switched={recovery['protection_switched']}")
            result, report = tm.verify(directory, ack_log, settings=run_settings() + new)
            if not check(verified_clean(result, report),
                         f"{label} loop {loop} (load crash after {writes} writes, restart power "
                         f"loss at write {point}): verify failed: {result.stdout[-3000:]} "
                         f"{result.stderr[-2000:]}"):
                break
            # Back to the crashed run's mode for the next loop's load.
            back = tm.run("recover", "-D", directory, *sets(run_settings() + crashed))
            check(back.returncode == 0, f"{label} loop {loop}: switching back failed: "
                                        f"{back.stderr[-2000:]}")
            print(f"{label} loop {loop}: load crash after {writes} writes, power loss at write "
                  f"{point} of the restart ({'crashed' if recover.returncode else 'completed'}), "
                  f"{report['acknowledged']} acknowledged commits verified", flush=True)
    finally:
        for path in (directory, ack_log, report_path):
            remove(path)
    return switched


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    loops = max(2, args.loops // 5)
    for index, (crashed_mode, crashed, new_mode, new) in enumerate(SWITCHES):
        switch_loop(tm, crashed_mode, crashed, new_mode, new, loops, args.seed + 500 * index)
    finish("protection switch across a crash")


if __name__ == "__main__":
    main()
