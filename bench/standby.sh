#!/usr/bin/env bash
# Streaming replication under load (not a test): does a standby keep up with its primary?
# For each protection mode and with WAL prefetch on and off on the standby, a primary at
# scale SCALE runs the tpcb-like load with CLIENTS clients for SECONDS; a base backup is
# taken from it once it runs and a standby streams and replays on the same machine
# (loopback). Every second the standby's status (tidemark standby --json) is sampled into
# a timeline CSV: WAL positions received, flushed and replayed, bytes and seconds behind,
# records replayed per second, pages read by replay and prefetch hits. The table gives the
# primary's tps, the WAL shipped per second, the replay lag (mean, max, and its trend over
# the second half of the run: a lag that keeps growing has a positive slope), and pages
# read by replay; the chart (gnuplot, SVG; installed from Debian when missing) shows
# replay lag over time, one panel per row.
# The seed's figures (doublewrite-buffer-review.txt): a PostgreSQL standby replaying
# without full-page images fell 63.6 s behind, with full-page writes 3.1 s.
# --sync SETTING runs the primary with synchronous_standby=SETTING (off, remote_write,
# remote_flush or remote_apply; synchronous_standby_names='': any one standby), so its
# commits wait for the standby: until it streams, none completes. --standby-shared-buffers
# gives the standby its own pool (default: --shared-buffers). --cold (root only) syncs
# and drops the page cache after the base backup, before the standby starts, so replay
# reads the pages it needs from the device (the primary, running, loses its cache too).
# Each run's bench report and per-second timeline, and its logs, are kept in OUT as
# bench-NAME.json, bench-timeline-NAME.csv and *-NAME.log. These four are not for
# --sync-cost.
#
# Both processes share this machine's two cores and disk: the primary's load competes
# with the standby's replay for CPU, which a standby on its own machine would not.
#
# --sync-cost measures instead what synchronous replication costs in tps: for each
# protection mode, synchronous_standby=remote_flush against off, with one standby (a;
# synchronous_standby_names='a') and with three (a, b, c; 'ANY 2 (a, b, c)'). The off
# runs have the same standbys streaming asynchronously, so that a ratio isolates the
# waiting, not the WAL senders' and the standbys' work. Each configuration's standbys are
# seeded once per mode (a primary at 1 client, base backups by name, the standbys caught
# up, the primary stopped and recovered cleanly); every run starts from a fresh copy of
# that seed: the standbys start first, then the primary runs the load for SECONDS, and its
# tps is counted after the first WARMUP seconds (the standbys connect within a second or
# so, and remote_flush commits wait until they do). off and remote_flush run in
# alternating pairs, ABBA over the rounds (round 1 off first, round 2 remote_flush first,
# ...). Reported per run: tps (after the warm-up, and bench's whole-run figure), commit
# p50/p99/max, the primary's WAL fdatasync p50, how soon every standby streamed, the
# standbys' flushed and replay lag; per pair the ratio remote_flush / off, and per
# configuration the ratio of the means; the day's WAL fdatasync p50 (the median of the
# off runs'). Writes OUT/sync-cost.md, OUT/sync-cost.json and, per run, the bench report,
# its timeline and each standby's sampled status in OUT/sync-cost-runs/. Primary and
# standbys share the machine's cores and disk, which overstates the cost against standbys
# on machines of their own.
#
#   usage: bench/standby.sh [-s SCALE] [-c CLIENTS] [-T SECONDS] [--modes "full_page_writes doublewrite"]
#            [--prefetch "on off"] [--shared-buffers 128MB] [--standby-shared-buffers SIZE]
#            [--sync off|remote_write|remote_flush|remote_apply] [--cold] [--out DIR]
#            [--tidemark PATH] [--port 17500] [--keep]
#          bench/standby.sh --sync-cost [--rounds 2] [--warmup 5] [-s SCALE] [-c CLIENTS] [-T SECONDS]
#            [--modes ...] [--shared-buffers 128MB] [--out DIR] [--tidemark PATH] [--port 17500] [--keep]
#   defaults: -s 50 -c 8 -T 300, both modes, prefetch on and off, --sync off, the page
#   cache kept (about 25 minutes);
#   --sync-cost: -s 10 -c 8 -T 30 --rounds 2 --warmup 5, both modes, the standbys' WAL
#   prefetch at its default (16 runs, about 11 minutes on 2 cores).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

scale= clients=8 seconds=
sync_cost=0 rounds=2 warmup=5
modes="full_page_writes doublewrite"
prefetch_values="on off"
shared_buffers=128MB
standby_shared_buffers=
sync=off
cold=0
out=standby-results
tidemark_bin=$root/build/tidemark
port=17500
keep=0

usage() { sed -n '/^#   usage:/,/^#   defaults:/s/^#//p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    -s) scale=$2; shift ;;
    -c) clients=$2; shift ;;
    -T) seconds=$2; shift ;;
    --modes) modes=$2; shift ;;
    --prefetch) prefetch_values=$2; shift ;;
    --shared-buffers) shared_buffers=$2; shift ;;
    --standby-shared-buffers) standby_shared_buffers=$2; shift ;;
    --sync) sync=$2; shift ;;
    --cold) cold=1 ;;
    --out) out=$2; shift ;;
    --tidemark) tidemark_bin=$2; shift ;;
    --port) port=$2; shift ;;
    --keep) keep=1 ;;
    --sync-cost) sync_cost=1 ;;
    --rounds) rounds=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
  shift
done
if [ "$sync_cost" = 1 ]; then
  scale=${scale:-10} seconds=${seconds:-30}
else
  scale=${scale:-50} seconds=${seconds:-300}
fi
for v in "$scale" "$clients" "$seconds" "$port" "$rounds"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "not a positive whole number: $v" >&2; exit 2; }
done
if [ "$sync_cost" = 1 ] && { ! [[ "$warmup" =~ ^[0-9]+$ ]] || [ "$warmup" -ge "$seconds" ]; }; then
  echo "--warmup takes whole seconds below -T ($seconds), got $warmup" >&2; exit 2
fi
for m in $modes; do
  case $m in full_page_writes|doublewrite|off) ;; *) echo "unknown mode: $m" >&2; exit 2 ;; esac
done
for p in $prefetch_values; do
  case $p in on|off) ;; *) echo "--prefetch takes on and/or off, got $p" >&2; exit 2 ;; esac
done
case $sync in off|remote_write|remote_flush|remote_apply) ;;
  *) echo "--sync takes off, remote_write, remote_flush or remote_apply, got $sync" >&2; exit 2 ;;
esac
if [ "$sync_cost" = 1 ] && { [ "$sync" != off ] || [ -n "$standby_shared_buffers" ] || [ "$cold" = 1 ]; }; then
  echo "--sync, --standby-shared-buffers and --cold are not for --sync-cost" >&2; exit 2
fi
if [ "$cold" = 1 ] && [ "$(id -u)" != 0 ]; then
  echo "--cold drops the page cache and needs root" >&2; exit 2
fi
standby_shared_buffers=${standby_shared_buffers:-$shared_buffers}
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
mkdir -p "$out"
out=$(realpath "$out")

work=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-standby-XXXXXX")
started_pids=()  # --sync-cost: every process it starts (the samplers too)
cleanup() {
  local rc=$?
  set +e
  for pid in "${started_pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  pkill -9 -f "$work/tidemark" 2>/dev/null
  if [ "$keep" = 1 ] || [ $rc -ne 0 ]; then log "work directory kept: $work"; else rm -rf "$work"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cp "$tidemark_bin" "$work/tidemark"
"$work/tidemark" --help >/dev/null 2>&1 || { echo "no usable tidemark at $tidemark_bin" >&2; exit 1; }

common=(--set "shared_buffers=$shared_buffers" --set checkpoint_timeout=30s --set log_checkpoints=off)

if [ "$sync_cost" = 1 ]; then
  # ---- --sync-cost: remote_flush against off, in alternating pairs ----
  listen=127.0.0.1:$port  # the primary's one port: every standby connects to it
  runs_dir=$out/sync-cost-runs
  rm -rf "$runs_dir"
  mkdir -p "$runs_dir" "$work/logs"
  rows=$out/sync-cost-runs.jsonl
  : > "$rows"
  all_names=(a b c)
  began=$(date +%s)
  began_text=$(date '+%Y-%m-%d %H:%M:%S %Z')
  fail() { log "FAILED: $*"; exit 1; }
  now() { date +%s.%N; }
  # Waits until FILE holds TEXT; status 1 after SECONDS.
  wait_for_line() {
    local file=$1 text=$2 deadline=$(( $(date +%s) + $3 ))
    until grep -q "$text" "$file" 2>/dev/null; do
      [ "$(date +%s)" -lt "$deadline" ] || return 1
      sleep 0.1
    done
  }
  # SIGTERM, then SIGKILL after SECONDS; the exit status in $stopped_rc (137: killed).
  # Not in a subshell: wait needs the process to be this shell's child.
  stop_pid() {
    local pid=$1
    stopped_rc=0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $(( $2 * 10 ))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "WARNING: process $pid did not stop within $2 s of SIGTERM: killed"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || stopped_rc=$?
  }
  # Starts a standby in DIR/NAME with its status in DIR/NAME.status.json; its pid in $!.
  start_standby() {
    "$work/tidemark" standby -D "$1/$2" --json "$1/$2.status.json" --status-interval 1 \
      "${common[@]}" --set "replication_listen=''" > /dev/null 2> "$3" &
    started_pids+=($!)
  }

  # The seed of one configuration: the template, N standbys (a, b, c) base-backed-up from
  # it by name and caught up, the primary then stopped and recovered (a clean shutdown),
  # the standbys stopped with SIGTERM. Its slots are those N standbys' only.
  seed() {  # mode, number of standbys
    local mode=$1 n=$2 dir=$work/seed-$1-$2 logs=$work/logs/seed-$1-$2 name primary rc
    local names=("${all_names[@]:0:$2}") standby_pids=() statuses=()
    rm -rf "$dir"; mkdir -p "$dir"
    cp -a "$work/template-$mode" "$dir/primary"
    log "seed $mode, $n standby(s) ${names[*]}: base backups from a primary at 1 client"
    "$work/tidemark" bench -D "$dir/primary" -c 1 -T 3600 "${common[@]}" \
      --set "replication_listen=$listen" > "$logs-primary.log" 2>&1 &
    primary=$!
    started_pids+=($primary)
    wait_for_line "$logs-primary.log" "WAL sender listening" 60 ||
      fail "seed $mode-$n: the primary's WAL sender is not listening (log: $logs-primary.log)"
    for name in "${names[@]}"; do
      "$work/tidemark" basebackup -D "$dir/$name" --primary "$listen" --name "$name" \
        --json "$logs-backup-$name.json" > /dev/null 2> "$logs-backup-$name.log" ||
        fail "seed $mode-$n: basebackup $name (log: $logs-backup-$name.log)"
    done
    for name in "${names[@]}"; do
      start_standby "$dir" "$name" "$logs-standby-$name.log"
      standby_pids+=($!)
      statuses+=("$dir/$name.status.json")
    done
    python3 "$here/standby_sample.py" --caught-up 180 1000000 "${statuses[@]}" ||
      fail "seed $mode-$n: the standbys did not catch up within 180 s (logs: $logs-*)"
    kill -TERM "$primary"; wait "$primary" 2>/dev/null || true  # bench has no clean stop
    sleep 1
    for pid in "${standby_pids[@]}"; do
      stop_pid "$pid" 30
      [ "$stopped_rc" = 0 ] ||
        fail "seed $mode-$n: a standby stopped with status $stopped_rc (logs: $logs-standby-*)"
    done
    "$work/tidemark" recover -D "$dir/primary" "${common[@]}" > "$logs-recover.log" 2>&1 ||
      fail "seed $mode-$n: recover of the primary (log: $logs-recover.log)"
    rm -f "$dir"/*.status.json
  }

  seq_no=0
  # One timed run from a fresh copy of the seed: standbys first, then the primary's load.
  run_sync() {  # mode, number of standbys, off | remote_flush, round
    local mode=$1 n=$2 setting=$3 round=$4 dir=$work/run name pid rc quorum
    local names=("${all_names[@]:0:$2}") standby_pids=() csvs=() standby_rcs=() samplers=()
    if [ "$n" = 1 ]; then quorum=a; else quorum="ANY 2 (a, b, c)"; fi
    seq_no=$((seq_no + 1))
    local tag; tag=$(printf '%02d-%s-%s-%s' "$seq_no" "$mode" "$n" "$setting")
    local logs=$work/logs/$tag
    rm -rf "$dir"; mkdir -p "$dir"
    cp -a "$work/seed-$mode-$n/primary" "$dir/"
    for name in "${names[@]}"; do cp -a "$work/seed-$mode-$n/$name" "$dir/"; done
    sync  # the copy's dirty page cache is written back before the run, not during it
    for name in "${names[@]}"; do
      start_standby "$dir" "$name" "$logs-standby-$name.log"
      standby_pids+=($!)
    done
    for name in "${names[@]}"; do
      wait_for_line "$logs-standby-$name.log" "standby: replaying from" 120 ||
        fail "$tag: standby $name did not open (log: $logs-standby-$name.log)"
    done
    log "run $seq_no: $mode, $n standby(s), synchronous_standby=$setting," \
        "synchronous_standby_names='$quorum', round $round: ${seconds}s at $clients clients"
    local started; started=$(date +%T)
    # A remote_flush commit left waiting for a standby that never comes would keep bench
    # from ending: it is killed 120 s past its time.
    timeout -k 10 $((seconds + 120)) "$work/tidemark" bench -D "$dir/primary" -c "$clients" \
      -T "$seconds" --json "$runs_dir/$tag.json" --timeline "$runs_dir/$tag.csv" \
      "${common[@]}" --set "replication_listen=$listen" --set "synchronous_standby=$setting" \
      --set "synchronous_standby_names=$quorum" > "$logs-primary.log" 2>&1 &
    local bench_pid=$!
    started_pids+=($bench_pid)
    for name in "${names[@]}"; do
      python3 "$here/standby_sample.py" "$dir/$name.status.json" "$runs_dir/$tag-standby-$name.csv" \
        "$bench_pid" &
      samplers+=($!)
      started_pids+=($!)
      csvs+=("standby_csv=$runs_dir/$tag-standby-$name.csv")
    done
    wait_for_line "$logs-primary.log" "WAL sender listening" 60 ||
      log "WARNING: $tag: the primary's WAL sender is not listening (log: $logs-primary.log)"
    # Seconds from then until the primary logs every standby streaming (within 30 s): the
    # standbys retry their connection every second.
    local t0 connected_s=
    t0=$(now)
    for _ in $(seq 300); do
      local all=1
      for name in "${names[@]}"; do
        grep -q "standby \"$name\" streaming from" "$logs-primary.log" 2>/dev/null || { all=0; break; }
      done
      if [ "$all" = 1 ]; then connected_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'); break; fi
      sleep 0.1
    done
    [ -n "$connected_s" ] || log "WARNING: $tag: not every standby streams 30 s after the WAL sender listened"
    local bench_rc=0
    wait "$bench_pid" || bench_rc=$?
    [ "$bench_rc" = 0 ] || log "WARNING: $tag: bench exited with status $bench_rc (log: $logs-primary.log)"
    for pid in "${samplers[@]}"; do wait "$pid" || true; done
    for pid in "${standby_pids[@]}"; do stop_pid "$pid" 30; standby_rcs+=("$stopped_rc"); done
    for rc in "${standby_rcs[@]}"; do
      [ "$rc" = 0 ] || { log "WARNING: $tag: standby exit statuses ${standby_rcs[*]} (logs: $logs-standby-*)"; break; }
    done
    [ -s "$runs_dir/$tag.json" ] || fail "$tag: no bench report (log: $logs-primary.log)"
    # Odd log lines: warnings and errors, except the standbys' "cannot reach the primary"
    # (each starts before its primary); and a standby's connection lost before the end
    # (every standby loses its primary once, when the run ends).
    local primary_warnings standby_warnings disconnects=0 lost
    primary_warnings=$(grep -c -E 'WARNING|ERROR|error:' "$logs-primary.log" || true)
    standby_warnings=$(cat "$logs"-standby-*.log | grep -v 'cannot reach the primary' |
      grep -c -E 'WARNING|ERROR|error:' || true)
    for name in "${names[@]}"; do
      lost=$(grep -c 'standby lost its primary' "$logs-standby-$name.log" || true)
      if ((lost > 1)); then disconnects=$((disconnects + lost - 1)); fi
    done
    python3 "$here/standby_sample.py" --sync-row bench="$runs_dir/$tag.json" \
      timeline="$runs_dir/$tag.csv" warmup="$warmup" mode="$mode" standbys="$n" \
      setting="$setting" names="$quorum" round="$round" seq="$seq_no" connected_s="$connected_s" \
      bench_exit="$bench_rc" standby_exits="$(IFS=,; echo "${standby_rcs[*]}")" \
      primary_warnings="$primary_warnings" standby_warnings="$standby_warnings" \
      disconnects="$disconnects" \
      started="$started" "${csvs[@]}" >> "$rows"
    cp "$logs"-*.log "$runs_dir/" 2>/dev/null || true
    rm -rf "$dir"
  }

  log "--sync-cost: scale $scale, $clients clients, ${seconds}s per run (tps after ${warmup}s)," \
      "$rounds rounds, modes: $modes; primary on $listen; work dir $work"
  for mode in $modes; do
    log "init -s $scale ($mode)"
    rm -rf "$work/template-$mode"
    "$work/tidemark" init -D "$work/template-$mode" -s "$scale" \
      --set torn_page_protection="$mode" > "$work/logs/init-$mode.log" 2>&1 ||
      fail "init $mode (log: $work/logs/init-$mode.log)"
    seed "$mode" 1
    seed "$mode" 3
    rm -rf "$work/template-$mode"
    for ((round = 1; round <= rounds; round++)); do
      for n in 1 3; do
        if ((round % 2 == 1)); then
          run_sync "$mode" "$n" off "$round"; run_sync "$mode" "$n" remote_flush "$round"
        else
          run_sync "$mode" "$n" remote_flush "$round"; run_sync "$mode" "$n" off "$round"
        fi
      done
    done
    rm -rf "$work/seed-$mode-1" "$work/seed-$mode-3"
  done
  elapsed=$(( $(date +%s) - began ))
  python3 "$here/standby_sample.py" --sync-table "$rows" "$out/sync-cost.json" \
    scale="$scale" clients="$clients" seconds="$seconds" warmup="$warmup" rounds="$rounds" \
    modes="$modes" shared_buffers="$shared_buffers" checkpoint_timeout=30s cpus="$(nproc)" \
    version="$("$work/tidemark" --version)" commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    began="$began_text" elapsed_s="$elapsed" | tee "$out/sync-cost.md"
  log "--sync-cost took $((elapsed / 60)) min $((elapsed % 60)) s; tables in $out/sync-cost.md," \
      "JSON in $out/sync-cost.json, per-run reports in $runs_dir"
  exit 0
fi

rows=$out/rows.jsonl
: > "$rows"
log "scale $scale, $clients clients, ${seconds}s per run, modes: $modes, prefetch: $prefetch_values," \
    "synchronous_standby=$sync, shared_buffers $shared_buffers (standby $standby_shared_buffers)," \
    "page cache $([ "$cold" = 1 ] && echo "dropped before the standby starts" || echo kept)"
for mode in $modes; do
  log "init -s $scale ($mode)"
  rm -rf "$work/template-$mode"
  "$work/tidemark" init -D "$work/template-$mode" -s "$scale" \
    --set torn_page_protection="$mode" > "$work/init-$mode.log" 2>&1
  for prefetch in $prefetch_values; do
    name=$mode-prefetch-$prefetch
    rm -rf "$work/primary" "$work/standby"
    cp -a "$work/template-$mode" "$work/primary"
    sync
    log "$name: primary load ${seconds}s at $clients clients, standby on 127.0.0.1:$port"
    "$work/tidemark" bench -D "$work/primary" -c "$clients" -T "$seconds" --json "$out/bench-$name.json" \
      --timeline "$out/bench-timeline-$name.csv" "${common[@]}" --set "replication_listen=127.0.0.1:$port" \
      --set "synchronous_standby=$sync" > "$work/primary-$name.log" 2>&1 &
    bench_pid=$!
    for _ in $(seq 600); do  # until the WAL sender listens
      grep -q "WAL sender listening" "$work/primary-$name.log" 2>/dev/null && break
      sleep 0.1
    done
    "$work/tidemark" basebackup -D "$work/standby" --primary "127.0.0.1:$port" \
      --json "$work/backup-$name.json" > /dev/null 2> "$work/backup-$name.log"
    if [ "$cold" = 1 ]; then
      log "$name: base backup done; page cache dropped"
      sync; echo 3 > /proc/sys/vm/drop_caches
    fi
    "$work/tidemark" standby -D "$work/standby" --json "$work/status.json" --status-interval 1 \
      "${common[@]}" --set "shared_buffers=$standby_shared_buffers" --set "replication_listen=''" \
      --set "recovery_prefetch=$prefetch" > /dev/null 2> "$work/standby-$name.log" &
    standby_pid=$!
    python3 "$here/standby_sample.py" "$work/status.json" "$out/timeline-$name.csv" "$bench_pid" &
    sampler_pid=$!
    wait "$bench_pid"
    wait "$sampler_pid" || true
    kill -TERM "$standby_pid"
    wait "$standby_pid" || true
    python3 "$here/standby_sample.py" --summarize "$out/timeline-$name.csv" "$out/bench-$name.json" \
      "$mode" "$prefetch" >> "$rows"
    cp "$work"/{primary,backup,standby}-"$name".log "$out/"
    port=$((port + 1))
  done
done
python3 "$here/standby_sample.py" --table "$rows" | tee "$out/table.md"
if ! command -v gnuplot >/dev/null; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  $sudo apt-get install -y -qq gnuplot-nox >/dev/null || log "no gnuplot: no chart"
fi
if command -v gnuplot >/dev/null; then
  python3 "$here/standby_sample.py" --gnuplot "$out/lag.svg" "$out"/timeline-*.csv | gnuplot
  log "chart: $out/lag.svg"
fi
log "timelines and table in $out"
