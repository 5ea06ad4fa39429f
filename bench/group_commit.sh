#!/usr/bin/env bash
# Group commit benchmark (not a test): tps, latency percentiles, WAL bytes per transaction
# and WAL fsyncs per commit at 1, 8 and 32 clients on the same data directory.
# Group commit shows as fewer WAL fsyncs than commits once clients overlap.
#   usage: bench/group_commit.sh [path/to/tidemark] [scale] [seconds] [extra --set args...]
set -euo pipefail
tidemark=${1:-build/tidemark}
scale=${2:-10}
seconds=${3:-15}
shift $(( $# >= 3 ? 3 : $# ))
data=$(mktemp -d /tmp/tidemark-groupcommit-XXXXXX)
trap 'rm -rf "$data"' EXIT
"$tidemark" init -D "$data/db" -s "$scale" >/dev/null 2>&1
printf "%8s %10s %9s %9s %9s %9s %12s %14s\n" clients tps avg_ms p50_ms p99_ms max_ms wal_B/txn fsyncs/commit
for clients in 1 8 32; do
  "$tidemark" bench -D "$data/db" -c "$clients" -T "$seconds" --json "$data/r.json" \
    --set log_checkpoints=off "$@" >/dev/null 2>&1
  python3 - "$data/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); l = r["latency_ms"]; w = r["wal"]
print(f"{r['clients']:8d} {r['tps']:10.0f} {l['avg']:9.3f} {l['p50']:9.3f} {l['p99']:9.3f} "
      f"{l['max']:9.3f} {w['bytes_per_transaction']:12.0f} {w['fsyncs_per_commit']:14.3f}")
PY
done
