"""Crash loop in doublewrite mode: simulated power losses with torn writes at varied write
counts, each followed by `verify --ack-log` (eager repair from the ring, then redo): no
lost acknowledged commit, no checksum failure, balances consistent. Two configurations:
the default ring with checkpoints every second, and a two-batch ring with a 16-page buffer
pool (the data is ~80 times larger) and no checkpoint during the run, so chunks are retired
only by the sync worker's segment fsyncs."""
import random

from harness import verified_clean, Tidemark, check, finish, parse_args, remove, run_settings, scratch, sets

CONFIGURATIONS = {
    "default ring": ["torn_page_protection=doublewrite"],
    "two-batch ring, no checkpoints": [
        "torn_page_protection=doublewrite", "doublewrite_batch_pages=8",
        "doublewrite_ring_pages=16", "shared_buffers=16", "checkpoint_timeout=1h",
        "max_wal_size=1GB"],
}


def crash_loop(tm, label, extra, loops, seed):
    directory = scratch()
    ack_log = directory + ".acks"
    crashes = repaired = 0
    try:
        tm.init(directory)
        open(ack_log, "w").close()
        chooser = random.Random(seed)
        for loop in range(loops):
            writes = chooser.choice([2, 10, 40, 120, 400, 1000, 2500])
            writes += chooser.randrange(0, max(1, writes // 2))
            engine = "io_uring" if loop % 2 == 0 else "sync"
            settings = run_settings() + extra + [f"io_method={engine}"]
            bench = tm.run("bench", "-D", directory, "-c", "4", "-T", "60", "--ack-log", ack_log,
                           "--crash-after-writes", str(writes), "--crash-mode", "torn",
                           "--seed", str(seed + loop), *sets(settings))
            if not check(bench.returncode in (0, 3), f"{label} loop {loop}: bench exited "
                                                     f"{bench.returncode}: {bench.stderr[-2000:]}"):
                break
            crashes += bench.returncode == 3
            result, report = tm.verify(directory, ack_log, settings=run_settings() + extra)
            ok = verified_clean(result, report)
            if not check(ok, f"{label} loop {loop} (crash after {writes} writes): verify failed: "
                             f"{result.stdout[-3000:]} {result.stderr[-2000:]}"):
                break
            repaired += report["pages_repaired"]
            print(f"{label} loop {loop}: crash after {writes} writes ({engine}): "
                  f"{report['pages_repaired']} pages repaired from the ring, "
                  f"{report['acknowledged']} acknowledged commits verified", flush=True)
        check(crashes >= loops * 9 // 10, f"{label}: only {crashes} of {loops} runs crashed")
    finally:
        remove(directory)
        remove(ack_log)
    return crashes, repaired


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    loops = max(2, args.loops)
    total_crashes = total_repaired = 0
    for index, (label, extra) in enumerate(CONFIGURATIONS.items()):
        crashes, repaired = crash_loop(tm, label, extra, loops, args.seed + 1000 * index)
        total_crashes += crashes
        total_repaired += repaired
    check(total_repaired > 0, "no crash left a page for the ring to repair")
    print(f"doublewrite: {total_crashes} simulated power losses, {total_repaired} pages repaired")
    finish("doublewrite crash loop")


if __name__ == "__main__":
    main()
