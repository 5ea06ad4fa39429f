"""Crash loop on keyed tables with 4 KiB pages: in full_page_writes and in doublewrite mode
(a two-batch ring and a 16-page pool), simulated power losses at varied write counts,
torn and lost writes alternating, each followed by `verify --ack-log` (which reads every
table back in key order, checks the balances and every acknowledged transaction's history
row, then `check`s every page and every table's tree). The history rows are padded to
3 000 bytes, more than a 4 KiB leaf keeps inline, so every transaction writes an overflow
chain, and the history table splits all the time."""
import random

from harness import (PROTECTED_MODES, SMALL, Tidemark, check, finish, parse_args, remove,
                     run_settings, scratch, sets, verified_clean)

HISTORY_BYTES = "3000"


def crash_loop(tm, mode, extra, loops, seed):
    directory = scratch()
    ack_log = directory + ".acks"
    crashes = 0
    try:
        tm.init(directory, settings=SMALL + ["page_size=4kB"])
        open(ack_log, "w").close()
        chooser = random.Random(seed)
        for loop in range(loops):
            writes = chooser.choice([2, 10, 40, 120, 400, 1000, 2500])
            writes += chooser.randrange(0, max(1, writes // 2))
            crash_mode = "torn" if loop % 2 == 0 else "lose-unsynced"
            settings = run_settings() + extra
            bench = tm.run("bench", "-D", directory, "-c", "4", "-T", "60", "--ack-log", ack_log,
                           "--history-bytes", HISTORY_BYTES, "--crash-after-writes", str(writes),
                           "--crash-mode", crash_mode, "--seed", str(seed + loop), *sets(settings))
            if not check(bench.returncode in (0, 3), f"{mode} loop {loop}: bench exited "
                                                     f"{bench.returncode}: {bench.stderr[-2000:]}"):
                break
            crashes += bench.returncode == 3
            result, report = tm.verify(directory, ack_log, settings=settings)
            if not check(verified_clean(result, report) and report["tables_checked"] == 5,
                         f"{mode} loop {loop} (crash after {writes} writes, {crash_mode}): "
                         f"verify failed: {result.stdout[-3000:]} {result.stderr[-2000:]}"):
                break
            print(f"{mode} loop {loop}: {crash_mode} crash after {writes} writes: verified "
                  f"{report['acknowledged']} acknowledged commits, 5 trees", flush=True)
        check(crashes >= loops * 9 // 10, f"{mode}: only {crashes} of {loops} runs lost power")
    finally:
        remove(directory)
        remove(ack_log)
    return crashes


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    loops = max(2, args.loops)
    for index, (mode, extra) in enumerate(PROTECTED_MODES.items()):
        count = crash_loop(tm, mode, extra, loops, args.seed + 7000 + 1000 * index)
        print(f"{mode}: {count} power losses on keyed tables, each recovered and verified")
    finish("crash loop on tables")


if __name__ == "__main__":
    main()
