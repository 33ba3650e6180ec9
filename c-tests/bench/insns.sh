#!/usr/bin/env bash
# make bench, third part: instructions per small-message round trip, counted
# by valgrind's callgrind over c-tests/bench/rf_insns (one thread, two
# endpoints, no waiting), so the figure does not depend on machine load.
#
#   c-tests/bench/insns.sh <rf_insns binary> [sizes]
#
# For each provider: Ir(3N round trips) - Ir(N round trips), divided by 2N,
# counting only inside rf_insns' round_trips() (--toggle-collect): set-up
# and tear-down (fi_getinfo's /proc and interface reads, rustfab's scan of
# /dev/shm), whose cost changes with what else runs on the machine, stay
# out; first contact (inside the loop) cancels in the difference. Peers: rustfab shm, libfabric 1.17's shm
# and, with LIBFABRIC2_PREFIX, 2.x's shm and sm2. Also writes the top
# functions of rustfab's count to $BENCH_OUT/insns-rustfab-<size>.txt.
# INSNS_ARGS passes more rf_insns options (-m: Open MPI mtl ofi's calls;
# -t: tagged; -e N: empty reads).
set -u
bin=$1
sizes=${2:-1 4096}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib=${FI_PROVIDER_PATH:-$root/build}
out_dir=${BENCH_OUT:-$root/build/bench}
N=${INSNS_ITERS:-2000}
# The threading model rf_insns asks (-T): domain (fi_rdm_pingpong's) or safe.
threading=${INSNS_THREADING:-domain}
# More rf_insns options, e.g. INSNS_ARGS=-m (Open MPI mtl ofi's call shape).
extra=${INSNS_ARGS:-}
mkdir -p "$out_dir"
if ! command -v valgrind >/dev/null 2>&1; then
	echo "insns: NOT RUN (no valgrind; Debian: valgrind)"
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
peers=("rustfab shm|rustfab|FI_PROVIDER_PATH=$lib FI_RUSTFAB_TRANSPORT=shm" "1.17 shm|shm|")
l2=${LIBFABRIC2_PREFIX:-}
if [ -n "$l2" ] && [ -e "$l2/lib/libfabric.so.1" ]; then
	peers+=("2.x shm|shm|LD_LIBRARY_PATH=$l2/lib" "2.x sm2|sm2|LD_LIBRARY_PATH=$l2/lib")
else
	echo "insns: libfabric 2.x left out (set LIBFABRIC2_PREFIX to its install prefix)"
fi
# Locked instructions executed in a callgrind profile taken with
# --dump-instr=yes --compress-pos=no --compress-strings=no: the
# per-instruction counts at every address objdump shows as lock-prefixed,
# an xchg with memory (implicitly locked) or mfence, in every object the
# profile names. Each is a full
# barrier (~2.5 ns uncontended here, more when a store waits for a line
# another core holds): what callgrind's instruction count weighs as one.
locked() { # profile -> count
	local f=$1 o
	{
		grep '^ob=' "$f" | cut -c4- | sort -u | while read -r o; do
			[ -f "$o" ] || continue
			objdump -d --no-show-raw-insn "$o" 2>/dev/null |
				awk -v o="$o" '/^ *[0-9a-f]+:/ && ($2 == "lock" || $2 == "mfence" || ($2 == "xchg" && $3 ~ /\(/)) {
					a = $1; sub(":", "", a); sub("^0+", "", a); print "L\t" o "\t" a }'
		done
		echo "PROFILE"
		cat "$f"
	} | awk -F'\t' '
		$1 == "L" { lk[$2 " " $3] = 1; next }
		$0 == "PROFILE" { FS = " "; prof = 1; next }
		!prof { next }
		/^ob=/ { ob = substr($0, 4); next }
		/^calls=/ { skip = 1; next }
		/^0x/ { if (skip) { skip = 0; next }
			a = substr($1, 3); sub("^0+", "", a)
			if ((ob " " a) in lk) n += $NF
			next }
		{ skip = 0 }
		END { print n + 0 }'
}
count() { # envs prov size iters -> "total-Ir locked-instructions"
	# shellcheck disable=SC2086
	env -u FI_PROVIDER -u FI_PROVIDER_PATH $1 timeout 300 valgrind --tool=callgrind --toggle-collect=round_trips \
		--dump-instr=yes --compress-pos=no --compress-strings=no \
		--callgrind-out-file="$work/cg.$4" "$bin" -p "$2" -s "$3" -i "$4" -T "$threading" $extra >"$work/out" 2>"$work/err" || {
		echo "insns: $2 failed: $(tail -n 2 "$work/err" | tr '\n' ' ')" >&2
		return 1
	}
	echo "$(callgrind_annotate "$work/cg.$4" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}') $(locked "$work/cg.$4")"
}
echo "insns: FI_THREAD_${threading^^} asked (INSNS_THREADING=domain|safe)${extra:+, rf_insns $extra}"
printf "%-12s %8s %14s %18s\n" peer bytes "Ir/round trip" "locked/round trip"
for size in $sizes; do
	for p in "${peers[@]}"; do
		IFS='|' read -r name prov envs <<<"$p"
		read -r a la < <(count "$envs" "$prov" "$size" "$N") || continue
		read -r b lb < <(count "$envs" "$prov" "$size" $((3 * N))) || continue
		printf "%-12s %8s %14d %18s\n" "$name" "$size" $(((b - a) / (2 * N))) \
			"$(awk -v a="$la" -v b="$lb" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / (2 * n) }')"
		if [ "$prov" = rustfab ]; then
			callgrind_annotate "$work/cg.$((3 * N))" 2>/dev/null | sed -n '/file:function/,$p' | head -n 40 \
				>"$out_dir/insns-rustfab-$size.txt"
		fi
	done
done
echo "insns: top functions of rustfab's count in $out_dir/insns-rustfab-<size>.txt"
