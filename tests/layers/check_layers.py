"""The layering of DESIGN §2, checked on every #include: arrows point down only.

    examples, tools -> workload -> public API (include/tidemark/)
    runtime (implements the public API) -> actors -> messages -> storage
    runtime -> access (keyed tables) -> storage

- the public headers include only each other (no CAF, nothing of the layers below);
- examples/ include only the public headers; workload/ the public headers and its own
  files; tools/ those and workload/ (they are clients of the API, like any application);
- storage/ includes only storage/ and never CAF (it is usable without an actor system);
- access/ includes access/ and storage/, never CAF (the tree works on pages, not actors);
- messages/ includes messages/ and storage/;
- actors/ includes actors/, messages/ and storage/ (the runtime boots actors, never the
  reverse);
- storage/, access/, messages/ and actors/ may include the public vocabulary headers
  (tidemark/errors.hpp, tidemark/types.hpp), whose types they throw and use;
- runtime/ includes anything below it; tests/ mirror the folder they test.

KNOWN lists crossings tolerated until they are removed. It is empty since the split of
runtime/engine.hpp (the actors share actors/context.hpp, which includes nothing above
them): any crossing fails the check. A listed crossing that is gone fails it too (so the
list only shrinks). Usage: check_layers.py [REPOSITORY]"""
import os
import re
import sys

ALLOWED = {
    "include/tidemark": set(),
    "examples": set(),
    "workload": {"workload"},
    "tools": {"tools", "workload"},
    "storage": {"storage"},
    "access": {"access", "storage"},
    "messages": {"messages", "storage"},
    "actors": {"actors", "messages", "storage"},
    "runtime": {"runtime", "access", "actors", "messages", "storage"},
    "tests/storage": {"storage", "tests"},
    "tests/access": {"access", "storage", "tests"},
}
# Layers that must compile without CAF's headers.
NO_CAF = {"include/tidemark", "examples", "workload", "tools", "storage", "access",
          "tests/storage", "tests/access"}
# Public headers a lower layer may include (<tidemark/...>); None: all of them.
PUBLIC_VOCABULARY = {"tidemark/errors.hpp", "tidemark/types.hpp"}
PUBLIC_ALLOWED = {"storage": PUBLIC_VOCABULARY, "access": PUBLIC_VOCABULARY,
                  "messages": PUBLIC_VOCABULARY, "actors": PUBLIC_VOCABULARY,
                  "tests/storage": PUBLIC_VOCABULARY, "tests/access": PUBLIC_VOCABULARY}

KNOWN = set()

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(path):
    """The most specific ALLOWED key that `path` lies in, or None."""
    for key in sorted(ALLOWED, key=len, reverse=True):
        if path.startswith(key + "/"):
            return key
    return None


def crossings(root):
    found = set()
    for layer in ALLOWED:
        folder = os.path.join(root, layer)
        if not os.path.isdir(folder):
            continue
        for dirpath, _, names in os.walk(folder):
            for name in names:
                if not name.endswith((".hpp", ".cpp", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                if layer_of(path) != layer:
                    continue
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    for line in f:
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        quote, target = match.groups()
                        if quote == "<":
                            if layer in NO_CAF and target.startswith("caf/"):
                                found.add((path, target))
                            allowed = PUBLIC_ALLOWED.get(layer)
                            if (target.startswith("tidemark/") and allowed is not None
                                    and target not in allowed):
                                found.add((path, target))
                            continue
                        top = target.split("/")[0]
                        if "/" in target and top not in ALLOWED[layer]:
                            found.add((path, target))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    found = crossings(os.path.abspath(root))
    new = sorted(found - KNOWN)
    gone = sorted(KNOWN - found)
    for path, target in new:
        print(f"FAIL: {path} includes {target}, which crosses DESIGN §2's layers upward")
    for path, target in gone:
        print(f"FAIL: {path} no longer includes {target}: remove it from KNOWN in {__file__}")
    print(f"layers: {len(found)} crossings, {len(found & KNOWN)} known, {len(new)} new, "
          f"{len(gone)} gone")
    sys.exit(1 if new or gone else 0)


if __name__ == "__main__":
    main()
