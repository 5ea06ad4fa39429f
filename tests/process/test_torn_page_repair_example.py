"""examples/torn_page_repair tears the same page write in each protection mode: with
protection off the tear is detected and named; with full_page_writes redo restores the page
from its WAL image; with doublewrite startup repair restores it from the ring. In the last
two modes the page then holds the committed values."""
import os
import re
import subprocess

from harness import check, finish, parse_args


def main():
    args = parse_args()
    example = os.path.join(os.path.dirname(args.tidemark), "torn_page_repair")
    run = subprocess.run([example], capture_output=True, text=True, timeout=300)
    out = run.stdout
    check(run.returncode == 0, f"example exited {run.returncode}: {run.stderr[-1500:]}")
    sections = re.split(r"^torn_page_protection = ", out, flags=re.M)[1:]
    modes = {s.split("\n", 1)[0]: s for s in sections}
    check(set(modes) == {"off", "full_page_writes", "doublewrite"}, f"modes seen: {sorted(modes)}")
    for mode, text in modes.items():
        check(re.search(r"on disk: bad_checksum in file \S*base/10\.0 block 0 \(relation 10 block 0\)",
                        text) is not None,
              f"{mode}: the page write was not torn on disk:\n{text}")
    check(re.search(r"recovery stopped, as it must: .*bad_checksum.*base/10\.0 block 0",
                    modes.get("off", "")) is not None, "off: the tear was not detected and named")
    check(re.search(r"[1-9]\d* full-page images restored by redo; the counters read 42 and 42",
                    modes.get("full_page_writes", "")) is not None,
          "full_page_writes: the page was not restored from the WAL")
    check(re.search(r"[1-9]\d* pages repaired from the ring, 0 full-page images restored by redo; "
                    r"the counters read 42 and 42", modes.get("doublewrite", "")) is not None,
          "doublewrite: the page was not repaired from the ring")
    print(out)
    finish("torn page repair example")


if __name__ == "__main__":
    main()
