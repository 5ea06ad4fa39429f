"""Replication commands used wrongly get a clear error and change nothing: a base backup
into a non-empty directory, from a primary that is not there or from a port that accepts
and stays silent, a standby or promotion of
a directory that is not a standby, a normal open of a standby, a standby refused by a
primary of another system; a standby promoted before it is consistent stays a standby
(and `promote` says so at once), `promote` of a standby that dies meanwhile ends at once;
and after a failover a standby seeded from the promoted copy refuses the old primary
(generations). On loopback (no namespaces needed)."""
import os
import signal
import socket
import subprocess
import time

from harness import (Primary, Tidemark, check, finish, parse_args, poll_until, remove, scratch,
                     tree_digest)

SETTINGS = ["shared_buffers=256", "log_checkpoints=off"]


def replaying_standby(tm, directory, log_path):
    """A standby running in `directory` (its stderr in `log_path`) once it replays."""
    with open(log_path, "w") as log:
        process = subprocess.Popen([tm.binary, "standby", "-D", directory,
                                    "--status-interval", "0.1"],
                                   stdout=subprocess.DEVNULL, stderr=log)

    def replaying():
        with open(log_path) as f:
            return "standby: replaying from" in f.read()
    check(poll_until(lambda: replaying() or process.poll() is not None, 60)
          and process.poll() is None, f"the standby in {directory} did not start")
    return process


def standby_until_refused(tm, directory, log_path, extra=()):
    """Runs a standby until it exits (or 30 s pass: then it is stopped); returns what it
    logged, with its exit status appended as "exit N" (a refused standby stops with 2)."""
    with open(log_path, "w") as log:
        p = subprocess.Popen([tm.binary, "standby", "-D", directory, "--status-interval", "0.1",
                              *extra], stdout=subprocess.DEVNULL, stderr=log)
    try:
        code = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.terminate()
        code = f"none (still running after 30 s; stopped: {p.wait(timeout=30)})"
    with open(log_path) as f:
        return f.read() + f"\nexit {code}"


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    work = scratch()
    # A port nothing listens on: bound (not listening) by this test for its whole run.
    nowhere = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    nowhere.bind(("127.0.0.1", 0))
    unreachable = f"127.0.0.1:{nowhere.getsockname()[1]}"
    try:
        primary = os.path.join(work, "primary")
        other = os.path.join(work, "other")
        tm.init(primary, settings=SETTINGS)
        tm.init(other, settings=SETTINGS)

        r = tm.run("basebackup", "-D", os.path.join(work, "x"), "--primary", unreachable)
        check(r.returncode == 1 and "cannot reach the primary" in r.stderr,
              f"basebackup from nowhere: {r.returncode} {r.stderr}")
        check(not os.path.exists(os.path.join(work, "x")), "a failed basebackup left a directory")
        # A port that accepts connections and stays silent (the kernel completes the TCP
        # handshake; nothing answers CAF's): basebackup gives up with a clear error
        # instead of waiting for good.
        silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        try:
            r = tm.run("basebackup", "-D", os.path.join(work, "x"), "--primary",
                       f"127.0.0.1:{silent.getsockname()[1]}", timeout=120)
            check(r.returncode == 1 and "cannot reach the primary" in r.stderr
                  and "handshake" in r.stderr,
                  f"basebackup from a silent port: {r.returncode} {r.stderr}")
            check(not os.path.exists(os.path.join(work, "x")),
                  "a basebackup from a silent port left a directory")
        finally:
            silent.close()
        r = tm.run("basebackup", "-D", primary, "--primary", unreachable)
        check(r.returncode == 2 and "not empty" in r.stderr, f"basebackup into a data directory: {r.stderr}")
        r = tm.run("basebackup", "-D", os.path.join(work, "y"), "--primary", unreachable,
                   "--name", "")
        check(r.returncode == 2 and "--name is empty" in r.stderr,
              f"basebackup with an empty --name: {r.returncode} {r.stderr}")
        missing = os.path.join(work, "missing")
        for command in ("standby", "promote"):
            r = tm.run(command, "-D", missing)
            check(r.returncode == 2 and "does not exist" in r.stderr,
                  f"{command} of a missing directory: {r.returncode} {r.stderr}")
        check(not os.path.exists(missing), "standby or promote made a missing directory")
        r = tm.run("basebackup", "-D", os.path.join(work, "y"), "--primary", "localhost")
        check(r.returncode == 2 and "HOST:PORT" in r.stderr, f"basebackup with a bad address: {r.stderr}")

        os.remove(os.path.join(primary, "tidemark.lock"))  # a refusal must not make one
        before = tree_digest(primary, ignore=())
        r = tm.run("standby", "-D", primary)
        check(r.returncode == 2 and "not a standby" in r.stderr, f"standby of a primary: {r.stderr}")
        r = tm.run("promote", "-D", primary)
        check(r.returncode == 2 and "not a standby" in r.stderr, f"promote of a primary: {r.stderr}")
        check(tree_digest(primary, ignore=()) == before,
              "a refused standby or promote changed the directory (its lock file included)")

        r = tm.run("bench", "-D", primary, "-t", "1", "--set", "replication_listen=127.0.0.1:0x")
        check(r.returncode == 2 and "replication_listen" in r.stderr, f"bad replication_listen: {r.stderr}")

        # A running primary, a consistent standby of it, and a directory it refuses.
        bench = Primary(tm, primary, os.path.join(work, "primary.log"), SETTINGS)
        try:
            standby = os.path.join(work, "standby")
            r = tm.run("basebackup", "-D", standby, "--primary", bench.address)
            check(r.returncode == 0, f"basebackup: {r.stderr}")
            r = tm.run("bench", "-D", standby, "-t", "1")
            check(r.returncode == 2 and "is a standby" in r.stderr, f"bench on a standby: {r.stderr}")
            r = tm.run("verify", "-D", standby)
            check(r.returncode == 2 and "is a standby" in r.stderr, f"verify on a standby: {r.stderr}")

            # Not consistent yet (its backup's end lies beyond the WAL it has): no promotion.
            early = os.path.join(work, "early")
            subprocess.run(["cp", "-a", standby, early], check=True)
            conf_path = os.path.join(early, "standby.conf")
            with open(conf_path) as f:
                lines = [("backup_end_lsn = %d\n" % (1 << 60)) if l.startswith("backup_end_lsn")
                         else l for l in f]
            with open(conf_path, "w") as f:
                f.writelines(lines)
            r = tm.run("promote", "-D", early)
            check(r.returncode == 1 and "not consistent yet" in r.stderr,
                  f"promote before consistency: {r.returncode} {r.stderr}")
            check(os.path.exists(conf_path), "a refused promotion removed standby.conf")
            # The same refusal from a running standby reaches `tidemark promote` at once,
            # with the standby's reason (not after its whole --timeout).
            running = replaying_standby(tm, early, os.path.join(work, "early.log"))
            try:
                started = time.monotonic()
                r = tm.run("promote", "-D", early, "--timeout", "600")
                took = time.monotonic() - started
                check(r.returncode == 1 and "refused" in r.stderr
                      and "not consistent yet" in r.stderr and took < 60,
                      f"promote of a running standby that refuses: {r.returncode} after "
                      f"{took:.1f} s: {r.stderr}")
                check(running.poll() is None and os.path.exists(conf_path),
                      "a running standby that refused promotion stopped or changed")
            finally:
                running.terminate()
                running.wait(timeout=60)
            # A standby that dies while `promote` waits for it: promote notices at once that
            # no process holds the directory any more (not after its whole --timeout).
            dying = replaying_standby(tm, early, os.path.join(work, "dying.log"))
            try:
                os.kill(dying.pid, signal.SIGSTOP)  # it cannot answer the request
                waiting = subprocess.Popen([tm.binary, "promote", "-D", early, "--timeout", "600"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                           text=True)
                check(poll_until(lambda: os.path.exists(os.path.join(early, "promote.signal")),
                                 60), "promote did not ask the running standby")
                os.kill(dying.pid, signal.SIGKILL)
                try:
                    _, err = waiting.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    waiting.kill()
                    _, err = waiting.communicate()
                check(waiting.returncode == 1 and "stopped without promoting" in err,
                      f"promote while its standby died: {waiting.returncode}: {err}")
            finally:
                if dying.poll() is None:
                    os.kill(dying.pid, signal.SIGCONT)
                    dying.kill()
                dying.wait(timeout=60)

            # The other system's directory, dressed as a standby of this primary.
            with open(os.path.join(standby, "standby.conf")) as f:
                conf = f.read()
            with open(os.path.join(other, "standby.conf"), "w") as f:
                f.write(conf)
            text = standby_until_refused(tm, other, os.path.join(work, "other.log"))
            check("refused this standby" in text and "copy of system" in text
                  and text.endswith("exit 2"),
                  f"a standby of another system was not refused clearly: {text[-2000:]}")
        finally:
            bench.stop()

        # After a failover: the standby promoted (its primary stopped), a new standby seeded
        # from it, and the old primary back: the new standby refuses the old primary.
        r = tm.run("promote", "-D", standby)
        check(r.returncode == 0, f"offline promote: {r.stderr}")
        promoted = Primary(tm, standby, os.path.join(work, "promoted.log"), SETTINGS)
        try:
            third = os.path.join(work, "third")
            r = tm.run("basebackup", "-D", third, "--primary", promoted.address)
            check(r.returncode == 0, f"basebackup from the promoted standby: {r.stderr}")
        finally:
            promoted.stop()
        # The old primary waits for a synchronous standby: meeting one of the newer
        # generation, it stops acknowledging (its waiting commits end, unacknowledged).
        old = Primary(tm, primary, os.path.join(work, "old.log"), SETTINGS,
                      extra=["synchronous_standby=remote_flush"])
        try:
            text = standby_until_refused(tm, third, os.path.join(work, "third.log"),
                                         ["--primary", old.address])
            check("refused this standby" in text and "generation" in text
                  and text.endswith("exit 2"),
                  f"a standby of the promoted copy was not refused by the old primary: "
                  f"{text[-2000:]}")
            check(poll_until(lambda: old.process.poll() is not None, 60),
                  "the old primary's commits still wait after it met a newer generation")
            with open(old.log) as f:
                log = f.read()
            check("this is an old primary" in log and "no longer acknowledges" in log
                  and "no synchronous standby confirmed" in log,
                  f"the old primary did not say it was superseded: {log[-3000:]}")
        finally:
            old.stop()
    finally:
        nowhere.close()
        remove(work)
    finish("standby bad input")


if __name__ == "__main__":
    main()
