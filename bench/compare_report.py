#!/usr/bin/env python3
"""Table and JSON for bench/compare.sh (not a test).

Reads the manifest compare.sh writes (one line per configuration, tab-separated:
name, system, result path, extra path, schema), normalizes each system's raw results into
the same fields, prints one table plus the ratios of each keyed-tables Tidemark mode to
each peer, the ratio of Tidemark's keyed-tables full_page_writes run to its run on
--schema pages (what the B+tree costs), the ratio of Tidemark's doublewrite mode to its
unprotected mode (torn_page_protection=off; target tps >= 0.95 x off, judged on the means
over every doublewrite / off pair in the manifest, each pair's ratio printed as well) and
the share of buffer writes made by sessions (backends), and writes it all as JSON.
Configurations may be missing (compare.sh --only): what needs them is left out of the
table and null in the JSON.

  tidemark: `tidemark bench --json` (+ `tidemark verify --json` for the invariant); the
            schema column says tables or pages (`tidemark init --schema`)
  postgres: a directory with pgbench.out, pgbench's per-transaction logs (txn.*) and
            stats.json (pg_stat_wal, pg_stat_bgwriter, LSN difference, balance sums)
  sqlite, rocksdb: the JSON line of bench/peers/*_tpcb

  usage: compare_report.py --manifest FILE --json OUT [--setting KEY=VALUE]...
"""
import argparse
import glob
import json
import math
import os
import re
import sys


def percentile(sorted_values, p):
    """Nearest rank, as the peer drivers compute it."""
    if not sorted_values:
        return None
    k = max(1, math.ceil(p * len(sorted_values)))
    return sorted_values[min(len(sorted_values), k) - 1]


DW_OFF_TPS_TARGET = 0.95


def backend_share(buffers):
    """Sessions' (backends') share of all buffer writes, or None when not counted."""
    parts = [buffers.get(k) for k in ("checkpoint", "bgwriter", "backend")]
    if any(v is None for v in parts):
        return None
    total = sum(parts)
    return buffers["backend"] / total if total else None


def tidemark(name, path, verify_path, schema):
    r = json.load(open(path))
    w, b, c = r["wal"], r["buffers"], r["checkpoints"]
    ok = None
    if verify_path and os.path.exists(verify_path):
        v = json.load(open(verify_path))
        ok = bool(v.get("ok")) and bool(v.get("balances_consistent", True))
    return {
        "name": name, "system": "tidemark", "tps": r["tps"], "transactions": r["transactions"],
        "latency_ms": {k: r["latency_ms"][k] for k in ("avg", "p50", "p99", "p999", "max")},
        "log_bytes_per_txn": w["bytes_per_transaction"],
        "log_measure": "WAL bytes / transactions (tidemark bench --json wal.bytes_per_transaction)",
        "fpi": w["fpi"],
        "buffers": {"checkpoint": b["written_checkpoint"], "bgwriter": b["written_bgwriter"],
                    "backend": b["written_backend"]},
        "checkpoint_ms": {"write": c["write_ms"], "sync": c["sync_ms"]},
        "invariant_ok": ok,
        "details": {"torn_page_protection": r.get("torn_page_protection"), "schema": schema,
                    "checkpoints_timed": c["timed"], "checkpoints_requested": c["requested"],
                    "wal_fsyncs_per_commit": w.get("fsyncs_per_commit"),
                    "wal_fsync_us": {k: w.get("fsync_" + k + "_us") for k in ("avg", "p50", "p99", "max")},
                    "doublewrite": r.get("doublewrite"), "io_method": r.get("io_method")},
    }


def postgres(name, directory):
    out = open(os.path.join(directory, "pgbench.out")).read()
    s = json.load(open(os.path.join(directory, "stats.json")))
    m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
    if not m:
        raise SystemExit(f"{name}: no tps in pgbench output:\n{out}")
    tps = float(m.group(1))
    lat = []
    for f in glob.glob(os.path.join(directory, "txn.*")):
        with open(f) as fh:
            for line in fh:
                fields = line.split()
                if len(fields) >= 6 and fields[2].isdigit():  # skipped transactions say "skipped"
                    lat.append(int(fields[2]) / 1000.0)
    lat.sort()
    n = len(lat)
    sums = s["sums"]
    ok = (sums["accounts"] == sums["tellers"] == sums["branches"] == sums["history"]
          and sums["history_rows"] - s["history_rows_before"] == n)
    return {
        "name": name, "system": "postgres", "tps": tps, "transactions": n,
        "latency_ms": {"avg": sum(lat) / n if n else None, "p50": percentile(lat, 0.50),
                       "p99": percentile(lat, 0.99), "p999": percentile(lat, 0.999),
                       "max": lat[-1] if lat else None},
        "log_bytes_per_txn": s["wal_lsn_bytes"] / max(n, 1),
        "log_measure": "pg_current_wal_lsn() difference over the run / transactions",
        "fpi": s["wal_fpi"],
        "buffers": {"checkpoint": s["buffers_checkpoint"], "bgwriter": s["buffers_clean"],
                    "backend": s["buffers_backend"]},
        "checkpoint_ms": {"write": s["checkpoint_write_time"], "sync": s["checkpoint_sync_time"]},
        "invariant_ok": ok,
        "details": {k: s[k] for k in ("version", "full_page_writes", "data_checksums", "wal_records",
                                      "wal_bytes", "wal_write", "wal_sync", "checkpoints_timed",
                                      "checkpoints_req", "maxwritten_clean", "buffers_backend_fsync",
                                      "buffers_alloc")},
    }


def sqlite(name, path):
    r = json.loads(open(path).read().strip().splitlines()[-1])
    frame = r["page_size"] + 24
    return {
        "name": name, "system": "sqlite", "tps": r["tps"], "transactions": r["transactions"],
        "latency_ms": r["latency_ms"],
        "log_bytes_per_txn": r["log_bytes_per_transaction"], "log_measure": r["log_measure"],
        # Every SQLite WAL frame is a whole page image.
        "fpi": round(r["log_bytes"] / frame),
        "buffers": {"checkpoint": round(r["checkpoint_pages_written"]), "bgwriter": None, "backend": None},
        "checkpoint_ms": {"write": r["checkpoint_write_ms"], "sync": r["checkpoint_sync_ms"]},
        "invariant_ok": r["invariant_ok"],
        "details": {k: r[k] for k in ("version", "page_size", "cache_mb_per_connection", "wal_fsyncs",
                                      "checkpoint_fsyncs", "retries", "sums")},
    }


def rocksdb(name, path):
    r = json.loads(open(path).read().strip().splitlines()[-1])
    return {
        "name": name, "system": "rocksdb", "tps": r["tps"], "transactions": r["transactions"],
        "latency_ms": r["latency_ms"],
        "log_bytes_per_txn": r["log_bytes_per_transaction"], "log_measure": r["log_measure"],
        "fpi": None,
        "buffers": {"checkpoint": None, "bgwriter": None, "backend": None},
        "checkpoint_ms": {"write": None, "sync": None},
        "invariant_ok": r["invariant_ok"],
        "details": {k: r[k] for k in ("version", "block_cache_mb", "wal_syncs", "flushes", "flush_bytes",
                                      "flush_ms", "compactions", "compaction_bytes", "compaction_ms",
                                      "stall_ms", "sums")},
    }


def ring_fsyncs(doublewrite):
    """The doublewrite ring's fdatasync count and spread, or nothing outside doublewrite mode."""
    if not doublewrite or not doublewrite.get("fsyncs"):
        return ""
    return (f"{doublewrite['fsyncs']} ring fdatasyncs µs p50 {fmt(doublewrite.get('fsync_p50_us'), '.0f')} "
            f"p99 {fmt(doublewrite.get('fsync_p99_us'), '.0f')}, ")


def fmt(v, spec):
    """format(v, spec), or a right-aligned '-' of the same width when there is no value."""
    if v is None:
        width = re.match(r"\d*", spec).group(0)
        return "-".rjust(int(width) if width else 1)
    return format(v, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--setting", action="append", default=[])
    a = ap.parse_args()
    settings = dict(kv.split("=", 1) for kv in a.setting)

    configs = []
    for line in open(a.manifest):
        if not line.strip():
            continue
        name, system, path, extra, schema = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
        if system == "tidemark":
            configs.append(tidemark(name, path, extra, schema or "tables"))
        elif system == "postgres":
            configs.append(postgres(name, path))
        elif system == "sqlite":
            configs.append(sqlite(name, path))
        elif system == "rocksdb":
            configs.append(rocksdb(name, path))
    for c in configs:  # null when not counted or when no buffer was written
        c["backend_write_share"] = backend_share(c["buffers"])

    lines = []
    head = (f"{'configuration':<31} {'tps':>8} {'avg_ms':>7} {'p50_ms':>7} {'p99_ms':>7} {'p99.9_ms':>8} "
            f"{'max_ms':>8} {'log_B/txn':>9} {'FPI':>7} {'buf_ckpt':>8} {'buf_bgw':>7} {'buf_bknd':>8} "
            f"{'ckpt_w_s':>8} {'ckpt_s_s':>8} {'invariant':>9}")
    lines.append(head)
    for c in configs:
        l, b, k = c["latency_ms"], c["buffers"], c["checkpoint_ms"]
        inv = {True: "ok", False: "FAILED", None: "?"}[c["invariant_ok"]]
        lines.append(
            f"{c['name']:<31} {fmt(c['tps'], '8.0f')} {fmt(l['avg'], '7.2f')} {fmt(l['p50'], '7.2f')} "
            f"{fmt(l['p99'], '7.2f')} {fmt(l['p999'], '8.2f')} {fmt(l['max'], '8.1f')} "
            f"{fmt(c['log_bytes_per_txn'], '9.0f')} {fmt(c['fpi'], '7d')} {fmt(b['checkpoint'], '8d')} "
            f"{fmt(b['bgwriter'], '7d')} {fmt(b['backend'], '8d')} "
            f"{fmt(None if k['write'] is None else k['write'] / 1000, '8.2f')} "
            f"{fmt(None if k['sync'] is None else k['sync'] / 1000, '8.2f')} {inv:>9}")

    ratios = []
    # The peers find every row by its key, as Tidemark's keyed tables do: the pages run
    # (rows at fixed places) is compared with its keyed twin only.
    all_tms = [c for c in configs if c["system"] == "tidemark"]
    tms = [c for c in all_tms if c["details"]["schema"] == "tables"]
    pages = next((c for c in all_tms if c["details"]["schema"] == "pages"), None)
    peers = [c for c in configs if c["system"] != "tidemark"]

    def ratio(x, y):
        return x / y if x is not None and y else None

    if tms and peers:
        lines.append("")
        lines.append(f"{'tidemark / peer':<46} {'tps':>7} {'p99':>7} {'log_B/txn':>9}")
        for t in tms:
            for p in peers:
                r = {"tidemark": t["name"], "peer": p["name"],
                     "tps": ratio(t["tps"], p["tps"]),
                     "p99_latency": ratio(t["latency_ms"]["p99"], p["latency_ms"]["p99"]),
                     "log_bytes_per_txn": ratio(t["log_bytes_per_txn"], p["log_bytes_per_txn"])}
                ratios.append(r)
                label = f"{t['name']} / {p['name']}"
                lines.append(f"{label:<46} {fmt(r['tps'], '7.2f')} {fmt(r['p99_latency'], '7.2f')} "
                             f"{fmt(r['log_bytes_per_txn'], '9.2f')}")

    # What the B+tree costs: the pages run against the first keyed run of its protection
    # mode (compare.sh runs them back to back).
    keyed_vs_pages = None
    twin = next((t for t in tms if pages and t["details"]["torn_page_protection"] ==
                 pages["details"]["torn_page_protection"]), None)
    if twin:
        keyed_vs_pages = {"numerator": twin["name"], "denominator": pages["name"],
                          "tps": ratio(twin["tps"], pages["tps"]),
                          "p99_latency": ratio(twin["latency_ms"]["p99"], pages["latency_ms"]["p99"]),
                          "log_bytes_per_txn": ratio(twin["log_bytes_per_txn"], pages["log_bytes_per_txn"])}
        lines.append("")
        lines.append(f"{'keyed tables / pages':<46} {'tps':>7} {'p99':>7} {'log_B/txn':>9}")
        lines.append(f"{twin['name'] + ' / pages':<46} {fmt(keyed_vs_pages['tps'], '7.3f')} "
                     f"{fmt(keyed_vs_pages['p99_latency'], '7.2f')} "
                     f"{fmt(keyed_vs_pages['log_bytes_per_txn'], '9.2f')}")

    # Doublewrite's cost: Tidemark doublewrite against Tidemark with torn_page_protection=off,
    # pair by pair (compare.sh runs them in ABBA order) and over all pairs together, which is
    # what the target is judged on: the mean tps of the doublewrite runs over that of the off
    # runs (the runs are equally long), and the same for p99 and log bytes.
    def tm_runs(mode):
        return [c for c in tms if (c["details"].get("torn_page_protection") or
                                   c["name"].split()[-1]) == mode]

    def mean(values):
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    def dw_off_ratios(dws, offs):
        return {"tps": ratio(mean(d["tps"] for d in dws), mean(o["tps"] for o in offs)),
                "p99_latency": ratio(mean(d["latency_ms"]["p99"] for d in dws),
                                     mean(o["latency_ms"]["p99"] for o in offs)),
                "log_bytes_per_txn": ratio(mean(d["log_bytes_per_txn"] for d in dws),
                                           mean(o["log_bytes_per_txn"] for o in offs))}

    def dw_off_line(label, r, suffix=""):
        return (f"{label:<46} {fmt(r['tps'], '7.3f')} {fmt(r['p99_latency'], '7.2f')} "
                f"{fmt(r['log_bytes_per_txn'], '9.2f')}{suffix}")

    pairs = list(zip(tm_runs("doublewrite"), tm_runs("off")))
    dw_vs_off = None
    if pairs:
        combined = dw_off_ratios([d for d, _ in pairs], [o for _, o in pairs])
        tps_ratio = combined["tps"]
        dw_vs_off = dict(combined, **{
            "numerator": [d["name"] for d, _ in pairs], "denominator": [o["name"] for _, o in pairs],
            "pairs": [dict(dw_off_ratios([d], [o]), numerator=d["name"], denominator=o["name"])
                      for d, o in pairs],
            "tps_target": DW_OFF_TPS_TARGET,
            "tps_target_met": None if tps_ratio is None else tps_ratio >= DW_OFF_TPS_TARGET})
        met = {True: "met", False: "NOT met", None: "?"}[dw_vs_off["tps_target_met"]]
        target = f"   (tps target >= {DW_OFF_TPS_TARGET:.2f}: {met})"
        lines.append("")
        lines.append(f"{'doublewrite / off':<46} {'tps':>7} {'p99':>7} {'log_B/txn':>9}")
        if len(pairs) == 1:
            lines.append(dw_off_line(f"{pairs[0][0]['name']} / {pairs[0][1]['name']}", combined, target))
        else:
            for pair in dw_vs_off["pairs"]:
                lines.append(dw_off_line(f"{pair['numerator']} / {pair['denominator']}", pair))
            lines.append(dw_off_line(f"all {len(pairs)} pairs (means)", combined, target))

    notes = [
        "ratios: Tidemark value / peer value (tps above 1: Tidemark faster; p99 and log_B/txn "
        "below 1: Tidemark lower), for the runs on keyed tables (tidemark init's default), which "
        "find every row by its key as the peers do",
        "latency: tidemark from its --json; postgres from pgbench -l per-transaction logs; "
        "sqlite/rocksdb per-transaction timings in the driver; percentiles nearest-rank",
        "log_B/txn: tidemark wal.bytes_per_transaction; postgres pg_current_wal_lsn() difference; "
        "sqlite bytes written to the -wal file (VFS shim); rocksdb statistics rocksdb.wal.bytes",
        "FPI: tidemark wal.fpi; postgres pg_stat_wal.wal_fpi; sqlite WAL frames (every frame is a "
        "whole page image); rocksdb -",
        "buf_ckpt/buf_bgw/buf_bknd: tidemark buffers.written_*; postgres pg_stat_bgwriter "
        "buffers_checkpoint/buffers_clean/buffers_backend; sqlite: pages written to the database "
        "file (only checkpoints do; page size in details)",
        "ckpt_w_s/ckpt_s_s: tidemark checkpoints.write_ms/sync_ms; postgres checkpoint_write_time/"
        "checkpoint_sync_time (write phase includes pacing naps; a checkpoint still running at the "
        "end is not counted); sqlite time inside database-file write()/fsync() calls",
        "doublewrite / off: Tidemark torn_page_protection=doublewrite value / =off value (the cost "
        f"of torn-page protection by doublewrite; target tps >= {DW_OFF_TPS_TARGET:.2f}); with more "
        "than one pair, each pair's ratio and the ratio of the means over all pairs, on which the "
        "target is judged",
        "keyed tables / pages: Tidemark on keyed tables value / the same mode on --schema pages "
        "(rows at fixed places, no key lookup), run right after it: what the B+tree costs "
        "(tps below 1: keyed slower)",
        "session writes: buf_bknd / (buf_ckpt + buf_bgw + buf_bknd), the share of buffer writes "
        "made by sessions (backends) rather than the checkpointer or the bgwriter",
    ]
    for c in configs:
        d = c["details"]
        if c["system"] == "rocksdb":
            notes.append(f"{c['name']}: {d['flushes']} memtable flushes ({d['flush_bytes'] / 1e6:.1f} MB, "
                         f"{d['flush_ms'] / 1000:.2f} s), {d['compactions']} compactions "
                         f"({d['compaction_bytes'] / 1e6:.1f} MB, {d['compaction_ms'] / 1000:.2f} s), "
                         f"write stalls {d['stall_ms'] / 1000:.2f} s, {d['wal_syncs']} WAL syncs")
        elif c["system"] == "sqlite":
            notes.append(f"{c['name']}: page size {d['page_size']}, {d['wal_fsyncs']} WAL fsyncs, "
                         f"{d['checkpoint_fsyncs']} database-file fsyncs")
        elif c["system"] == "tidemark":
            share = c["backend_write_share"]
            notes.append(f"{c['name']}: checkpoints timed {d['checkpoints_timed']} requested "
                         f"{d['checkpoints_requested']}, WAL fsyncs/commit "
                         f"{fmt(d['wal_fsyncs_per_commit'], '.3f')}, WAL fdatasync µs p50 "
                         f"{fmt(d['wal_fsync_us']['p50'], '.0f')} p99 {fmt(d['wal_fsync_us']['p99'], '.0f')} "
                         f"max {fmt(d['wal_fsync_us']['max'], '.0f')} (a commit waits for at least one), "
                         f"{ring_fsyncs(d['doublewrite'])}"
                         f"session writes "
                         f"{'-' if share is None else format(100 * share, '.1f') + ' %'} of buffer writes "
                         f"({c['buffers']['backend']} of "
                         f"{sum(c['buffers'][k] for k in ('checkpoint', 'bgwriter', 'backend'))})")
        elif c["system"] == "postgres":
            notes.append(f"{c['name']}: PostgreSQL {d['version']}, checkpoints timed {d['checkpoints_timed']} "
                         f"requested {d['checkpoints_req']}, WAL syncs {d['wal_sync']}")

    table = "\n".join(lines)
    print(table)
    print()
    for n in notes:
        print("  " + n)
    with open(a.json, "w") as f:
        json.dump({"settings": settings, "configurations": configs, "ratios": ratios,
                   "keyed_vs_pages": keyed_vs_pages,
                   "doublewrite_vs_off": dw_vs_off, "notes": notes, "table": table}, f, indent=2)
        f.write("\n")
    if any(c["invariant_ok"] is False for c in configs):
        print("balance invariant FAILED for: " +
              ", ".join(c["name"] for c in configs if c["invariant_ok"] is False), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
