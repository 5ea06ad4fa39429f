"""Shared helpers for the process-level tests: run the tidemark program, make data
directories, hash a directory to prove a command modified nothing."""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# Settings for crash tests: a buffer pool much smaller than the data (scale 1 is ~1,250
# account pages), checkpoints every second, small segments so several files are in play.
SMALL = [
    "shared_buffers=64",
    "checkpoint_timeout=1s",
    "wal_segment_size=256kB",
    "segment_size=1MB",
    "max_wal_size=4MB",
    "wal_buffers=1MB",
    "log_checkpoints=off",
]
INIT_ONLY = ("wal_segment_size", "segment_size")

# The protection modes the recovery crash tests run in: full_page_writes, and doublewrite
# with a two-batch ring and a 16-page pool, so that the load's and redo's writes keep the
# ring full and chunks are retired only by the sync worker's fsyncs.
DOUBLEWRITE_SMALL_RING = ["torn_page_protection=doublewrite", "doublewrite_batch_pages=8",
                          "doublewrite_ring_pages=16"]
PROTECTED_MODES = {
    "full_page_writes": ["torn_page_protection=full_page_writes"],
    "doublewrite": DOUBLEWRITE_SMALL_RING + ["shared_buffers=16"],
}


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tidemark", required=True)
    parser.add_argument("--loops", type=int, default=50)
    parser.add_argument("--seed", type=int, default=20261129,
                        help="varies the crash points (for soak runs outside ctest)")
    return parser.parse_args()


class Tidemark:
    def __init__(self, binary):
        self.binary = os.path.abspath(binary)

    def run(self, *args, timeout=300, cwd=None):
        """Runs the program to its end (in `cwd`, when given). One that outlives `timeout` is
        a hang: its threads' stacks are printed (gdb, where installed) before it is killed
        and the test fails. A sanitizer's report in its stderr is printed whole, since the
        tests quote only the end of stderr and a report's first lines say what it found."""
        process = subprocess.Popen([self.binary, *args], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, cwd=cwd)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            print_stacks(process.pid, f"{self.binary} {' '.join(args)}")
            process.kill()
            process.communicate()
            raise
        print_sanitizer_report(stderr, f"{self.binary} {' '.join(args)}")
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def init(self, directory, scale=1, settings=SMALL, schema="tables"):
        """init with keyed tables, or with schema="pages" the rows at fixed places in
        relations 1-4 (base/3.0 holds the accounts) and the load before the first
        checkpoint (the WAL starts in segment 0)."""
        sets = [x for s in settings for x in ("--set", s)]
        result = self.run("init", "-D", directory, "-s", str(scale), "--schema", schema, *sets)
        check(result.returncode == 0, f"init failed: {result.stderr}")

    def verify(self, directory, ack_log=None, settings=()):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
            report_path = out.name
        args = ["verify", "-D", directory, "--json", report_path]
        if ack_log:
            args += ["--ack-log", ack_log]
        args += [x for s in settings for x in ("--set", s)]
        result = self.run(*args)
        report = None
        if os.path.getsize(report_path) > 0:
            with open(report_path) as f:
                report = json.load(f)
        os.unlink(report_path)
        return result, report


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer")


def print_sanitizer_report(stderr, what):
    """The whole of a sanitizer's report in a program's stderr, for the test's log."""
    starts = [stderr.find(m) for m in SANITIZER_MARKERS if m in stderr]
    if starts:
        print(f"SANITIZER REPORT from {what}:\n{stderr[max(0, min(starts) - 200):]}", flush=True)


def print_stacks(pid, what):
    """Every thread's stack of a process that hangs, for the test's log."""
    print(f"HANG: {what} (pid {pid}) outlived its timeout; its threads:", flush=True)
    if shutil.which("gdb") is None:
        print("  (gdb is not installed: no stacks)", flush=True)
        return
    trace = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                           capture_output=True, text=True, timeout=120)
    print(trace.stdout, trace.stderr, sep="\n", flush=True)


def poll_until(condition, limit_s):
    """True once `condition()` holds, False when `limit_s` passed first."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)  # the observer's pace, not the engine's synchronisation
    return condition()


def poll_while_advancing(condition, position, stall_s):
    """True once `condition()` holds; False when `position()` (a progress measure, e.g. a
    standby's replay position) has not moved for `stall_s`. For waits whose length depends
    on how fast the machine is: a slow machine only takes longer, a stuck process fails."""
    last, moved = position(), time.monotonic()
    while True:
        if condition():
            return True
        now_at = position()
        if now_at != last:
            last, moved = now_at, time.monotonic()
        elif time.monotonic() - moved > stall_s:
            return condition()
        time.sleep(0.02)  # the observer's pace, not the engine's synchronisation


class Process:
    """A tidemark process, its stderr kept in a log file."""

    def __init__(self, args, log):
        self.log = log
        with open(log, "w") as out:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=out)

    def exited(self):
        return self.process.poll() is not None

    def kill(self):
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        return self.process.wait()

    def stop(self):
        """SIGTERM, and the exit code; one that outlives 60 s is a hang: its threads' stacks
        are printed before it is killed (exit code None)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            print_stacks(self.process.pid, " ".join(self.process.args))
            self.kill()
            return None

    def text(self):
        with open(self.log) as f:
            return f.read()

    def tail(self):
        return self.text()[-3000:]


def listening_address(log_text):
    """HOST:PORT from a primary's "WAL sender listening on HOST:PORT" log line (with
    replication_listen=HOST:0, the port the system chose), or None before it is logged."""
    found = re.search(r"WAL sender listening on (\S+)", log_text)
    return found.group(1) if found else None


def verified_clean(result, report):
    """verify exited 0 and found no lost commit, no checksum failure, consistent balances."""
    return (result.returncode == 0 and report is not None and report["ok"]
            and report["lost_commits"] == 0 and report["checksum_failures"] == 0
            and report["balances_consistent"])


def run_settings(settings=SMALL):
    """The per-run part of `settings` (init-only keys cannot be repeated on later runs)."""
    return [s for s in settings if not s.startswith(INIT_ONLY)]


def sets(settings):
    return [x for s in settings for x in ("--set", s)]


def tree_digest(directory, ignore=("tidemark.lock",)):
    digest = hashlib.sha256()
    for root, _, files in sorted(os.walk(directory)):
        for name in sorted(files):
            if name in ignore:
                continue
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, directory).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


failures = []


def ack_count(path):
    """Commits acknowledged so far in an ack log (one line each); 0 before it exists."""
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def status(path):
    """A status file's JSON (tidemark standby --json), or None if not written yet or
    caught mid-write."""
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message, flush=True)
    return condition


def each_mode(crash_loop, seed_offset, summary, passed_label):
    """Runs `crash_loop(tm, mode, settings, loops, seed)` for every PROTECTED_MODES entry,
    prints `summary` with the count it returns, and finishes."""
    args = parse_args()
    tm = Tidemark(args.tidemark)
    loops = max(2, args.loops)
    for index, (mode, extra) in enumerate(PROTECTED_MODES.items()):
        count = crash_loop(tm, mode, extra, loops, args.seed + seed_offset + 1000 * index)
        print(f"{mode}: {count} {summary}")
    finish(passed_label)


def finish(passed_label):
    """Prints the closing line ctest logs and exits non-zero on any failure."""
    passed = 0 if failures else 1
    print(f"{passed_label}: {passed} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


def scratch():
    return tempfile.mkdtemp(prefix="tidemark-test-")


def remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)


class Primary:
    """A running primary (`tidemark bench` with `settings` and any `extra` run settings)
    publishing its WAL sender on a port the system chooses; `address` is read from its log."""

    def __init__(self, tm, directory, log, settings=SMALL, extra=(), clients=2):
        self.log = log
        with open(log, "w") as out:
            self.process = subprocess.Popen(
                [tm.binary, "bench", "-D", directory, "-c", str(clients), "-T", "600",
                 *sets(run_settings(settings) + ["replication_listen=127.0.0.1:0", *extra])],
                stdout=subprocess.DEVNULL, stderr=out)
        self.address = None
        poll_until(lambda: self.process.poll() is not None or self._listening(), 60)
        check(self.address is not None, f"the primary in {directory} did not listen")

    def _listening(self):
        with open(self.log) as f:
            self.address = listening_address(f.read())
        return self.address is not None

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=60)
