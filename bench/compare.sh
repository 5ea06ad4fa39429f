#!/usr/bin/env bash
# Tidemark against PostgreSQL, SQLite and RocksDB on pgbench's tpcb-like workload (not a
# test). Everything runs on this machine, in one temporary directory:
#   - Tidemark `bench` on keyed tables (init's default, --schema tables: every row found
#     by its key, as the peers find theirs), torn_page_protection=full_page_writes,
#     =doublewrite and =off (a data directory per mode; data_checksums on, fixed at init);
#     off is the unprotected baseline that doublewrite's cost is measured against (target:
#     dw tps >= 0.95 x off);
#   - Tidemark `bench` on --schema pages (rows at fixed places, no key lookup),
#     full_page_writes, settings as the keyed full_page_writes run: keyed / pages is what
#     the B+tree costs Tidemark itself (--only without tidemark-pages leaves it out);
#   - a private PostgreSQL 15 (installed from Debian when missing) started as the postgres
#     user on 127.0.0.1:PORT with its own data directory (initdb --data-checksums) and
#     socket directory, pgbench -M prepared tpcb-like with full_page_writes on and off
#     (server restarted between runs; stopped by the EXIT trap whatever happens);
#   - bench/peers/sqlite_tpcb and bench/peers/rocksdb_tpcb (built here with g++ into
#     bench/peers/build), the same transaction on the same schema.
# Same scale, clients, duration, buffer pool (shared_buffers; the peers' page / block
# cache), checkpoint_timeout, max_wal_size, checkpoint_completion_target,
# synchronous_commit=on and checksums for Tidemark and PostgreSQL; the peers have no such
# checkpoint settings (SQLite checkpoints every 1000 WAL frames, RocksDB flushes full
# memtables). PostgreSQL runs three ways: full_page_writes on, on with
# wal_compression=lz4 (Tidemark always compresses its full-page images, so this is the
# like-for-like row), and off. Runs alternate systems: tidemark fpw, tidemark fpw pages
# (right after its keyed twin, so that the disk's drift moves both alike), postgres
# fpw=on, postgres fpw=on lz4, tidemark dw, tidemark off, postgres fpw=off, tidemark off
# #2, tidemark dw #2, sqlite, rocksdb. Doublewrite and off run as pairs in ABBA order (dw
# off, off dw, ...; --dw-off-pairs, default 2): a single run of each moves with the disk,
# whose fsync latency drifts by tens of percent within minutes here, so the dw / off ratio
# is judged on the means over all pairs (each pair's ratio is printed too). `sync` runs
# right before every timed run, so that no run pays for the writeback of the previous
# run's dirty page cache. Each system's balance invariant is checked after its run.
# Prints one table (Tidemark-to-peer ratios for the keyed runs, the keyed / pages ratio of
# the full_page_writes runs, the doublewrite / off tps ratio, each Tidemark run's share
# of buffer writes made by sessions) and writes it as JSON. Each Tidemark run also writes
# its per-second timeline (res/tm-MODE.csv in the work directory; --keep keeps it, for
# bench/plot_timeline.sh). Numbers depend on the machine; reported, not asserted.
#
#   usage: bench/compare.sh [-s SCALE] [-c CLIENTS] [-T SECONDS] [--checkpoint-timeout 30s]
#            [--shared-buffers 128MB] [--max-wal-size 1GB] [--completion-target 0.9]
#            [--quick] [--json FILE] [--tidemark PATH] [--port 54329]
#            [--only tidemark,tidemark-pages,postgres,sqlite,rocksdb] [--dw-off-pairs 2]
#            [--keep]
#   defaults: -s 50 -c 8 -T 60 (about 12 minutes on 2 cores): with checkpoint_timeout 30s
#   (PostgreSQL's minimum) every configuration completes at least one timed checkpoint
#   within its run; --quick: -s 2 -T 5 --dw-off-pairs 1.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

scale= seconds=
clients=8
checkpoint_timeout=30s
shared_buffers=128MB
max_wal_size=1GB
completion_target=0.9
json_out=compare.json
tidemark_bin=$root/build/tidemark
port=54329
only=tidemark,tidemark-pages,postgres,sqlite,rocksdb
quick=0
keep=0
dw_off_pairs=

usage() { sed -n '/^#   usage:/,/^#   defaults:/s/^#//p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    -s) scale=$2; shift ;;
    -c) clients=$2; shift ;;
    -T) seconds=$2; shift ;;
    --checkpoint-timeout) checkpoint_timeout=$2; shift ;;
    --shared-buffers) shared_buffers=$2; shift ;;
    --max-wal-size) max_wal_size=$2; shift ;;
    --completion-target) completion_target=$2; shift ;;
    --json) json_out=$2; shift ;;
    --tidemark) tidemark_bin=$2; shift ;;
    --port) port=$2; shift ;;
    --only) only=$2; shift ;;
    --dw-off-pairs) dw_off_pairs=$2; shift ;;
    --quick) quick=1 ;;
    --keep) keep=1 ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
  shift
done
if [ "$quick" = 1 ]; then
  scale=${scale:-2} seconds=${seconds:-5} dw_off_pairs=${dw_off_pairs:-1}
fi
scale=${scale:-50} seconds=${seconds:-60} dw_off_pairs=${dw_off_pairs:-2}
for v in "$scale" "$clients" "$seconds" "$dw_off_pairs"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "scale, clients, seconds and --dw-off-pairs must be positive integers" >&2; exit 2; }
done
# The peers take their cache size in MB.
case ${shared_buffers^^} in
  *GB) cache_mb=$(( ${shared_buffers%??} * 1024 )) ;;
  *MB) cache_mb=${shared_buffers%??} ;;
  *) echo "--shared-buffers must be given in MB or GB (e.g. 128MB)" >&2; exit 2 ;;
esac
wants() { [[ ,$only, == *,$1,* ]]; }
for system in ${only//,/ }; do
  case $system in
    tidemark|tidemark-pages|postgres|sqlite|rocksdb) ;;
    *) echo "--only: unknown system \"$system\" (tidemark, tidemark-pages, postgres, sqlite, rocksdb)" >&2; exit 2 ;;
  esac
done
if wants postgres; then  # PostgreSQL refuses checkpoint_timeout below 30 s
  case $checkpoint_timeout in
    *min) ckpt_s=$(( ${checkpoint_timeout%min} * 60 )) ;;
    *h) ckpt_s=$(( ${checkpoint_timeout%h} * 3600 )) ;;
    *s) ckpt_s=${checkpoint_timeout%s} ;;
    *) ckpt_s=$checkpoint_timeout ;;
  esac
  if ! [[ $ckpt_s =~ ^[0-9]+$ ]] || [ "$ckpt_s" -lt 30 ]; then
    echo "--checkpoint-timeout $checkpoint_timeout: PostgreSQL accepts 30s .. 1d (use --only to leave it out)" >&2
    exit 2
  fi
fi
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
json_out=$(realpath -m "$json_out")

# ---- prerequisites: Debian packages, peer drivers, a stable copy of tidemark ----
pgbin=/usr/lib/postgresql/15/bin
need=()
if wants postgres && [ ! -x "$pgbin/pgbench" ]; then need+=(postgresql); fi
if wants sqlite && [ ! -e /usr/include/sqlite3.h ]; then need+=(libsqlite3-dev); fi
if wants rocksdb && [ ! -e /usr/include/rocksdb/db.h ]; then need+=(librocksdb-dev); fi
if [ ${#need[@]} -gt 0 ]; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  log "installing ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
if wants postgres && [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  echo "no postgres user (the postgresql package creates it)" >&2; exit 1
fi

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

peers=$here/peers
build_peer() {  # name, libraries...
  local name=$1; shift
  local out=$peers/build/$name
  if [ ! -x "$out" ] || [ "$peers/$name.cpp" -nt "$out" ] || [ "$peers/tpcb_common.hpp" -nt "$out" ]; then
    log "building bench/peers/build/$name"
    mkdir -p "$peers/build"
    g++ -O2 -std=c++17 -o "$out.tmp" "$peers/$name.cpp" "$@" -lpthread && mv "$out.tmp" "$out"
  fi
}
wants sqlite && build_peer sqlite_tpcb -lsqlite3
wants rocksdb && build_peer rocksdb_tpcb -lrocksdb

work=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-compare-XXXXXX")
chmod 755 "$work"  # the postgres user must reach its directories inside
mkdir -p "$work/res" "$work/logs"
pgdata=$work/pg/data
pg_started=0
cleanup() {
  local rc=$?
  set +e
  if [ "$pg_started" = 1 ] || [ -e "$pgdata/postmaster.pid" ]; then
    log "stopping the PostgreSQL server"
    as_pg "$pgbin/pg_ctl" -D "$pgdata" -m fast -w -t 60 stop >/dev/null 2>&1 ||
      as_pg "$pgbin/pg_ctl" -D "$pgdata" -m immediate -w stop >/dev/null 2>&1
  fi
  if [ "$keep" = 1 ] || [ $rc -ne 0 ]; then log "work directory kept: $work"; else rm -rf "$work"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Run a private copy of tidemark, so that rebuilding it during a long comparison cannot
# change the binary under the runs.
if wants tidemark || wants tidemark-pages; then
  for _ in $(seq 120); do [ -x "$tidemark_bin" ] && break; log "waiting for $tidemark_bin"; sleep 5; done
  for _ in 1 2 3; do cp "$tidemark_bin" "$work/tidemark" 2>/dev/null && "$work/tidemark" --help >/dev/null 2>&1 && break; sleep 5; done
  "$work/tidemark" --help >/dev/null 2>&1 || { echo "no usable tidemark at $tidemark_bin" >&2; exit 1; }
fi

log "scale $scale, $clients clients, ${seconds}s per run, shared_buffers $shared_buffers," \
    "checkpoint_timeout $checkpoint_timeout, max_wal_size $max_wal_size," \
    "checkpoint_completion_target $completion_target, synchronous_commit on; work dir $work"

# ---- setup: every data set is loaded before the first timed run ----
tm_settings=(--set shared_buffers="$shared_buffers" --set checkpoint_timeout="$checkpoint_timeout"
             --set max_wal_size="$max_wal_size" --set checkpoint_completion_target="$completion_target"
             --set synchronous_commit=on --set wal_buffers=16MB --set log_checkpoints=on)
tm_init() {  # mode, schema (tables | pages)
  log "tidemark init -s $scale --schema $2 ($1)"
  "$work/tidemark" init -D "$work/tm-$1" -s "$scale" --schema "$2" > "$work/logs/tm-$1-init.log" 2>&1
}
if wants tidemark; then
  for mode in fpw dw off; do tm_init "$mode" tables; done
fi
if wants tidemark-pages; then tm_init pages pages; fi

psql_q() {  # each argument runs as its own statement (its own transaction)
  local args=() sql
  for sql in "$@"; do args+=(-c "$sql"); done
  as_pg "$pgbin/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work/pg/sock" -p "$port" -d postgres "${args[@]}"
}
pg_start() {  # full_page_writes value, wal_compression value
  as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$work/pg/server.log" -w -t 300 \
    -o "-c full_page_writes=$1 -c wal_compression=$2" start >/dev/null
  pg_started=1
}
pg_stop() {
  as_pg "$pgbin/pg_ctl" -D "$pgdata" -m fast -w -t 300 stop >/dev/null
  pg_started=0
}
if wants postgres; then
  if python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then :; else
    echo "port $port on 127.0.0.1 is in use; choose another with --port" >&2; exit 1
  fi
  mkdir -p "$work/pg/sock" "$work/res/pg"
  [ "$(id -u)" = 0 ] && chown -R postgres: "$work/pg" "$work/res/pg"
  log "initdb --data-checksums, pgbench -i -s $scale"
  as_pg "$pgbin/initdb" -D "$pgdata" --data-checksums -U postgres -A trust > "$work/logs/initdb.log" 2>&1
  cat >> "$pgdata/postgresql.conf" <<EOF

# bench/compare.sh
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$work/pg/sock'
max_connections = $(( clients + 20 > 100 ? clients + 20 : 100 ))
shared_buffers = $shared_buffers
wal_buffers = 16MB
checkpoint_timeout = $checkpoint_timeout
max_wal_size = $max_wal_size
checkpoint_completion_target = $completion_target
synchronous_commit = on
fsync = on
log_checkpoints = on
EOF
  pg_start on off
  as_pg "$pgbin/pgbench" -i -q -s "$scale" -h "$work/pg/sock" -p "$port" postgres > "$work/logs/pgbench-init.log" 2>&1
  pg_stop
fi
if wants sqlite; then
  log "sqlite_tpcb init -s $scale"
  "$peers/build/sqlite_tpcb" init -D "$work/sqlite" -s "$scale" > "$work/logs/sqlite-init.log" 2>&1
fi
if wants rocksdb; then
  log "rocksdb_tpcb init -s $scale"
  "$peers/build/rocksdb_tpcb" init -D "$work/rocksdb" -s "$scale" > "$work/logs/rocksdb-init.log" 2>&1
fi
sync

# ---- the timed runs ----
manifest=$work/res/manifest.tsv
: > "$manifest"

# fpw | dw | off (keyed tables) | pages (full_page_writes on --schema pages), then the
# run's number within its mode (1 when absent)
run_tidemark() {
  local mode=$1 run=${2:-1} protection schema=tables
  case $mode in
    fpw) protection=full_page_writes ;;
    dw) protection=doublewrite ;;
    off) protection=off ;;
    pages) protection=full_page_writes schema=pages ;;
  esac
  # Run 1 keeps the plain names (res/tm-MODE.json, .csv); later runs of a mode continue on
  # the same data directory and are named tm-MODE-N and "tidemark MODE #N". The pages run
  # is "tidemark full_page_writes pages".
  local tag=tm-$mode name="tidemark $protection"
  if [ "$schema" = pages ]; then name="$name pages"; fi
  if [ "$run" -gt 1 ]; then tag=tm-$mode-$run name="$name #$run"; fi
  log "run: $name"
  sync  # the previous run's dirty page cache is written back before this run, not during it
  "$work/tidemark" bench -D "$work/tm-$mode" -c "$clients" -T "$seconds" --json "$work/res/$tag.json" \
    --timeline "$work/res/$tag.csv" "${tm_settings[@]}" --set torn_page_protection=$protection > "$work/logs/$tag.log" 2>&1
  "$work/tidemark" verify -D "$work/tm-$mode" --json "$work/res/$tag.verify.json" \
    >> "$work/logs/$tag.log" 2>&1 || true
  printf '%s\ttidemark\t%s\t%s\t%s\n' "$name" "$work/res/$tag.json" "$work/res/$tag.verify.json" \
    "$schema" >> "$manifest"
}

run_postgres() {  # on | off | lz4 (full_page_writes=on with wal_compression=lz4)
  local fpw=$1 compression=off name="postgres fpw=$1" out=$work/res/pg/fpw-$1
  if [ "$1" = lz4 ]; then fpw=on compression=lz4 name="postgres fpw=on lz4"; fi
  log "run: postgres full_page_writes=$fpw wal_compression=$compression"
  as_pg mkdir -p "$out"
  pg_start "$fpw" "$compression"
  # pgbench's own pre-run vacuum (history is kept, so the invariant holds over all runs),
  # then a checkpoint so that the run starts, like Tidemark's, right after one.
  psql_q "VACUUM pgbench_branches" "VACUUM pgbench_tellers" "CHECKPOINT"
  psql_q "SELECT pg_stat_reset_shared('bgwriter')" "SELECT pg_stat_reset_shared('wal')" >/dev/null
  local start_lsn history_before
  history_before=$(psql_q "SELECT count(*) FROM pgbench_history")
  start_lsn=$(psql_q "SELECT pg_current_wal_lsn()")
  sync  # as before every timed run
  as_pg "$pgbin/pgbench" -n -M prepared -b tpcb-like -c "$clients" -j "$(( clients < $(nproc) ? clients : $(nproc) ))" \
    -T "$seconds" -l --log-prefix="$out/txn" -h "$work/pg/sock" -p "$port" postgres > "$out/pgbench.out" 2>&1
  sleep 1  # let exiting backends and the checkpointer publish their statistics
  psql_q "SELECT json_build_object(
      'full_page_writes', current_setting('full_page_writes'),
      'wal_compression', current_setting('wal_compression'),
      'data_checksums', current_setting('data_checksums'),
      'version', current_setting('server_version'),
      'wal_lsn_bytes', pg_wal_lsn_diff(pg_current_wal_lsn(), '$start_lsn'),
      'wal_records', w.wal_records, 'wal_fpi', w.wal_fpi, 'wal_bytes', w.wal_bytes,
      'wal_write', w.wal_write, 'wal_sync', w.wal_sync,
      'checkpoints_timed', b.checkpoints_timed, 'checkpoints_req', b.checkpoints_req,
      'checkpoint_write_time', b.checkpoint_write_time, 'checkpoint_sync_time', b.checkpoint_sync_time,
      'buffers_checkpoint', b.buffers_checkpoint, 'buffers_clean', b.buffers_clean,
      'maxwritten_clean', b.maxwritten_clean, 'buffers_backend', b.buffers_backend,
      'buffers_backend_fsync', b.buffers_backend_fsync, 'buffers_alloc', b.buffers_alloc,
      'history_rows_before', $history_before,
      'sums', (SELECT json_build_object(
          'accounts', (SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts),
          'tellers', (SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers),
          'branches', (SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches),
          'history', (SELECT coalesce(sum(delta), 0) FROM pgbench_history),
          'history_rows', (SELECT count(*) FROM pgbench_history))))
    FROM pg_stat_wal w, pg_stat_bgwriter b" > "$out/stats.json"
  pg_stop
  printf '%s\tpostgres\t%s\t\n' "$name" "$out" >> "$manifest"
}

run_peer() {  # sqlite | rocksdb
  log "run: $1"
  sync  # as before every timed run
  "$peers/build/$1_tpcb" run -D "$work/$1" -c "$clients" -T "$seconds" --cache-mb "$cache_mb" \
    --json "$work/res/$1.json" > "$work/logs/$1.log" 2>&1 || true
  [ -s "$work/res/$1.json" ] || { cat "$work/logs/$1.log" >&2; echo "$1 run failed" >&2; exit 1; }
  printf '%s\t%s\t%s\t\n' "$1" "$1" "$work/res/$1.json" >> "$manifest"
}

wants tidemark && run_tidemark fpw
wants tidemark-pages && run_tidemark pages
wants postgres && run_postgres on
wants postgres && run_postgres lz4
wants tidemark && run_tidemark dw
wants tidemark && run_tidemark off
wants postgres && run_postgres off
if wants tidemark; then  # the further dw / off pairs, each in the order opposite the one before
  for ((pair = 2; pair <= dw_off_pairs; pair++)); do
    if ((pair % 2 == 0)); then run_tidemark off "$pair"; run_tidemark dw "$pair"
    else run_tidemark dw "$pair"; run_tidemark off "$pair"; fi
  done
fi
wants sqlite && run_peer sqlite
wants rocksdb && run_peer rocksdb

python3 "$here/compare_report.py" --manifest "$manifest" --json "$json_out" \
  --setting scale="$scale" --setting clients="$clients" --setting seconds="$seconds" \
  --setting shared_buffers="$shared_buffers" --setting checkpoint_timeout="$checkpoint_timeout" \
  --setting max_wal_size="$max_wal_size" --setting checkpoint_completion_target="$completion_target" \
  --setting synchronous_commit=on --setting cpus="$(nproc)"
log "wrote $json_out"
