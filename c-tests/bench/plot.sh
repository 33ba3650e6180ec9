#!/usr/bin/env bash
# make bench, last part: PNG plots of the CSVs the peer benchmarks wrote.
#
#   c-tests/bench/plot.sh      (reads and writes $BENCH_OUT, default build/bench)
#
# From peers.csv (c-tests/bench/peers.sh: classes shm and tcp), mpi.csv
# (c-tests/bench/mpi.sh: class mpi) and run.csv (c-tests/bench/run.sh, rf_bench
# against the built-in providers: classes rf-shm, rf-tcp, rf-msg and the
# buffered rows rf-shm-B, rf-tcp-B) and hosts.csv (c-tests/bench/hosts.sh,
# make bench-hosts: classes hosts-veth, hosts-tbf-RATE), whichever exist:
#   latency.png    one-way latency (us) against message size, one panel per
#                  class, one line per peer (the "lat" rows);
#   bandwidth.png  MB/s against size: shm and tcp streaming bandwidth (the
#                  "bw" rows, fi_rdm_tagged_bw / ucx_perftest tag_bw) and, for
#                  mpi, ping-pong bandwidth (size / one-way time);
#   rma.png        MB/s against size of fi_rma_bw writes and reads (the
#                  "rma_write"/"rma_read" rows), one panel per class and
#                  operation.
# Both axes logarithmic; rustfab's lines are red and thicker. Needs gnuplot
# (Debian: gnuplot-nox); without it, or without any CSV, it says so and
# exits 0.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${BENCH_OUT:-$root/build/bench}
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "plot: NOT RUN: gnuplot is not installed (Debian: apt-get install gnuplot-nox); the CSVs in $dir have every figure"
	exit 0
fi
csvs=()
for f in "$dir/peers.csv" "$dir/mpi.csv" "$dir/run.csv" "$dir/hosts.csv"; do [ -s "$f" ] && csvs+=("$f"); done
if [ ${#csvs[@]} -eq 0 ]; then
	echo "plot: NOT RUN: none of $dir/peers.csv, mpi.csv, run.csv exists (make bench writes them)"
	exit 0
fi
# the title names each CSV with its time: a CSV left by an earlier run shows
names=$(for f in "${csvs[@]}"; do echo "$(basename "$f") of $(date -u -r "$f" '+%Y-%m-%d %H:%M')"; done | paste -sd',' | sed 's/,/, /g')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One data file per (figure, class, peer): "size value" lines sorted by
# size; index.txt lists "figure|class|file|peer". figure lat: the lat rows;
# figure bw: the bw rows, and the mpi lat rows as size / time (bytes/us =
# MB/s).
awk -F, -v w="$work" '
FNR == 1 { next }
{
	cls = $1; t = $2; size = $3; peer = $4; v = $5 + 0
	if (FILENAME ~ /(^|\/)run\.csv$/) cls = "rf-" cls
	if (FILENAME ~ /(^|\/)hosts\.csv$/) cls = "hosts-" cls
	if (t == "lat") add("lat", cls, peer, size, v)
	if (t == "bw") add("bw", cls, peer, size, v)
	if (t == "lat" && cls == "mpi" && v > 0) add("bw", cls, peer, size, size / v)
	if (t ~ /^rma_/) add("rma", cls "-" substr(t, 5), peer, size, v)
}
function add(fig, cls, peer, size, v,   k) {
	k = fig SUBSEP cls SUBSEP peer
	if (!(k in file)) {
		file[k] = w "/d" (++n) ".dat"
		print fig "|" cls "|" file[k] "|" peer >(w "/index.txt")
	}
	print size, v >>file[k]
}' "${csvs[@]}"
for f in "$work"/d*.dat; do sort -n -o "$f" "$f"; done

# plot FIGURE OUTPUT YLABEL: one panel per class, side by side
plot() {
	local fig=$1 png=$2 ylabel=$3
	local classes
	classes=$(awk -F'|' -v f="$fig" '$1 == f {print $2}' "$work/index.txt" | sort -u | awk '
		{ c[$1] = 1 } END { n = split("shm tcp mpi rf-shm rf-tcp rf-msg rf-shm-B rf-tcp-B shm-write shm-read tcp-write tcp-read", o, " "); for (i = 1; i <= n; i++) if (o[i] in c) { printf "%s ", o[i]; delete c[o[i]] }
		for (k in c) printf "%s ", k }')
	local n
	n=$(echo "$classes" | wc -w)
	[ "$n" -gt 0 ] || { echo "plot: no $fig rows, $png not written"; return 0; }
	# up to 3 panels side by side, more in rows of 2
	local cols=$n rows=1
	[ "$n" -le 3 ] || { cols=2; rows=$(((n + 1) / 2)); }
	{
		echo "set terminal pngcairo size $((560 * cols)),$((480 * rows)) noenhanced font ',10'"
		echo "set output '$png'"
		echo "set logscale xy"
		echo "set grid"
		echo "set key top left box opaque"
		echo "set format x '%.0s%cB'"
		echo "set xlabel 'message size (bytes)'"
		echo "set ylabel '$ylabel'"
		[ "$fig" != lat ] && echo "set key bottom right"
		echo "set multiplot layout $rows,$cols title 'rustfab make bench: medians of interleaved rounds ($names UTC)'"
		local c
		for c in $classes; do
			local what=$c
			case $fig-$c in
				lat-mpi) what="mpi: Open MPI ping-pong, one-way" ;;
				lat-rf-*) what="${c#rf-}: rf_bench ping-pong, one-way" ;;
				lat-hosts-*) what="between 2 hosts (${c#hosts-}): Open MPI ping-pong, one-way" ;;
				bw-hosts-*) what="between 2 hosts (${c#hosts-}): Open MPI streaming" ;;
				bw-rf-*) what="${c#rf-}: rf_bench streaming" ;;
				bw-mpi) what="mpi: Open MPI ping-pong (size / one-way time)" ;;
				lat-*) what="$c: fi_rdm_pingpong / ucx_perftest tag_lat, one-way" ;;
				bw-*) what="$c: streaming, fi_rdm_tagged_bw -W 64 / ucx_perftest tag_bw" ;;
				rma-*) what="${c%-*}: fi_rma_bw -o ${c#*-} -W 64 (both directions)" ;;
			esac
			echo "set title \"$what\""
			awk -F'|' -v f="$fig" -v c="$c" '
				BEGIN { n = split("#1f77b4 #2ca02c #9467bd #ff7f0e #8c564b #17becf #7f7f7f #bcbd22", col, " ") }
				$1 == f && $2 == c {
					if ($4 ~ /^rustfab/ && $4 != "rustfab posted") { lw = 3; lc = "#d00000" } else { lw = 1.5; lc = col[(k++ % n) + 1] }
					s = s sep sprintf("\"%s\" using 1:2 with linespoints lw %s lc rgb \"%s\" pt 7 ps 0.8 title \"%s\"", $3, lw, lc, $4); sep = ", " }
				END { print "plot " s }' "$work/index.txt"
		done
		echo "unset multiplot"
	} >"$work/$fig.gp"
	if gnuplot "$work/$fig.gp" 2>"$work/err"; then
		echo "plot: wrote $png ($n panels: ${classes% })"
	else
		echo "plot: gnuplot failed for $png: $(tail -n 3 "$work/err" | tr '\n' ' ')"
		return 1
	fi
}
status=0
plot lat "$dir/latency.png" "one-way latency (us)" || status=1
plot bw "$dir/bandwidth.png" "bandwidth (MB/s, 10^6 bytes/s)" || status=1
plot rma "$dir/rma.png" "RMA bandwidth (MB/s, 10^6 bytes/s)" || status=1
exit $status
