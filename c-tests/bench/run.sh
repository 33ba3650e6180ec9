#!/usr/bin/env bash
# make bench: rustfab against libfabric's built-in providers, same program
# (rf_bench), same machine, same run. Each pair is measured REPEAT times,
# interleaved, and the median is printed with the ratio rustfab/built-in
# (latency: < 1 is better; bandwidth: > 1 is better). Processes are pinned
# to CPUs 0 and 1 by rf_bench itself.
#
# Rows: shm (rustfab shm vs shm), tcp (rustfab tcp RDM vs tcp;ofi_rxm),
# msg (rustfab tcp FI_EP_MSG vs the built-in tcp's FI_EP_MSG), and the *-B
# rows (rustfab buffered receives vs rustfab posted receives). BENCH_TCP=0
# leaves the tcp and msg rows out. Writes $BENCH_OUT/run-raw.csv (every
# round) and run.csv (medians, the columns of peers.csv: class = the row,
# peer = rustfab or the built-in provider; in the -B rows "rustfab buffered"
# and "rustfab posted"), which make bench plots with the rest.
set -u
bin=${1:-build/bench/rf_bench}
REPEAT=${REPEAT:-3}
SIZES=${SIZES:-1,64,1k,4k,64k,1m,4m}
ITERS=${ITERS:-10000}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
out=$(mktemp)
trap 'rm -f "$out" "$out.one"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
out_dir=${BENCH_OUT:-build/bench}
mkdir -p "$out_dir"
raw=$out_dir/run-raw.csv csv=$out_dir/run.csv
echo "round,class,test,size,peer,value,unit" >"$raw"

# Buffered receives (-B: FI_BUFFERED_RECV, messages used in place and
# discarded) against posted receives, both rustfab, small messages.
BUF_SIZES=${BUF_SIZES:-1,64,1k,4k}

# pairs: label | transport | rustfab args | reference args [| sizes]
# (reference: the built-in provider; for the "-B" rows, rustfab with posted
# receives)
pairs=(
	"shm|shm|-p rustfab -d shm|-p shm"
	"shm-B|shm|-p rustfab -d shm -B|-p rustfab -d shm|$BUF_SIZES"
)
if [ "${BENCH_TCP:-1}" != 0 ]; then
	pairs+=("tcp|tcp|-p rustfab -d tcp|-p tcp;ofi_rxm")
	pairs+=("tcp-B|tcp|-p rustfab -d tcp -B|-p rustfab -d tcp|$BUF_SIZES")
	pairs+=("msg|tcp|-p rustfab -d tcp -e msg|-p tcp -e msg")
fi

for pair in "${pairs[@]}"; do
	IFS='|' read -r label transport ours theirs sizes <<<"$pair"
	sizes=${sizes:-$SIZES}
	for r in $(seq "$REPEAT"); do
		for who in ours theirs; do
			args=$ours; [ $who = theirs ] && args=$theirs
			# shellcheck disable=SC2086
			if ! FI_RUSTFAB_TRANSPORT=$transport timeout 300 "$bin" $args -s "$sizes" -i "$ITERS" \
				| sed "s/^/$label $who /" >"$out.one"; then
				echo "bench: $who ($args) failed" >&2
			fi
			cat "$out.one" >>"$out"
			# test provider bytes value -> the raw CSV
			awk -v r="$r" -v label="$label" -v who="$who" '{
				peer = $4
				if (label ~ /-B$/) peer = who == "ours" ? "rustfab buffered" : "rustfab posted"
				printf "%s,%s,%s,%s,%s,%s,%s\n", r, label, $3, $5, peer, $6, ($3 == "lat" ? "us" : "MB/s")
			}' "$out.one" >>"$raw"
		done
	done
done

echo "rows *-B: rustfab buffered receives (FI_BUFFERED_RECV) in the rustfab column, rustfab posted receives in the built-in column"
printf "%-6s %-4s %10s %14s %14s %8s\n" "tport" "test" "bytes" "rustfab" "built-in" "ratio"
awk '
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ key = $1 " " $3 " " $5; vals[$2 " " key] = vals[$2 " " key] " " $6; keys[key] = 1 }
END {
	for (k in keys) {
		split(k, f, " ")
		o = median(vals["ours " k]); t = median(vals["theirs " k])
		unit = f[2] == "lat" ? "us" : "MB/s"
		printf "%s %s %012d|%-6s %-4s %10s %11.3f %-2s %11.3f %-4s %6.2f\n", f[1], f[2], f[3], f[1], f[2], f[3], o, unit, t, unit, (t > 0 ? o / t : 0)
	}
}' "$out" | sort | cut -d'|' -f2
awk -f "$here/medians.awk" "$raw" | grep -v '^class' | sort -t, -k1,1 -k2,2r -k3,3n -k4,4 >"$csv.tmp"
{ echo "class,test,size,peer,median,unit,runs,fastest_peer,ratio_to_fastest_peer"; cat "$csv.tmp"; } >"$csv"
rm -f "$csv.tmp"
echo "bench: CSV $csv, every round in $raw"
