#!/usr/bin/env bash
# Two links between two "hosts": network namespaces A and B joined by two
# veth pairs (rla0 10.124.0.1/24 <-> rlb0 10.124.0.2/24, rla1 10.124.1.1/24
# <-> rlb1 10.124.1.2/24). Each side advertises its first pair's address
# (FI_RUSTFAB_IFACE) and names its second as an extra link
# (FI_RUSTFAB_TCP_LINKS). links_pair (c-tests/netns/links_pair.c) checks
# that large messages go over both links (the client's byte counters), that
# link 1 going down mid-transfer loses no message and gives no error
# completion, and that the link is used again once it is back up; then
# fi_rdm_tagged_bw (fabtests) over both links at 2 and 4 MiB must finish.
# Needs root: without the permission to create namespaces it prints "SKIP"
# and exits 0. Only the namespaces this script creates are touched; they are
# deleted on exit.
#
#   c-tests/netns/links.sh [build dir]     (FI_PROVIDER_PATH must be set)
set -u
build=${1:-build}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
prog=$build/netns/links_pair
T=${NETNS_TIMEOUT:-180}
ns_a=rustfab-la-$$
ns_b=rustfab-lb-$$
tmp=$(mktemp -d)

cleanup() {
	ip netns del "$ns_a" 2>/dev/null
	ip netns del "$ns_b" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$(dirname "$0")/../skip.sh"

[ "$(id -u)" = 0 ] || skip "netns links: not root: cannot create network namespaces"
command -v ip >/dev/null || skip "netns links: iproute2 (ip) not installed"
ip netns add "$ns_a" 2>"$tmp/err" || skip "netns links: ip netns add failed: $(cat "$tmp/err")"
ip netns add "$ns_b" 2>"$tmp/err" || skip "netns links: ip netns add failed: $(cat "$tmp/err")"
. "$(dirname "$0")/two-links.sh"
why=$(two_links "$ns_a" "$ns_b" rla rlb 10.124) || skip "netns links: $why"

export FI_PROVIDER=${FI_PROVIDER:-rustfab}
echo "== netns links: $ns_a (rla0 10.124.0.1, rla1 10.124.1.1) <-> $ns_b (rlb0 10.124.0.2, rlb1 10.124.1.2)"
if [ ! -x "$prog" ]; then
	echo "FAIL netns links: $prog not built"
	exit 1
fi
mkfifo "$tmp/a2b" "$tmp/b2a"
ip netns exec "$ns_a" env FI_RUSTFAB_IFACE=rla0 FI_RUSTFAB_TCP_LINKS=rla1 FI_RUSTFAB_TRANSPORT=tcp RF_TRANSPORT=tcp \
	timeout -k 5 "$T" "$prog" server "$tmp/a2b" "$tmp/b2a" rla0 rla1 >"$tmp/s.log" 2>&1 &
sp=$!
ip netns exec "$ns_b" env FI_RUSTFAB_IFACE=rlb0 FI_RUSTFAB_TCP_LINKS=rlb1 FI_RUSTFAB_TRANSPORT=tcp RF_TRANSPORT=tcp \
	timeout -k 5 "$T" "$prog" client "$tmp/b2a" "$tmp/a2b" rlb0 rlb1 >"$tmp/c.log" 2>&1
crc=$?
wait $sp
src=$?
sed "s/^/  [A] /" "$tmp/s.log"
sed "s/^/  [B] /" "$tmp/c.log"
rc=0
if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
	echo "ok   netns links (server rc=$src, client rc=$crc)"
else
	echo "FAIL netns links (server rc=$src, client rc=$crc)"
	rc=1
fi

# fi_rdm_tagged_bw (fabtests, when installed) streams multi-chunk messages
# from the first moment, before link 1 is up and with link 0's queue full:
# it must finish (a message whose chunks took two links hung it).
ft=${FABTESTS_PREFIX:-/opt/fabtests}/bin
if [ -x "$ft/fi_rdm_tagged_bw" ]; then
	for size in 2097152 4194304; do
		ip netns exec "$ns_a" env FI_RUSTFAB_IFACE=rla0 FI_RUSTFAB_TCP_LINKS=rla1 FI_RUSTFAB_TRANSPORT=tcp \
			timeout -k 5 60 "$ft/fi_rdm_tagged_bw" -p rustfab -W 16 -S $size -I 64 >"$tmp/s.log" 2>&1 &
		sp=$!
		sleep 0.5
		ip netns exec "$ns_b" env FI_RUSTFAB_IFACE=rlb0 FI_RUSTFAB_TCP_LINKS=rlb1 FI_RUSTFAB_TRANSPORT=tcp \
			timeout -k 5 60 "$ft/fi_rdm_tagged_bw" -p rustfab -W 16 -S $size -I 64 10.124.0.1 >"$tmp/c.log" 2>&1
		crc=$?
		wait $sp
		src=$?
		if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
			echo "ok   netns links fi_rdm_tagged_bw -S $size over two links"
		else
			tail -n 3 "$tmp/s.log" "$tmp/c.log" | sed 's/^/  /'
			echo "FAIL netns links fi_rdm_tagged_bw -S $size over two links (server rc=$src, client rc=$crc)"
			rc=1
		fi
	done
else
	echo "note: fabtests not found ($ft); fi_rdm_tagged_bw over two links skipped"
fi
exit $rc
