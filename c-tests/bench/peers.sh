#!/usr/bin/env bash
# make bench, second part: rustfab next to the fastest peers an HPC user
# compares with, measured with the same programs in one run.
#
#   FABTESTS_PREFIX=/opt/fabtests [LIBFABRIC2_PREFIX=/opt/libfabric-2.6] \
#   [FABTESTS2_PREFIX=/opt/fabtests-2.6] c-tests/bench/peers.sh
#
# Programs: fabtests 1.17's fi_rdm_pingpong (-S 1, 64, 4096: one-way latency,
# usec/xfer, below 1 us 1 / Mxfers/sec) and fi_rdm_tagged_bw -W 64 (-S 4096, 65536, 1048576: MB/s), an
# installed fabtests (nothing of fabtests is in this repository). Server on
# CPU 0, client on CPU 1 (taskset), each run under `timeout`.
# RMA (tests rma_write, rma_read): fi_rma_bw -e rdm -o write|read -W 64
# (-S 4096, 65536, 1048576: MB/s; fabtests' read and write runs are
# bidirectional). Atomics (test atomic_sum, atomic_cswap): fi_rdm_atomic
# -o sum|cswap -z uint64, one 8-byte atomic at a time: thousands of
# operations per second (1000 / usec per operation). Both only for the
# peers that offer them; rustfab's atomic rows say "rustfab does not offer
# FI_ATOMIC" while it does not. PEER_TESTS (default "lat bw rma atomic")
# picks the tests.
#
# Peers (each found or said to be missing):
#   shm class: rustfab shm; libfabric 1.17 (Debian) shm; with
#     LIBFABRIC2_PREFIX, libfabric 2.x shm and sm2 (the same 1.17 fabtests
#     binaries: the 2.x core answers the 1.17 API, so only the provider
#     changes); UCX `ucx_perftest` tag_lat / tag_bw with UCX_TLS=posix,self
#     when installed.
#   tcp class: rustfab tcp; 1.17 tcp;ofi_rxm; with LIBFABRIC2_PREFIX, 2.x
#     tcp;ofi_rxm and, with FABTESTS2_PREFIX too, 2.x's native tcp RDM (the
#     1.17 fabtests binaries fail its fi_av_insert, so its own are used);
#     for RMA and atomics also libfabric 1.17's sockets (bound to 127.0.0.1:
#     its fi_av_insert fails on the wildcard address fabtests gives it); UCX
#     tag_lat / tag_bw with UCX_TLS=tcp,self over lo when installed.
#
# ROUNDS (3) rounds, each running every peer once per test and size in turn
# (interleaved, so a burst of load on the shared machine hits all peers);
# the median of the rounds is reported with its ratio to the fastest peer of
# the class (rustfab excluded from "peer"): latency < 1 and bandwidth > 1
# mean rustfab is ahead. Writes $BENCH_OUT/peers.csv (medians) and
# peers-raw.csv (every run); make bench plots it (c-tests/bench/plot.sh). Exit status 0
# unless nothing could be measured.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ft=${FABTESTS_PREFIX:-}
if [ -z "$ft" ] || [ ! -x "$ft/bin/fi_rdm_pingpong" ] || [ ! -x "$ft/bin/fi_rdm_tagged_bw" ]; then
	echo "peers: NOT RUN. FABTESTS_PREFIX is not set or holds no bin/fi_rdm_pingpong and"
	echo "peers: bin/fi_rdm_tagged_bw; set it to a fabtests 1.17 install (e.g. FABTESTS_PREFIX=/opt/fabtests)"
	echo "peers: to compare rustfab with libfabric's shm and tcp;ofi_rxm (and 2.x, UCX) in this run."
	exit 0
fi
lib=${FI_PROVIDER_PATH:-$root/build}
if [ ! -e "$lib/librustfab-fi.so" ]; then
	echo "peers: no $lib/librustfab-fi.so (make lib builds it)"
	exit 1
fi
ROUNDS=${ROUNDS:-3}
LAT_SIZES=${LAT_SIZES:-1 64 4096}
BW_SIZES=${BW_SIZES:-4096 65536 1048576}
WINDOW=${WINDOW:-64}
LAT_ITERS=${LAT_ITERS:-10000}
RMA_SIZES=${RMA_SIZES:-4096 65536 1048576}
ATOMIC_ITERS=${ATOMIC_ITERS:-2000}
PEER_TESTS=${PEER_TESTS:-lat bw rma atomic}
T=${PEER_TIMEOUT:-60}
out_dir=${BENCH_OUT:-$root/build/bench}
mkdir -p "$out_dir"
raw=$out_dir/peers-raw.csv
csv=$out_dir/peers.csv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bw_iters() { # messages per bandwidth run: ~100-500 MB at the large sizes
	if [ "$1" -ge 1048576 ]; then echo 500; elif [ "$1" -ge 65536 ]; then echo 4000; else echo 20000; fi
}
rma_iters() { # RMA operations per fi_rma_bw run (sockets moves ~40 MB/s here)
	if [ "$1" -ge 1048576 ]; then echo 100; elif [ "$1" -ge 65536 ]; then echo 500; else echo 2000; fi
}
atomic_iters() { # atomics per fi_rdm_atomic run; sockets' progress thread
	# takes ~25 ms per atomic on this loaded 2-core machine: 100 for it
	if [ "$1" = sockets ]; then echo 100; else echo "$ATOMIC_ITERS"; fi
}

# Peers: name|class|kind|provider|environment|fabtests bin directory|tests
# it takes part in|extra fabtests arguments
rf="FI_PROVIDER_PATH=$lib FI_PROVIDER=rustfab"
all="lat bw rma atomic"
peers=(
	"rustfab shm|shm|ft|rustfab|$rf FI_RUSTFAB_TRANSPORT=shm|$ft/bin|$all|"
	"1.17 shm|shm|ft|shm||$ft/bin|$all|"
	"rustfab tcp|tcp|ft|rustfab|$rf FI_RUSTFAB_TRANSPORT=tcp|$ft/bin|$all|"
	"1.17 tcp;ofi_rxm|tcp|ft|tcp;ofi_rxm||$ft/bin|$all|"
	"1.17 sockets|tcp|ft|sockets||$ft/bin|rma atomic|-s 127.0.0.1"
)
l2=${LIBFABRIC2_PREFIX:-}
if [ -n "$l2" ] && [ -e "$l2/lib/libfabric.so.1" ]; then
	v2=$(basename "$(readlink -f "$l2/lib/libfabric.so.1")")
	peers+=("2.x shm|shm|ft|shm|LD_LIBRARY_PATH=$l2/lib|$ft/bin|$all|")
	peers+=("2.x sm2|shm|ft|sm2|LD_LIBRARY_PATH=$l2/lib|$ft/bin|lat bw|")
	peers+=("2.x tcp;ofi_rxm|tcp|ft|tcp;ofi_rxm|LD_LIBRARY_PATH=$l2/lib|$ft/bin|$all|")
	ft2=${FABTESTS2_PREFIX:-}
	if [ -n "$ft2" ] && [ -x "$ft2/bin/fi_rdm_pingpong" ]; then
		peers+=("2.x tcp|tcp|ft|tcp|LD_LIBRARY_PATH=$l2/lib|$ft2/bin|$all|")
	else
		echo "peers: libfabric 2.x native tcp RDM left out: set FABTESTS2_PREFIX to a fabtests 2.x install (the 1.17 binaries fail its fi_av_insert)"
	fi
	echo "peers: libfabric 2.x from $l2 ($v2)"
else
	echo "peers: libfabric 2.x left out (set LIBFABRIC2_PREFIX to its install prefix, e.g. /opt/libfabric-2.6)"
fi
if command -v ucx_perftest >/dev/null 2>&1; then
	peers+=("UCX posix|shm|ucx|posix,self|||lat bw|")
	# UCX's tcp over loopback needs the device named (it leaves lo out).
	peers+=("UCX tcp|tcp|ucx|tcp,self|UCX_NET_DEVICES=lo||lat bw|")
else
	echo "peers: UCX left out (no ucx_perftest; Debian: ucx-utils)"
fi

port=$((20000 + $$ % 20000))
next_port() { port=$((port + 3)); [ $port -lt 60000 ] || port=20000; }

# run_ft env provider bindir program args... -> prints the figure or nothing
# (the peer's extra arguments, $extra, go first)
run_ft() {
	local envs=$1 prov=$2 bin=$3 prog=$4; shift 4
	next_port
	# shellcheck disable=SC2086
	env -u FI_PROVIDER -u FI_PROVIDER_PATH $envs timeout -k 5 "$T" taskset -c 0 \
		"$bin/$prog" $extra -E$((port + 2)) -B $port -p "$prov" "$@" >"$work/srv" 2>&1 &
	local spid=$!
	sleep 0.3
	# shellcheck disable=SC2086
	env -u FI_PROVIDER -u FI_PROVIDER_PATH $envs timeout -k 5 "$T" taskset -c 1 \
		"$bin/$prog" $extra -E$((port + 2)) -P $port -B $((port + 1)) -p "$prov" "$@" 127.0.0.1 >"$work/cli" 2>&1
	local rc=$?
	wait $spid
	local src=$?
	[ $rc -eq 0 ] && [ $src -eq 0 ] || return 1
	# bytes iters total time MB/sec usec/xfer Mxfers/sec (fi_rdm_atomic: the
	# operation's name first; its figure: thousands of operations per second).
	# Latency below 1 us from Mxfers/sec (its inverse: three significant
	# digits where usec/xfer's two decimals give one or two, 0.15 or 0.16).
	case $prog in
		fi_rdm_pingpong) awk '$1 != "bytes" && NF == 7 {v = ($6 < 1 && $7 > 0) ? sprintf("%.4f", 1 / $7) : $6} END {if (v != "") print v}' "$work/cli" ;;
		fi_rdm_atomic) awk '$1 != "name" && NF == 8 && $7 > 0 {v = 1000 / $7} END {if (v != "") printf "%.2f\n", v}' "$work/cli" ;;
		*) awk '$1 != "bytes" && NF == 7 {v = $5} END {if (v != "") print v}' "$work/cli" ;;
	esac
}

# Whether a peer's provider answers fi_getinfo for caps (fi_info, with the
# peer's environment): rustfab's atomic rows are "not offered" until it does.
offers() {
	local envs=$1 prov=$2 caps=$3
	# shellcheck disable=SC2086
	env -u FI_PROVIDER -u FI_PROVIDER_PATH $envs fi_info -p "$prov" -t FI_EP_RDM -c "$caps" >/dev/null 2>&1
}

# run_ucx tls envs tag_lat|tag_bw size iters -> one-way latency (us) or MB/s (10^6)
run_ucx() {
	local tls=$1 envs=$2 t=$3 size=$4 n=$5
	next_port
	# shellcheck disable=SC2086
	env UCX_TLS="$tls" $envs timeout -k 5 "$T" taskset -c 0 ucx_perftest -p $port >"$work/srv" 2>&1 &
	local spid=$!
	sleep 0.3
	# shellcheck disable=SC2086
	env UCX_TLS="$tls" $envs timeout -k 5 "$T" taskset -c 1 ucx_perftest 127.0.0.1 -p $port -t "$t" -s "$size" -n "$n" \
		>"$work/cli" 2>&1
	local rc=$?
	wait $spid
	[ $rc -eq 0 ] || return 1
	# Final: iters p50 avg-lat overall-lat avg-bw overall-bw avg-rate overall-rate
	# (ucx_perftest's MB are 2^20 bytes: converted to fabtests' 10^6)
	if [ "$t" = tag_lat ]; then
		awk '$1 == "Final:" {print $5}' "$work/cli"
	else
		awk '$1 == "Final:" {printf "%.2f\n", $7 * 1.048576}' "$work/cli"
	fi
}

echo "round,class,test,size,peer,value,unit" >"$raw"
failures=0
notes=()
# Peers whose provider does not offer a test's capability: said once, not run.
declare -A skip=()
for p in "${peers[@]}"; do
	IFS='|' read -r name class kind prov envs bin tests extra <<<"$p"
	[ "$kind" = ft ] || continue
	case " $tests " in *" rma "*) offers "$envs" "$prov" FI_RMA || skip["$name|rma"]="$prov does not offer FI_RMA" ;; esac
	case " $tests " in *" atomic "*) offers "$envs" "$prov" FI_ATOMIC || skip["$name|atomic"]="$prov does not offer FI_ATOMIC" ;; esac
done
for k in "${!skip[@]}"; do
	notes+=("${k%|*} ${k#*|}: ${skip[$k]}")
done
start=$(date +%s)
echo "peers: $ROUNDS interleaved rounds of: $PEER_TESTS; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	for test in $PEER_TESTS; do
		case $test in
			lat) runs=$(for s in $LAT_SIZES; do echo "lat:$s"; done); unit=us ;;
			bw) runs=$(for s in $BW_SIZES; do echo "bw:$s"; done); unit=MB/s ;;
			rma) runs=$(for o in write read; do for s in $RMA_SIZES; do echo "rma_$o:$s"; done; done); unit=MB/s ;;
			atomic) runs="atomic_sum:8 atomic_cswap:8"; unit=kops/s ;;
			*) echo "peers: unknown test $test (PEER_TESTS: lat bw rma atomic)" >&2; exit 1 ;;
		esac
		for run in $runs; do
			row=${run%:*} size=${run#*:}
			for p in "${peers[@]}"; do
				IFS='|' read -r name class kind prov envs bin tests extra <<<"$p"
				case " $tests " in *" $test "*) ;; *) continue ;; esac
				[ -z "${skip["$name|$test"]:-}" ] || continue
				case $kind-$row in
					ucx-lat) v=$(run_ucx "$prov" "$envs" tag_lat "$size" "$LAT_ITERS") ;;
					ucx-bw) v=$(run_ucx "$prov" "$envs" tag_bw "$size" "$(bw_iters "$size")") ;;
					ft-lat) v=$(run_ft "$envs" "$prov" "$bin" fi_rdm_pingpong -S "$size" -I "$LAT_ITERS") ;;
					ft-bw) v=$(run_ft "$envs" "$prov" "$bin" fi_rdm_tagged_bw -W "$WINDOW" -S "$size" -I "$(bw_iters "$size")") ;;
					ft-rma_*) v=$(run_ft "$envs" "$prov" "$bin" fi_rma_bw -e rdm -o "${row#rma_}" -W "$WINDOW" -S "$size" \
						-I "$(rma_iters "$size")") ;;
					ft-atomic_*) v=$(run_ft "$envs" "$prov" "$bin" fi_rdm_atomic -o "${row#atomic_}" -z uint64 -I "$(atomic_iters "$prov")") ;;
				esac
				if [ -z "$v" ]; then
					echo "peers: round $r: $name $row $size failed: $(tail -n 2 "$work/cli" | tr '\n' ' ')" >&2
					failures=$((failures + 1))
					continue
				fi
				echo "$r,$class,$row,$size,$name,$v,$unit" >>"$raw"
			done
		done
	done
done
echo "peers: $(($(date +%s) - start)) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg); $failures failed runs"

# Medians, and the ratio of each to the fastest peer of its class
# (medians.awk: rustfab rows are never "the fastest peer").
awk -f "$here/medians.awk" "$raw" | sort -t, -k1,1 -k2,2r -k3,3n -k4,4 >"$csv.tmp"
{ head -n 1 "$csv.tmp" | grep '^class' ; grep -v '^class' "$csv.tmp"; } >"$csv"
rm -f "$csv.tmp"

printf "\n%-5s %-12s %8s  %-17s %11s %-6s %-17s %6s\n" class test bytes peer median unit "fastest peer" ratio
tail -n +2 "$csv" | awk -F, '{printf "%-5s %-12s %8s  %-17s %11s %-6s %-17s %6s\n", $1, $2, $3, $4, $5, $6, $8, $9}'
for n in "${notes[@]}"; do echo "not measured: $n"; done
echo "(lat: one-way us, ratio < 1 = faster than the fastest peer; bw, rma_*: MB/s, atomic_*: thousands of"
echo " 8-byte atomics per second, one at a time; ratio > 1 = more)"
echo "peers: CSV $csv, every run in $raw"

[ "$(wc -l <"$raw")" -gt 1 ]
