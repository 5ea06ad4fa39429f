#!/bin/bash
# standby_on_fuse.sh BINARY [RUNS] - a manual check, not part of `make test`.
#
# Checks that a synchronous standby (synchronous_standby=remote_flush) whose data
# directory is on a FUSE passthrough file system with the kernel page cache on
# (passthrough_cache.c, next to this script) loses no acknowledged commit when its
# primary is killed with -9 and the standby is promoted.  On such a mount a
# standby's redo was seen reading zeros where its receiver had just fsynced WAL.
# Each run: init + bench the primary (~20 s of load), basebackup + standby on the
# mount, kill -9 the primary, promote the standby (live if it still runs, offline
# if it stopped by itself), verify it against the primary's acknowledgement log.
# Prints one line per run; exits 0 only if no run lost an acknowledged commit
# (1: commits lost; 2: setup failed or a run acknowledged nothing).
#
# Needs: root (or FUSE rights), /dev/fuse, and the packages libfuse3-dev, fuse3,
# pkg-config and gcc.  Everything lives in a mktemp -d work dir that is removed.
#   e.g.: bash tests/fuse/standby_on_fuse.sh build/tidemark 3
set -euo pipefail
BIN=$(readlink -f "${1:?usage: standby_on_fuse.sh BINARY [RUNS]}")
RUNS=${2:-3}
LOAD_SECS=20
[ -x "$BIN" ] || { echo "not executable: $BIN" >&2; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/standby_on_fuse.XXXXXX")
BACK=$W/backing MNT=$W/mnt
FS_PID='' BENCH_PID='' SB_PID=''

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
stop() { alive "$1" && kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null || true; }
# shellcheck disable=SC2317  # cleanup is run by the trap
cleanup() {
  set +e
  stop "$BENCH_PID"; stop "$SB_PID"
  if mountpoint -q "$MNT"; then fusermount3 -u "$MNT" || { sleep 1; fusermount3 -uz "$MNT"; }; fi
  for _ in $(seq 40); do alive "$FS_PID" || break; sleep 0.25; done
  stop "$FS_PID"
  if mountpoint -q "$MNT"; then echo "standby_on_fuse: $MNT still mounted, $W kept" >&2
  else rm -rf --one-file-system "$W"; fi
}
trap cleanup EXIT
trap 'exit 2' INT TERM
die() { echo "standby_on_fuse: $*" >&2; exit 2; }
sample() {   # the standby's status file ($R/ST.json): max wal_rereads, ever "failed": true
  local r; r=$(jnum wal_rereads "$R/ST.json")
  if [ -n "$r" ] && { [ -z "$REREADS" ] || [ "$r" -gt "$REREADS" ]; }; then REREADS=$r; fi
  if grep -q '"failed": *true' "$R/ST.json" 2>/dev/null; then FAILED=yes; fi
}
jnum() { grep -o "\"$1\": *[0-9]*" "$2" 2>/dev/null | head -1 | grep -o '[0-9]*$' || true; }

read -ra FUSE_FLAGS <<<"$(pkg-config fuse3 --cflags --libs)" || die "pkg-config: no fuse3"
gcc -Wall -Wextra -O2 -o "$W/passthrough_cache" "$HERE/passthrough_cache.c" "${FUSE_FLAGS[@]}" ||
  die "cannot build passthrough_cache"
mkdir -p "$BACK" "$MNT"
"$W/passthrough_cache" "$BACK" "$MNT" -f 2>"$W/fs.log" &
FS_PID=$!
for _ in $(seq 50); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || die "mount failed: $(cat "$W/fs.log")"

ANY_LOST=0
for run in $(seq "$RUNS"); do
  R=$W/run$run S=$MNT/s
  mkdir -p "$R"; rm -rf "$S"
  timeout 300 "$BIN" init -D "$R/P" -s 2 --set shared_buffers=2MB \
    --set torn_page_protection=full_page_writes >"$R/init.log" 2>&1 || die "init failed: $(tail -3 "$R/init.log")"
  "$BIN" bench -D "$R/P" -c 4 -T 120 --ack-log "$R/ACKS" --set checkpoint_timeout=3s \
    --set replication_listen=127.0.0.1:0 --set synchronous_standby=remote_flush \
    >"$R/bench.out" 2>"$R/P.log" &
  BENCH_PID=$!
  ADDR=
  for _ in $(seq 300); do
    ADDR=$(sed -n 's/.*WAL sender listening on \([^ ]*:[0-9][0-9]*\).*/\1/p' "$R/P.log" | head -1)
    if [ -n "$ADDR" ] || ! alive "$BENCH_PID"; then break; fi; sleep 0.1
  done
  grep -q 'port "0" is not a number' "$R/P.log" &&
    die "$BIN does not take replication_listen port 0 (a build from before port 0 support)"
  [ -n "$ADDR" ] || die "the primary did not listen: $(head -3 "$R/P.log")"
  timeout 120 "$BIN" basebackup -D "$S" --primary "$ADDR" >"$R/basebackup.log" 2>&1 ||
    die "basebackup failed: $(tail -3 "$R/basebackup.log")"
  "$BIN" standby -D "$S" --json "$R/ST.json" --status-interval 0.5 --set checkpoint_timeout=3s \
    --set "replication_listen=''" >"$R/standby.out" 2>"$R/standby.log" &
  SB_PID=$!

  REREADS='' FAILED=no
  for _ in $(seq $((LOAD_SECS * 2))); do sample; sleep 0.5; done   # the load runs
  stop "$BENCH_PID"; BENCH_PID=
  cp "$R/ACKS" "$R/ACKS.copy" || die "no acknowledgement log: $(tail -3 "$R/P.log")"
  sample

  if alive "$SB_PID"; then   # the running standby promotes itself and exits
    HOW=live
    timeout 180 "$BIN" promote -D "$S" --timeout 60 >"$R/promote.log" 2>&1 || HOW="live(promote failed)"
    for _ in $(seq 120); do alive "$SB_PID" || break; sleep 0.25; done
    alive "$SB_PID" && HOW="$HOW,standby killed"
    stop "$SB_PID"; SB_PID=
  else                       # it stopped by itself (exit 1, "failed": true): promote the directory
    SB_RC=0; wait "$SB_PID" || SB_RC=$?; SB_PID=
    HOW="offline(standby exit $SB_RC)"
    timeout 300 "$BIN" promote -D "$S" --timeout 120 >"$R/promote.log" 2>&1 || HOW="$HOW failed"
  fi
  sample

  VRC=0
  timeout 600 "$BIN" verify -D "$S" --ack-log "$R/ACKS.copy" --json "$R/V.json" \
    >"$R/verify.out" 2>"$R/verify.log" || VRC=$?
  ACKED=$(jnum acknowledged "$R/V.json") LOST=$(jnum lost_commits "$R/V.json")
  [ -n "$LOST" ] || { LOST="? (verify exit $VRC)"; ANY_LOST=1; }
  [ "$LOST" = 0 ] || ANY_LOST=1
  echo "run $run: acknowledged ${ACKED:-?} lost $LOST wal_rereads ${REREADS:--}" \
       "failed $FAILED promote $HOW"
  [ "${ACKED:-0}" != 0 ] || die "run $run checked nothing: no commit acknowledged ($(head -1 "$R/standby.log"))"
done
exit "$ANY_LOST"
