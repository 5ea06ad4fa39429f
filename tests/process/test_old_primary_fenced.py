"""An old primary restarted after a failover cannot split the history (the sequence an
operator ran into): primary P under synchronous_standby=remote_flush and
synchronous_standby_names=FIRST 1 (s1, a) (s1 confirms while it can, else a) with standbys
s1 and a; s1 runs with replication_listen set to the address it serves on once promoted, which it
reports to P. P and a are killed, s1 is promoted and runs as the new primary on that
address. Then P is restarted under remote_flush, and a (a standby of P's generation that
never heard of the promotion) is restarted and connects to it.

Before, P acknowledged thousands of commits through a that s1 never got. Now P, at start,
asks each standby's address which generation runs there, finds s1's newer one before any
standby counts, acknowledges no commit (its ack log stays empty) and records it in
global/superseded; restarted once more (without synchronous commits, so that it stays
up), it knows from that mark without asking and refuses a, which stops with status 2. The commits P acknowledged before the failover are all on s1.

P's address and the one s1 will serve on are ports the kernel handed out to this test
(bound, then released), not guessed ones: both must stay the same across restarts. Waits poll observable state with deadlines."""
import os
import socket

from harness import (SMALL, Process, Tidemark, ack_count, check, finish, listening_address,
                     parse_args, poll_until, remove, run_settings, scratch, sets, verified_clean)


def free_port():
    """A port the kernel chose as free just now (released again for the standby to use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def primary_settings(address, wait):
    return sets(run_settings() + [f"replication_listen={address}",
                                  f"synchronous_standby={wait}",
                                  "synchronous_standby_names=FIRST 1 (s1, a)",
                                  "wal_sender_timeout=2s"])


def standby(tm, work, name, listen, tag):
    return Process([tm.binary, "standby", "-D", os.path.join(work, name),
                    *sets(run_settings() + [f"replication_listen={listen}"])],
                   os.path.join(work, f"{name}-{tag}.log"))


def start_primary(tm, work, address, wait, acks, tag):
    """P on `address` (the same at every start: its standbys come back to it there)."""
    return Process([tm.binary, "bench", "-D", os.path.join(work, "p"), "-c", "2", "-T", "600",
                    "--ack-log", acks, *primary_settings(address, wait)],
                   os.path.join(work, f"p-{tag}.log"))


def first_life(tm, work, p_address, s1_address):
    """P with s1 and a, until s1's future address is in P's slots and commits were
    acknowledged; then P and a are killed and s1 is promoted (its process ends). The ack
    log's path."""
    acks = os.path.join(work, "acks-before")
    p = start_primary(tm, work, p_address, "remote_flush", acks, "1")
    a = s1 = None
    try:
        check(poll_until(lambda: listening_address(p.text()) or p.exited(), 60)
              and not p.exited(), f"P did not listen: {p.tail()}")
        address = listening_address(p.text())
        for name in ("s1", "a"):
            backup = tm.run("basebackup", "-D", os.path.join(work, name), "--primary", address,
                            "--name", name)
            check(backup.returncode == 0, f"basebackup {name}: {backup.stderr}")
        s1 = standby(tm, work, "s1", s1_address, "1")
        a = standby(tm, work, "a", "''", "1")
        slots = os.path.join(work, "p", "global", "standby_slots")

        def recorded():
            return os.path.exists(slots) and s1_address in open(slots).read()
        check(poll_until(lambda: (recorded() and ack_count(acks) >= 300) or p.exited(), 120),
              f"P did not record s1's address or acknowledge commits: {p.tail()}")
        print(f"P acknowledged {ack_count(acks)} commits with s1 and a", flush=True)
    finally:
        p.kill()
        if a:
            a.kill()
    try:
        promoted = tm.run("promote", "-D", os.path.join(work, "s1"))
        check(promoted.returncode == 0, f"promote s1: {promoted.stderr}")
        check(poll_until(s1.exited, 120), f"s1 did not end after its promotion: {s1.tail()}")
    finally:
        s1.kill()
    return acks


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    work = scratch()
    processes = []
    try:
        tm.init(os.path.join(work, "p"), settings=SMALL)
        p_address, s1_address = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        acks_before = first_life(tm, work, p_address, s1_address)
        # s1, promoted, is the new primary on the address it reported.
        new_acks = os.path.join(work, "acks-new")
        new = Process([tm.binary, "bench", "-D", os.path.join(work, "s1"), "-c", "2", "-T", "600",
                       "--ack-log", new_acks, *sets(run_settings() + [
                           f"replication_listen={s1_address}"])], os.path.join(work, "s1-new.log"))
        processes.append(new)
        check(poll_until(lambda: listening_address(new.text()) or new.exited(), 60)
              and not new.exited(), f"the new primary did not listen: {new.tail()}")

        # P restarted under remote_flush, a with it: P asks s1's address before any
        # standby counts, and acknowledges nothing (its clients get commit_outcome_unknown,
        # and the benchmark ends).
        old_acks = os.path.join(work, "acks-old")
        p = start_primary(tm, work, p_address, "remote_flush", old_acks, "2")
        processes.append(p)
        a = standby(tm, work, "a", "''", "2")
        processes.append(a)
        check(poll_until(lambda: "this is an old primary" in p.text() or p.exited(), 60),
              f"the restarted old primary did not learn it is one: {p.tail()}")
        check(f"runs at {s1_address}" in p.text(), f"the warning does not say where: {p.tail()}")
        p.kill()
        a.kill()
        check(ack_count(old_acks) == 0,
              f"the old primary acknowledged {ack_count(old_acks)} commits the new primary "
              f"does not have: {p.tail()}")
        print("restarted under remote_flush, the old primary acknowledged nothing", flush=True)

        # Again, now without synchronous commits (so that it stays up): it knows from its
        # mark without asking, and refuses a, which stops with status 2.
        p = start_primary(tm, work, p_address, "off", os.path.join(work, "acks-off"), "3")
        processes.append(p)
        check(poll_until(lambda: "this is an old primary" in p.text() or p.exited(), 60)
              and "recorded in global/superseded" in p.text(),
              f"the old primary did not know it from its mark: {p.tail()}")
        a = standby(tm, work, "a", "''", "3")
        processes.append(a)
        check(poll_until(lambda: a.exited(), 60),
              f"the old primary's standby a kept following it: {a.tail()}")
        check(a.process.returncode == 2 and "old one" in a.text(),
              f"a did not stop with status 2 naming an old primary ({a.process.returncode}): "
              f"{a.tail()}")
        p.kill()
        print("restarted again, the old primary knew from its mark and refused a", flush=True)
        check(os.path.exists(os.path.join(work, "p", "global", "superseded")),
              "the old primary did not record that it is one")

        new.kill()
        with open(os.path.join(work, "acks-all"), "w") as out:
            for path in (acks_before, new_acks):
                out.write(open(path).read())
        result, report = tm.verify(os.path.join(work, "s1"), os.path.join(work, "acks-all"))
        check(verified_clean(result, report),
              f"the new primary lost acknowledged commits: {result.stdout[-2000:]}")
        print(f"the new primary holds all {report['acknowledged']} acknowledged commits of "
              f"both generations", flush=True)
    finally:
        for process in processes:
            process.kill()
        remove(work)
    finish("old primary fenced")


if __name__ == "__main__":
    main()
