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
#
# Both processes share this machine's two cores and disk: the primary's load competes
# with the standby's replay for CPU, which a standby on its own machine would not.
#
#   usage: bench/standby.sh [-s SCALE] [-c CLIENTS] [-T SECONDS] [--modes "full_page_writes doublewrite"]
#            [--prefetch "on off"] [--shared-buffers 128MB] [--out DIR] [--tidemark PATH]
#            [--port 17500] [--keep]
#   defaults: -s 50 -c 8 -T 300, both modes, prefetch on and off (about 25 minutes).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

scale=50 clients=8 seconds=300
modes="full_page_writes doublewrite"
prefetch_values="on off"
shared_buffers=128MB
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
    --out) out=$2; shift ;;
    --tidemark) tidemark_bin=$2; shift ;;
    --port) port=$2; shift ;;
    --keep) keep=1 ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
  shift
done
for v in "$scale" "$clients" "$seconds" "$port"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "not a positive whole number: $v" >&2; exit 2; }
done
for m in $modes; do
  case $m in full_page_writes|doublewrite|off) ;; *) echo "unknown mode: $m" >&2; exit 2 ;; esac
done
for p in $prefetch_values; do
  case $p in on|off) ;; *) echo "--prefetch takes on and/or off, got $p" >&2; exit 2 ;; esac
done
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
mkdir -p "$out"
out=$(realpath "$out")

work=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-standby-XXXXXX")
cleanup() {
  local rc=$?
  set +e
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
rows=$out/rows.jsonl
: > "$rows"
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
    "$work/tidemark" bench -D "$work/primary" -c "$clients" -T "$seconds" --json "$work/bench.json" \
      "${common[@]}" --set "replication_listen=127.0.0.1:$port" > "$work/primary-$name.log" 2>&1 &
    bench_pid=$!
    for _ in $(seq 600); do  # until the WAL sender listens
      grep -q "WAL sender listening" "$work/primary-$name.log" 2>/dev/null && break
      sleep 0.1
    done
    "$work/tidemark" basebackup -D "$work/standby" --primary "127.0.0.1:$port" \
      --json "$work/backup-$name.json" > /dev/null 2> "$work/backup-$name.log"
    "$work/tidemark" standby -D "$work/standby" --json "$work/status.json" --status-interval 1 \
      "${common[@]}" --set "replication_listen=''" --set "recovery_prefetch=$prefetch" \
      > /dev/null 2> "$work/standby-$name.log" &
    standby_pid=$!
    python3 "$here/standby_sample.py" "$work/status.json" "$out/timeline-$name.csv" "$bench_pid" &
    sampler_pid=$!
    wait "$bench_pid"
    wait "$sampler_pid" || true
    kill -TERM "$standby_pid"
    wait "$standby_pid" || true
    python3 "$here/standby_sample.py" --summarize "$out/timeline-$name.csv" "$work/bench.json" \
      "$mode" "$prefetch" >> "$rows"
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
