"""`init` reports success only once everything it wrote is durable.

Run on the fault-injecting engine with a journal, `init` must leave no write unsynced
(the journal records exactly the writes no fsync covered: none may remain), the settings
it was given must be in effect on the next start, and a power loss at the first write of
that start must not lose them."""
import json
import os

from harness import Tidemark, check, finish, parse_args, remove, scratch

SETTINGS = ["torn_page_protection=doublewrite", "shared_buffers=2MB", "log_checkpoints=off"]


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    directory = scratch()
    journal = directory + ".journal"
    report_path = directory + ".json"
    try:
        remove(directory)
        init = tm.run("init", "-D", directory, "-s", "1", "--fault-journal", journal,
                      *[x for s in SETTINGS for x in ("--set", s)])
        check(init.returncode == 0, f"init failed: {init.stderr[-2000:]}")
        check(not os.path.exists(journal),
              f"init left writes unsynced ({os.path.getsize(journal) if os.path.exists(journal) else 0}"
              " journal bytes)")
        for name in ("tidemark.conf", "workload.conf"):
            path = os.path.join(directory, name)
            check(os.path.exists(path) and os.path.getsize(path) > 0, f"{name} is missing or empty")
        # A power loss at the first write of the next start (it rewrites the control file).
        crash = tm.run("recover", "-D", directory, "--fault-journal", journal,
                       "--crash-after-writes", "1", "--crash-mode", "torn")
        check(crash.returncode == 3, f"the power loss run exited {crash.returncode}: "
                                     f"{crash.stderr[-2000:]}")
        result = tm.run("recover", "-D", directory, "--json", report_path)
        check(result.returncode == 0, f"start after the power loss failed: {result.stderr[-2000:]}")
        if result.returncode == 0:
            with open(report_path) as f:
                recovery = json.load(f)["recovery"]
            check(recovery["protection"] == "doublewrite",
                  f"the directory came back in {recovery['protection']}, not doublewrite")
        print("init: nothing unsynced; settings survive a power loss right after it", flush=True)
    finally:
        for path in (directory, journal, report_path):
            remove(path)
    finish("init is durable")


if __name__ == "__main__":
    main()
