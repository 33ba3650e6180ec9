#!/usr/bin/env bash
# Keep a `make bench` run in the tree and make the README's table from it.
#
#   c-tests/bench/publish.sh [build/bench]
#
# Copies the run's CSVs (peers, run, mpi, hosts, and their -raw files) and
# PNGs into docs/bench/<date of the newest CSV>/, writes env.txt there (the
# commit, CPU, kernel, libfabric, load average while publishing, and the
# files' times), and replaces the README's table between the markers
# "<!-- bench-table: DIR -->" and "<!-- /bench-table -->" with
# c-tests/bench/table.sh DIR. Commit the directory and the README together.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
src=${1:-$root/build/bench}
newest=$(ls -t "$src"/*.csv 2>/dev/null | head -n 1) || true
[ -n "$newest" ] || { echo "publish: no CSV in $src (run make bench first)" >&2; exit 2; }
date=$(date -u -r "$newest" +%F)
rel=docs/bench/$date
dst=$root/$rel
mkdir -p "$dst"
for f in "$src"/*.csv "$src"/*.png "$src"/insns*.txt; do [ -f "$f" ] && cp "$f" "$dst/"; done
{
	echo "run of $date (UTC), published $(date -u +%FT%TZ)"
	echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with local changes)')"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
	echo "kernel: $(uname -r)"
	echo "libfabric core: $(fi_info --version 2>/dev/null | tr '\n' ' ')"
	echo "load average at publishing: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "files:"
	(cd "$src" && ls -l --time-style=+%FT%T ./*.csv ./*.png 2>/dev/null | awk '{print "  " $6 " " $7}')
} >"$dst/env.txt"
table=$("$here/table.sh" "$rel")
readme=$root/README.md
grep -q '^<!-- bench-table: ' "$readme" || { echo "publish: README.md has no <!-- bench-table: DIR --> marker" >&2; exit 2; }
awk -v rel="$rel" -v table="$table" '
	/^<!-- bench-table: / { print "<!-- bench-table: " rel " -->"; print table; skip = 1; next }
	/^<!-- \/bench-table -->/ { skip = 0 }
	!skip' "$readme" >"$readme.tmp" && mv "$readme.tmp" "$readme"
echo "publish: $rel written, README.md's table made from it"
