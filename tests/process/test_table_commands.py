"""The operator's commands for keyed tables, on a directory `init` loaded with tables and
`bench` then ran on: `tables` lists the four workload tables with their sizes; `dump`
prints a table in key order (keys as \\xNN text, round-tripping through --from/--to, the
range inclusive at both ends, --limit); `check` checks every table's tree and names a
broken one (a damaged page by its checksum, a tree damaged behind a valid page by the
tree check); a missing table is bad usage (exit 2) and changes nothing."""
import json
import os

from harness import (Tidemark, check, finish, parse_args, remove, run_settings, scratch, sets,
                     tree_digest)


def key_text(n):
    return "".join(f"\\x{b:02x}" for b in n.to_bytes(8, "big"))


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    directory = scratch()
    unchecked = scratch()
    try:
        tm.init(directory)
        bench = tm.run("bench", "-D", directory, "-c", "2", "-t", "200", *sets(run_settings()))
        check(bench.returncode == 0, f"bench failed: {bench.stderr}")
        before = tree_digest(directory)

        listed = tm.run("tables", "-D", directory)
        check(listed.returncode == 0, f"tables failed: {listed.stderr}")
        rows = {line.split()[0]: int(line.split()[1]) for line in listed.stdout.splitlines()[1:]}
        check(sorted(rows) == ["accounts", "branches", "history", "tellers"],
              f"tables listed {sorted(rows)}")
        check(rows["accounts"] > rows["tellers"] > 0, f"table sizes: {rows}")

        dump = tm.run("dump", "-D", directory, "--table", "tellers")
        lines = dump.stdout.splitlines()
        check(dump.returncode == 0 and len(lines) == 10, f"tellers dump: {dump.stdout[:400]}")
        check([line.split("\t")[0] for line in lines] == [key_text(n) for n in range(10)],
              f"tellers out of order or misprinted: {lines[:3]}")
        ranged = tm.run("dump", "-D", directory, "--table", "accounts", "--from", key_text(10),
                        "--to", key_text(12))
        keys = [line.split("\t")[0] for line in ranged.stdout.splitlines()]
        check(keys == [key_text(10), key_text(11), key_text(12)], f"a range: {keys}")
        limited = tm.run("dump", "-D", directory, "--table", "history", "--limit", "5")
        check(len(limited.stdout.splitlines()) == 5, f"--limit 5: {limited.stdout[:300]}")

        result = tm.run("check", "-D", directory)
        report = json.loads(result.stdout)
        check(result.returncode == 0 and report["tables_checked"] == 5,
              f"check of the tables: {result.stdout}")

        missing = tm.run("dump", "-D", directory, "--table", "nope")
        check(missing.returncode == 2 and "no table named 'nope'" in missing.stderr,
              f"a missing table: exit {missing.returncode}: {missing.stderr}")
        bad_key = tm.run("dump", "-D", directory, "--table", "accounts", "--from", "\\x4")
        check(bad_key.returncode == 2 and "--from" in bad_key.stderr,
              f"a malformed key: exit {bad_key.returncode}: {bad_key.stderr}")
        check(tree_digest(directory) == before, "tables, dump or check changed the directory")

        # A damaged page of a table is named (its checksum fails before the tree is read).
        base = os.path.join(directory, "base")
        largest = max(os.listdir(base), key=lambda name: os.path.getsize(os.path.join(base, name)))
        accounts = largest.split(".")[0] + ".0"  # the accounts table's first segment
        with open(os.path.join(base, accounts), "r+b") as f:
            f.seek(8192 * 3 + 4000)
            byte = f.read(1)
            f.seek(8192 * 3 + 4000)
            f.write(bytes([byte[0] ^ 0xFF]))
        result = tm.run("check", "-D", directory)
        check(result.returncode == 1 and f"base/{accounts} block 3" in result.stderr,
              f"a damaged table page is not named: {result.stderr}")

        # Without checksums, a node whose slot points one byte off passes the page checks:
        # the tree check finds it and names the table.
        remove(unchecked)
        tm.init(unchecked, settings=["data_checksums=off", "log_checkpoints=off"])
        with open(os.path.join(unchecked, "base", accounts), "r+b") as f:
            f.seek(8192 * 3 + 64 + 2 * 5)
            byte = f.read(1)
            f.seek(8192 * 3 + 64 + 2 * 5)
            f.write(bytes([byte[0] ^ 0x01]))
        result = tm.run("check", "-D", unchecked)
        check(result.returncode == 1 and "table 'accounts'" in result.stderr,
              f"a broken tree is not named: {result.stderr}")
    finally:
        remove(directory)
        remove(unchecked)
    finish("table commands")


if __name__ == "__main__":
    main()
