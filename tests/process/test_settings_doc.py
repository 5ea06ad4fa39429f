"""docs/settings.md is exactly what `tidemark settings --markdown` prints, so the settings
documentation cannot drift from the parser's table: after a setting is added or changed,
regenerate it (make settings-doc, or build/tidemark settings --markdown > docs/settings.md)."""
import difflib
import os

from harness import Tidemark, check, finish, parse_args

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "settings.md")


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    result = tm.run("settings", "--markdown")
    check(result.returncode == 0, f"settings --markdown exited {result.returncode}: {result.stderr}")
    with open(DOC) as f:
        written = f.read()
    if check(written == result.stdout,
             "docs/settings.md differs from `tidemark settings --markdown`; regenerate it with "
             "make settings-doc (or build/tidemark settings --markdown > docs/settings.md)"):
        print(f"docs/settings.md: {written.count(chr(10))} lines, as the program prints them")
    else:
        print("".join(difflib.unified_diff(written.splitlines(True), result.stdout.splitlines(True),
                                           "docs/settings.md", "tidemark settings --markdown")))
    finish("settings doc")


if __name__ == "__main__":
    main()
