#!/usr/bin/env bash
# `make run`: a short demonstration on a temporary data directory. Creates a TPC-B-like
# database (scale 5), runs 8 clients for 20 s with progress lines every second and a
# checkpoint every 5 s (log_checkpoints on), then verifies the result.
#   usage: bench/demo.sh [path/to/tidemark]
set -euo pipefail
tidemark=${1:-build/tidemark}
data=$(mktemp -d /tmp/tidemark-demo-XXXXXX)
trap 'rm -rf "$data"' EXIT
echo "== tidemark init (scale 5) in $data"
"$tidemark" init -D "$data/db" -s 5
echo "== tidemark bench: 8 clients, 20 s, checkpoint_timeout=5s, shared_buffers=16MB"
"$tidemark" bench -D "$data/db" -c 8 -T 20 -P 1 --json "$data/bench.json" \
  --ack-log "$data/acks" --set checkpoint_timeout=5s --set shared_buffers=16MB >/dev/null
echo "== summary"
python3 - "$data/bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
lat = r["latency_ms"]
print(f"tps {r['tps']:.0f}  transactions {r['transactions']}  clients {r['clients']}  "
      f"mode {r['torn_page_protection']}")
print(f"latency ms: avg {lat['avg']:.3f}  p50 {lat['p50']:.3f}  p99 {lat['p99']:.3f}  "
      f"p99.9 {lat['p999']:.3f}  max {lat['max']:.3f}")
w = r["wal"]
print(f"WAL: {w['bytes_per_transaction']:.0f} bytes/txn, {w['fpi']} full-page images, "
      f"{w['fsyncs_per_commit']:.3f} fsyncs/commit")
b = r["buffers"]
print(f"buffers written: checkpoint {b['written_checkpoint']}  bgwriter {b['written_bgwriter']}  "
      f"backend {b['written_backend']}  (allocated {b['allocated']})")
c = r["checkpoints"]
print(f"checkpoints: timed {c['timed']}  requested {c['requested']}  write {c['write_ms']} ms  "
      f"sync {c['sync_ms']} ms")
PY
echo "== tidemark verify --ack-log"
"$tidemark" verify -D "$data/db" --ack-log "$data/acks" --json "$data/verify.json" >/dev/null
python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print('verify:', 'OK' if v['ok'] else 'FAILED', '-', v['acknowledged'], 'acknowledged commits,', v['lost_commits'], 'lost,', v['pages_checked'], 'pages checked')" "$data/verify.json"
