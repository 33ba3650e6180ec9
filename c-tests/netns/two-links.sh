# Sourced by c-tests/netns/links.sh and c-tests/bench/links.sh: two network
# namespaces joined by two veth pairs.
#   two_links NS_A NS_B IF_A IF_B NET [RATE]
# makes the pairs IF_A0 <-> IF_B0 (NET.0.1/24, NET.0.2/24) and IF_A1 <-> IF_B1
# (NET.1.1/24, NET.1.2/24), each shaped with tc tbf to RATE on both ends when
# RATE is given, and waits until both answer. The namespaces must exist.
# Prints why and returns 1 when a step fails.
two_links() {
	local a=$1 b=$2 ia=$3 ib=$4 net=$5 rate=${6:-} k
	for k in 0 1; do
		ip link add "$ia$k" netns "$a" type veth peer name "$ib$k" netns "$b" ||
			{ echo "cannot create a veth pair"; return 1; }
		ip -n "$a" addr add "$net.$k.1/24" dev "$ia$k"
		ip -n "$b" addr add "$net.$k.2/24" dev "$ib$k"
		ip -n "$a" link set "$ia$k" up
		ip -n "$b" link set "$ib$k" up
		if [ -n "$rate" ]; then
			ip netns exec "$a" tc qdisc add dev "$ia$k" root tbf rate "$rate" burst 256kb latency 50ms &&
				ip netns exec "$b" tc qdisc add dev "$ib$k" root tbf rate "$rate" burst 256kb latency 50ms ||
				{ echo "tc tbf failed"; return 1; }
		fi
	done
	ip -n "$a" link set lo up
	ip -n "$b" link set lo up
	for k in 0 1; do
		for _ in $(seq 50); do
			ip netns exec "$a" ping -c1 -W1 "$net.$k.2" >/dev/null 2>&1 && break
			sleep 0.1
		done
	done
}
