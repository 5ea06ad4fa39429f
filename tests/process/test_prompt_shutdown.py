"""SIGTERM ends every long-running tidemark process within 5 s, whatever it is doing:
a standby connecting to a primary that accepts and never answers, waiting to retry a
primary that refuses connections, streaming and replaying, and just started (its
recovery) — one refused by a primary of another system stops by itself, with status 2; a primary with a WAL sender streaming to a
standby, and one whose commits wait for a synchronous standby that stopped answering
(SIGSTOP); a bench; and a verify that runs crash recovery. Afterwards each directory opens
again and holds every acknowledged commit. On loopback.

The 5 s is a bound for a hang, not a measurement: each process stops on the signal (an
event), normally within a fraction of a second; the times are printed."""
import os
import signal
import socket
import subprocess
import time

from harness import (SMALL, Primary, Process, Tidemark, check, finish, parse_args, poll_until,
                     print_stacks, run_settings, scratch, sets, verified_clean)

LIMIT_S = 5.0
SETTINGS = SMALL + ["log_checkpoints=off"]
times = []


def stopped_promptly(process, what, expect_code=None):
    """SIGTERM `process` (a harness.Process or Primary) and check it exits within LIMIT_S."""
    popen = process.process
    check(popen.poll() is None, f"{what}: exited before SIGTERM")
    started = time.monotonic()
    popen.send_signal(signal.SIGTERM)
    try:
        code = popen.wait(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        print_stacks(popen.pid, what)
        popen.kill()
        popen.wait()
        check(False, f"{what}: still running {LIMIT_S} s after SIGTERM")
        return
    took = time.monotonic() - started
    times.append((what, took))
    print(f"{what}: exited {code} {took:.2f} s after SIGTERM", flush=True)
    if expect_code is not None:
        with open(process.log) as f:
            tail = f.read()[-2000:]
        check(code == expect_code, f"{what}: exit code {code}, expected {expect_code}: {tail}")


def standby(tm, directory, log, primary=None):
    args = [tm.binary, "standby", "-D", directory, "--status-interval", "0.1",
            *sets(run_settings(SETTINGS))]
    if primary:
        args += ["--primary", primary]
    return Process(args, log)


def logged(process, text, limit_s=60):
    return poll_until(lambda: process.exited() or text in process.text(), limit_s) and \
        text in process.text()


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    work = scratch()
    primary_dir = os.path.join(work, "primary")
    other_dir = os.path.join(work, "other")
    standby_dir = os.path.join(work, "standby")
    tm.init(primary_dir, settings=SETTINGS)
    tm.init(other_dir, settings=SETTINGS)
    # A port that accepts connections and never answers (the kernel completes the
    # handshake; nobody reads), and one that refuses them (bound, not listening).
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    silent_address = f"127.0.0.1:{silent.getsockname()[1]}"
    refusing = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    refusing.bind(("127.0.0.1", 0))
    refusing_address = f"127.0.0.1:{refusing.getsockname()[1]}"

    primary = Primary(tm, primary_dir, os.path.join(work, "primary.log"), SETTINGS)
    try:
        r = tm.run("basebackup", "-D", standby_dir, "--primary", primary.address)
        check(r.returncode == 0, f"basebackup: {r.stderr}")

        s = standby(tm, standby_dir, os.path.join(work, "connecting.log"), silent_address)
        if check(logged(s, "standby: not connected to"), f"connecting standby: {s.tail()}"):
            stopped_promptly(s, "standby connecting to a silent primary", 0)

        s = standby(tm, standby_dir, os.path.join(work, "retrying.log"), refusing_address)
        if check(logged(s, "cannot reach the primary"), f"retrying standby: {s.tail()}"):
            stopped_promptly(s, "standby waiting to retry", 0)

        other = Primary(tm, other_dir, os.path.join(work, "other.log"), SETTINGS)
        try:
            s = standby(tm, standby_dir, os.path.join(work, "refused.log"), other.address)
            if check(logged(s, "refused this standby"), f"refused standby: {s.tail()}"):
                check(poll_until(s.exited, 30) and s.process.returncode == 2,
                      f"a standby refused for good did not stop with status 2 "
                      f"({s.process.poll()}): {s.tail()}")
                s.kill()
        finally:
            other.stop()

        s = standby(tm, standby_dir, os.path.join(work, "streaming.log"))
        if check(logged(s, "standby: streaming from"), f"streaming standby: {s.tail()}"):
            stopped_promptly(s, "standby streaming and replaying", 0)

        s = standby(tm, standby_dir, os.path.join(work, "starting.log"))
        stopped_promptly(s, "standby just started (recovery or its first connect)")

        # The primary, streaming to a standby.
        s = standby(tm, standby_dir, os.path.join(work, "streaming2.log"))
        check(logged(s, "standby: streaming from"), f"streaming standby: {s.tail()}")
        stopped_promptly(primary, "primary with a WAL sender streaming")
        s.stop()
    finally:
        if primary.process.poll() is None:
            primary.stop()

    # A primary whose commits wait for a synchronous standby that stopped answering.
    sync_primary = Primary(tm, primary_dir, os.path.join(work, "sync-primary.log"), SETTINGS,
                           extra=["synchronous_standby=remote_flush"])
    s = standby(tm, standby_dir, os.path.join(work, "sync-standby.log"), sync_primary.address)
    check(logged(s, "standby: streaming from"), f"synchronous standby: {s.tail()}")
    os.kill(s.process.pid, signal.SIGSTOP)
    stopped_promptly(sync_primary, "primary waiting for a stopped synchronous standby")
    os.kill(s.process.pid, signal.SIGCONT)
    s.stop()

    # A bench, mid-run, and a verify that runs the crash recovery it left.
    acks = os.path.join(work, "acks")
    bench = Process([tm.binary, "bench", "-D", primary_dir, "-c", "2", "-T", "600",
                     "--ack-log", acks, *sets(run_settings(SETTINGS))],
                    os.path.join(work, "bench.log"))
    check(poll_until(lambda: bench.exited() or os.path.exists(acks) and os.path.getsize(acks) > 0, 60),
          f"bench acknowledged nothing: {bench.tail()}")
    stopped_promptly(bench, "bench mid-run")
    verify = Process([tm.binary, "verify", "-D", primary_dir, *sets(run_settings(SETTINGS))],
                     os.path.join(work, "verify-interrupted.log"))
    stopped_promptly(verify, "verify at its start (crash recovery)")
    result, report = tm.verify(primary_dir, ack_log=acks, settings=run_settings(SETTINGS))
    check(verified_clean(result, report),
          f"after the interrupted runs: {result.returncode} {result.stderr[-2000:]}")
    r = tm.run("promote", "-D", standby_dir, *sets(run_settings(SETTINGS)))
    check(r.returncode == 0, f"the standby, stopped in every state, promotes offline: {r.stderr}")

    silent.close()
    refusing.close()
    if times:
        print("slowest: %s in %.2f s" % max(times, key=lambda t: t[1]))
    finish("prompt shutdown")


if __name__ == "__main__":
    main()
