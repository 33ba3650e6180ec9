#!/usr/bin/env bash
# make bench-hosts: Open MPI between two hosts, as users run a job across
# nodes: rustfab (pml cm + mtl ofi, auto: TCP between the hosts) next to
# pml ucx over TCP, ob1 + btl tcp, and cm + mtl ofi over libfabric's
# tcp;ofi_rxm. Each host is a network namespace; the two are joined by a veth
# pair (rf0, 10.127.0.1 and .2/24) this script makes and removes; mpirun
# runs in host 1 and starts host 2's orted through c-tests/mpi-hosts/agent.sh
# (a mount and UTS namespace per host, as make mpi-hosts does). One rank per
# host, --bind-to none.
#
# Program: c-tests/mpi-hosts/pingpong.c, sizes HOSTS_SIZES (1 B ... 4 MiB):
# ping-pong (one-way time, "lat") and streaming bandwidth with HOSTS_WINDOW
# (64) messages in flight ("bw"). Links: the veth as it is ("veth"), and
# shaped to HOSTS_RATE (2gbit, a real NIC's rate) with tc tbf on both ends
# ("tbf-2gbit"; HOSTS_RATE= leaves it out). ROUNDS (3) interleaved rounds;
# medians with their ratio to the fastest peer in $BENCH_OUT/hosts.csv (the
# columns of peers.csv; class = the link) and every run in hosts-raw.csv.
#
# MPICH 5 (the wheel make mpi5 installs into BUILD/venv/mpich5, or
# HOSTS_MPICH=<its prefix>), ch4:ofi, launched by hydra through
# c-tests/mpi-hosts/hydra-agent.sh: over rustfab ("MPICH rustfab") and over
# the libfabric inside the wheel, tcp;ofi_rxm ("MPICH tcp;ofi_rxm") and its
# native tcp ("MPICH tcp"); the same pingpong.c built with its mpicc.
#
# Needs root (network namespaces), iproute2, tc, Open MPI; pml ucx only when
# this Open MPI has it (ompi_info); MPICH only when its wheel is there. Not
# part of make test.
#
#   c-tests/bench/hosts.sh [build dir]   (FI_PROVIDER_PATH must be set)
set -u
build=${1:-build}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
agent=$root/c-tests/mpi-hosts/agent.sh
exe=$build/mpi-hosts/pingpong
ROUNDS=${ROUNDS:-3}
SIZES=${HOSTS_SIZES:-1 64 4096 65536 1048576 4194304}
WINDOW=${HOSTS_WINDOW:-64}
RATE=${HOSTS_RATE-2gbit}
T=${HOSTS_TIMEOUT:-300}
out_dir=${BENCH_OUT:-$root/build/bench}
mkdir -p "$out_dir"
raw=$out_dir/hosts-raw.csv csv=$out_dir/hosts.csv
pfx=rfb$$
# shellcheck source=c-tests/bench/hosts-net.sh
. "$here/hosts-net.sh"

[ "$(id -u)" = 0 ] || { echo "bench-hosts: NOT RUN: needs root (network namespaces)"; exit 1; }
command -v mpirun >/dev/null || { echo "bench-hosts: NOT RUN: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"; exit 1; }
[ -x "$exe" ] || { echo "bench-hosts: $exe not built (make $exe)"; exit 1; }

hosts_up || exit 1

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Peers: name|environment|mpirun options (word-split)
peers=(
	"rustfab|FI_PROVIDER=rustfab FI_RUSTFAB_TRANSPORT=auto FI_RUSTFAB_IFACE=rf0|-x FI_PROVIDER_PATH -x FI_PROVIDER -x FI_RUSTFAB_TRANSPORT -x FI_RUSTFAB_IFACE --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include rustfab --mca mtl_ofi_verbose 1 --mca btl self"
	"ob1+tcp||--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include rf0"
	"tcp;ofi_rxm|FI_PROVIDER=tcp,ofi_rxm FI_TCP_IFACE=rf0|-x FI_PROVIDER -x FI_TCP_IFACE --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp;ofi_rxm --mca btl self"
)
if ompi_info 2>/dev/null | grep -q "MCA pml: ucx "; then
	peers+=("pml ucx|UCX_TLS=tcp,self UCX_NET_DEVICES=rf0|-x UCX_TLS -x UCX_NET_DEVICES --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any")
else
	echo "bench-hosts: pml ucx left out: this Open MPI has no ucx pml (ompi_info lists no 'MCA pml: ucx')"
fi
mpich=${HOSTS_MPICH:-$build/venv/mpich5}
if [ -x "$mpich/bin/mpicc" ] && [ -x "$mpich/bin/mpiexec" ]; then
	"$mpich/bin/mpicc" -O2 -o "$work/pingpong_mpich" "$root/c-tests/mpi-hosts/pingpong.c" 2>"$work/mpicc.log" || {
		echo "bench-hosts: MPICH left out: its mpicc failed ($(head -n 1 "$work/mpicc.log"))"; mpich=; }
else
	echo "bench-hosts: MPICH left out: no wheel at $mpich (make mpi5 installs it; or HOSTS_MPICH=<prefix>)"
	mpich=
fi
if [ -n "$mpich" ]; then
	peers+=("MPICH rustfab|FI_PROVIDER=rustfab FI_RUSTFAB_TRANSPORT=auto FI_RUSTFAB_IFACE=rf0|")
	peers+=("MPICH tcp;ofi_rxm|FI_PROVIDER=tcp;ofi_rxm FI_TCP_IFACE=rf0|")
	peers+=("MPICH tcp|FI_PROVIDER=tcp FI_TCP_IFACE=rf0|")
fi
links=(veth)
[ -z "$RATE" ] || links+=("tbf-$RATE")

shape() { # rate or empty: tbf on both ends of the link, or none
	for h in "$h1" "$h2"; do
		ip netns exec "$h" tc qdisc del dev rf0 root 2>/dev/null
		[ -z "$1" ] || ip netns exec "$h" tc qdisc add dev rf0 root tbf rate "$1" burst 256kb latency 50ms || return 1
	done
}

sizes_arg=$(echo "$SIZES" | tr ' ' ',')
run() { # name env opts -> "lat SIZE V" and "bw SIZE V" lines
	local name=$1 envs=$2 opts=$3 args
	args=(-s "$sizes_arg" -n "${HOSTS_ITERS:-2000}" -N "${HOSTS_ITERS_BIG:-100}" -w "$WINDOW")
	case $name in
	MPICH*)
		# shellcheck disable=SC2086
		env $envs MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_DEBUG_SUMMARY=1 FI_PROVIDER_PATH="$FI_PROVIDER_PATH" \
			timeout -k 10 "$T" ip netns exec "$h1" "$mpich/bin/mpiexec" \
			-launcher ssh -launcher-exec "$root/c-tests/mpi-hosts/hydra-agent.sh" \
			-hosts "$h1,$h2" -n 2 -ppn 1 -iface rf0 \
			-genvlist "MPIR_CVAR_CH4_NETMOD,FI_PROVIDER_PATH,FI_PROVIDER,FI_RUSTFAB_TRANSPORT,FI_RUSTFAB_IFACE,FI_TCP_IFACE" \
			"$work/pingpong_mpich" "${args[@]}" >"$work/log" 2>&1 || return 1
		# the summary (rank 0) names the provider MPICH chose
		if ! grep -q "^libfabric provider: ${name#MPICH } " "$work/log"; then
			echo "bench-hosts: MPICH did not report 'libfabric provider: ${name#MPICH }'" >>"$work/log"
			return 1
		fi
		;;
	*)
		# shellcheck disable=SC2086
		env $envs timeout -k 10 "$T" ip netns exec "$h1" mpirun --hostfile "$work/hosts" -np 2 \
			--mca plm_rsh_agent "$agent" --mca oob_tcp_if_include rf0 --bind-to none $opts \
			"$exe" "${args[@]}" >"$work/log" 2>&1 || return 1
		;;
	esac
	grep -q "pingpong: data FAIL" "$work/log" && return 1
	if [ "$name" = rustfab ] && [ "$(grep -c "mtl:ofi:prov: rustfab" "$work/log")" -lt 2 ]; then
		echo "bench-hosts: not every rank reports mtl:ofi:prov: rustfab" >>"$work/log"
		return 1
	fi
	awk '$1 == "pingpong" && $3 == "B:" {print "lat", $2, $4} $1 == "stream" && $3 == "B:" {print "bw", $2, $4}' "$work/log"
}

echo "round,class,test,size,peer,value,unit" >"$raw"
failures=0 start=$(date +%s)
echo "bench-hosts: ${#peers[@]} peers x links ${links[*]}, $ROUNDS rounds, sizes $SIZES; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for link in "${links[@]}"; do
	rate=; [ "$link" = veth ] || rate=${link#tbf-}
	shape "$rate" || { echo "bench-hosts: tc tbf failed: $link left out"; continue; }
	for r in $(seq "$ROUNDS"); do
		for p in "${peers[@]}"; do
			IFS='|' read -r name envs opts <<<"$p"
			if ! run "$name" "$envs" "$opts" >"$work/res" || [ ! -s "$work/res" ]; then
				echo "bench-hosts: $link round $r: $name failed: $(grep -E "rror|FAIL|bench-hosts" "$work/log" | grep -v '^\[' | head -n 3 | tr '\n' ' ')" >&2
				failures=$((failures + 1))
				continue
			fi
			while read -r t size v; do
				echo "$r,$link,$t,$size,$name,$v,$([ "$t" = lat ] && echo us || echo MB/s)" >>"$raw"
			done <"$work/res"
		done
	done
done
shape ""
echo "bench-hosts: $(($(date +%s) - start)) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg); $failures failed runs"
awk -f "$here/medians.awk" "$raw" | grep -v '^class' | sort -t, -k1,1r -k2,2r -k3,3n -k4,4 >"$csv.tmp"
{ echo "class,test,size,peer,median,unit,runs,fastest_peer,ratio_to_fastest_peer"; cat "$csv.tmp"; } >"$csv"
rm -f "$csv.tmp"
echo
echo "(lat: one-way us, ratio < 1 = rustfab faster than the fastest peer; bw: MB/s, ratio > 1 = more)"
tail -n +2 "$csv" | awk -F, '{printf "%-12s %-4s %8s  %-12s %11s %-5s %-12s %6s\n", $1, $2, $3, $4, $5, $6, $8, $9}'
echo "bench-hosts: CSV $csv, every run in $raw"
[ "$(wc -l <"$raw")" -gt 1 ]
