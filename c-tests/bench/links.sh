#!/usr/bin/env bash
# make bench-links: streaming bandwidth between two namespace "hosts" joined
# by two veth pairs, each shaped to LINKS_RATE (1gbit) with tc tbf on both
# ends: rustfab over one link (the first pair) against two links
# (FI_RUSTFAB_TCP_LINKS naming the second pair's interface on each side).
# fi_rdm_tagged_bw (fabtests, FABTESTS_PREFIX or /opt/fabtests) -W 64 at
# LINKS_SIZES (1 MiB and 4 MiB), LINKS_MIB (1024) MiB per run, ROUNDS (3)
# interleaved rounds; prints each
# run and the medians with the two-link / one-link ratio. Needs root; the
# namespaces are its own and are deleted on exit.
set -u
build=${1:-build}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
RATE=${LINKS_RATE-1gbit}
SIZES=${LINKS_SIZES:-1048576 4194304}
ROUNDS=${ROUNDS:-3}
T=${LINKS_TIMEOUT:-120}
ft=${FABTESTS_PREFIX:-/opt/fabtests}/bin
ns_a=rustfab-ba-$$
ns_b=rustfab-bb-$$
tmp=$(mktemp -d)
cleanup() {
	ip netns del "$ns_a" 2>/dev/null
	ip netns del "$ns_b" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || { echo "bench-links: needs root"; exit 1; }
[ -x "$ft/fi_rdm_tagged_bw" ] || { echo "bench-links: no $ft/fi_rdm_tagged_bw (set FABTESTS_PREFIX)"; exit 1; }
ip netns add "$ns_a" && ip netns add "$ns_b" || exit 1
. "$(dirname "$0")/../netns/two-links.sh"
why=$(two_links "$ns_a" "$ns_b" rba rbb 10.125 "$RATE") || { echo "bench-links: $why"; exit 1; }

run() { # links size -> MB/s
	local links=$1 size=$2 la= lb= iters
	[ "$links" = 2 ] && { la=FI_RUSTFAB_TCP_LINKS=rba1; lb=FI_RUSTFAB_TCP_LINKS=rbb1; }
	iters=$((${LINKS_MIB:-1024} * 1048576 / size))
	# shellcheck disable=SC2086
	ip netns exec "$ns_a" env FI_PROVIDER=rustfab FI_RUSTFAB_TRANSPORT=tcp FI_RUSTFAB_IFACE=rba0 $la \
		timeout -k 5 "$T" "$ft/fi_rdm_tagged_bw" -p rustfab -W ${LINKS_WINDOW:-64} -S "$size" -I "$iters" >"$tmp/srv" 2>&1 &
	local spid=$!
	sleep 0.5
	# shellcheck disable=SC2086
	ip netns exec "$ns_b" env FI_PROVIDER=rustfab FI_RUSTFAB_TRANSPORT=tcp FI_RUSTFAB_IFACE=rbb0 $lb \
		timeout -k 5 "$T" "$ft/fi_rdm_tagged_bw" -p rustfab -W ${LINKS_WINDOW:-64} -S "$size" -I "$iters" 10.125.0.1 >"$tmp/cli" 2>&1
	local rc=$?
	[ -z "${LINKS_DEBUG:-}" ] || grep -ih "link\|advertis" "$tmp/srv" "$tmp/cli" | grep -v "settings\|core:core" | head -20 >&2
	wait $spid
	local src=$?
	if [ $rc -ne 0 ] || [ $src -ne 0 ]; then
		{ echo "run failed (client rc=$rc, server rc=$src):"; grep -v "core:core" "$tmp/srv" "$tmp/cli" | tail -n 30; [ -z "${LINKS_KEEP:-}" ] || cp "$tmp/srv" "$tmp/cli" "$LINKS_KEEP"; } >&2
		echo "failed"
		return
	fi
	awk '$1 != "bytes" && NF == 7 {v = $5} END {if (v != "") print v; else print "failed"}' "$tmp/cli"
}

echo "== bench-links: two veth pairs, each tbf $RATE; fi_rdm_tagged_bw -W 64; $ROUNDS rounds"
declare -A all
for r in $(seq "$ROUNDS"); do
	for size in $SIZES; do
		for links in 1 2; do
			v=$(run $links "$size")
			echo "round $r size $size links $links: $v MB/s"
			all[$size,$links]="${all[$size,$links]:-} $v"
		done
	done
done
median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); else print "n/a"}'; }
echo "| size | one link MB/s | two links MB/s | two / one |"
echo "|---:|---:|---:|---:|"
for size in $SIZES; do
	one=$(echo "${all[$size,1]}" | median)
	two=$(echo "${all[$size,2]}" | median)
	ratio=$(awk -v a="$one" -v b="$two" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", b / a; else print "n/a"}')
	echo "| $size | $one | $two | $ratio |"
done
