#!/usr/bin/env bash
# Where the time goes between hosts: counts per ping-pong round trip that do
# not depend on the machine's load — system calls (by name), context
# switches, TCP segments and bytes on the link — on each side, for Open MPI
# ping-pong between two network namespaces joined by a veth pair (the set-up
# of c-tests/bench/hosts.sh: rf0, 10.127.0.1 and .2/24, one rank per host,
# mpirun in host 1 starting host 2's orted through c-tests/mpi-hosts/agent.sh).
# Peers: rustfab (pml cm + mtl ofi, auto transport: tcp between the hosts),
# ob1 + btl tcp, pml ucx (UCX_TLS=tcp,self).
#
# Each rank runs under `perf stat` (software events and syscall tracepoints
# only: they count the same on a busy machine). Every (peer, size) runs twice,
# with ITERS_LO and ITERS_HI round trips; the difference divided by the
# difference in round trips removes MPI_Init, the warm-up and MPI_Finalize.
# The TCP segment and byte counts are the namespaces' /proc/net/snmp and
# rf0's link statistics, read before and after each run (the launcher's
# own TCP traffic is in both runs and cancels the same way).
#
# cpu_us is the rank's CPU time (task-clock) per round trip: unlike the other
# counts it grows with the load (and with a hypervisor's steal time); only
# ratios between peers measured in the same run mean anything.
#
# Output: $BENCH_OUT/hosts-where.csv (peer,size,rank,event,per_rt) and a
# table on stdout. Needs root, perf with tracepoints, Open MPI (with the
# ucx pml for that row). Not part of make test.
#
#   FI_PROVIDER_PATH=<dir of librustfab-fi.so> c-tests/bench/hosts-where.sh [build dir]
#   WHERE_SIZES="1 4096 65536 1048576"  WHERE_PEERS="rustfab ob1 ucx"  WHERE_NICE=-20
set -u
build=${1:-build}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
agent=$root/c-tests/mpi-hosts/agent.sh
exe=$(cd "$build" && pwd)/mpi-hosts/pingpong
SIZES=${WHERE_SIZES:-1 4096 65536 1048576}
PEERS=${WHERE_PEERS:-rustfab ob1 ucx}
T=${WHERE_TIMEOUT:-120}
out_dir=${BENCH_OUT:-$root/build/bench}
mkdir -p "$out_dir"
csv=$out_dir/hosts-where.csv
pfx=rfw$$
# shellcheck source=c-tests/bench/hosts-net.sh
. "$here/hosts-net.sh"

[ "$(id -u)" = 0 ] || { echo "hosts-where: NOT RUN: needs root (network namespaces)"; exit 1; }
[ -x "$exe" ] || { echo "hosts-where: $exe not built (make $build/mpi-hosts/pingpong)"; exit 1; }
command -v perf >/dev/null || { echo "hosts-where: NOT RUN: perf not found"; exit 1; }

hosts_up || exit 1

# System calls a ping-pong may make (their total, all calls, is "syscalls").
calls="sendmsg recvmsg sendto recvfrom read write readv writev sched_yield epoll_wait epoll_pwait poll ppoll futex nanosleep clock_nanosleep"
events="raw_syscalls:sys_enter,context-switches,task-clock"
for c in $calls; do events="$events,syscalls:sys_enter_$c"; done
# Reads that found nothing (EAGAIN): a polling transport's empty polls,
# as "<call>_eagain".
again=
for c in readv recvmsg recvfrom read; do again="$again -e syscalls:sys_exit_$c --filter 'ret == -11'"; done
# The rank's wrapper: perf stat into a file named after the rank (under
# nice -n WHERE_NICE when set: on a machine others load, e.g. -20 keeps the
# ranks' round trips near a quiet machine's while a yield still hands the
# core to whatever else is runnable).
nice=
[ -z "${WHERE_NICE:-}" ] || nice="nice -n $WHERE_NICE"
cat >"$work/wrap.sh" <<EOF
#!/bin/sh
exec $nice perf stat -x, -o "$work/perf.\$OMPI_COMM_WORLD_RANK" -e '$events' $again -- "\$@"
EOF
chmod +x "$work/wrap.sh"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
opts_of() {
	case $1 in
	rustfab) echo "-x FI_PROVIDER_PATH -x FI_PROVIDER=rustfab -x FI_RUSTFAB_TRANSPORT=auto -x FI_RUSTFAB_IFACE=rf0 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include rustfab --mca btl self" ;;
	ob1) echo "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include rf0" ;;
	ucx) echo "-x UCX_TLS=tcp,self -x UCX_NET_DEVICES=rf0 --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any" ;;
	esac
}
net() { # namespace -> "outsegs insegs retrans txbytes rxbytes txpackets"
	ip netns exec "$1" awk '/^Tcp:/ {n++; if (n == 2) print $12, $11, $13}' /proc/net/snmp | tr '\n' ' '
	ip netns exec "$1" cat /sys/class/net/rf0/statistics/tx_bytes /sys/class/net/rf0/statistics/rx_bytes \
		/sys/class/net/rf0/statistics/tx_packets | tr '\n' ' '
}
# run peer size iters -> $work/res.<iters>: "rank event count" lines
run() {
	local peer=$1 size=$2 n=$3 a b
	rm -f "$work"/perf.*
	a="$(net "$h1")$(net "$h2")"
	# shellcheck disable=SC2046
	timeout -k 10 "$T" ip netns exec "$h1" mpirun --hostfile "$work/hosts" -np 2 \
		--mca plm_rsh_agent "$agent" --mca oob_tcp_if_include rf0 --bind-to none $(opts_of "$peer") \
		"$work/wrap.sh" "$exe" -s "$size" -n "$n" -N "$n" >"$work/log" 2>&1 || { cat "$work/log" >&2; return 1; }
	b="$(net "$h1")$(net "$h2")"
	grep -q "pingpong: data FAIL" "$work/log" && return 1
	grep "^pingpong" "$work/log" >&2
	{
		for r in 0 1; do
			awk -F, -v r="$r" '$3 != "" && $1 ~ /^[0-9]/ {e = $3; sub(/^syscalls:sys_enter_/, "", e); if (sub(/^syscalls:sys_exit_/, "", e)) e = e "_eagain"; sub(/^raw_syscalls:sys_enter/, "syscalls", e); v = $1; if (e == "task-clock") { e = "cpu_us"; v = $1 * 1000 } print r, e, v}' "$work/perf.$r"
		done
		# shellcheck disable=SC2086
		set -- $a
		local x=("$@")
		# shellcheck disable=SC2086
		set -- $b
		local y=("$@") names=(tcp_segs_out tcp_segs_in tcp_retrans link_tx_bytes link_rx_bytes link_tx_packets) i
		for i in 0 1 2 3 4 5; do
			echo 0 "${names[$i]}" $((y[i] - x[i]))
			echo 1 "${names[$i]}" $((y[i + 6] - x[i + 6]))
		done
	} >"$work/res.$n"
}
lo_hi() { # size -> "lo hi" round trips
	if [ "$1" -ge 1048576 ]; then echo "${ITERS_BIG_LO:-50} ${ITERS_BIG_HI:-250}"
	elif [ "$1" -ge 65536 ]; then echo "${ITERS_MID_LO:-200} ${ITERS_MID_HI:-1200}"
	else echo "${ITERS_LO:-1000} ${ITERS_HI:-6000}"; fi
}

echo "peer,size,rank,event,per_rt" >"$csv"
echo "hosts-where: peers $PEERS, sizes $SIZES; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for size in $SIZES; do
	for peer in $PEERS; do
		read -r lo hi <<<"$(lo_hi "$size")"
		if ! run "$peer" "$size" "$lo" || ! run "$peer" "$size" "$hi"; then
			echo "hosts-where: $peer $size B failed" >&2
			continue
		fi
		# per round trip: (hi - lo) / (hi - lo round trips); counts of rank r
		awk -v peer="$peer" -v size="$size" -v d=$((hi - lo)) '
			FNR == NR {lo[$1 " " $2] = $3; next}
			{k = $1 " " $2; printf "%s,%s,%s,%s,%.2f\n", peer, size, $1, $2, ($3 - lo[k]) / d}
		' "$work/res.$lo" "$work/res.$hi" | tee -a "$csv" | awk -F, '$5 != "0.00"'
	done
done
echo "hosts-where: per round trip counts in $csv"
