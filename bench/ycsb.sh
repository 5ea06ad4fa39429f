#!/usr/bin/env bash
# Durable YCSB (not a test): Tidemark (full_page_writes and doublewrite) against RocksDB,
# WiredTiger, Berkeley DB, LMDB and SQLite, every write acknowledged only once an fsync or
# fdatasync covers it, side by side on this machine. The drivers are ours, in
# bench/peers/*_ycsb.cpp (records, workloads and the lost-write check in ycsb_common.hpp);
# each states its configuration in its results.
#
# Per size and system: a fresh store is loaded (RECORDS records of 1 000 bytes, keys
# "user<hash>" in hashed order, 1 000 records a transaction, THREADS threads), then the
# workloads run one after another for SECONDS each (default A B C F E; E inserts, so it
# runs last), each operation its own transaction, requests zipfian 0.99; then `verify`
# reads every record and checks that no acknowledged write was lost. Sizes:
#   cached  the store's cache (Tidemark's shared_buffers, RocksDB's block cache,
#           WiredTiger's cache, Berkeley DB's memory pool, SQLite's page caches in all)
#           CACHED_CACHE, larger than the data; no memory limit;
#   beyond  the whole run in a memory cgroup of LIMIT bytes, which counts the page cache
#           too, with the data at least 4 x LIMIT; the cache is a quarter of LIMIT (the
#           rest holds each store's other memory and some page cache); the page
#           cache is dropped before every phase (pages cached by earlier phases would be
#           charged to no one). cgroup v1 (/sys/fs/cgroup/memory) or v2 (memory.max);
#           needs root.
# Each workload phase starts with --warmup seconds of reads, measured by no one, so that
# every store's cache (pool, block cache, LMDB's mapped pages) starts the measured seconds
# holding what the workload reads most: a cold cache at the start of each process would
# measure its filling (a fifth of Tidemark's CPU in a 20-second C), not the workload.
# Per phase: operations per second; latency p50/p99/p99.9/max of reads and of writes;
# retries after conflicts; bytes written to the device per operation (/proc/diskstats of
# the device holding the work directory: everything written on the machine meanwhile);
# fsync and fdatasync calls per write (perf stat of the driver's system calls).
# Once per system (cached size): the crash check, on a store of at most 100 000 records.
# Workload A runs until at least 2 000 writes are acknowledged, the driver is killed with
# SIGKILL, and `verify` opens the store (its recovery) and checks every acknowledged write.
# Writes OUT/ycsb.md (tables), OUT/ycsb.json, OUT/ycsb-<size>-<workload>.svg (ops/s per
# system; gnuplot, installed from Debian when missing) and keeps each phase's JSON line in
# OUT/rows.jsonl. Installs the peers' Debian packages and perf when missing.
#
#   usage: bench/ycsb.sh [-n RECORDS] [-t THREADS] [-T SECONDS] [--warmup SECONDS]
#            [--workloads "A B C F E"]
#            [--systems "tidemark-fpw tidemark-dw rocksdb wiredtiger bdb lmdb sqlite"]
#            [--sizes "cached beyond"] [--cached-cache 2GB] [--limit 256MB] [--no-crash]
#            [--load-limit SECONDS] [--quick] [--build DIR] [--out DIR] [--keep]
#   defaults: -n 1000000 -t 8 -T 20 --warmup 3 (0: none), all workloads, systems and
#   sizes, --cached-cache 2GB, --limit 256MB (the data is about 1.2 GB: 4.7 x),
#   --load-limit 240. A load still
#   running after --load-limit seconds is stopped (SIGKILL) and reported as not finished;
#   that store's workloads are not run at that size (beyond memory, Berkeley DB's load took
#   9 minutes). The cached size takes about 25 minutes on 2 cores, the whole run about an
#   hour.
#   --quick: -n 50000 -T 1 --warmup 1 --cached-cache 128MB --limit 256MB, about 5 minutes.
#   It checks the harness, not the stores: its "beyond" data (about 60 MB) fits the limit, since a
#   smaller limit leaves too little for the stores' own memory (WAL buffers, memtables,
#   transactions: Tidemark's load peaks at 170 MB resident with an 80 MB pool).
#   directory: --build names the Tidemark build tree (default: build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

records=1000000 threads=8 seconds=20 warmup=3
workloads="A B C F E"
systems="tidemark-fpw tidemark-dw rocksdb wiredtiger bdb lmdb sqlite"
sizes="cached beyond"
cached_cache=2GB limit=256MB load_limit=240
crash=1 keep=0
build=$root/build
out=ycsb-results

for a in "$@"; do # --quick sets the defaults below; options given with it still win
  if [ "$a" = --quick ]; then
    records=50000 seconds=1 warmup=1 cached_cache=128MB limit=256MB
  fi
done
usage() { sed -n '/^#   usage:/,/^#   directory/s/^#//p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    -n) records=$2; shift ;;
    -t) threads=$2; shift ;;
    -T) seconds=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --workloads) workloads=$2; shift ;;
    --systems) systems=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    --cached-cache) cached_cache=$2; shift ;;
    --limit) limit=$2; shift ;;
    --no-crash) crash=0 ;;
    --load-limit) load_limit=$2; shift ;;
    --quick) ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --keep) keep=1 ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
  shift
done
for v in "$records" "$threads" "$seconds" "$load_limit"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "-n, -t, -T and --load-limit take positive integers" >&2; exit 2; }
done
[[ $warmup =~ ^[0-9]+$ ]] || { echo "--warmup takes seconds (0 or more), got $warmup" >&2; exit 2; }
for w in $workloads; do
  case $w in A|B|C|E|F) ;; *) echo "--workloads takes A, B, C, E and F, got $w" >&2; exit 2 ;; esac
done
for s in $systems; do
  case $s in tidemark-fpw|tidemark-dw|rocksdb|wiredtiger|bdb|lmdb|sqlite) ;;
    *) echo "--systems: no system $s" >&2; exit 2 ;; esac
done
for s in $sizes; do
  case $s in cached|beyond) ;; *) echo "--sizes takes cached and beyond, got $s" >&2; exit 2 ;; esac
done
bytes_of() { # 256MB, 2GB, 512kB -> bytes
  local v=$1
  case $v in
    *GB) echo $(( ${v%GB} << 30 )) ;; *MB) echo $(( ${v%MB} << 20 )) ;;
    *kB) echo $(( ${v%kB} << 10 )) ;; *[0-9]) echo "$v" ;;
    *) echo "not a size: $v (use kB, MB or GB)" >&2; exit 2 ;;
  esac
}
cached_cache_bytes=$(bytes_of "$cached_cache")
limit_bytes=$(bytes_of "$limit")
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
case " $sizes " in *" beyond "*)
  [ "$(id -u)" = 0 ] || { echo "the beyond-memory size needs root (a memory cgroup)" >&2; exit 2; } ;;
esac

# ---- prerequisites ----
sudo=$([ "$(id -u)" = 0 ] || echo sudo)
missing=()
[ -e /usr/include/rocksdb/db.h ] || missing+=(librocksdb-dev)
[ -e /usr/include/wiredtiger.h ] || missing+=(libwiredtiger-dev)
[ -e /usr/include/db_cxx.h ] || missing+=(libdb5.3++-dev)
[ -e /usr/include/lmdb.h ] || missing+=(liblmdb-dev)
[ -e /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
command -v gnuplot >/dev/null || missing+=(gnuplot-nox)
command -v perf >/dev/null || missing+=(linux-perf)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
libs=()
for lib in tidemark tidemark_access tidemark_storage; do
  [ -e "$build/lib$lib.a" ] || { echo "no lib$lib.a in $build: build first (make build), or name the build tree with --build DIR" >&2; exit 1; }
  libs+=("$build/lib$lib.a")
done

mkdir -p "$out"
out=$(realpath "$out")
work=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-ycsb-XXXXXX")
cgroup=
cleanup() {
  local rc=$?
  [ -n "$cgroup" ] && rmdir "$cgroup" 2>/dev/null || true
  if [ "$keep" = 1 ] || [ $rc -ne 0 ]; then log "work directory kept: $work"; else rm -rf "$work"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$work/bin" "$work/logs"

log "building the drivers"
cc() { g++ -O2 -std=c++17 -o "$work/bin/$1" "$here/peers/$1.cpp" "${@:2}" -pthread; }
cc tidemark_ycsb -I"$root/include" "${libs[@]}" -lcaf_io -lcaf_core -luring -llz4
cc rocksdb_ycsb -lrocksdb
cc wiredtiger_ycsb -lwiredtiger
cc bdb_ycsb -ldb_cxx
cc lmdb_ycsb -llmdb
cc sqlite_ycsb -lsqlite3

# The device holding the work directory, as /proc/diskstats names it.
source_dev=$(df --output=source "$work" | tail -1)
device=$(basename "$(realpath "$source_dev")")
sectors_written() { awk -v d="$device" '$3 == d { print $10 }' /proc/diskstats; }
[ -n "$(sectors_written)" ] || { log "no /proc/diskstats entry for $device: bytes per operation not measured"; device=; }

# The memory cgroup for the beyond-memory size.
make_cgroup() {
  if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    cgroup=/sys/fs/cgroup/tidemark-ycsb-$$
    mkdir -p "$cgroup"
    echo "$limit_bytes" > "$cgroup/memory.max"
  else
    cgroup=/sys/fs/cgroup/memory/tidemark-ycsb-$$
    mkdir -p "$cgroup"
    echo "$limit_bytes" > "$cgroup/memory.limit_in_bytes"
  fi
}

driver_of() { case $1 in tidemark-*) echo tidemark_ycsb ;; *) echo "${1}_ycsb" ;; esac; }
settings_of() {
  case $1 in
    tidemark-fpw) echo "--set torn_page_protection=full_page_writes" ;;
    tidemark-dw) echo "--set torn_page_protection=doublewrite" ;;
  esac
}

# Runs one phase of a driver: prints nothing, appends its row to rows.jsonl.
# phase SYSTEM SIZE CACHE_BYTES COMMAND [ARGS...]
phase() {
  local system=$1 size=$2 cache=$3 command=$4; shift 4
  local name=$system-$size-$command${1:+-$1} dir=$work/data-$system-$size acks=$work/acks-$system-$size
  local json=$work/logs/$name.json perfout=$work/logs/$name.perf
  local args=("$command" -D "$dir" --acks "$acks" -n "$records" -t "$threads" --cache "$cache")
  [ "$command" = run ] && args+=(-w "$1" -T "$seconds" --warmup "$warmup")
  [ "$command" = load ] && args+=($(settings_of "$system"))
  [ "$command" = verify ] || args+=(--json "$json")
  sync
  if [ "$size" = beyond ]; then echo 3 > /proc/sys/vm/drop_caches; fi
  local before after=
  before=${device:+$(sectors_written)}
  local limited=()
  [ "$command" = load ] && limited=(timeout -s KILL "$load_limit")
  local wrapped=(perf stat -x, -o "$perfout" -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync
                 -- "${limited[@]}" "$work/bin/$(driver_of "$system")" "${args[@]}")
  local rc=0 started=$SECONDS
  if [ "$size" = beyond ]; then
    sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cgroup" "${wrapped[@]}" \
      > "$work/logs/$name.out" 2> "$work/logs/$name.log" || rc=$?
  else
    "${wrapped[@]}" > "$work/logs/$name.out" 2> "$work/logs/$name.log" || rc=$?
  fi
  local result=$json
  [ "$command" = verify ] && result=$work/logs/$name.out
  # perf stat exits 0 when the driver is killed by a signal (the cgroup's OOM killer).
  [ $rc -eq 0 ] && ! grep -q '^{' "$result" 2>/dev/null && rc=137
  if [ $rc -ne 0 ]; then
    local why
    why=$(grep -v '^LOG:' "$work/logs/$name.log" | tail -1)
    if [ "$command" = load ] && [ $((SECONDS - started)) -ge "$load_limit" ]; then
      why="the load did not finish within ${load_limit} s (stopped)"
    fi
    log "$name failed (exit $rc): ${why:-no message; killed for memory?}"
    python3 -c 'import json, sys; print(json.dumps({"system": sys.argv[1], "size": sys.argv[2], "command": sys.argv[3], "phase": sys.argv[4], "failed": sys.argv[5]}))' \
      "$system" "$size" "$command" "${1:-$command}" "exit $rc: ${why:-killed for memory?}" >> "$work/rows.jsonl"
    return 1
  fi
  sync
  after=${device:+$(sectors_written)}
  python3 - "$result" "$perfout" "${before:-0}" "${after:-0}" "$system" "$size" "$command" >> "$work/rows.jsonl" <<'EOF'
import json, sys
path, perf, before, after, system, size, command = sys.argv[1:]
row = json.loads(open(path).read().strip().splitlines()[-1])
syncs = 0
for line in open(perf):
    parts = line.strip().split(",")
    if len(parts) > 2 and parts[2].startswith("syscalls:") and parts[0].isdigit():
        syncs += int(parts[0])
row.update({"system": system, "size": size, "command": command,
            "device_bytes": (int(after) - int(before)) * 512, "syncs": syncs})
print(json.dumps(row))
EOF
}

: > "$work/rows.jsonl"
[ -n "$(echo " $sizes " | grep " beyond ")" ] && make_cgroup
log "records $records, threads $threads, ${seconds}s a workload after ${warmup}s of reads, workloads: $workloads; sizes: $sizes" \
    "(cached: cache $cached_cache; beyond: cgroup limit $limit, cache a quarter of it); device $device"
for size in $sizes; do
  cache=$([ "$size" = cached ] && echo "$cached_cache_bytes" || echo $((limit_bytes / 4)))
  for system in $systems; do
    log "$size, $system: load"
    mkdir -p "$work/acks-$system-$size"
    if phase "$system" "$size" "$cache" load; then
      for w in $workloads; do
        log "$size, $system: workload $w"
        phase "$system" "$size" "$cache" run "$w" || true
      done
      log "$size, $system: verify"
      phase "$system" "$size" "$cache" verify || true
    fi
    rm -rf "$work/data-$system-$size"
  done
done

if [ "$crash" = 1 ]; then
  crash_records=$((records < 100000 ? records : 100000)) # enough to kill mid-workload
  for system in $systems; do
    log "crash check, $system: load, workload A killed after 2 000 acknowledged writes, verify"
    dir=$work/data-$system-crash acks=$work/acks-$system-crash
    mkdir -p "$acks"
    bin=$work/bin/$(driver_of "$system")
    "$bin" load -D "$dir" --acks "$acks" -n "$crash_records" -t "$threads" --cache "$cached_cache_bytes" \
      $(settings_of "$system") > /dev/null 2> "$work/logs/crash-$system-load.log"
    "$bin" run -D "$dir" --acks "$acks" -n "$crash_records" -t "$threads" -w A -T 600 \
      --cache "$cached_cache_bytes" > /dev/null 2> "$work/logs/crash-$system-run.log" &
    pid=$!
    until [ "$(cat "$acks"/acks-* 2>/dev/null | wc -c)" -ge $((2000 * 32)) ]; do
      kill -0 "$pid" 2>/dev/null || { log "the $system driver ended before the kill"; exit 1; }
      sleep 0.1
    done
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    "$bin" verify -D "$dir" --acks "$acks" -n "$crash_records" -t "$threads" --cache "$cached_cache_bytes" \
      > "$work/logs/crash-$system-verify.out" 2> "$work/logs/crash-$system-verify.log" || true
    python3 - "$work/logs/crash-$system-verify.out" "$system" >> "$work/rows.jsonl" <<'EOF'
import json, sys
row = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
row.update({"system": sys.argv[2], "size": "cached", "command": "crash"})
print(json.dumps(row))
EOF
    rm -rf "$dir"
  done
fi

cp "$work/rows.jsonl" "$out/rows.jsonl"
python3 "$here/ycsb_report.py" "$out/rows.jsonl" "$out" "$(nproc) cores, device $device"
log "written $out/ycsb.md, $out/ycsb.json and the charts"
