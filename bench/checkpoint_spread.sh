#!/usr/bin/env bash
# Spread versus unpaced checkpoints on the same workload (not a test): runs the same bench
# twice on one data directory, first with checkpoint_completion_target=0 (every checkpoint
# writes and syncs at once, as before load-distributed checkpoints) and then with the
# default 0.9, and prints tps and the latency tail for both. Reported, not asserted.
#   usage: bench/checkpoint_spread.sh [tidemark] [scale] [seconds] [clients] [extra --set args...]
set -euo pipefail
tidemark=${1:-build/tidemark}
scale=${2:-10}
seconds=${3:-60}
clients=${4:-8}
shift $(( $# >= 4 ? 4 : $# ))
data=$(mktemp -d /tmp/tidemark-spread-XXXXXX)
trap 'rm -rf "$data"' EXIT
"$tidemark" init -D "$data/db" -s "$scale" >/dev/null 2>&1
common=(--set checkpoint_timeout=10s --set shared_buffers=32MB --set log_checkpoints=off "$@")
printf "%-10s %9s %9s %9s %10s %9s %11s %10s\n" mode tps p99_ms p99.9_ms max_ms ckpts ckpt_write_s backend%
for target in 0 0.9; do
  "$tidemark" bench -D "$data/db" -c "$clients" -T "$seconds" --json "$data/r.json" \
    --set checkpoint_completion_target=$target "${common[@]}" >/dev/null 2>&1
  python3 - "$data/r.json" "$target" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); l = r["latency_ms"]; c = r["checkpoints"]; b = r["buffers"]
mode = "unpaced" if float(sys.argv[2]) == 0 else "spread"
n = c["timed"] + c["requested"]
print(f"{mode:<10} {r['tps']:9.0f} {l['p99']:9.3f} {l['p999']:9.3f} {l['max']:10.3f} {n:9d} "
      f"{c['write_ms'] / 1000 / max(n, 1):11.2f} {100 * b['backend_share']:9.1f}")
PY
done
