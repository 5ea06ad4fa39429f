"""kill -9 of a running bench, then `verify --ack-log`: no acknowledged commit is lost.
The kill is timed by progress (the ack log reaching a number of lines), not by a sleep."""
import os
import signal
import subprocess
import time

from harness import (Tidemark, check, finish, parse_args, remove, run_settings, scratch,
                     sets)


def wait_for_acks(ack_log, wanted, process, limit_s=60):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and process.poll() is None:
        with open(ack_log) as f:
            if sum(1 for _ in f) >= wanted:
                return True
        time.sleep(0.01)  # polling interval of the observer, not synchronisation of the engine
    return False


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    rounds = 3
    for round_number in range(rounds):
        directory = scratch()
        ack_log = directory + ".acks"
        try:
            tm.init(directory)
            open(ack_log, "w").close()
            process = subprocess.Popen(
                [tm.binary, "bench", "-D", directory, "-c", "8", "-T", "120", "--ack-log", ack_log,
                 *sets(run_settings())],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            reached = wait_for_acks(ack_log, 2000 * (round_number + 1), process)
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            check(reached, f"round {round_number}: bench did not acknowledge enough commits")
            result, report = tm.verify(directory, ack_log, settings=run_settings())
            ok = result.returncode == 0 and report["lost_commits"] == 0 and report["ok"]
            check(ok, f"round {round_number}: verify after kill -9 failed: {result.stdout[-3000:]}"
                      f" {result.stderr[-2000:]}")
            if report:
                print(f"round {round_number}: killed after {report['acknowledged']} acknowledged "
                      f"commits; recovery replayed {report['recovery']['records']} records; "
                      f"none lost", flush=True)
        finally:
            remove(directory)
            remove(ack_log)
    finish("kill -9")


if __name__ == "__main__":
    main()
