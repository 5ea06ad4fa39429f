"""SIGHUP to a running `tidemark bench` reloads DIR/tidemark.conf (database::reload()):
with checkpoint_timeout 60min no timed checkpoint runs; the file then says 1s, SIGHUP,
and the bench says it reloaded the setting and logs a timed checkpoint without a
restart. A setting only a restart takes is named as such; a broken file is refused and
the bench goes on. Waits poll the bench's log (events) with deadlines."""
import os
import re
import signal

from harness import Process, Tidemark, check, finish, parse_args, poll_until, remove, scratch

SETTINGS = ["shared_buffers=256", "checkpoint_timeout=1h", "max_wal_size=1GB",
            "log_checkpoints=on", "wal_segment_size=256kB", "segment_size=1MB"]


def set_in_file(directory, key, value):
    path = os.path.join(directory, "tidemark.conf")
    with open(path) as f:
        text = f.read()
    text, count = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
    check(count == 1, f"{key} not found in {path}")
    with open(path, "w") as f:
        f.write(text)


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    work = scratch()
    try:
        data = os.path.join(work, "data")
        tm.init(data, settings=SETTINGS)
        bench = Process([tm.binary, "bench", "-D", data, "-c", "2", "-T", "600", "-P", "0.2"],
                        os.path.join(work, "bench.log"))
        try:
            check(poll_until(lambda: "progress:" in bench.text() or bench.exited(), 60)
                  and not bench.exited(), f"the bench did not start: {bench.tail()}")
            check("checkpoint complete (time)" not in bench.text(),
                  "a timed checkpoint ran before the reload")
            set_in_file(data, "checkpoint_timeout", "1s")
            set_in_file(data, "shared_buffers", "512")
            bench.process.send_signal(signal.SIGHUP)
            check(poll_until(lambda: "reload: checkpoint_timeout = 1s" in bench.text(), 60),
                  f"no reload line: {bench.tail()}")
            check("reload: not applied until a restart: shared_buffers" in bench.text(),
                  f"shared_buffers not named as needing a restart: {bench.tail()}")
            check(poll_until(lambda: "checkpoint complete (time)" in bench.text(), 60),
                  f"no timed checkpoint after the reload: {bench.tail()}")
            set_in_file(data, "max_wal_size", "plenty")
            bench.process.send_signal(signal.SIGHUP)
            check(poll_until(lambda: "reload: refused" in bench.text(), 60),
                  f"a broken file was not refused: {bench.tail()}")
            progress = bench.text().count("progress:")
            check(poll_until(lambda: bench.text().count("progress:") > progress + 2, 60)
                  and not bench.exited(), f"the bench stopped after a refused reload: "
                                          f"{bench.tail()}")
            print("reloaded checkpoint_timeout took effect; shared_buffers named for a "
                  "restart; a broken file refused while the bench went on", flush=True)
        finally:
            bench.kill()
    finally:
        remove(work)
    finish("reload on SIGHUP")


if __name__ == "__main__":
    main()
