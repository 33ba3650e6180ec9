#!/usr/bin/env bash
# "Many hosts": Open MPI over rustfab's auto transport across network
# namespaces that stand in for hosts. Each host is a network namespace
# (veth "rf0", 10.125.0.H/24) plus, per launch, a mount and UTS namespace of
# its own (agent.sh: hostname = the namespace's name, a private /dev/shm),
# so the ranks of one host share rustfab's auto host id and ranks on
# different hosts do not. A "head" namespace holds the bridge joining them
# (10.125.0.254) and runs mpirun, which starts one orted per host through
# agent.sh (--mca plm_rsh_agent), as it would through ssh on a cluster.
#
# Runs (timings are printed, never asserted):
#   1. mpi_test (c-tests/mpi) on 2 hosts x 2 ranks and 4 hosts x 1 rank:
#      every check passes, every rank used rustfab, and rustfab's own log
#      (FI_LOG_LEVEL=info: "auto: first send to PEER over shm|tcp") shows
#      each rank reached its own host's ranks over shm and the other hosts'
#      ranks over TCP, at their veth addresses;
#   2. pingpong between 2 hosts (1 rank each): rustfab auto next to
#      libfabric's tcp;ofi_rxm in the same set-up;
#   3. pingpong between ranks 0 and 1 of host 1 while ranks 2 and 3 wait in
#      a barrier: on host 1 too (1 x 4), and on host 2 over TCP (2 x 2; the
#      oversubscription case of a 2-core machine);
#   4. mpi_test on 2 hosts x 2 ranks without FI_RUSTFAB_IFACE, each host's
#      first interfaces reaching no other host (nocar0, 10.124.H.1: a bridge
#      without carrier; dead0, 10.126.H.1: up with carrier): the ranks
#      advertise rf0, the interface the route to mpirun uses; and, with no
#      launcher and no route to ask (fi_pingpong in a namespace of its own),
#      a bridge with carrier and one without are passed over for eth0;
#   5. the 64-rank job (job64): 4 hosts x 16 ranks, more than the machine
#      has cores (--oversubscribe), all-to-alls of 8 B and 64 KiB over
#      rustfab with every block checked, within a timeout; MPI_Init time,
#      first contact, RSS and descriptors per rank printed;
#   6. only with MPI_HOSTS_ONLY=alltoall (make scale-mpi): MPI_Alltoall on
#      1, 2 and 4 hosts, 4-16 ranks, rustfab next to Open MPI's own shared
#      memory and TCP (pml ob1: vader, tcp); then the 64-rank job, rustfab
#      next to ob1 and pml ucx (MPI_HOSTS_ONLY=job64-peers: only that).
# MPI_HOSTS_MPIRUN_ARGS adds mpirun options to every job.
# Every mpirun runs with --bind-to none: with Open MPI's default binding each
# host's orted binds its first rank to core 0, so on one machine the ranks of
# all "hosts" share one core.
#
# Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN), iproute2, unshare and
# Open MPI; without namespaces it prints "SKIP: cannot create network
# namespaces" and exits 0. Only namespaces it creates are touched; they are
# deleted on exit.
#
#   c-tests/mpi-hosts/run.sh [build dir]   (FI_PROVIDER_PATH must be set)
set -u
build=${1:-build}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
here=$(cd "$(dirname "$0")" && pwd)
agent=$here/agent.sh
mpi_test=$build/mpi/mpi_test
pingpong=$build/mpi-hosts/pingpong
T=${MPI_HOSTS_TIMEOUT:-60}
NHOSTS=4
pfx=rfh$$
head=${pfx}-0
tmp=$(mktemp -d)

cleanup() {
	for i in $(seq 0 $NHOSTS) b; do ip netns del "${pfx}-$i" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$(dirname "$0")/../skip.sh"
nons() { skip "mpi-hosts: cannot create network namespaces ($*)"; }

[ "$(id -u)" = 0 ] || nons "not root"
command -v ip >/dev/null || nons "iproute2 (ip) not installed"
command -v unshare >/dev/null || nons "unshare (util-linux) not installed"
command -v mpirun >/dev/null || { echo "FAIL mpi-hosts: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"; exit 1; }
for f in "$mpi_test" "$pingpong"; do
	[ -x "$f" ] || { echo "FAIL mpi-hosts: $f not built"; exit 1; }
done

ip netns add "$head" 2>"$tmp/err" || nons "ip netns add: $(cat "$tmp/err")"
ip -n "$head" link set lo up
ip -n "$head" link add br0 type bridge 2>"$tmp/err" || nons "cannot create a bridge: $(cat "$tmp/err")"
ip -n "$head" addr add 10.125.0.254/24 dev br0
ip -n "$head" link set br0 up
for i in $(seq 1 $NHOSTS); do
	h=${pfx}-$i
	ip netns add "$h" 2>"$tmp/err" || nons "ip netns add: $(cat "$tmp/err")"
	# First in the kernel's order: a bridge that is up with an address
	# (10.124.H.1/24) and no carrier (its one port's link is down:
	# NO-CARRIER, as docker0 or virbr0 with nothing attached). Never
	# advertised (the "anyiface" run).
	ip -n "$h" link add nocar0 type bridge 2>"$tmp/err" ||
		nons "cannot create a bridge: $(cat "$tmp/err")"
	ip -n "$h" link add nocarp type veth peer name nocarq 2>"$tmp/err" ||
		nons "cannot create a veth pair: $(cat "$tmp/err")"
	ip -n "$h" link set nocarp master nocar0
	ip -n "$h" addr add "10.124.$i.1/24" dev nocar0
	ip -n "$h" link set nocarp up
	ip -n "$h" link set nocar0 up
	# Next, before rf0: an interface that is up, has
	# an address of its own subnet (10.126.H.1/24) and reaches no other
	# host (its veth peer stays in the same namespace). A rank that
	# advertised it could not be reached (the "anyiface" run).
	ip -n "$h" link add dead0 type veth peer name dead1 2>"$tmp/err" ||
		nons "cannot create a veth pair: $(cat "$tmp/err")"
	ip -n "$h" addr add "10.126.$i.1/24" dev dead0
	ip -n "$h" link set dead1 up
	ip -n "$h" link set dead0 up
	ip link add rf0 netns "$h" type veth peer name "h$i" netns "$head" 2>"$tmp/err" ||
		nons "cannot create a veth pair: $(cat "$tmp/err")"
	ip -n "$h" addr add "10.125.0.$i/24" dev rf0
	ip -n "$h" link set lo up
	ip -n "$h" link set rf0 up
	ip -n "$head" link set "h$i" master br0
	ip -n "$head" link set "h$i" up
done
# Every host answers before anything runs over the links.
for i in $(seq 1 $NHOSTS); do
	for _ in $(seq 50); do
		ip netns exec "$head" ping -c1 -W1 "10.125.0.$i" >/dev/null 2>&1 && break
		sleep 0.1
	done
done

passed=0; failed=0
# MPI_HOSTS_ONLY=name runs one group (mpi_test, anyiface, between, oversub,
# job64).
want() { [ -z "${MPI_HOSTS_ONLY:-}" ] || [ "$MPI_HOSTS_ONLY" = "$1" ]; }
result() { # rc, name
	if [ "$1" -eq 0 ]; then echo "ok   mpi-hosts $2"; passed=$((passed + 1))
	else echo "FAIL mpi-hosts $2"; failed=$((failed + 1)); fi
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# mpirun HOSTS RANKS_PER_HOST PROVIDER LOG EXE ARGS...: runs in the head
# namespace, hosts 1..HOSTS with RANKS_PER_HOST slots each (ranks fill host
# 1 first). PROVIDER: rustfab (auto), or another libfabric provider for
# comparison ("tcp;ofi_rxm": FI_PROVIDER=tcp,ofi_rxm).
job() {
	local nh=$1 rph=$2 prov=$3 log=$4
	shift 4
	: >"$tmp/hostfile"
	# OVERSUB=1: each host has as many slots as the machine has cores, and
	# mpirun places RANKS_PER_HOST ranks on each anyway (--oversubscribe):
	# Open MPI then knows the hosts are oversubscribed and has its own
	# transports yield when idle (mpi_yield_when_idle), as on a real
	# cluster that runs more ranks than cores.
	local slots=$rph over=()
	if [ -n "${OVERSUB:-}" ]; then
		slots=$(nproc)
		over=(--oversubscribe --map-by "ppr:$rph:node")
	fi
	for i in $(seq 1 "$nh"); do echo "${pfx}-$i slots=$slots" >>"$tmp/hostfile"; done
	local provenv=(FI_PROVIDER=rustfab)
	# NO_IFACE=1: FI_RUSTFAB_IFACE is neither set nor passed (the ranks pick
	# the interface to advertise themselves).
	local ifenv=(FI_RUSTFAB_IFACE=rf0) ifx=(-x FI_RUSTFAB_IFACE)
	[ -z "${NO_IFACE:-}" ] || { ifenv=(); ifx=(); }
	[ "$prov" = rustfab ] || provenv=(FI_PROVIDER="${prov//;/,}")
	# ob1: Open MPI's own shared memory (vader) and TCP, no libfabric
	local pml=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$prov"
		--mca mtl_ofi_verbose 1 --mca btl self)
	[ "$prov" = ob1 ] && pml=(--mca pml ob1 --mca btl self,vader,tcp --mca btl_tcp_if_include rf0)
	# pml ucx: UCX's shared memory within a host, its TCP between hosts
	[ "$prov" = ucx ] && pml=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
		-x UCX_TLS=sm,tcp,self -x UCX_NET_DEVICES=rf0,lo)
	env -u FI_RUSTFAB_IFACE "${provenv[@]}" "${ifenv[@]}" FI_RUSTFAB_TRANSPORT=auto \
		timeout -k 10 "$T" ip netns exec "$head" \
		mpirun --hostfile "$tmp/hostfile" -np $((nh * rph)) \
		--mca plm_rsh_agent "$agent" --mca oob_tcp_if_include br0,rf0 \
		--bind-to none "${over[@]}" ${MPI_HOSTS_MPIRUN_ARGS:-} \
		-x FI_PROVIDER_PATH -x FI_PROVIDER "${ifx[@]}" -x FI_RUSTFAB_TRANSPORT \
		-x FI_LOG_LEVEL -x FI_LOG_PROV \
		"${pml[@]}" "$@" >"$log" 2>&1
}

# Checks a log of a job run with FI_LOG_LEVEL=info: each rank (pid) sent to
# ranks of its own host over shm and to every other host over TCP, and never
# to its own host over TCP. $1 = log, $2 = hosts, $3 = ranks per host.
check_transports() {
	awk -v nh="$2" -v rph="$3" '
	/auto: first send to/ {
		split($0, f, ":"); pid = f[2]
		# "... auto: first send to PEER over KIND (this host: IP)"
		match($0, /first send to [^ ]+ over [a-z]+ \(this host: [0-9.]+\)/)
		split(substr($0, RSTART, RLENGTH), w, " ")
		peer = w[4]; kind = w[6]; me = w[9]; sub(/\)/, "", me)
		pids[pid] = 1
		if (kind == "shm") shm[pid]++
		else if (kind == "tcp") {
			ip = peer; sub(/:.*/, "", ip)
			if (ip == me) { print "  rank pid " pid " reached its own host (" ip ") over TCP"; bad = 1 }
			tcp[pid, ip] = 1; ntcp[pid] += 0
			if (!((pid, ip) in seen)) { seen[pid, ip] = 1; ntcp[pid]++ }
		}
	}
	END {
		n = 0
		for (p in pids) {
			n++
			# the other ranks of its host over shm (itself too, if Open MPI
			# sends to itself through the provider), every other host over tcp
			if (shm[p] < rph - 1 || shm[p] > rph || ntcp[p] != nh - 1) {
				print "  rank pid " p ": " shm[p] + 0 " peers over shm (want " rph - 1 "), " ntcp[p] + 0 " hosts over tcp (want " nh - 1 ")"
				bad = 1
			}
		}
		if (n != nh * rph) { print "  " n " ranks logged their peers (want " nh * rph ")"; bad = 1 }
		exit bad
	}' "$1"
}

echo "== mpi-hosts: $NHOSTS hosts (network namespaces ${pfx}-1..$NHOSTS, 10.125.0.1-$NHOSTS on rf0), mpirun in ${pfx}-0"
for shape in "2 2" "4 1"; do
	want mpi_test || break
	set -- $shape
	nh=$1 rph=$2
	log=$tmp/mpi_test.$nh.$rph
	FI_LOG_LEVEL=info FI_LOG_PROV=rustfab job "$nh" "$rph" rustfab "$log" "$mpi_test"
	rc=$?
	line=$(grep -E "^mpi \([0-9]+ ranks\): [0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
	used=$(grep -c "mtl:ofi:prov: rustfab" "$log")
	ok=0
	if [ $rc -ne 0 ] || [ -z "$line" ] || ! echo "$line" | grep -q " 0 failed"; then
		ok=1; grep -E "FAIL|rror" "$log" | head -n 20; tail -n 20 "$log"
	fi
	[ "$used" -eq $((nh * rph)) ] || { ok=1; echo "  only $used of $((nh * rph)) ranks report mtl:ofi:prov: rustfab"; }
	result $ok "mpi_test, $nh hosts x $rph ranks (rc=$rc; $line)"
	check_transports "$log" "$nh" "$rph"
	result $? "transports, $nh hosts x $rph ranks: shm within a host, TCP between hosts"
done

# Hosts whose first interface (dead0) reaches no other host, and no
# FI_RUSTFAB_IFACE: each rank advertises the address its route to mpirun
# leaves from (rf0), so the job runs and TCP goes between the rf0 addresses.
if want anyiface; then
	log=$tmp/mpi_test.anyiface
	NO_IFACE=1 FI_LOG_LEVEL=info FI_LOG_PROV=rustfab job 2 2 rustfab "$log" "$mpi_test"
	rc=$?
	line=$(grep -E "^mpi \([0-9]+ ranks\): [0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
	ok=0
	if [ $rc -ne 0 ] || [ -z "$line" ] || ! echo "$line" | grep -q " 0 failed"; then
		ok=1; grep -E "FAIL|rror|advertising" "$log" | head -n 20; tail -n 20 "$log"
	fi
	result $ok "mpi_test, 2 hosts x 2 ranks, first interface unreachable, no FI_RUSTFAB_IFACE (rc=$rc; $line)"
	adv=$(grep -c "tcp: advertising 10\.125\.0\.[0-9]* (rf0: the route to the launcher" "$log")
	bad=$(grep -cE "tcp: advertising 10\.12[46]\." "$log")
	[ "$adv" -gt 0 ] && [ "$bad" -eq 0 ]
	result $? "anyiface: ranks advertise rf0 by the route to mpirun ($adv lines), never nocar0 or dead0 ($bad)"
	# The bridge really has no carrier (what the kernel reports for it).
	ip -n "${pfx}-1" link show nocar0 | grep -q NO-CARRIER
	result $? "anyiface: nocar0 is up with no carrier (NO-CARRIER)"
	# No launcher and no route to ask (fi_pingpong, no default route): the
	# last-resort pick. A host whose first interface is a bridge with an
	# address and carrier (a bridge with no port at all has carrier on
	# recent kernels) and whose second is a bridge without carrier:
	# neither is advertised while eth0 is up with carrier.
	if command -v fi_pingpong >/dev/null; then
		b=${pfx}-b
		ip netns add "$b" && ip -n "$b" link set lo up &&
			ip -n "$b" link add hostbr0 type bridge && ip -n "$b" addr add 10.123.0.1/24 dev hostbr0 &&
			ip -n "$b" link set hostbr0 up &&
			ip -n "$b" link add nocar0 type bridge && ip -n "$b" addr add 10.124.0.1/24 dev nocar0 &&
			ip -n "$b" link add nocarp type veth peer name nocarq && ip -n "$b" link set nocarp master nocar0 &&
			ip -n "$b" link set nocarp up && ip -n "$b" link set nocar0 up &&
			ip -n "$b" link add eth0 type veth peer name eth1 && ip -n "$b" addr add 10.122.0.1/24 dev eth0 &&
			ip -n "$b" link set eth1 up && ip -n "$b" link set eth0 up
		rc=$?
		log=$tmp/pp.bridges
		if [ $rc -eq 0 ]; then
			pp() { env -u FI_RUSTFAB_IFACE -u OMPI_MCA_orte_hnp_uri -u SLURM_LAUNCH_NODE_IPADDR -u PMI_PORT \
				FI_PROVIDER=rustfab FI_RUSTFAB_TRANSPORT=tcp FI_LOG_LEVEL=info FI_LOG_PROV=rustfab \
				timeout -k 5 20 ip netns exec "$b" fi_pingpong -p rustfab -e rdm -I 10 -S 64 "$@"; }
			pp >"$log.srv" 2>&1 &
			sleep 0.5
			pp 127.0.0.1 >"$log" 2>&1
			rc=$?
			wait $! || rc=1
		fi
		# (the side whose address is wildcard-bound advertises; one or both)
		adv=$(cat "$log" "$log.srv" 2>/dev/null | grep -c "tcp: advertising 10\.122\.0\.1 (eth0: the first interface that is up with carrier")
		bad=$(cat "$log" "$log.srv" 2>/dev/null | grep -cE "tcp: advertising 10\.12[34]\.")
		[ $rc -eq 0 ] && [ "$adv" -gt 0 ] && [ "$bad" -eq 0 ] ||
			{ rc=1; cat "$log" "$log.srv" 2>/dev/null | grep -E "advertising|rror" | head -n 5; }
		result $rc "anyiface: no route to ask: eth0 advertised ($adv lines), never the bridges before it ($bad)"
	else
		echo "  mpi-hosts anyiface: fi_pingpong (libfabric-bin) not installed: the no-route bridge check is skipped"
	fi
fi

# Between two hosts, rustfab next to tcp;ofi_rxm.
for prov in rustfab "tcp;ofi_rxm"; do
	want between || break
	log=$tmp/pp.$$
	job 2 1 "$prov" "$log" "$pingpong" "${PP_SMALL:-2000}" "${PP_LARGE:-100}"
	rc=$?
	grep -q "pingpong: data FAIL" "$log" && rc=1
	[ $rc -eq 0 ] || tail -n 20 "$log"
	result $rc "pingpong between 2 hosts over $prov"
	grep "^pingpong " "$log" | sed "s/^/  [$prov] /"
done

# The ping-pong between ranks 0 and 1 (shm) while ranks 2 and 3 wait in a
# barrier: all four on one host (they wait over shm), then 2 hosts x 2 ranks
# (host 2's ranks wait over TCP).
want oversub && for shape in "1 4" "2 2"; do
	set -- $shape
	log=$tmp/pp.$1.$2
	job "$1" "$2" rustfab "$log" "$pingpong" "${PP_SMALL:-2000}" 0
	rc=$?
	grep -q "pingpong: data FAIL" "$log" && rc=1
	[ $rc -eq 0 ] || tail -n 20 "$log"
	result $rc "pingpong within host 1 while ranks 2, 3 wait ($1 hosts x $2 ranks)"
	grep "^pingpong " "$log" | sed "s/^/  [$1 x $2, shm] /"
done

# The 64-rank job: 4 hosts x 16 ranks on this machine's cores
# (oversubscribed), over rustfab: MPI_Init, the first all-to-all (every
# pair's first contact at once), then one all-to-all of 8 B and one of
# 64 KiB, every block checked, all within JOB64_TIMEOUT (a hang is a
# failure); every rank used rustfab, and reached its own host's ranks over
# shm and the other hosts over TCP. What it cost (times, RSS, descriptors
# per rank) is printed, not judged. Needs $build/mpi-hosts/alltoall (the
# Makefile's mpi-hosts target builds it).
if want job64; then
	a2a=$build/mpi-hosts/alltoall
	log=$tmp/job64
	t64=${JOB64_TIMEOUT:-150}
	# Each rank's output in a file of its own too (64 ranks' log lines
	# interleave in mpirun's); $log is those files, rank by rank.
	if [ -x "$a2a" ]; then
		MPI_HOSTS_MPIRUN_ARGS="${MPI_HOSTS_MPIRUN_ARGS:-} --output-filename $tmp/job64.out" \
			T=$t64 OVERSUB=1 FI_LOG_LEVEL=info FI_LOG_PROV=rustfab job 4 16 rustfab "$log.mpirun" \
			"$a2a" -w 0 "${JOB64_ITERS:-1}" 8 65536
		rc=$?
		cat "$tmp"/job64.out/*/rank.*/std* >"$log" 2>/dev/null
	else
		echo "  $a2a not built"; rc=1; : >"$log"
	fi
	[ $rc -eq 124 ] && echo "  timed out after $t64 s"
	grep -q "data FAIL" "$log" && rc=1
	[ "$(grep -c "^alltoall 64 ranks" "$log")" -eq 2 ] || { rc=1; echo "  not every all-to-all reported"; }
	used=$(grep -c "mtl:ofi:prov: rustfab" "$log")
	[ "$used" -eq 64 ] || { rc=1; echo "  only $used of 64 ranks report mtl:ofi:prov: rustfab"; }
	[ $rc -eq 0 ] || { grep -E "rror|FAIL" "$log" | head -n 10; tail -n 20 "$log.mpirun"; }
	result $rc "64 ranks on 4 hosts (16 per host, oversubscribed): all-to-all 8 B and 64 KiB over rustfab, data checked (rc=$rc)"
	grep "^alltoall" "$log" | sed "s/^/  [4x16 rustfab] /"
	check_transports "$log" 4 16
	result $? "transports, 4 hosts x 16 ranks: shm within a host, TCP between hosts"
fi

# MPI_Alltoall for 4-16 ranks (A2A_SHAPES="1x32 4x8" for 32), rustfab next to Open MPI's own shared memory
# and TCP (ob1), each shape in one run: for docs/performance-history.md, only with
# MPI_HOSTS_ONLY=alltoall (minutes; not part of make test).
if [ "${MPI_HOSTS_ONLY:-}" = alltoall ]; then
	for shape in ${A2A_SHAPES:-1x4 1x8 1x16 2x2 2x4 4x2 2x8 4x4}; do
		for prov in rustfab ob1; do
			log=$tmp/a2a
			job "${shape%x*}" "${shape#*x}" "$prov" "$log" "$build/mpi-hosts/alltoall" "${A2A_ITERS:-50}" 8 4096
			rc=$?
			grep -q "data FAIL" "$log" && rc=1
			[ $rc -eq 0 ] || tail -n 5 "$log"
			result $rc "alltoall $shape over $prov"
			grep "^alltoall " "$log" | sed "s/^/  [$shape $prov] /"
		done
	done
fi

# The 64-rank job side by side (make scale-mpi): rustfab, ob1 (vader within
# a host, tcp between) and pml ucx (UCX's shared memory and TCP; when this
# Open MPI has it), A2A64_ROUNDS rounds interleaved, each a job of its own.
if [ "${MPI_HOSTS_ONLY:-}" = alltoall ] || [ "${MPI_HOSTS_ONLY:-}" = job64-peers ]; then
	provs="rustfab ob1"
	if ompi_info 2>/dev/null | grep -q "MCA pml: ucx "; then provs="$provs ucx"
	else echo "  mpi-hosts: pml ucx left out of the 64-rank job: this Open MPI has no ucx pml"; fi
	read -r a2a_nh a2a_rph <<<"$(echo "${A2A64_SHAPE:-4x16}" | tr x ' ')"
	for round in $(seq 1 "${A2A64_ROUNDS:-1}"); do
		for prov in ${A2A64_PROVS:-$provs}; do
			log=$tmp/a2a64
			T=${JOB64_TIMEOUT:-300} OVERSUB=1 job "$a2a_nh" "$a2a_rph" "$prov" "$log" "$build/mpi-hosts/alltoall" \
				-w "${A2A64_WARMUP:-2}" "${A2A64_ITERS:-5}" 8 65536
			rc=$?
			grep -q "data FAIL" "$log" && rc=1
			[ "$(grep -c "^alltoall $((a2a_nh * a2a_rph)) ranks" "$log")" -eq 2 ] || rc=1
			[ $rc -eq 0 ] || tail -n 5 "$log"
			result $rc "alltoall ${a2a_nh}x$a2a_rph (oversubscribed) over $prov, round $round"
			grep "^alltoall" "$log" | sed "s/^/  [${a2a_nh}x$a2a_rph $prov] /"
		done
	done
fi

echo "mpi-hosts: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
