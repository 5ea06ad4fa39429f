"""A process crash, a restart, then a power loss.

After kill -9 the data files hold every write the process issued, synced or not: what
was not fsynced sits in the page cache and is lost if the power fails later. Each loop:
  1. the load ends in a process crash with every write in place (--crash-mode process);
     the fault engine keeps the writes that were never fsynced in a journal;
  2. a restart recovers and runs load again, and a simulated power loss fires at a random
     write during or after that recovery: it loses or tears every write not fsynced since,
     those of the killed process included (--fault-journal);
  3. `verify --ack-log`: no acknowledged commit lost, no checksum failure, balances equal.
Recovery must therefore make the directory durable before it overwrites anything (the
ring, pages redo finds already newer, the redo point). In full_page_writes and doublewrite
mode (a two-batch ring and a 16-page pool in doublewrite)."""
import random

from harness import check, each_mode, remove, run_settings, scratch, sets, verified_clean


def crash_loop(tm, mode, extra, loops, seed):
    directory = scratch()
    ack_log = directory + ".acks"
    journal = directory + ".journal"
    power_losses = 0
    try:
        tm.init(directory)
        open(ack_log, "w").close()
        chooser = random.Random(seed)
        settings = run_settings() + extra
        for loop in range(loops):
            kill_at = chooser.choice([300, 1000, 2500]) + chooser.randrange(0, 300)
            killed = tm.run("bench", "-D", directory, "-c", "4", "-T", "60", "--ack-log", ack_log,
                            "--crash-after-writes", str(kill_at), "--crash-mode", "process",
                            "--fault-journal", journal, *sets(settings))
            if not check(killed.returncode == 3, f"{mode} loop {loop}: the process crash run "
                                                 f"exited {killed.returncode}: {killed.stderr[-2000:]}"):
                break
            power_at = chooser.randrange(1, 2000)
            restart = tm.run("bench", "-D", directory, "-c", "4", "-T", "60", "--ack-log", ack_log,
                             "--crash-after-writes", str(power_at), "--crash-mode", "torn",
                             "--seed", str(seed + loop), "--fault-journal", journal,
                             *sets(settings))
            if not check(restart.returncode in (0, 3), f"{mode} loop {loop}: the restart exited "
                                                       f"{restart.returncode}: {restart.stderr[-2000:]}"):
                break
            power_losses += restart.returncode == 3
            remove(journal) # what the power loss did not take is durable for verify
            result, report = tm.verify(directory, ack_log, settings=settings)
            if not check(verified_clean(result, report),
                         f"{mode} loop {loop} (process crash after {kill_at} writes, power loss "
                         f"at write {power_at} of the restart): verify failed: "
                         f"{result.stdout[-3000:]} {result.stderr[-2000:]}"):
                break
            print(f"{mode} loop {loop}: process crash after {kill_at} writes, power loss at "
                  f"write {power_at} of the restart, {report['acknowledged']} acknowledged "
                  f"commits verified", flush=True)
        check(power_losses >= loops * 8 // 10,
              f"{mode}: only {power_losses} of {loops} restarts lost power")
    finally:
        for path in (directory, ack_log, journal):
            remove(path)
    return power_losses


def main():
    each_mode(crash_loop, 9000, "power losses after a process crash, each recovered and verified", "process crash then power loss")


if __name__ == "__main__":
    main()
