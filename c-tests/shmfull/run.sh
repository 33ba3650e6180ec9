#!/usr/bin/env bash
# A full /dev/shm (docs/shm.md "Memory"): rf_stress between three processes
# over shm, in a private mount namespace whose /dev/shm is a tmpfs of a few
# hundred KiB or MiB, so that the segments' pages run out. In a tmpfs mapping
# the first touch of a page (a read as well as a write) allocates it, and with
# no room left raises SIGBUS: rustfab allocates every page before it touches
# it, and where that fails the send fails or the sender stays within what it
# has — never a signal.
#   1. 1600 KiB, 16384-cell rings, CMA off (large messages streamed through
#      the rings): every process gets its control pages and every sender its
#      small lap (128 KiB), but not the rest of a large ring; every message
#      arrives, every byte checked (rf_stress exits 0), and rustfab said why
#      the rings stayed small.
#   2. 600 KiB: not every ring gets the 1024 cells (64 KiB) a sender of
#      large messages needs to work. The operations that needed them fail
#      with -FI_ENOMEM and that pair of peers fails both ways, for good:
#      the other side's operations towards it end with -FI_ECONNRESET
#      instead of waiting for replies that cannot come. rf_stress exits 1,
#      its peers count the failures by code ("operations failed with: 12
#      ..."), every peer reports (no operation is left pending), and no
#      process dies of a signal.
# Needs root (or CAP_SYS_ADMIN) for the mount namespace: without it prints
# "SKIP" and exits 0. Nothing outside the namespace is touched.
#
#   c-tests/shmfull/run.sh [build dir]     (FI_PROVIDER_PATH must be set)
set -u
build=${1:-build}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
stress=$(cd "$build/stress" && pwd)/rf_stress
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Whatever a crashing process leaves in its working directory stays out of
# the tree.
cd "$tmp" || exit 1
if ! unshare -m true 2>/dev/null || ! unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs /dev/shm' 2>/dev/null; then
	. "$(dirname "$0")/../skip.sh"
	skip "shmfull: no permission for a mount namespace with its own /dev/shm (run as root)"
fi
fails=0
# run <name> <tmpfs size> <rf_stress args...>: output in $tmp/<name>, status in $tmp/<name>.rc
run() {
	local name=$1 size=$2
	shift 2
	unshare -m sh -c 'mount -t tmpfs -o size="$0" tmpfs /dev/shm && exec "$@"' "$size" \
		env FI_LOG_LEVEL=warn FI_RUSTFAB_SHM_RING_CELLS=16384 FI_RUSTFAB_SHM_CMA=0 \
		timeout 120 "$stress" -t shm -p 3 -n 2 "$@" >"$tmp/$name" 2>&1
	echo $? >"$tmp/$name.rc"
}
verdict() { # name ok? message
	if [ "$2" = yes ]; then
		echo "ok   shmfull $1"
	else
		echo "FAIL shmfull $1: $3"
		sed 's/^/    /' "$tmp/$1" | tail -n 15
		fails=$((fails + 1))
	fi
}
signalled() { grep -q -e 'killed by signal' -e 'terminated with signal' "$tmp/$1"; }

run confined 1600k -o 3000 -m 65536 -T 100
rc=$(cat "$tmp/confined.rc")
ok=no
if [ "$rc" = 0 ] && ! signalled confined && grep -q 'ok (0 mismatches)' "$tmp/confined" &&
	grep -q 'has no room for the rest of a peer' "$tmp/confined"; then
	ok=yes
fi
verdict confined $ok "rf_stress exited $rc (want 0, every message checked, no peer killed by a signal, and the warning that the rings stayed small)"

run no-room 600k -o 1000 -m 65536 -T 20 -W 3
rc=$(cat "$tmp/no-room.rc")
ok=no
if [ "$rc" = 1 ] && ! signalled no-room && grep -q 'operations failed with: 12 (Cannot allocate memory)' "$tmp/no-room" &&
	! grep -q -e 'never completed' -e 'did not report' "$tmp/no-room"; then
	ok=yes
fi
verdict no-room $ok "rf_stress exited $rc (want 1: operations failing with -FI_ENOMEM, none left pending, no process killed by a signal)"

echo "shmfull: $((2 - fails)) passed, $fails failed"
[ $fails -eq 0 ]
