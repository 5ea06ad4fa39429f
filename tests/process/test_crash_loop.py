"""Crash loop (issue: foundation): simulated power losses with torn writes at varied
write counts in full_page_writes mode, each followed by `verify --ack-log`: no lost
acknowledged commit, no checksum failure, balances consistent. Alternates the io_uring and
synchronous engines under the fault engine."""
import random

from harness import (verified_clean, SMALL, Tidemark, check, finish, parse_args, remove, run_settings,
                     scratch, sets)


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    directory = scratch()
    ack_log = directory + ".acks"
    crashes = 0
    try:
        tm.init(directory)
        open(ack_log, "w").close()
        chooser = random.Random(args.seed)
        for loop in range(args.loops):
            writes = chooser.choice([1, 5, 20, 60, 150, 400, 900, 2000, 4000])
            writes += chooser.randrange(0, max(1, writes // 2))
            engine = "io_uring" if loop % 2 == 0 else "sync"
            settings = run_settings() + ["torn_page_protection=full_page_writes",
                                         f"io_method={engine}"]
            bench = tm.run("bench", "-D", directory, "-c", "4", "-T", "60",
                           "--ack-log", ack_log, "--crash-after-writes", str(writes),
                           "--crash-mode", "torn", "--seed", str(args.seed + loop), *sets(settings))
            if not check(bench.returncode in (0, 3),
                         f"loop {loop}: bench exited {bench.returncode}: {bench.stderr[-2000:]}"):
                break
            crashes += bench.returncode == 3
            result, report = tm.verify(directory, ack_log, settings=run_settings())
            ok = verified_clean(result, report)
            if not check(ok, f"loop {loop} (crash after {writes} writes, {engine}): verify "
                             f"failed: {result.stdout[-3000:]} {result.stderr[-2000:]}"):
                break
            print(f"loop {loop}: crash after {writes} writes ({engine}): verified "
                  f"{report['acknowledged']} acknowledged commits", flush=True)
        check(crashes >= args.loops * 9 // 10,
              f"only {crashes} of {args.loops} runs reached their simulated crash")
    finally:
        remove(directory)
        remove(ack_log)
    finish("crash loop")


if __name__ == "__main__":
    main()
