#!/usr/bin/env bash
# Full-page writes versus doublewrite across checkpoint intervals (not a test): for
# checkpoint_timeout 10 s, 30 s and 120 s runs the same bench in both modes on one data
# directory and prints tps, p99 latency and WAL bytes per transaction, then the tps spread
# across intervals per mode ((max - min) / mean). Reported, not asserted.
#   usage: bench/torn_page_modes.sh [tidemark] [scale] [seconds] [clients] [extra --set args...]
set -euo pipefail
tidemark=${1:-build/tidemark}
scale=${2:-10}
seconds=${3:-60}
clients=${4:-8}
shift $(( $# >= 4 ? 4 : $# ))
data=$(mktemp -d /tmp/tidemark-modes-XXXXXX)
trap 'rm -rf "$data"' EXIT
"$tidemark" init -D "$data/db" -s "$scale" >/dev/null 2>&1
printf "%-17s %9s %9s %9s %10s %8s %10s %11s\n" mode interval tps p99_ms WAL_B/txn fpi dw_fsyncs slot_waits
for interval in 10s 30s 120s; do
  for mode in full_page_writes doublewrite; do
    "$tidemark" bench -D "$data/db" -c "$clients" -T "$seconds" --json "$data/$mode-$interval.json" \
      --set torn_page_protection=$mode --set checkpoint_timeout=$interval \
      --set shared_buffers=32MB --set log_checkpoints=off "$@" >/dev/null 2>&1
    python3 - "$data/$mode-$interval.json" "$interval" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); d = r["doublewrite"]
print(f"{r['torn_page_protection']:<17} {sys.argv[2]:>9} {r['tps']:9.0f} {r['latency_ms']['p99']:9.3f} "
      f"{r['wal']['bytes_per_transaction']:10.0f} {r['wal']['fpi']:8d} {d['fsyncs']:10d} {d['slot_waits']:11d}")
PY
  done
done
python3 - "$data" <<'PY'
import json, sys, glob, os
for mode in ("full_page_writes", "doublewrite"):
    tps = [json.load(open(f))["tps"] for f in sorted(glob.glob(os.path.join(sys.argv[1], mode + "-*.json")))]
    spread = (max(tps) - min(tps)) / (sum(tps) / len(tps))
    print(f"tps spread across intervals, {mode}: {100 * spread:.1f}%")
PY
