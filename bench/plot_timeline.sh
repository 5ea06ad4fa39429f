#!/usr/bin/env bash
# Turns one or more `tidemark bench --timeline FILE.csv` files into one SVG chart, a panel
# per file: tps (left axis) and p99 latency (right axis) per second, with checkpoint phases
# shaded behind them (write: blue, sync: orange, finish: grey) — the picture that shows
# checkpoint stalls. Installs gnuplot from Debian when missing.
#   usage: bench/plot_timeline.sh OUT.svg TIMELINE.csv [TIMELINE.csv ...]
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 OUT.svg TIMELINE.csv [TIMELINE.csv ...]" >&2
  exit 2
fi
out=$1
shift
if ! command -v gnuplot >/dev/null; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  $sudo apt-get install -y -qq gnuplot-nox >/dev/null
fi
for f in "$@"; do
  [ -r "$f" ] || { echo "cannot read $f" >&2; exit 2; }
  head -1 "$f" | grep -q '^time_s,tps,p99_ms,' || { echo "$f is not a tidemark timeline" >&2; exit 2; }
done
panels=$#
height=$(( 260 * panels + 40 ))
script=$(mktemp)
trap 'rm -f "$script"' EXIT
{
  echo "set terminal svg size 1000,$height dynamic background rgb 'white' font 'sans,11'"
  echo "set output '$out'"
  echo "set datafile separator ','"
  echo "set key below horizontal"
  echo "set multiplot layout $panels,1"
  echo "set xlabel 'seconds'"
  echo "set ylabel 'transactions per second'"
  echo "set y2label 'p99 latency (ms)'"
  echo "set ytics nomirror"
  echo "set y2tics"
  echo "set y2range [0:*]"
  echo "set style fill solid 1.0 noborder"
  for f in "$@"; do
    title=$(basename "$f" .csv)
    echo "set title '$title'"
    echo "stats '$f' every ::1 using 2 nooutput"
    echo "top = STATS_max * 1.15 + 1"
    echo "set yrange [0:top]"
    # Phase bands: a box per second over the whole height, coloured by phase (column 5).
    echo "plot '$f' every ::1 using (\$1-0.5):(\$5==1?top:1/0):(1.0) with boxes lc rgb '#dbe9f6' title 'checkpoint write', \\"
    echo "     '$f' every ::1 using (\$1-0.5):(\$5==2?top:1/0):(1.0) with boxes lc rgb '#fde2c4' title 'checkpoint sync', \\"
    echo "     '$f' every ::1 using (\$1-0.5):(\$5==3?top:1/0):(1.0) with boxes lc rgb '#dddddd' title 'checkpoint finish', \\"
    echo "     '$f' every ::1 using 1:2 with lines lw 2 lc rgb '#1f4e79' title 'tps', \\"
    echo "     '$f' every ::1 using 1:3 axes x1y2 with lines lw 1.5 lc rgb '#c0392b' title 'p99 ms'"
  done
  echo "unset multiplot"
} > "$script"
gnuplot "$script"
echo "wrote $out"
