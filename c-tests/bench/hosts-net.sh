# shellcheck shell=bash
# Sourced by c-tests/bench/hosts.sh and c-tests/bench/hosts-where.sh, with
# $pfx set: two "hosts", network namespaces $h1 and $h2 ($pfx-1, $pfx-2),
# and $work, a temporary directory; both removed when the script exits.
# hosts_up joins the namespaces by a veth pair (rf0, 10.127.0.1 and .2/24),
# waits until .2 answers a ping and writes the hostfile $work/hosts (one slot
# per host). Needs root.
h1=${pfx}-1 h2=${pfx}-2
work=$(mktemp -d)
cleanup() {
	ip netns del "$h1" 2>/dev/null
	ip netns del "$h2" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

hosts_up() {
	local i h
	ip netns add "$h1" && ip netns add "$h2" || return 1
	ip link add rf0 netns "$h1" type veth peer name rf0 netns "$h2" || return 1
	for i in 1 2; do
		h=${pfx}-$i
		ip -n "$h" addr add "10.127.0.$i/24" dev rf0
		ip -n "$h" link set lo up
		ip -n "$h" link set rf0 up
	done
	for _ in $(seq 50); do ip netns exec "$h1" ping -c1 -W1 10.127.0.2 >/dev/null 2>&1 && break; sleep 0.1; done
	printf '%s slots=1\n%s slots=1\n' "$h1" "$h2" >"$work/hosts"
}
