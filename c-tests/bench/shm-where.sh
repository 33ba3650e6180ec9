#!/usr/bin/env bash
# Where the time goes on one host: counts per message that do not depend on
# the machine's load — system calls (all, and by name: the CMA copies
# process_vm_readv / process_vm_writev, sched_yield, the doorbell's sendto),
# context switches and page faults — on each side of fabtests'
# fi_rdm_pingpong and fi_rdm_tagged_bw -W 64, for rustfab shm next to
# libfabric 1.17's shm and, with LIBFABRIC2_PREFIX, 2.x's shm and sm2 (the
# same 1.17 fabtests binaries, as c-tests/bench/peers.sh runs them).
#
# Each side runs under `perf stat` (software events and syscall tracepoints
# only: they count the same on a busy machine), server on CPU 0, client on
# CPU 1. Every (peer, test, size) runs twice, with LO and HI iterations; the
# difference divided by the difference in messages removes start-up (the
# out-of-band connection, fi_getinfo, first contact) and tear-down.
# Ping-pong counts are per round trip (one message each way), bandwidth
# counts per message (fabtests' bandwidth test also sends one
# acknowledgement per window of 64, which the per-message figure includes).
#
# cpu_us is the side's CPU time (task-clock) per round trip or message:
# unlike the other counts it grows with the load (a side that spins uses its
# whole CPU); only ratios between peers measured in the same run mean
# anything. sched_yield and context switches also depend on the load where a
# provider yields while it waits (rustfab's CQ idle rule, docs/performance.md):
# read them next to the load average printed at the start and end.
#
# Output: $BENCH_OUT/shm-where.csv (peer,test,size,side,event,per_msg) and a
# table on stdout. Needs perf with tracepoints (root, or
# kernel.perf_event_paranoid <= -1) and a fabtests 1.17 install. Not part of
# make test.
#
#   FABTESTS_PREFIX=/opt/fabtests [LIBFABRIC2_PREFIX=/opt/libfabric-2.6] \
#   [FI_PROVIDER_PATH=<dir of librustfab-fi.so>] c-tests/bench/shm-where.sh
#   WHERE_SIZES="4096 65536 1048576"  WHERE_TESTS="lat bw"
#   WHERE_PEERS="rustfab 1.17 2.x sm2"  WHERE_RUSTFAB_ENV="FI_RUSTFAB_SHM_STREAM_LONE_MAX=0"
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ft=${FABTESTS_PREFIX:-}
if [ -z "$ft" ] || [ ! -x "$ft/bin/fi_rdm_pingpong" ]; then
	echo "shm-where: NOT RUN: set FABTESTS_PREFIX to a fabtests 1.17 install (e.g. /opt/fabtests)"
	exit 1
fi
command -v perf >/dev/null || { echo "shm-where: NOT RUN: perf not found"; exit 1; }
if ! perf stat -e syscalls:sys_enter_sched_yield -x, -o /dev/null true 2>/dev/null; then
	echo "shm-where: NOT RUN: perf cannot count syscall tracepoints here (root, or kernel.perf_event_paranoid=-1)"
	exit 1
fi
lib=${FI_PROVIDER_PATH:-$root/build}
[ -e "$lib/librustfab-fi.so" ] || { echo "shm-where: no $lib/librustfab-fi.so (make lib builds it)"; exit 1; }
SIZES=${WHERE_SIZES:-4096 65536 1048576}
TESTS=${WHERE_TESTS:-lat bw}
PEERS=${WHERE_PEERS:-rustfab 1.17 2.x sm2}
T=${WHERE_TIMEOUT:-120}
out_dir=${BENCH_OUT:-$root/build/bench}
mkdir -p "$out_dir"
csv=$out_dir/shm-where.csv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

l2=${LIBFABRIC2_PREFIX:-}
# name|provider|environment
declare -A peer_def=(
	[rustfab]="rustfab|FI_PROVIDER_PATH=$lib FI_RUSTFAB_TRANSPORT=shm ${WHERE_RUSTFAB_ENV:-}"
	[1.17]="shm|"
)
if [ -n "$l2" ] && [ -e "$l2/lib/libfabric.so.1" ]; then
	peer_def[2.x]="shm|LD_LIBRARY_PATH=$l2/lib"
	peer_def[sm2]="sm2|LD_LIBRARY_PATH=$l2/lib"
fi

calls="sched_yield process_vm_readv process_vm_writev sendto recvfrom sendmsg recvmsg epoll_pwait epoll_wait futex madvise"
events="raw_syscalls:sys_enter,context-switches,page-faults,task-clock"
for c in $calls; do events="$events,syscalls:sys_enter_$c"; done

# Iterations: (lo hi) per test and size; ping-pong iterations are round
# trips, bandwidth iterations messages.
iters() {
	local t=$1 s=$2
	if [ "$t" = lat ]; then
		if [ "$s" -ge 1048576 ]; then echo "200 600"; elif [ "$s" -ge 65536 ]; then echo "1000 3000"; else echo "5000 15000"; fi
	else
		if [ "$s" -ge 1048576 ]; then echo "200 600"; elif [ "$s" -ge 65536 ]; then echo "1000 3000"; else echo "5000 15000"; fi
	fi
}

port=$((43000 + $$ % 1000 * 7))
# run prov envs prog size iters tag -> $work/<tag>.{srv,cli} perf outputs
run() {
	local prov=$1 envs=$2 prog=$3 size=$4 n=$5 tag=$6 extra=""
	[ "$prog" = fi_rdm_tagged_bw ] && extra="-W 64"
	port=$((port + 3))
	# shellcheck disable=SC2086
	env -u FI_PROVIDER -u FI_PROVIDER_PATH $envs timeout -k 5 "$T" taskset -c 0 \
		perf stat -x, -e "$events" -o "$work/$tag.srv" \
		"$ft/bin/$prog" $extra -E$((port + 2)) -B $port -p "$prov" -S "$size" -I "$n" >"$work/$tag.srvlog" 2>&1 &
	local spid=$!
	sleep 0.3
	# shellcheck disable=SC2086
	env -u FI_PROVIDER -u FI_PROVIDER_PATH $envs timeout -k 5 "$T" taskset -c 1 \
		perf stat -x, -e "$events" -o "$work/$tag.cli" \
		"$ft/bin/$prog" $extra -E$((port + 2)) -P $port -B $((port + 1)) -p "$prov" -S "$size" -I "$n" 127.0.0.1 \
		>"$work/$tag.clilog" 2>&1
	local rc=$?
	wait $spid
	local src=$?
	[ $rc -eq 0 ] && [ $src -eq 0 ]
}
# counts file -> "event value" lines (task-clock in ms)
counts() {
	awk -F, 'NF > 2 && $1 ~ /^[0-9.]+$/ { e = $3; sub(".*sys_enter_", "", e); sub("raw_syscalls:sys_enter", "syscalls", e); print e, $1 }' "$1"
}

echo "peer,test,size,side,event,per_msg" >"$csv"
echo "shm-where: load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
for t in $TESTS; do
	case $t in lat) prog=fi_rdm_pingpong ;; bw) prog=fi_rdm_tagged_bw ;; *) echo "shm-where: unknown test $t (lat bw)"; exit 1 ;; esac
	for s in $SIZES; do
		read -r lo hi < <(iters "$t" "$s")
		for p in $PEERS; do
			def=${peer_def[$p]:-}
			[ -n "$def" ] || { echo "shm-where: peer $p left out (LIBFABRIC2_PREFIX unset?)"; continue; }
			IFS='|' read -r prov envs <<<"$def"
			if ! run "$prov" "$envs" "$prog" "$s" "$lo" lo || ! run "$prov" "$envs" "$prog" "$s" "$hi" hi; then
				echo "shm-where: $p $t $s failed: $(tail -n 1 "$work/lo.clilog" "$work/hi.clilog" 2>/dev/null | tr '\n' ' ')"
				failed=$((failed + 1))
				continue
			fi
			for side in srv cli; do
				join <(counts "$work/lo.$side" | sort) <(counts "$work/hi.$side" | sort) |
					awk -v p="$p" -v t="$t" -v s="$s" -v side="$side" -v d=$((hi - lo)) '{
						v = ($3 - $2) / d
						if ($1 == "task-clock") { $1 = "cpu_us"; v *= 1000 }
						printf "%s,%s,%s,%s,%s,%.3f\n", p, t, s, side, $1, v }' >>"$csv"
			done
		done
	done
done
echo "shm-where: load average at end: $(cut -d' ' -f1-3 /proc/loadavg); $failed failed"
# Table: one row per peer/test/size/side, the counts that matter.
cols="syscalls process_vm_readv process_vm_writev sched_yield sendto context-switches page-faults cpu_us"
printf "%-8s %-4s %8s %-4s" peer test bytes side
for c in $cols; do printf " %10s" "${c/process_vm_/vm_}"; done
echo
awk -F, -v cols="$cols" 'NR > 1 { k = $1 "|" $2 "|" $3 "|" $4; if (!(k in seen)) { seen[k] = 1; order[++n] = k } v[k "|" $5] = $6 }
	END { m = split(cols, c, " ")
		for (i = 1; i <= n; i++) { split(order[i], f, "|"); printf "%-8s %-4s %8s %-4s", f[1], f[2], f[3], f[4]
			for (j = 1; j <= m; j++) { x = v[order[i] "|" c[j]]; printf " %10s", (x == "" ? "-" : x) }
			printf "\n" } }' "$csv"
echo "(per round trip for lat, per message for bw; srv = the side on CPU 0, the receiver in bw)"
echo "shm-where: CSV $csv"
