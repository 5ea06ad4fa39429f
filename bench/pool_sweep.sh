#!/usr/bin/env bash
# Who writes the buffers as the pool shrinks (not a test): for each scale and each
# shared_buffers size, bench/compare.sh runs Tidemark (full_page_writes, doublewrite, off)
# and PostgreSQL 15 (pgbench, full_page_writes on and off) with the same settings, and this
# script prints one table: tps, commit p99 and maximum, and the share of buffer writes
# that sessions made themselves (Tidemark's written_backend, PostgreSQL's buffers_backend)
# — the bgwriter and the checkpointer made the rest. Numbers depend on the machine;
# reported, not asserted.
#
#   usage: bench/pool_sweep.sh [--scales "5 50"] [--pools "8 16 32 64 128"] [-T SECONDS]
#            [-c CLIENTS] [--tidemark PATH] [--json FILE]
#   defaults: scales 5 and 50; pools 8, 16, 32, 64, 128 MB and one larger than the data
#   (256 MB at scale 5, 1 GB at scale 50); -T 20 -c 8. 8 MB is 1 024 buffers of 8 KiB.
#   The whole default sweep takes about an hour and a half on 2 cores.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
scales="5 50" pools="" seconds=20 clients=8 tidemark_args=() json_out=""
while [ $# -gt 0 ]; do
  case $1 in
    --scales) scales=$2; shift ;;
    --pools) pools=$2; shift ;;
    -T) seconds=$2; shift ;;
    -c) clients=$2; shift ;;
    --tidemark) tidemark_args=(--tidemark "$2"); shift ;;
    --json) json_out=$2; shift ;;
    *) sed -n '/^#   usage:/,/sweep takes/s/^#//p' "$0" >&2; exit 2 ;;
  esac
  shift
done

work=$(mktemp -d /tmp/tidemark-pool-sweep-XXXXXX)
trap 'rm -rf "$work"' EXIT
for scale in $scales; do
  sizes=$pools
  if [ -z "$sizes" ]; then
    if [ "$scale" -le 5 ]; then sizes="8 16 32 64 128 256"; else sizes="8 16 32 64 128 1024"; fi
  fi
  for mb in $sizes; do
    printf '[%s] scale %s, shared_buffers %s MB\n' "$(date +%T)" "$scale" "$mb" >&2
    "$here/compare.sh" -s "$scale" -c "$clients" -T "$seconds" --shared-buffers "${mb}MB" \
      --only tidemark,postgres --dw-off-pairs 1 "${tidemark_args[@]}" --json "$work/s$scale-$mb.json" \
      > "$work/s$scale-$mb.out" 2>&1 || { echo "compare.sh failed at scale $scale, ${mb} MB:" >&2; tail -20 "$work/s$scale-$mb.out" >&2; exit 1; }
  done
done

python3 - "$work" "$json_out" <<'PY'
import glob, json, os, re, sys
work, out = sys.argv[1], sys.argv[2]
rows = []
for path in glob.glob(os.path.join(work, "s*-*.json")):
    scale, mb = map(int, re.match(r"s(\d+)-(\d+)\.json", os.path.basename(path)).groups())
    for c in json.load(open(path))["configurations"]:
        lat = c.get("latency_ms") or {}
        rows.append({"scale": scale, "shared_buffers_mb": mb, "buffers": mb * 128,
                     "config": c["name"], "tps": c.get("tps"), "p99_ms": lat.get("p99"),
                     "max_ms": lat.get("max"), "sessions_write_share": c.get("backend_write_share")})
rows.sort(key=lambda r: (r["scale"], r["shared_buffers_mb"], r["config"]))
fmt = "{:>5} {:>8} {:>8}  {:<28} {:>9} {:>8} {:>9} {:>10}"
print(fmt.format("scale", "pool MB", "buffers", "configuration", "tps", "p99 ms", "max ms", "sessions"))
for r in rows:
    share = r["sessions_write_share"]
    print(fmt.format(r["scale"], r["shared_buffers_mb"], r["buffers"], r["config"],
                     "%.0f" % r["tps"] if r["tps"] is not None else "-",
                     "%.2f" % r["p99_ms"] if r["p99_ms"] is not None else "-",
                     "%.1f" % r["max_ms"] if r["max_ms"] is not None else "-",
                     "%.1f %%" % (100 * share) if share is not None else "-"))
if out:
    json.dump(rows, open(out, "w"), indent=1)
PY
