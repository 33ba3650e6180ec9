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
count() { # envs prov size iters -> total Ir
	# shellcheck disable=SC2086
	env -u FI_PROVIDER -u FI_PROVIDER_PATH $1 timeout 300 valgrind --tool=callgrind --toggle-collect=round_trips \
		--callgrind-out-file="$work/cg.$4" "$bin" -p "$2" -s "$3" -i "$4" -T "$threading" $extra >"$work/out" 2>"$work/err" || {
		echo "insns: $2 failed: $(tail -n 2 "$work/err" | tr '\n' ' ')" >&2
		return 1
	}
	callgrind_annotate "$work/cg.$4" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
echo "insns: FI_THREAD_${threading^^} asked (INSNS_THREADING=domain|safe)${extra:+, rf_insns $extra}"
printf "%-12s %8s %14s\n" peer bytes "Ir/round trip"
for size in $sizes; do
	for p in "${peers[@]}"; do
		IFS='|' read -r name prov envs <<<"$p"
		a=$(count "$envs" "$prov" "$size" "$N") || continue
		b=$(count "$envs" "$prov" "$size" $((3 * N))) || continue
		printf "%-12s %8s %14d\n" "$name" "$size" $(((b - a) / (2 * N)))
		if [ "$prov" = rustfab ]; then
			callgrind_annotate "$work/cg.$((3 * N))" 2>/dev/null | sed -n '/file:function/,$p' | head -n 40 \
				>"$out_dir/insns-rustfab-$size.txt"
		fi
	done
done
echo "insns: top functions of rustfab's count in $out_dir/insns-rustfab-<size>.txt"
