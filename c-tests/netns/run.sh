#!/usr/bin/env bash
# "Between hosts": two network namespaces joined by a veth pair
# (10.123.0.1/24 <-> 10.123.0.2/24), one rustfab process in each. Runs
#   1. rdm_pair: the RDM scenarios of test_rdm.c, one end per namespace
#      (sizes up to 16 MiB both ways, tags, CQ data, FI_SOURCE, truncation,
#      unexpected ordering, multi-recv, inject/delivery complete, a window
#      of 2000 x 64 KiB, a peer killed mid-transfer);
#   2. fi_pingpong (libfabric-bin) over rustfab: RDM and MSG endpoints;
#   3. the fabtests ping-pongs (fi_rdm_pingpong, fi_msg_pingpong, fi_cm_data)
#      when an installed fabtests is found (FABTESTS_PREFIX, or /opt/fabtests);
#   4. msg_pair: connected endpoints (connection data, data both ways,
#      shutdown), then a partition after connect (B's link goes down): both
#      sides must see FI_SHUTDOWN and error completions within the keepalive
#      and user timeouts (about 20 s).
# Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN): without the permission to
# create namespaces it prints "SKIP" and exits 0. Only namespaces this
# script creates are touched; they are deleted on exit.
#
#   c-tests/netns/run.sh [build dir]     (FI_PROVIDER_PATH must be set)
set -u
build=${1:-build}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
pair=$build/netns/rdm_pair
mpair=$build/netns/msg_pair
T=${NETNS_TIMEOUT:-300}
ns_a=rustfab-a-$$
ns_b=rustfab-b-$$
ip_a=10.123.0.1
ip_b=10.123.0.2
tmp=$(mktemp -d)

cleanup() {
	ip netns del "$ns_a" 2>/dev/null
	ip netns del "$ns_b" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$(dirname "$0")/../skip.sh"

[ "$(id -u)" = 0 ] || skip "netns: not root: cannot create network namespaces"
command -v ip >/dev/null || skip "netns: iproute2 (ip) not installed"
ip netns add "$ns_a" 2>"$tmp/err" || skip "netns: ip netns add failed: $(cat "$tmp/err")"
ip netns add "$ns_b" 2>"$tmp/err" || skip "netns: ip netns add failed: $(cat "$tmp/err")"
if ! ip link add rfa netns "$ns_a" type veth peer name rfb netns "$ns_b" 2>"$tmp/err"; then
	skip "netns: cannot create a veth pair: $(cat "$tmp/err")"
fi
ip -n "$ns_a" addr add $ip_a/24 dev rfa
ip -n "$ns_b" addr add $ip_b/24 dev rfb
for n in "$ns_a" "$ns_b"; do
	ip -n "$n" link set lo up
done
ip -n "$ns_a" link set rfa up
ip -n "$ns_b" link set rfb up
# The link answers before anything runs over it.
for _ in $(seq 50); do
	ip netns exec "$ns_a" ping -c1 -W1 $ip_b >/dev/null 2>&1 && break
	sleep 0.1
done

passed=0; failed=0
# NETNS_ONLY=name runs one group (rdm_pair, fi_pingpong, fabtests, msg_pair).
want() { [ -z "${NETNS_ONLY:-}" ] || [ "$NETNS_ONLY" = "$1" ]; }
result() { # name, rc
	if [ "$2" -eq 0 ]; then echo "ok   netns $1"; passed=$((passed + 1))
	else echo "FAIL netns $1 (rc=$2)"; failed=$((failed + 1)); fi
}

# Runs a server command in A and a client command in B; both must succeed.
# Each side advertises its veth address (FI_RUSTFAB_IFACE).
cs() { # name, server cmd, client cmd
	local name=$1 s=$2 c=$3
	ip netns exec "$ns_a" env FI_RUSTFAB_IFACE=rfa FI_RUSTFAB_TRANSPORT=tcp RF_TRANSPORT=tcp \
		timeout -k 5 "$T" bash -c "$s" >"$tmp/s.log" 2>&1 &
	local sp=$!
	sleep "${CS_DELAY:-0.5}"
	ip netns exec "$ns_b" env FI_RUSTFAB_IFACE=rfb FI_RUSTFAB_TRANSPORT=tcp RF_TRANSPORT=tcp \
		timeout -k 5 "$T" bash -c "$c" >"$tmp/c.log" 2>&1
	local crc=$?
	wait $sp
	local src=$?
	local rc=$((crc != 0 || src != 0))
	if [ $rc -ne 0 ] || [ -n "${NETNS_VERBOSE:-}" ]; then
		sed "s/^/  [A] /" "$tmp/s.log"
		sed "s/^/  [B] /" "$tmp/c.log"
	fi
	result "$name (server rc=$src, client rc=$crc)" $rc
}

export FI_PROVIDER=${FI_PROVIDER:-rustfab}
echo "== netns: $ns_a ($ip_a, rfa) <-> $ns_b ($ip_b, rfb)"

# 1. The RDM scenarios, one end per namespace (control channel: FIFOs).
if ! want rdm_pair; then
	:
elif [ -x "$pair" ]; then
	mkfifo "$tmp/a2b" "$tmp/b2a"
	cs "rdm_pair" "$pair server $tmp/a2b $tmp/b2a" "$pair client $tmp/b2a $tmp/a2b"
	grep -h -E '^(ok|FAIL) ' "$tmp/s.log" | sed 's/^/  [A] /'
else
	echo "FAIL netns rdm_pair: $pair not built"; failed=$((failed + 1))
fi

# 2. fi_pingpong (libfabric-bin), data integrity checked.
if ! want fi_pingpong; then
	:
elif command -v fi_pingpong >/dev/null; then
	for e in rdm msg; do
		cs "fi_pingpong -e $e" "fi_pingpong -p rustfab -e $e -c -I 200" \
			"fi_pingpong -p rustfab -e $e -c -I 200 $ip_a"
		tail -n 3 "$tmp/c.log" | sed 's/^/  [B] /'
	done
else
	echo "note: fi_pingpong (libfabric-bin) not found; skipped"
fi

# 3. fabtests, when installed.
ft=${FABTESTS_PREFIX:-/opt/fabtests}/bin
if ! want fabtests; then
	:
elif [ -x "$ft/fi_msg_pingpong" ]; then
	for t in "fi_rdm_pingpong -I 100" "fi_msg_pingpong -I 100 -v" "fi_msg_bw -I 100" "fi_cm_data"; do
		cs "$t" "$ft/$t -p rustfab -s $ip_a" "$ft/$t -p rustfab -s $ip_b $ip_a"
	done
else
	echo "note: fabtests not found at $ft; skipped"
fi

# 4. Connected endpoints, then a partition (last: it takes B's link down).
if ! want msg_pair; then
	:
elif [ -x "$mpair" ]; then
	mkfifo "$tmp/ma2b" "$tmp/mb2a"
	cs "msg_pair" "$mpair server $tmp/ma2b $tmp/mb2a rfa" "$mpair client $tmp/mb2a $tmp/ma2b rfb"
	grep -h -E '^(ok|FAIL) |FI_SHUTDOWN after' "$tmp/s.log" | sed 's/^/  [A] /'
	grep -h -E 'FI_SHUTDOWN after' "$tmp/c.log" | sed 's/^/  [B] /'
	ip -n "$ns_b" link set rfb up
else
	echo "FAIL netns msg_pair: $mpair not built"; failed=$((failed + 1))
fi

echo "netns: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
