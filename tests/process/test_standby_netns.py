"""Streaming replication across two network namespaces this test creates (ip netns, a veth
pair, an address on each end of that link only): a primary under load with
synchronous_standby=remote_flush in one, a base backup and a standby in the other. It
cuts the link and restores it, kills the standby and restarts it, then kills the primary,
promotes the standby and checks that every commit acknowledged under remote_flush is in
the promoted copy (verify --ack-log). Then the roles swap: the old primary's place is taken
by a new standby seeded from the promoted one, for more kill-and-promote cycles (--loops
sets how many; at least two in ctest).

Skipped (exit 77) with a message where namespaces cannot be made (not root, no ip).
Waits poll observable state (the ack log, the standby's status file) with deadlines; the
polling interval only paces the observer."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from harness import (Tidemark, ack_count, check, finish, parse_args, remove, run_settings, scratch, sets, status)

SKIP = 77
SETTINGS = [
    "shared_buffers=256",
    "checkpoint_timeout=2s",
    "wal_segment_size=1MB",
    "max_wal_size=8MB",
    "log_checkpoints=off",
]


def run(*cmd, check_rc=True):
    result = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    if check_rc and result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {result.stderr.strip()}")
    return result


class Link:
    """Two namespaces joined by a veth pair with 10.77.N.1 and 10.77.N.2 on its ends."""

    def __init__(self):
        tag = os.getpid() % 100000
        self.primary_ns, self.standby_ns = f"tmp{tag}p", f"tmp{tag}s"
        self.primary_if, self.standby_if = f"tmv{tag}p", f"tmv{tag}s"
        net = tag % 250
        self.primary_ip, self.standby_ip = f"10.77.{net}.1", f"10.77.{net}.2"
        run("ip", "netns", "add", self.primary_ns)
        run("ip", "netns", "add", self.standby_ns)
        run("ip", "link", "add", self.primary_if, "type", "veth", "peer", "name", self.standby_if)
        run("ip", "link", "set", self.primary_if, "netns", self.primary_ns)
        run("ip", "link", "set", self.standby_if, "netns", self.standby_ns)
        for ns, dev, ip in ((self.primary_ns, self.primary_if, self.primary_ip),
                            (self.standby_ns, self.standby_if, self.standby_ip)):
            run("ip", "-n", ns, "addr", "add", f"{ip}/30", "dev", dev)
            run("ip", "-n", ns, "link", "set", dev, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")

    def in_ns(self, ns, *cmd):
        return ["ip", "netns", "exec", ns, *cmd]

    def cut(self):
        run("ip", "-n", self.standby_ns, "link", "set", self.standby_if, "down")

    def restore(self):
        run("ip", "-n", self.standby_ns, "link", "set", self.standby_if, "up")

    def close(self):
        run("ip", "netns", "del", self.primary_ns, check_rc=False)
        run("ip", "netns", "del", self.standby_ns, check_rc=False)


def namespaces_unavailable():
    if os.geteuid() != 0:
        return "not running as root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is missing"
    probe = f"tmprobe{os.getpid() % 100000}"
    result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if result.returncode != 0:
        return "ip netns add failed: " + result.stderr.strip()
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def wait_until(what, condition, limit_s=60):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)  # the observer's pace, not the engine's synchronisation
    return check(False, f"timed out after {limit_s} s waiting for {what}")


class Node:
    """A tidemark process in a namespace, its output kept in a log file."""

    def __init__(self, link, ns, args, log):
        self.log = log
        self.process = subprocess.Popen(link.in_ns(ns, *args), stdout=subprocess.DEVNULL,
                                        stderr=open(log, "w"))

    def kill(self):
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)

    def tail(self):
        with open(self.log) as f:
            return f.read()[-3000:]

    def text(self):
        with open(self.log) as f:
            return f.read()


def start_standby(tm, link, standby, port, work, name):
    status_file = os.path.join(work, f"{name}.status.json")
    remove(status_file)
    node = Node(link, link.standby_ns,
                [tm.binary, "standby", "-D", standby, "--primary", f"{link.primary_ip}:{port}",
                 "--json", status_file, "--status-interval", "0.1",
                 *sets(run_settings(SETTINGS) + ["replication_listen=''"])],
                os.path.join(work, f"{name}.log"))
    return node, status_file


def cycle(tm, link, work, number, primary, port, faults):
    """One primary under remote_flush load, a standby seeded from it; kill the primary and
    promote. Returns the promoted directory (the next cycle's primary)."""
    acks = os.path.join(work, f"acks.{number}")
    open(acks, "w").close()
    bench = Node(link, link.primary_ns,
                 [tm.binary, "bench", "-D", primary, "-c", "4", "-T", "600", "--ack-log", acks,
                  *sets(run_settings(SETTINGS) + [f"replication_listen={link.primary_ip}:{port}",
                                                 "synchronous_standby=remote_flush"])],
                 os.path.join(work, f"primary.{number}.log"))
    standby = os.path.join(work, f"node.{number + 1}")
    try:
        if not wait_until(f"cycle {number}: the primary's WAL sender to listen",
                          lambda: "WAL sender listening" in bench.text()):
            print(bench.tail())
            return None
        backup = run(*link.in_ns(link.standby_ns, tm.binary, "basebackup", "-D", standby,
                                 "--primary", f"{link.primary_ip}:{port}"), check_rc=False)
        if not check(backup.returncode == 0, f"cycle {number}: basebackup failed: {backup.stderr}"):
            return None
        backup_redo = json.loads(backup.stdout)["redo_lsn"]
        node, status_file = start_standby(tm, link, standby, port, work, f"standby.{number}")
        try:
            if not wait_until(f"cycle {number}: commits acknowledged by the standby",
                              lambda: ack_count(acks) >= 300):
                print(bench.tail(), node.tail())
                return None
            if faults:
                # Restartpoints (checkpoint_timeout=2s) before the faults below.
                wait_until("a restartpoint on the standby",
                           lambda: (status(status_file) or {}).get("restartpoints", 0) >= 1, 30)
                # A cut link: the standby notices (no answer within 10 s) and commits wait.
                link.cut()
                wait_until("the standby to notice the cut link",
                           lambda: (status(status_file) or {}).get("connected") is False, 40)
                stalled = ack_count(acks)
                link.restore()
                check(wait_until("commits after the link came back",
                                 lambda: ack_count(acks) >= stalled + 300, 60),
                      "streaming did not resume after the link came back")
                # A crashed standby restarts from what it had flushed.
                node.kill()
                node, status_file = start_standby(tm, link, standby, port, work,
                                                  f"standby.{number}.restarted")
                before = ack_count(acks)
                check(wait_until("commits after the standby restarted",
                                 lambda: ack_count(acks) >= before + 300, 60),
                      "streaming did not resume after the standby was killed and restarted")
                # It replayed from a restartpoint of its own, not from the base backup (its
                # status file is written every 0.1 s once it streams).
                wait_until("the restarted standby's status", lambda: status(status_file), 30)
                restarted = status(status_file) or {}
                check(restarted.get("restart_redo", 0) > backup_redo,
                      f"the restarted standby replayed from {restarted.get('restart_redo')}, "
                      f"not past its base backup's redo point {backup_redo}")
                print(f"cycle {number}: link cut and restored (commits waited at {stalled}), "
                      f"standby killed and restarted", flush=True)
            bench.kill()
            promoted = run(*link.in_ns(link.standby_ns, tm.binary, "promote", "-D", standby),
                           check_rc=False)
            check(promoted.returncode == 0, f"cycle {number}: promote failed: {promoted.stderr}")
            code = node.stop()
            check(code == 0, f"cycle {number}: the standby exited with {code}: {node.tail()}")
        finally:
            node.kill()
        result, report = tm.verify(standby, acks, settings=run_settings(SETTINGS) +
                                   ["replication_listen=''"])
        ok = (result.returncode == 0 and report is not None and report["lost_commits"] == 0
              and report["ok"])
        check(ok, f"cycle {number}: verify of the promoted standby failed: "
                  f"{result.stdout[-2000:]} {result.stderr[-2000:]}")
        if report:
            print(f"cycle {number}: primary killed after {report['acknowledged']} commits "
                  f"acknowledged under remote_flush; promoted standby has all of them",
                  flush=True)
        return standby if ok else None
    finally:
        bench.kill()


def main():
    args = parse_args()
    why = namespaces_unavailable()
    if why:
        print(f"SKIPPED: network namespaces cannot be made here ({why}); run this test as "
              f"root on a machine with iproute2")
        sys.exit(SKIP)
    tm = Tidemark(args.tidemark)
    work = scratch()
    link = Link()
    try:
        primary = os.path.join(work, "node.0")
        tm.init(primary, settings=SETTINGS)
        port = 17000 + os.getpid() % 1000
        cycles = max(2, args.loops // 10)  # ctest: 5 (2 under sanitizers); by hand: more
        for number in range(cycles):
            primary = cycle(tm, link, work, number, primary, port, faults=(number == 0))
            if primary is None:
                break
            # The promoted standby becomes the next primary: move it into the primary's
            # namespace by path (both namespaces share the file system).
    finally:
        link.close()
        remove(work)
    finish("standby across namespaces")


if __name__ == "__main__":
    main()
