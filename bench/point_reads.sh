#!/usr/bin/env bash
# Point reads of a cached table (not a test): Tidemark against LMDB on the same keys, in
# one run on this machine. Each loads KEYS keys (16 bytes: the key's number in zero-padded
# decimal; 100-byte values) in key order, then gets uniformly random existing keys on 1
# thread and on 2 threads for SECONDS each, in the order tidemark 1, lmdb 1, tidemark 2,
# lmdb 2 (each run its own process, which first walks the whole table once with a cursor,
# untimed, so that every page is in memory and every entry is checked):
#   - Tidemark: bench/peers/tidemark_point_reads.cpp, the public API only, built here with
#     g++ against the build tree's libraries; one table, loaded 10 000 keys a transaction
#     (fewer if max_commit_pages() says so); session::get outside a transaction, a session
#     per thread; shared_buffers holds the whole table (the run reports the buffers it had
#     to allocate for pages not in the pool: 0 means it stayed cached);
#   - LMDB (liblmdb-dev, installed from Debian when missing): bench/peers/lmdb_point_reads.cpp,
#     loaded 10 000 keys a transaction with MDB_APPEND and LMDB's default sync settings;
#     mdb_get in a read transaction renewed and reset per get (one per thread). LMDB reads
#     through its memory map, so through the page cache, which holds the whole file here.
# Both drivers are built in the work directory, from bench/peers/point_reads_common.hpp
# (keys, values, the timed loop). `sync` runs before every timed run. Prints a table
# (load seconds, table size, gets per second at 1 and 2 threads, the 2-thread / 1-thread
# ratio, Tidemark / LMDB at each thread count) and writes it as JSON. Numbers depend on
# the machine; reported, not asserted.
#
#   usage: bench/point_reads.sh [-n KEYS] [-T SECONDS] [--shared-buffers 512MB]
#            [--build DIR] [--json FILE] [--keep]
#   defaults: -n 1000000 -T 30 (about 4 minutes on 2 cores, the load included);
#   --build build (the CMake build tree holding libtidemark.a, libtidemark_access.a and
#   libtidemark_storage.a: make build); --json point_reads.json; --keep keeps the work
#   directory (data directories, logs, each run's JSON line).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

keys=1000000
seconds=30
shared_buffers=512MB
build=$root/build
json_out=point_reads.json
keep=0

usage() { sed -n '/^#   usage:/,/^#   directory/s/^#//p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    -n) keys=$2; shift ;;
    -T) seconds=$2; shift ;;
    --shared-buffers) shared_buffers=$2; shift ;;
    --build) build=$2; shift ;;
    --json) json_out=$2; shift ;;
    --keep) keep=1 ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
  shift
done
for v in "$keys" "$seconds"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "-n and -T must be positive integers" >&2; exit 2; }
done
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
json_out=$(realpath -m "$json_out")
build=$(realpath -m "$build")

# ---- prerequisites: liblmdb-dev, the Tidemark libraries ----
if [ ! -e /usr/include/lmdb.h ]; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  log "installing liblmdb-dev"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq liblmdb-dev >/dev/null
fi
libs=()
for lib in tidemark tidemark_access tidemark_storage; do
  [ -e "$build/lib$lib.a" ] || { echo "no lib$lib.a in $build: build the libraries first (make build), or name the build tree with --build DIR" >&2; exit 1; }
  libs+=("$build/lib$lib.a")
done

work=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-point-reads-XXXXXX")
cleanup() {
  local rc=$?
  if [ "$keep" = 1 ] || [ $rc -ne 0 ]; then log "work directory kept: $work"; else rm -rf "$work"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$work/bin" "$work/res" "$work/logs"

# The Tidemark driver links as tidemark.pc says a consumer links (its Libs and Requires).
log "building the drivers"
g++ -O2 -std=c++17 -I"$root/include" -o "$work/bin/tidemark_point_reads" \
  "$here/peers/tidemark_point_reads.cpp" "${libs[@]}" -lcaf_io -lcaf_core -luring -llz4 -pthread
g++ -O2 -std=c++17 -o "$work/bin/lmdb_point_reads" "$here/peers/lmdb_point_reads.cpp" -llmdb -pthread

log "$keys keys, ${seconds}s per run, Tidemark shared_buffers $shared_buffers; work dir $work"
log "tidemark load"
"$work/bin/tidemark_point_reads" load -D "$work/tidemark" -n "$keys" --set shared_buffers="$shared_buffers" \
  > "$work/res/tidemark-load.json" 2> "$work/logs/tidemark-load.log"
log "lmdb load"
"$work/bin/lmdb_point_reads" load -D "$work/lmdb" -n "$keys" \
  > "$work/res/lmdb-load.json" 2> "$work/logs/lmdb-load.log"

for threads in 1 2; do
  for system in tidemark lmdb; do
    log "run: $system, $threads thread(s)"
    sync  # the load's dirty page cache is written back before the run, not during it
    "$work/bin/${system}_point_reads" run -D "$work/$system" -t "$threads" -T "$seconds" \
      --json "$work/res/$system-$threads.json" > /dev/null 2> "$work/logs/$system-$threads.log" ||
      { cat "$work/logs/$system-$threads.log" >&2; echo "$system run with $threads thread(s) failed" >&2; exit 1; }
  done
done

python3 - "$work/res" "$json_out" "$keys" "$seconds" "$shared_buffers" "$(nproc)" <<'PY'
import json, os, sys
res, out, keys, seconds, shared_buffers, cpus = sys.argv[1:]
systems = {}
for system in ("tidemark", "lmdb"):
    load = json.load(open(os.path.join(res, f"{system}-load.json")))
    runs = {t: json.load(open(os.path.join(res, f"{system}-{t}.json"))) for t in (1, 2)}
    d = runs[1]["details"]
    pages = d["table_pages"] if system == "tidemark" else d["pages_used"]
    systems[system] = {
        "load_seconds": load["load_seconds"], "load_commits": load["commits"],
        "table_mb": pages * d["page_size"] / 2**20,
        "gets_per_second": {str(t): r["gets_per_second"] for t, r in runs.items()},
        "two_threads_over_one": runs[2]["gets_per_second"] / runs[1]["gets_per_second"],
        "runs": list(runs.values())}
lines = [f"{'system':<10} {'load_s':>7} {'table_MB':>8} {'gets/s 1 thr':>13} {'gets/s 2 thr':>13} {'2 thr / 1':>9}"]
for name, s in systems.items():
    g = s["gets_per_second"]
    lines.append(f"{name:<10} {s['load_seconds']:7.1f} {s['table_mb']:8.0f} {g['1']:13,.0f} "
                 f"{g['2']:13,.0f} {s['two_threads_over_one']:9.2f}")
tidemark_over_lmdb = {t: systems["tidemark"]["gets_per_second"][t] / systems["lmdb"]["gets_per_second"][t]
                      for t in ("1", "2")}
lines.append("")
lines.append(f"tidemark / lmdb gets/s: {tidemark_over_lmdb['1']:.2f} at 1 thread, "
             f"{tidemark_over_lmdb['2']:.2f} at 2 threads")
allocated = [r["details"]["buffers_allocated_during_run"] for r in systems["tidemark"]["runs"]]
notes = [
    f"keys {int(keys):,} (16 bytes), values 100 bytes, {seconds} s per run, {cpus} CPUs",
    f"tidemark: session::get outside a transaction, shared_buffers {shared_buffers}; buffers "
    f"allocated for pages not in the pool during the runs: {allocated} (0: cached)",
    "lmdb: mdb_get in a read transaction renewed and reset per get, reads through the page "
    f"cache ({systems['lmdb']['runs'][0]['details']['version']})",
    "load_s: the drivers' load (every commit durable); table_MB: tidemark's table pages, "
    "lmdb's pages in use, times the page size",
]
table = "\n".join(lines)
print(table)
print()
for n in notes:
    print("  " + n)
with open(out, "w") as f:
    json.dump({"settings": {"keys": int(keys), "key_bytes": 16, "value_bytes": 100,
                            "seconds": int(seconds), "shared_buffers": shared_buffers,
                            "cpus": int(cpus)},
               "systems": systems, "tidemark_over_lmdb": tidemark_over_lmdb,
               "notes": notes, "table": table}, f, indent=2)
    f.write("\n")
PY
log "wrote $json_out"
