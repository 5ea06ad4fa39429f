"""A standby's slot survives its primary's restarts: with the standby stopped, the primary
runs twice more with checkpoints every second (each would recycle the standby's WAL
without the slot on disk); the standby then resumes streaming where it stopped, and its
primary keeps the slot in global/standby_slots. On loopback."""
import os
import subprocess
import time

from harness import (Tidemark, check, finish, listening_address, parse_args, remove, run_settings,
                     scratch, sets)

SETTINGS = ["shared_buffers=256", "checkpoint_timeout=1s", "wal_segment_size=1MB",
            "max_wal_size=4MB", "log_checkpoints=off"]


def wait_for_text(path, text, process, limit_s=60):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and process.poll() is None:
        with open(path) as f:
            if text in f.read():
                return True
        time.sleep(0.02)  # the observer's pace
    return False


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    work = scratch()
    primary_settings = run_settings(SETTINGS) + ["replication_listen=127.0.0.1:0"]
    try:
        primary, standby = os.path.join(work, "primary"), os.path.join(work, "standby")
        tm.init(primary, settings=SETTINGS)

        def load(seconds, log):
            return subprocess.Popen([tm.binary, "bench", "-D", primary, "-c", "2", "-T", str(seconds),
                                     *sets(primary_settings)],
                                    stdout=subprocess.DEVNULL, stderr=open(log, "w"))

        def run_standby(log, primary_address):
            return subprocess.Popen([tm.binary, "standby", "-D", standby, "--status-interval", "0.2",
                                     "--primary", primary_address,
                                     *sets(run_settings(SETTINGS) + ["replication_listen=''"])],
                                    stdout=subprocess.DEVNULL, stderr=open(log, "w"))

        def address_of(log):
            with open(log) as f:
                return listening_address(f.read())

        first = load(30, os.path.join(work, "p1.log"))
        check(wait_for_text(os.path.join(work, "p1.log"), "WAL sender listening", first),
              "the primary did not start its WAL sender")
        address = address_of(os.path.join(work, "p1.log"))
        r = tm.run("basebackup", "-D", standby, "--primary", address)
        check(r.returncode == 0, f"basebackup: {r.stderr}")
        s = run_standby(os.path.join(work, "s1.log"), address)
        check(wait_for_text(os.path.join(work, "s1.log"), "streaming from the primary", s),
              "the standby did not stream")
        s.terminate()
        s.wait(timeout=60)
        first.terminate()
        first.wait(timeout=60)
        slots = open(os.path.join(primary, "global", "standby_slots")).read()
        check(len(slots.split()) == 3,  # name, flushed position, owner
              f"the slot file does not hold the standby's slot: {slots!r}")
        for round_number in range(2):  # checkpoints every second, the standby away
            p = load(4, os.path.join(work, f"p{round_number + 2}.log"))
            p.wait(timeout=120)
        last = load(30, os.path.join(work, "p4.log"))
        check(wait_for_text(os.path.join(work, "p4.log"), "WAL sender listening", last),
              "the restarted primary did not start its WAL sender")
        s = run_standby(os.path.join(work, "s2.log"), address_of(os.path.join(work, "p4.log")))
        resumed = wait_for_text(os.path.join(work, "s2.log"), "streaming from the primary", s)
        text = open(os.path.join(work, "s2.log")).read()
        check(resumed and "refused" not in text,
              f"the standby could not resume after its primary's restarts: {text[-2000:]}")
        s.terminate()
        s.wait(timeout=60)
        last.terminate()
        last.wait(timeout=60)
        print("standby resumed after two primary restarts with checkpoints", flush=True)
    finally:
        subprocess.run(["pkill", "-9", "-f", work], capture_output=True)
        remove(work)
    finish("standby slot across restarts")


if __name__ == "__main__":
    main()
