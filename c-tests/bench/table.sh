#!/usr/bin/env bash
# The README's performance table, made from a dated `make bench` run kept in
# the tree (docs/bench/<date>/: the CSVs and PNGs c-tests/bench/publish.sh
# copied there, and env.txt: machine, commit, load).
#
#   c-tests/bench/table.sh docs/bench/2026-12-07     -> markdown on stdout
#
# One row per class, test and size that rustfab took part in: rustfab's
# median, the fastest other peer's median and name, and the ratio
# rustfab / fastest (the CSVs' ratio_to_fastest_peer: latency < 1 and
# bandwidth > 1 mean rustfab is ahead). `make readme-check` (in make lint)
# fails when the README's table is not this script's output for the run the
# README names, so the table can only change with a run behind it.
set -eu
dir=${1:?usage: table.sh docs/bench/<date>}
[ -d "$dir" ] || { echo "table.sh: no such run directory: $dir" >&2; exit 2; }
csvs=()
for f in peers.csv mpi.csv hosts.csv; do [ -f "$dir/$f" ] && csvs+=("$dir/$f"); done
[ ${#csvs[@]} -gt 0 ] || { echo "table.sh: $dir has no peers.csv, mpi.csv or hosts.csv" >&2; exit 2; }
echo "| class | test | size | rustfab | fastest other peer | ratio |"
echo "|---|---|---:|---:|---|---:|"
for f in "${csvs[@]}"; do
	awk -F, '
	function human(s) { return s >= 1048576 ? s / 1048576 " MiB" : s >= 1024 ? s / 1024 " KiB" : s " B" }
	NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
	{ k = $c["class"] "," $c["test"] "," $c["size"]; v[k SUBSEP $c["peer"]] = $c["median"]; u[k] = $c["unit"] }
	$c["peer"] ~ /rustfab/ { rows[++n] = k; who[n] = $c["peer"]; best[n] = $c["fastest_peer"]; ratio[n] = $c["ratio_to_fastest_peer"] }
	END {
		for (i = 1; i <= n; i++) {
			split(rows[i], f, ",")
			b = best[i] == "" ? "—" : best[i] " " v[rows[i] SUBSEP best[i]] " " u[rows[i]]
			printf "| %s | %s | %s | %s %s (%s) | %s | %s |\n", f[1], f[2], human(f[3]),
				v[rows[i] SUBSEP who[i]], u[rows[i]], who[i], b, ratio[i] == "" ? "—" : ratio[i]
		}
	}' "$f"
done
