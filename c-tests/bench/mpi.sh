#!/usr/bin/env bash
# make bench, MPI part (also `make bench-mpi` alone): Open MPI ping-pong over
# rustfab next to Open MPI's own fastest paths on one host.
#
#   c-tests/bench/mpi.sh [pingpong binary]   (default build/mpi-hosts/pingpong)
#
# Program: c-tests/mpi-hosts/pingpong.c, 2 ranks, `--bind-to core` (rank 0
# on core 0, rank 1 on core 1), sizes MPI_SIZES (1 64 4096 65536 1048576),
# one-way time (half a round trip), every message checked. Peers, each one
# mpirun per round running every size:
#   rustfab      pml cm + mtl ofi on rustfab (auto transport: shm here), the
#                recipe of c-tests/mpi/run.sh; every rank must report
#                "mtl:ofi:prov: rustfab" or the run counts as failed
#   ob1+vader    pml ob1, btl vader,self (Open MPI's shared memory)
#   pml ucx      pml ucx with UCX_TLS=posix,self, when this Open MPI has
#                the ucx pml (ompi_info); said and left out otherwise
# ROUNDS (3) rounds, each running every peer once (interleaved, so a burst
# of load on the shared machine hits all peers); medians of the rounds with
# their ratio to the faster of ob1+vader and pml ucx (< 1: rustfab faster).
# Writes $BENCH_OUT/mpi.csv (the columns of peers.csv, class "mpi", test
# "lat", unit us) and mpi-raw.csv (every run). Every mpirun runs under
# `timeout` (MPI_BENCH_TIMEOUT seconds, 120); as root it sets Open MPI's
# OMPI_ALLOW_RUN_AS_ROOT pair, as c-tests/mpi/run.sh does. Exit status 0
# unless nothing could be measured (no mpirun: says so, exits 0).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
exe=${1:-$root/build/mpi-hosts/pingpong}
if ! command -v mpirun >/dev/null 2>&1; then
	echo "mpi-bench: NOT RUN: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"
	exit 0
fi
[ -x "$exe" ] || { echo "mpi-bench: $exe not built (make builds it with mpicc: apt-get install libopenmpi-dev)"; exit 1; }
lib=${FI_PROVIDER_PATH:-$root/build}
if [ ! -e "$lib/librustfab-fi.so" ]; then
	echo "mpi-bench: no $lib/librustfab-fi.so (make lib builds it)"
	exit 1
fi
ROUNDS=${ROUNDS:-3}
MPI_SIZES=${MPI_SIZES:-1 64 4096 65536 1048576}
MPI_ITERS=${MPI_ITERS:-10000}    # below 64 KiB
MPI_ITERS_BIG=${MPI_ITERS_BIG:-500} # from 64 KiB
T=${MPI_BENCH_TIMEOUT:-120}
out_dir=${BENCH_OUT:-$root/build/bench}
mkdir -p "$out_dir"
raw=$out_dir/mpi-raw.csv
csv=$out_dir/mpi.csv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export FI_PROVIDER_PATH=$lib FI_PROVIDER=rustfab FI_RUSTFAB_TRANSPORT=auto
bind=(--bind-to core)
if [ "$(nproc)" -lt 2 ]; then
	echo "mpi-bench: only $(nproc) CPU: both ranks share it (--oversubscribe --bind-to core:overload-allowed)"
	bind=(--oversubscribe --bind-to core:overload-allowed)
fi

# Peers: name|mpirun options (word-split)
peers=(
	"rustfab|-x FI_PROVIDER_PATH -x FI_PROVIDER -x FI_RUSTFAB_TRANSPORT --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include rustfab --mca mtl_ofi_verbose 1 --mca btl self"
	"ob1+vader|--mca pml ob1 --mca btl vader,self"
)
if ompi_info 2>/dev/null | grep -q "MCA pml: ucx "; then
	peers+=("pml ucx|--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=posix,self")
else
	echo "mpi-bench: pml ucx left out: this Open MPI has no ucx pml (ompi_info lists no 'MCA pml: ucx')"
fi

sizes_arg=$(echo "$MPI_SIZES" | tr ' ' ',')
# run name options -> "size value" lines, or fails
run() {
	local name=$1 opts=$2
	# shellcheck disable=SC2086
	timeout -k 10 "$T" mpirun -np 2 "${bind[@]}" $opts \
		"$exe" -s "$sizes_arg" -n "$MPI_ITERS" -N "$MPI_ITERS_BIG" >"$work/log" 2>&1 || return 1
	grep -q "pingpong: data FAIL" "$work/log" && return 1
	if [ "$name" = rustfab ] && [ "$(grep -c "mtl:ofi:prov: rustfab" "$work/log")" -lt 2 ]; then
		echo "mpi-bench: not every rank reports mtl:ofi:prov: rustfab" >"$work/log"
		return 1
	fi
	# pingpong SIZE B: LAT us (half round trip), ...
	awk '$1 == "pingpong" && $3 == "B:" {print $2, $4}' "$work/log"
}

echo "round,class,test,size,peer,value,unit" >"$raw"
failures=0
start=$(date +%s)
echo "mpi-bench: $ROUNDS interleaved rounds of ${#peers[@]} peers, sizes $MPI_SIZES; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	for p in "${peers[@]}"; do
		IFS='|' read -r name opts <<<"$p"
		if ! run "$name" "$opts" >"$work/res" || [ ! -s "$work/res" ]; then
			why=$(grep -E "^(pingpong|usage|mpi-bench)|rror|FAIL" "$work/log" | grep -v '^\[' | head -n 3)
			[ -n "$why" ] || why=$(grep -v '^\[' "$work/log" | grep -v -e '^ *$' -e '^---' | tail -n 3)
			echo "mpi-bench: round $r: $name failed: $(echo "$why" | tr '\n' ' ')" >&2
			failures=$((failures + 1))
			continue
		fi
		while read -r size v; do echo "$r,mpi,lat,$size,$name,$v,us" >>"$raw"; done <"$work/res"
	done
done
echo "mpi-bench: $(($(date +%s) - start)) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg); $failures failed runs"

awk -f "$here/medians.awk" "$raw" | grep -v '^class' | sort -t, -k3,3n -k4,4 >"$csv.tmp"
{ echo "class,test,size,peer,median,unit,runs,fastest_peer,ratio_to_fastest_peer"; cat "$csv.tmp"; } >"$csv"
rm -f "$csv.tmp"

printf "\n%-5s %-4s %8s  %-10s %11s %-4s %-13s %6s\n" class test bytes peer median unit "fastest peer" ratio
tail -n +2 "$csv" | awk -F, '{printf "%-5s %-4s %8s  %-10s %11s %-4s %-13s %6s\n", $1, $2, $3, $4, $5, $6, $8, $9}'
echo "(Open MPI ping-pong, one-way us, medians of $ROUNDS rounds; ratio to the faster of ob1+vader and"
echo " pml ucx: < 1 = rustfab faster)"
echo "mpi-bench: CSV $csv, every run in $raw"
[ "$(wc -l <"$raw")" -gt 1 ]
