#!/usr/bin/env bash
# Crash-recovery time (not a test): how long `tidemark recover` takes to replay a fixed
# amount of WAL, for buffer pools from the smallest (128 kB, 16 buffers) to larger than
# the data, with WAL prefetch (recovery_prefetch) and the bgwriter (bgwriter_lru_maxpages)
# each on and off, in full_page_writes and doublewrite modes. PostgreSQL 15's restart
# after `pg_ctl stop -m immediate` of the same load is the reference row.
#
# How: per mode, one data directory at scale SCALE gets LOAD seconds of tpcb-like load
# with checkpoint_timeout 1h and max_wal_size 64GB (no checkpoint: all the WAL since the
# load's start is redo's), then the process is killed (kill -9: every write in place, as a
# process crash leaves it) and the directory synced. Each recovery runs on a fresh copy of
# that crashed directory; with --cold (the default when run as root) the page cache is
# dropped before each, so redo's reads come from the device. The table gives redo's time
# and rate, pages redo read, pages prefetch read (and how many redo used) or asked the
# kernel to read (in a pool under 128 buffers), pages written by redo and by the bgwriter,
# the doublewrite repair's and the end-of-recovery checkpoint's time, and the process's
# wall time; then, per mode and pool, the ratio of "both off" to "both on".
# PostgreSQL: initdb --data-checksums, pgbench -i, the same load (pgbench -M prepared),
# stop -m immediate, drop caches, time `pg_ctl start -w`; records replayed from
# pg_waldump --stats between the log's "redo starts at" and "redo done at".
#
#   usage: bench/recovery.sh [-s SCALE] [-c CLIENTS] [--load-seconds N]
#            [--pools "128kB 16MB 1GB"] [--modes "full_page_writes doublewrite"]
#            [--cold | --warm] [--json FILE] [--tidemark PATH] [--port 54331]
#            [--no-postgres] [--keep]
#   defaults: -s 50 -c 8 --load-seconds 30, the pools above, both modes, --cold as root
#   (about 25 minutes on 2 cores).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

scale=50 clients=8 load_seconds=30
pools="128kB 16MB 1GB"
modes="full_page_writes doublewrite"
cold=$([ "$(id -u)" = 0 ] && echo 1 || echo 0)
json_out=recovery.json
tidemark_bin=$root/build/tidemark
port=54331
postgres=1
keep=0

usage() { sed -n '/^#   usage:/,/^#   defaults:/s/^#//p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    -s) scale=$2; shift ;;
    -c) clients=$2; shift ;;
    --load-seconds) load_seconds=$2; shift ;;
    --pools) pools=$2; shift ;;
    --modes) modes=$2; shift ;;
    --cold) cold=1 ;;
    --warm) cold=0 ;;
    --json) json_out=$2; shift ;;
    --tidemark) tidemark_bin=$2; shift ;;
    --port) port=$2; shift ;;
    --no-postgres) postgres=0 ;;
    --keep) keep=1 ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
  shift
done
for v in "$scale" "$clients" "$load_seconds"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "not a positive whole number: $v" >&2; exit 2; }
done
for m in $modes; do
  case $m in full_page_writes|doublewrite) ;; *) echo "unknown mode: $m" >&2; exit 2 ;; esac
done
if [ "$cold" = 1 ] && [ "$(id -u)" != 0 ]; then
  echo "--cold drops the page cache and needs root; use --warm" >&2; exit 2
fi
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
json_out=$(realpath -m "$json_out")

pgbin=/usr/lib/postgresql/15/bin
if [ "$postgres" = 1 ] && [ ! -x "$pgbin/pgbench" ]; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  log "installing postgresql"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
fi
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-recovery-XXXXXX")
chmod 755 "$work"
mkdir -p "$work/res" "$work/logs"
pgdata=$work/pg/data
cleanup() {
  local rc=$?
  set +e
  pkill -9 -f "$work/tidemark bench" 2>/dev/null
  if [ -e "$pgdata/postmaster.pid" ]; then
    as_pg "$pgbin/pg_ctl" -D "$pgdata" -m immediate -w stop >/dev/null 2>&1
  fi
  if [ "$keep" = 1 ] || [ $rc -ne 0 ]; then log "work directory kept: $work"; else rm -rf "$work"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cp "$tidemark_bin" "$work/tidemark"
"$work/tidemark" --help >/dev/null 2>&1 || { echo "no usable tidemark at $tidemark_bin" >&2; exit 1; }

drop_caches() {
  sync
  if [ "$cold" = 1 ]; then echo 3 > /proc/sys/vm/drop_caches; fi
}

load_settings=(--set checkpoint_timeout=1h --set max_wal_size=64GB --set log_checkpoints=off)

# Runs the load for load_seconds and kills the process: the crashed directory in $2.
crash_after_load() {  # mode, directory
  "$work/tidemark" bench -D "$2" -c "$clients" -T $(( load_seconds * 4 + 60 )) \
    "${load_settings[@]}" --set torn_page_protection="$1" > "$work/logs/load-$1.log" 2>&1 &
  local pid=$!
  sleep "$load_seconds"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  sync
}

log "scale $scale, $clients clients, ${load_seconds}s of load per mode, pools: $pools," \
    "cache: $([ "$cold" = 1 ] && echo cold || echo warm); work dir $work"
rows=$work/res/rows.jsonl
: > "$rows"
for mode in $modes; do
  log "tidemark init -s $scale, then ${load_seconds}s of load ($mode) and kill -9"
  "$work/tidemark" init -D "$work/tm-$mode" -s "$scale" > "$work/logs/init-$mode.log" 2>&1
  crash_after_load "$mode" "$work/tm-$mode"
  for pool in $pools; do
    for prefetch in on off; do
      for bgwriter in on off; do
        maxpages=$([ "$bgwriter" = on ] && echo 1000 || echo 0)
        rm -rf "$work/run"
        cp -a "$work/tm-$mode" "$work/run"
        drop_caches
        log "recover: $mode, shared_buffers $pool, prefetch $prefetch, bgwriter $bgwriter"
        out=$work/res/$mode-$pool-$prefetch-$bgwriter.json
        started=$(date +%s.%N)
        "$work/tidemark" recover -D "$work/run" --json "$out" --set shared_buffers="$pool" \
          --set recovery_prefetch="$prefetch" --set bgwriter_lru_maxpages="$maxpages" \
          --set torn_page_protection="$mode" --set log_checkpoints=off \
          > "$work/logs/recover.out" 2> "$work/logs/recover-$mode-$pool-$prefetch-$bgwriter.log"
        ended=$(date +%s.%N)
        python3 - "$out" "$mode" "$pool" "$prefetch" "$bgwriter" "$started" "$ended" >> "$rows" <<'EOF'
import json, sys
out, mode, pool, prefetch, bgwriter, started, ended = sys.argv[1:]
r = json.load(open(out))
print(json.dumps({"system": "tidemark", "mode": mode, "pool": pool, "prefetch": prefetch,
                  "bgwriter": bgwriter, "wall_s": float(ended) - float(started),
                  "recovery": r["recovery"], "repair": r["repair"]}))
EOF
      done
    done
  done
  rm -rf "$work/run"
done

if [ "$postgres" = 1 ]; then
  if ! python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then
    echo "port $port on 127.0.0.1 is in use; choose another with --port" >&2; exit 1
  fi
  mkdir -p "$work/pg/sock"
  [ "$(id -u)" = 0 ] && chown -R postgres: "$work/pg"
  log "PostgreSQL: initdb --data-checksums, pgbench -i -s $scale, ${load_seconds}s of load, stop -m immediate"
  as_pg "$pgbin/initdb" -D "$pgdata" --data-checksums -U postgres -A trust > "$work/logs/initdb.log" 2>&1
  cat >> "$pgdata/postgresql.conf" <<EOF

# bench/recovery.sh
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$work/pg/sock'
max_connections = 100
shared_buffers = 128MB
checkpoint_timeout = 1h
max_wal_size = 64GB
synchronous_commit = on
log_checkpoints = on
EOF
  pg() { as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$work/pg/server.log" -w -t 3600 "$@" >/dev/null; }
  pg start
  as_pg "$pgbin/pgbench" -i -q -s "$scale" -h "$work/pg/sock" -p "$port" postgres > "$work/logs/pgbench-init.log" 2>&1
  as_pg "$pgbin/psql" -X -q -h "$work/pg/sock" -p "$port" -d postgres -c CHECKPOINT
  as_pg "$pgbin/pgbench" -n -M prepared -b tpcb-like -c "$clients" -j 2 -T "$load_seconds" \
    -h "$work/pg/sock" -p "$port" postgres > "$work/logs/pgbench.out" 2>&1
  pg -m immediate stop
  as_pg cp -a "$pgdata" "$work/pg/crashed"
  for pool in $pools; do
    rm -rf "$pgdata"
    as_pg cp -a "$work/pg/crashed" "$pgdata"
    sed -i "s/^shared_buffers = .*/shared_buffers = $pool/" "$pgdata/postgresql.conf"
    : > "$work/pg/server.log"
    drop_caches
    log "PostgreSQL restart: shared_buffers $pool"
    started=$(date +%s.%N)
    pg start
    ended=$(date +%s.%N)
    pg -m fast stop
    python3 - "$work/pg/server.log" "$pgbin" "$work/pg/crashed" "$pool" "$started" "$ended" >> "$rows" <<'EOF'
import json, re, subprocess, sys
log, pgbin, crashed, pool, started, ended = sys.argv[1:]
text = open(log).read()
start = re.search(r"redo starts at ([0-9A-F]+/[0-9A-F]+)", text)
done = re.search(r"redo done at ([0-9A-F]+/[0-9A-F]+).*?elapsed: ([0-9.]+) s", text, re.S)
records = None
if start and done:
    stats = subprocess.run(["runuser", "-u", "postgres", "--", f"{pgbin}/pg_waldump", "--stats",
                            "-p", f"{crashed}/pg_wal", "-s", start.group(1), "-e", done.group(1)],
                           capture_output=True, text=True).stdout
    m = re.search(r"Total\s+(\d+)", stats)
    records = int(m.group(1)) if m else None
print(json.dumps({"system": "postgres", "mode": "full_page_writes", "pool": pool,
                  "wall_s": float(ended) - float(started),
                  "redo_s": float(done.group(2)) if done else None, "records": records}))
EOF
  done
fi

python3 - "$rows" "$json_out" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
json.dump(rows, open(sys.argv[2], "w"), indent=1)
print("| system | mode | pool | prefetch | bgwriter | redo s | records/s | pages read by redo |"
      " prefetched (used) / advised | written by redo / bgwriter | repair s | checkpoint s | wall s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if r["system"] == "tidemark":
        c, p = r["recovery"], r["repair"]
        print(f"| Tidemark | {r['mode']} | {r['pool']} | {r['prefetch']} | {r['bgwriter']} "
              f"| {c['seconds']:.2f} | {c['records_per_second']:,.0f} | {c['pages_read']:,} "
              f"| {c['pages_prefetched']:,} ({c['prefetch_hits']:,}) / {c.get('pages_advised', 0):,} "
              f"| {c['pages_written_by_redo']:,} / {c['pages_written_by_bgwriter']:,} "
              f"| {p['seconds']:.2f} | {c['checkpoint_seconds']:.2f} | {r['wall_s']:.2f} |")
    else:
        redo = r["redo_s"]
        rate = (r["records"] / redo) if (redo and r["records"]) else None
        print(f"| PostgreSQL 15 | fpw=on | {r['pool']} | off | on | "
              f"{redo if redo is not None else '-'} | {f'{rate:,.0f}' if rate else '-'} "
              f"| - | - | - | - | - | {r['wall_s']:.2f} |")
print()
for mode in sorted({r["mode"] for r in rows if r["system"] == "tidemark"}):
    for pool in dict.fromkeys(r["pool"] for r in rows if r["system"] == "tidemark"):
        pick = {(r["prefetch"], r["bgwriter"]): r["recovery"]["seconds"] for r in rows
                if r["system"] == "tidemark" and r["mode"] == mode and r["pool"] == pool}
        if ("on", "on") in pick and ("off", "off") in pick and pick[("on", "on")] > 0:
            print(f"{mode}, {pool}: redo with prefetch and bgwriter off / both on = "
                  f"{pick[('off', 'off')] / pick[('on', 'on')]:.2f}")
EOF
log "written $json_out"
