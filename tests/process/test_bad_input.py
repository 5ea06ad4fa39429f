"""Bad input never corrupts or loses data: each case gives a clear message naming what is
wrong, exit status 2 (usage/configuration) or 1 (data), and leaves the data directory
byte-for-byte as it was."""
import os

from harness import (Tidemark, check, finish, parse_args, remove, run_settings, scratch,
                     sets, tree_digest)


def expect(tm, label, args, status, *needles, directory=None):
    before = tree_digest(directory) if directory else None
    result = tm.run(*args)
    output = result.stdout + result.stderr
    check(result.returncode == status,
          f"{label}: exit {result.returncode}, expected {status}: {output[-1500:]}")
    for needle in needles:
        check(needle in output, f"{label}: message does not mention {needle!r}: {output[-1500:]}")
    if directory:
        check(tree_digest(directory) == before, f"{label}: the data directory was modified")
    print(f"{label}: exit {result.returncode}: {output.strip().splitlines()[0][:160]}", flush=True)


def crashed_directory(tm):
    """A directory whose last run crashed with durable WAL after the initial checkpoint."""
    directory = scratch()
    tm.init(directory, schema="pages")  # its WAL starts in segment 0, which main() damages
    run = tm.run("bench", "-D", directory, "-c", "2", "-T", "60", "--crash-after-writes", "400",
                 "--crash-mode", "lose-unsynced", *sets(run_settings() + ["checkpoint_timeout=1h"]))
    check(run.returncode == 3, f"setup crash run exited {run.returncode}: {run.stderr[-800:]}")
    return directory


def corrupt_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        value = f.read(1)
        f.seek(offset)
        f.write(bytes([value[0] ^ 0x5A]))


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    directory = scratch()
    foreign = scratch()
    crashed = None
    try:
        tm.init(directory)
        bench = ["bench", "-D", directory, "-t", "5"]
        expect(tm, "unknown setting", [*bench, "--set", "shared_bufers=64"], 2, "shared_bufers",
               directory=directory)
        expect(tm, "out-of-range value", [*bench, "--set", "checkpoint_timeout=0"], 2,
               "checkpoint_timeout", "range", directory=directory)
        expect(tm, "bad unit", [*bench, "--set", "shared_buffers=12parsecs"], 2, "shared_buffers",
               directory=directory)
        expect(tm, "init-only setting changed", [*bench, "--set", "page_size=4kB"], 2, "page_size",
               directory=directory)
        expect(tm, "unknown flag", [*bench, "--frobnicate", "1"], 2, "--frobnicate",
               directory=directory)
        expect(tm, "doublewrite without checksums",
               ["init", "-D", os.path.join(foreign, "new"), "--set", "torn_page_protection=doublewrite",
                "--set", "data_checksums=off"], 2, "data_checksums", "doublewrite")
        expect(tm, "missing data directory", ["verify", "-D", "/nonexistent/tidemark"], 2,
               "does not exist")
        with open(os.path.join(foreign, "notes.txt"), "w") as f:
            f.write("not a database\n")
        expect(tm, "foreign data directory", ["verify", "-D", foreign], 2,
               "not a Tidemark data directory", directory=foreign)
        expect(tm, "init into a non-empty directory", ["init", "-D", foreign], 2, "not empty",
               directory=foreign)

        control = os.path.join(directory, "global", "tidemark.control")
        corrupt_byte(control, 40)
        expect(tm, "corrupt control file", ["verify", "-D", directory], 1, "checksum",
               directory=directory)
        corrupt_byte(control, 40)  # undo
        result, _ = tm.verify(directory, settings=run_settings())
        check(result.returncode == 0, "directory not usable again after restoring the control file")

        # Init-time settings at their defaults, so that nothing but the configuration file
        # itself can notice it is gone: "all defaults" would silently turn doublewrite off.
        defaults = os.path.join(foreign, "defaults")
        tm.init(defaults, settings=["torn_page_protection=doublewrite", "shared_buffers=2MB"])
        conf = os.path.join(defaults, "tidemark.conf")
        open(conf, "w").close()  # as a power loss right after an unsynced write leaves it
        expect(tm, "empty tidemark.conf", ["verify", "-D", defaults], 2, "tidemark.conf",
               "sets nothing", directory=defaults)
        os.remove(conf)
        expect(tm, "missing tidemark.conf", ["verify", "-D", defaults], 2, "tidemark.conf",
               directory=defaults)
        remove(defaults)
        expect(tm, "bad fault flag", ["recover", "-D", directory, "--crash-after-writes", "5",
                                      "--crash-mode", "sideways"], 2, "--crash-mode",
               directory=directory)
        expect(tm, "crash mode without a crash point", ["verify", "-D", directory,
                                                        "--crash-mode", "process"], 2,
               "--crash-after-writes", directory=directory)

        crashed = crashed_directory(tm)
        corrupt_byte(os.path.join(crashed, "wal", "0000000000000000"), 20000)
        expect(tm, "corrupt WAL record followed by valid ones",
               ["verify", "-D", crashed, *sets(run_settings())], 1, "WAL is corrupt", directory=crashed)
        expect(tm, "corrupt WAL, recover", ["recover", "-D", crashed, *sets(run_settings())], 1,
               "WAL is corrupt", directory=crashed)
    finally:
        remove(directory)
        remove(foreign)
        if crashed:
            remove(crashed)
    finish("bad input")


if __name__ == "__main__":
    main()
