#!/usr/bin/env bash
# make soak (and a short one in make test): one long-lived rf_soak server
# (c-tests/soak/rf_soak.c) under mixed traffic — echoed untagged and tagged
# messages of 96 B .. 1 MiB, RMA writes read back, fetching atomics, every
# byte and value checked — from a witness client that lives throughout, four
# normal clients, a slow reader (1 MiB answers left unread for 2 s) and a
# flooder (bursts of injected messages), while the clients other than the
# witness are killed (SIGKILL) at random and restarted; over each transport
# of SOAK_TRANSPORTS (default "shm tcp auto"), SOAK_SECONDS each (default
# 60; make test: 15).
#
#   c-tests/soak/run.sh <build dir>
#
# Every half second the server's RSS (VmRSS, and its anonymous, file and
# shared-memory parts), its open descriptors and the
# /dev/shm segments owned by this run's processes (count, KiB) are sampled
# into <build>/soak/<transport>.csv. Fails when:
#  * the server's heap (RssAnon) grows more than SOAK_RSS_MB (default 64)
#    MiB over its value once warm (the first sample after a quarter of the
#    run, at most 5 s), at any sample; or the shared memory it maps
#    (RssShmem) exceeds SOAK_SHMEM_MB (default 320: its own segment with
#    every ring touched is 257 MiB, docs/shm.md, plus the live clients'
#    rings it writes to);
#  * its descriptors grow more than SOAK_FD_GROWTH (default 64) over the warm
#    value at any sample, or end more than SOAK_FD_SLACK (default 8) above it
#    once every client is gone;
#  * a segment of a killed client is left once a new client has started
#    (rustfab removes dead owners' segments at a process's first endpoint,
#    docs/shm.md), or a doorbell file of this run is left without its segment;
#  * at the end the server still maps more than SOAK_DEAD_MAPS (default 0)
#    removed segments of killed clients (a removed segment's pages are freed
#    only when the last process mapping it lets go);
#  * a client or the server sees a corrupt byte or value (status 1, CORRUPT),
#    an operation takes over 10 s (HANG), a client that was not killed, the
#    witness or the late client exits non-zero, or anything outlives its
#    timeout.
# SOAK_PLANT plants a fault to show a check fails: fdleak (the server leaks
# a descriptor a second), corrupt (a client flips a payload byte), noreap
# (no client starts after the last kills, so nothing removes the killed
# clients' segments), rss (SOAK_RSS_MB=0: the bound cannot hold).
# Only 127.0.0.1 (FI_RUSTFAB_IFACE=lo).
set -u
build=${1:-build}
soak=$build/soak/rf_soak
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
export FI_PROVIDER=rustfab FI_RUSTFAB_IFACE=lo
secs=${SOAK_SECONDS:-60}
transports=${SOAK_TRANSPORTS:-shm tcp auto}
rss_mb=${SOAK_RSS_MB:-64}
shmem_mb=${SOAK_SHMEM_MB:-320}
fd_growth=${SOAK_FD_GROWTH:-64}
fd_slack=${SOAK_FD_SLACK:-8}
dead_maps_max=${SOAK_DEAD_MAPS:-0}
plant=${SOAK_PLANT:-}
[ "$plant" = rss ] && rss_mb=0
export SOAK_PLANT=$plant
out=$build/soak
uid=$(id -u)
bells=/dev/shm/rustfab-$uid
tmp=$(mktemp -d)
launched=() # every timeout wrapper started (cleanup)
cleanup() {
	for p in "${launched[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
failed=()
fail() { failed+=("$1"); echo "FAIL $1"; }

# The process a timeout wrapper runs (its only child).
child_of() { pgrep -P "$1" | head -n 1; }

# Segments of ours: /dev/shm/rustfab-<uid>-<token> whose header names an
# owner pid (bytes 20-23) that this run started. Prints "count KiB dead",
# dead: those whose owner is no longer alive.
shm_census() {
	local n=0 kb=0 dead=0 f pid s
	for f in /dev/shm/rustfab-"$uid"-*; do
		[ -f "$f" ] || continue
		pid=$(od -An -tu4 -j20 -N4 "$f" 2>/dev/null | tr -d ' ')
		[ -n "$pid" ] && grep -qx "$pid" "$tmp/pids" || continue
		n=$((n + 1))
		s=$(du -k "$f" 2>/dev/null | cut -f1) # gone meanwhile: 0
		kb=$((kb + ${s:-0}))
		kill -0 "$pid" 2>/dev/null || dead=$((dead + 1))
	done
	echo "$n $kb $dead"
}

# Segments the server still maps after they were removed (their owner
# died): their pages stay allocated while any process maps them.
dead_maps() { grep -c "/dev/shm/rustfab-$uid-[0-9a-f]* (deleted)" "/proc/$1/maps" 2>/dev/null || true; }

# Doorbells whose segment is gone, among the tokens this run saw.
orphan_bells() {
	local n=0 t
	for t in $(sort -u "$tmp/tokens" 2>/dev/null); do
		[ -e "$bells/$t" ] && [ ! -e "/dev/shm/rustfab-$uid-$t" ] && n=$((n + 1))
	done
	echo $n
}

note_tokens() {
	local f pid
	for f in /dev/shm/rustfab-"$uid"-*; do
		[ -f "$f" ] || continue
		pid=$(od -An -tu4 -j20 -N4 "$f" 2>/dev/null | tr -d ' ')
		[ -n "$pid" ] && grep -qx "$pid" "$tmp/pids" && echo "${f##*-}" >>"$tmp/tokens"
	done
}

run_one() {
	local t=$1 addr=$tmp/addr.$1 csv=$out/$1.csv
	export RF_TRANSPORT=$t
	: >"$tmp/pids"; : >"$tmp/tokens"
	rm -f "$addr"
	declare -A cpid gen mode
	local killed=" " kills=0 errs=0
	timeout -s KILL $((secs + 90)) "$soak" server "$addr" >"$tmp/server.$t" 2>&1 &
	local stp=$!; launched+=("$stp")
	local d=$((SECONDS + 20))
	while [ ! -s "$addr" ] && [ $SECONDS -lt $d ]; do sleep 0.1; done
	[ -s "$addr" ] || { fail "$t: the server never wrote its address"; cat "$tmp/server.$t"; return; }
	local spid; spid=$(child_of "$stp"); echo "$spid" >>"$tmp/pids"
	local t0=$SECONDS end=$((SECONDS + secs))
	start() { # index mode seconds
		local i=$1
		gen[$i]=$(( ${gen[$i]:--1} + 1 ))
		mode[$i]=$2
		local x=(); [ "$plant" = corrupt ] && x=(-X corrupt)
		timeout -s KILL $(($3 + 40)) "$soak" client "$addr" "$i" "${gen[$i]}" "$2" "$3" "${x[@]}" \
			>"$tmp/client.$t.$i.${gen[$i]}" 2>&1 &
		cpid[$i]=$!; launched+=("$!")
		local c; for _ in 1 2 3 4 5 6 7 8 9 10; do c=$(child_of "${cpid[$i]}") && [ -n "$c" ] && break; sleep 0.01; done
		echo "$c" >>"$tmp/pids"
	}
	# A client that ended by itself must have succeeded; one we killed is
	# not asked.
	reap() { # index
		local i=$1 rc
		wait "${cpid[$i]}" 2>/dev/null; rc=$?
		case "$killed" in *" ${cpid[$i]} "*) return ;; esac
		if [ $rc -ne 0 ]; then
			errs=$((errs + 1))
			fail "$t: client $i.${gen[$i]} (${mode[$i]}) exited $rc: $(tail -n 2 "$tmp/client.$t.$i.${gen[$i]}" | tr '\n' ' ')"
		fi
	}
	start 0 witness "$secs"
	# The others outlive the witness: every one is killed, at the latest
	# when the witness is done.
	start 1 slow $((secs + 30)); start 2 flood $((secs + 30))
	for i in 3 4 5 6; do start $i normal $((secs + 30)); done
	echo "t,rss_kb,anon_kb,file_kb,shmem_kb,fds,shm_segments,shm_kb,shm_dead,dead_maps,kills" >"$csv"
	local warm_rss= warm_fd= max_rss=0 max_fd=0 anon=0 warm_anon= max_anon=0 shmem=0 max_shmem=0 warm_at=$(( secs / 4 < 5 ? secs / 4 : 5 ))
	[ $warm_at -lt 2 ] && warm_at=2
	while kill -0 "${cpid[0]}" 2>/dev/null; do
		sleep 0.5
		# The killer: each half second, maybe one client (not the witness).
		local v=$((1 + RANDOM % 6)) c
		if [ $SECONDS -lt $((end - 2)) ] && [ $((RANDOM % 3)) -ne 0 ] && [ "${cpid[$v]}" != 0 ]; then
			c=$(child_of "${cpid[$v]}")
			if [ -n "$c" ]; then
				kill -9 "$c" 2>/dev/null
				killed+="${cpid[$v]} "; kills=$((kills + 1))
			fi
			reap $v; cpid[$v]=0
		fi
		# Clients that ended (killed, or their time up) are restarted while
		# the run has time left.
		for i in 1 2 3 4 5 6; do
			if [ "${cpid[$i]}" != 0 ] && ! kill -0 "${cpid[$i]}" 2>/dev/null; then reap $i; cpid[$i]=0; fi
			[ "${cpid[$i]}" = 0 ] && [ $SECONDS -lt $((end - 2)) ] && start $i "${mode[$i]}" $((secs + 30))
		done
		note_tokens
		local st rss fds sh parts
		st=/proc/$spid/status
		[ -r "$st" ] || { fail "$t: the server died: $(tail -n 3 "$tmp/server.$t" | tr '\n' ' ')"; break; }
		rss=$(awk '/^VmRSS/{print $2}' "$st")
		parts=$(awk '/^RssAnon|^RssFile|^RssShmem/{printf ",%s", $2}' "$st")
		fds=$(ls /proc/"$spid"/fd 2>/dev/null | wc -l)
		sh=$(shm_census)
		echo "$((SECONDS - t0)),$rss$parts,$fds,${sh// /,},$(dead_maps "$spid"),$kills" >>"$csv"
		anon=$(awk '/^RssAnon/{print $2}' "$st"); shmem=$(awk '/^RssShmem/{print $2}' "$st")
		if [ -z "$warm_rss" ] && [ $((SECONDS - t0)) -ge $warm_at ]; then warm_rss=$rss; warm_anon=$anon; warm_fd=$fds; fi
		[ "$rss" -gt "$max_rss" ] && max_rss=$rss
		[ "$anon" -gt "$max_anon" ] && max_anon=$anon
		[ "$shmem" -gt "$max_shmem" ] && max_shmem=$shmem
		[ "$fds" -gt "$max_fd" ] && max_fd=$fds
		if [ $SECONDS -gt $((end + 60)) ]; then fail "$t: HANG: the witness has not finished 60 s after its time"; break; fi
	done
	reap 0
	# The rest go the hard way too: every client but the witness is killed.
	for i in 1 2 3 4 5 6; do
		[ "${cpid[$i]}" = 0 ] && continue
		c=$(child_of "${cpid[$i]}")
		[ -n "$c" ] && { kill -9 "$c" 2>/dev/null; killed+="${cpid[$i]} "; kills=$((kills + 1)); }
		reap $i
	done
	note_tokens
	local before; before=$(shm_census)
	# A new client after the kills: the server still serves a newcomer, and
	# its first endpoint removes the killed clients' segments.
	if [ "$plant" != noreap ]; then
		start 7 normal 2
		reap 7
	fi
	sleep 1
	local st=/proc/$spid/status rss fds sh dead orphans parts
	if [ ! -r "$st" ]; then
		fail "$t: the server died: $(tail -n 3 "$tmp/server.$t" | tr '\n' ' ')"
		return
	fi
	rss=$(awk '/^VmRSS/{print $2}' "$st")
	parts=$(awk '/^RssAnon|^RssFile|^RssShmem/{printf ",%s", $2}' "$st")
	fds=$(ls /proc/"$spid"/fd | wc -l)
	sh=$(shm_census); dead=${sh##* }
	orphans=$(orphan_bells)
	local dmaps; dmaps=$(dead_maps "$spid")
	echo "$((SECONDS - t0)),$rss$parts,$fds,${sh// /,},$dmaps,$kills" >>"$csv"
	anon=$(awk '/^RssAnon/{print $2}' "$st"); shmem=$(awk '/^RssShmem/{print $2}' "$st")
	[ "$rss" -gt "$max_rss" ] && max_rss=$rss
	[ "$anon" -gt "$max_anon" ] && max_anon=$anon
	[ "$shmem" -gt "$max_shmem" ] && max_shmem=$shmem
	: "${warm_rss:=$rss}" "${warm_anon:=$anon}" "${warm_fd:=$fds}"
	kill -TERM "$spid"
	wait "$stp"; local src=$?
	grep -h "rf_soak" "$tmp/server.$t"
	echo "soak $t: ${secs}s, $kills clients killed; server RSS $((warm_rss / 1024)) MiB warm, max $((max_rss / 1024)), end $((rss / 1024));" \
		"its heap (RssAnon) $((warm_anon / 1024)) MiB warm, max $((max_anon / 1024)) (bound +$rss_mb MiB);" \
		"shared memory mapped (RssShmem) max $((max_shmem / 1024)) MiB (bound $shmem_mb MiB);" \
		"descriptors $warm_fd warm, max $max_fd, end $fds (bounds +$fd_growth, +$fd_slack at the end);" \
		"segments of this run before the new client: ${before% *} (count KiB), after: ${sh% *}, dead owners' $dead, orphan doorbells $orphans;" \
		"removed segments the server still maps: $dmaps"
	[ $src -eq 0 ] || fail "$t: the server exited $src: $(tail -n 3 "$tmp/server.$t" | tr '\n' ' ')"
	[ $((max_anon - warm_anon)) -le $((rss_mb * 1024)) ] ||
		fail "$t: server heap (RssAnon) grew $(((max_anon - warm_anon) / 1024)) MiB over its warm $((warm_anon / 1024)) MiB (bound $rss_mb MiB)"
	[ "$max_shmem" -le $((shmem_mb * 1024)) ] ||
		fail "$t: server maps $((max_shmem / 1024)) MiB of shared memory (bound $shmem_mb MiB)"
	[ $((max_fd - warm_fd)) -le "$fd_growth" ] ||
		fail "$t: server descriptors grew to $max_fd from $warm_fd (bound +$fd_growth)"
	[ $((fds - warm_fd)) -le "$fd_slack" ] ||
		fail "$t: server holds $fds descriptors with every client gone, $warm_fd when warm (bound +$fd_slack)"
	[ "$dead" -eq 0 ] || fail "$t: $dead segment(s) of killed clients left in /dev/shm at the end"
	[ "$dmaps" -le "$dead_maps_max" ] ||
		fail "$t: the server still maps $dmaps removed segments of killed clients (bound $dead_maps_max): their pages stay allocated"
	[ "$orphans" -eq 0 ] || fail "$t: $orphans doorbell file(s) of this run left without their segment"
}

mkdir -p "$out"
for t in $transports; do
	echo "== soak over $t (${secs}s${plant:+, planted: $plant})"
	run_one "$t"
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "soak: ${#failed[@]} failure(s)"
	exit 1
fi
echo "soak: passed ($transports; ${secs}s each; samples in $out/<transport>.csv)"
