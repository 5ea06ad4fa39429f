"""With torn_page_protection=off nothing repairs a torn data page, but it must never be
silently accepted: after a simulated power loss that tears data-page writes, `verify`
exits 1 and names the file and block. Also: verify never reports success with lost
commits or inconsistent balances in this mode."""
import re

from harness import Tidemark, check, finish, parse_args, remove, run_settings, scratch, sets


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    detected = 0
    attempts = 0
    for seed in range(1, 9):
        directory = scratch()
        ack_log = directory + ".acks"
        try:
            tm.init(directory)
            open(ack_log, "w").close()
            settings = run_settings() + ["torn_page_protection=off"]
            # Enough writes that many data pages were written since the last checkpoint.
            bench = tm.run("bench", "-D", directory, "-c", "4", "-T", "60", "--ack-log", ack_log,
                           "--crash-after-writes", str(1500 + 97 * seed), "--crash-mode", "torn",
                           "--seed", str(seed), *sets(settings))
            check(bench.returncode == 3, f"seed {seed}: bench exited {bench.returncode}")
            attempts += 1
            result, report = tm.verify(directory, ack_log, settings=run_settings())
            if result.returncode == 0:
                check(report["lost_commits"] == 0 and report["balances_consistent"],
                      f"seed {seed}: verify passed with lost commits or bad balances")
                continue
            named = re.search(r"base/\d+\.\d+ block \d+", result.stdout + result.stderr)
            check(result.returncode == 1, f"seed {seed}: verify exited {result.returncode}")
            check(report is not None and report["ok"] is False and report["checksum_failures"] > 0,
                  f"seed {seed}: verify failed without reporting a checksum failure: {result.stdout}")
            check(named is not None, f"seed {seed}: failure does not name file and block: "
                                     f"{result.stdout} {result.stderr}")
            if named:
                detected += 1
                print(f"seed {seed}: torn page detected: {named.group(0)}", flush=True)
        finally:
            remove(directory)
            remove(ack_log)
        if detected >= 2:
            break
    check(detected >= 1, f"no torn data page was detected in {attempts} crashes")
    finish("off mode torn-page detection")


if __name__ == "__main__":
    main()
