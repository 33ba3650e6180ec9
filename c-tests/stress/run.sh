#!/usr/bin/env bash
# make stress (not part of make test; about 5 minutes on a quiet 2-core
# machine, bounded by timeouts everywhere):
#
#  1. the checker of rf_stress is shown to work: a corrupted byte, a lost
#     message and a duplicated one (rf_stress -X) must each fail the run;
#  2. rf_stress (c-tests/stress/rf_stress.c): many threads in many processes,
#     send/recv/tagged/inject/cancel with random sizes up to 4 MiB, every
#     byte checked, over shm, tcp and auto; then again with FI_PROGRESS_AUTO,
#     more peers and small messages only;
#  3. with an installed fabtests (FABTESTS_PREFIX, e.g. /opt/fabtests):
#     fi_ubertest with the sockets provider's configurations
#     ($FABTESTS_PREFIX/share/fabtests/test_configs/sockets/*.test, prov_name
#     rewritten to rustfab into a temporary file) over shm, tcp and auto, and
#     fi_rdm_stress with job files written here (over tcp; see below).
#     Without fabtests it says so and runs 1 and 2 only.
#
#   c-tests/stress/run.sh <build dir>
#
# STRESS_SECONDS (default 30) is how long each main rf_stress run sends.
# quick.test and verify.test (the unit tests, MSG endpoints included) run
# over all three transports. all.test (72 latency and bandwidth sweeps, 10k
# round trips per size up to 6 MB) and complete.test (11,596 tests: every
# function x endpoint x AV x completion x class combination, latency and
# bandwidth) are sweeps, not stress, and take far longer than this target's
# budget (complete.test: 3,668 of its 11,596 tests in 15 minutes over shm at
# load 8): they run only with UBERTEST_ALL=1 (each under a 15-minute timeout).
# Exit status 0 only if everything passed; a failure of fi_ubertest listed
# in c-tests/stress/ubertest.known (each with the reason it is ubertest's
# bug, not rustfab's) is reported but does not fail the run.
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
export FI_PROVIDER=rustfab
# tcp endpoints bound to a wildcard advertise loopback: traffic stays local.
export FI_RUSTFAB_IFACE=${FI_RUSTFAB_IFACE:-lo}
secs=${STRESS_SECONDS:-30}
stress=$build/stress/rf_stress
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
start=$(date +%s)
failed=(); notes=()
fail() { failed+=("$1"); echo "FAIL $1"; }

echo "== 1. the checks can fail: faults planted on the sending side (rf_stress -X)"
for x in corrupt lose dup; do
	timeout -k 5 120 "$stress" -t shm -p 3 -n 2 -o 400 -W 5 -T 60 -X "$x" >"$tmp/x.out" 2>&1
	rc=$?
	case $x in
	corrupt) want='byte [0-9]* is 0x' ;;
	lose) want='received [0-9]* messages from peer' ;;
	dup) want='received twice' ;;
	esac
	if [ $rc -eq 1 ] && grep -q "$want" "$tmp/x.out"; then
		echo "ok   -X $x: detected ($(grep -m1 "$want" "$tmp/x.out" | sed 's/^rf_stress[^:]*: //'))"
	else
		fail "rf_stress -X $x was not detected (exit $rc)"
		tail -n 5 "$tmp/x.out"
	fi
done

echo
echo "== 2. rf_stress: many threads x many peers, every byte checked"
# run_stress <label> <args...>
run_stress() {
	local label=$1; shift
	local t0=$(date +%s)
	timeout -k 5 $((secs * 4 + 240)) "$stress" "$@" >"$tmp/s.out" 2>&1
	local rc=$?
	sed 's/^/   /' "$tmp/s.out"
	if [ $rc -eq 0 ]; then
		echo "ok   $label ($(($(date +%s) - t0)) s)"
	else
		[ $rc -eq 124 ] && echo "   (timed out)"
		fail "$label (exit $rc)"
	fi
}
for tr in shm tcp auto; do
	run_stress "rf_stress $tr: 6 peers x 4 threads, 1 B-4 MiB" -t "$tr" -p 6 -n 4 -o 1000000 -d "$secs" -T $((secs * 4 + 200))
done
for tr in shm tcp auto; do
	run_stress "rf_stress $tr: 12 peers x 2 threads, FI_PROGRESS_AUTO, 1 B-4 KiB" \
		-t "$tr" -p 12 -n 2 -o 1000000 -d $((secs / 3 + 1)) -m 4096 -A -s 7 -T $((secs * 4 + 200))
done

# ---- fabtests
prefix=${FABTESTS_PREFIX:-}
bin=$prefix/bin
cfgdir=$prefix/share/fabtests/test_configs/sockets
if [ -z "$prefix" ] || [ ! -x "$bin/fi_ubertest" ] || [ ! -d "$cfgdir" ]; then
	echo
	echo "== 3. fabtests not found (set FABTESTS_PREFIX to an installed fabtests 1.17, e.g. /opt/fabtests):"
	echo "   fi_ubertest and fi_rdm_stress were NOT run"
	notes+=("fabtests not found: fi_ubertest and fi_rdm_stress not run")
else
	echo
	echo "== 3a. fi_ubertest, the sockets provider's configurations with prov_name rustfab"
	port=$((20000 + $$ % 20000))
	# Under other names: runfabtests.sh's cleanup (someone else's, on a
	# shared machine) kill -9s every process whose name starts with "fi_".
	# And on our own ports (-q control, -P fabric): the default 9228 is
	# what every other fabtest on the machine uses.
	ln -s "$bin/fi_ubertest" "$tmp/rf-ubertest"
	ln -s "$bin/fi_rdm_stress" "$tmp/rf-rdm-stress"
	for cfg in "$cfgdir"/*.test; do
		name=$(basename "$cfg")
		sed 's/prov_name: *sockets/prov_name: rustfab/' "$cfg" >"$tmp/$name"
		if grep -q 'prov_name: *sockets' "$tmp/$name" || ! grep -q 'prov_name: rustfab' "$tmp/$name"; then
			fail "ubertest: could not rewrite prov_name in $cfg"
			continue
		fi
		trs="shm tcp auto"
		case $name in all.test | complete.test)
			# Sweeps, not stress: thousands of tests (see the header).
			[ "${UBERTEST_ALL:-0}" = 1 ] || { notes+=("ubertest $name not run (UBERTEST_ALL=1 runs it)"); continue; } ;;
		esac
		for tr in $trs; do
			port=$((port + 1))
			t0=$(date +%s)
			# As runfabtests.sh does: the server (-x: one run), then the client.
			FI_RUSTFAB_TRANSPORT=$tr timeout -k 5 900 "$tmp/rf-ubertest" -q $port -x >"$tmp/us.out" 2>&1 &
			spid=$!; pids+=($spid)
			sleep 1
			FI_RUSTFAB_TRANSPORT=$tr timeout -k 5 900 "$tmp/rf-ubertest" -q $port -P $((port + 10000)) \
				-u "$tmp/$name" 127.0.0.1 >"$tmp/uc.out" 2>&1
			crc=$?
			[ $crc -ne 0 ] && [ $crc -ne 61 ] && [ $crc -ne 5 ] && kill "$spid" 2>/dev/null
			wait "$spid"; src=$?
			# Each test that ran prints its description ("[rustfab, unit,
			# tsendv--, FI_EP_RDM, FI_AV_MAP, ...]") before its result.
			awk -v cfg="$name" '
				/^\[rustfab,/ { split($0, f, ", "); d = cfg " " f[2] " " f[3] " " f[4] " " f[5] }
				/^Ending test/ { r = $0; sub(/^[^:]*result: /, "", r);
					if (r != "Success" && r != "No data available" && r != "Function not implemented")
						print d " -> " r; d = "" }' "$tmp/uc.out" >"$tmp/ufail"
			counts=$(tail -n 7 "$tmp/uc.out" | awk -F: '/^(Success|Skipped|ENODATA|ENOSYS|EIO|ERROR)/ {gsub(/ /, "", $1); printf "%s %d, ", $1, $2}')
			line="ubertest $name over $tr: ${counts%, } ($(($(date +%s) - t0)) s)"
			unexpected=0
			while IFS= read -r f; do
				[ -n "$f" ] || continue
				if grep -v '^#' "$here/ubertest.known" | grep -qxF "$f"; then
					echo "   known ubertest bug (c-tests/stress/ubertest.known): $f"
					notes+=("$tr: $f (known ubertest bug)")
				else
					echo "   FAILED: $f"
					unexpected=1
				fi
			done <"$tmp/ufail"
			if ! grep -q '^Success:' "$tmp/uc.out" || [ $src -ge 128 ] || [ $crc -ge 124 ]; then
				unexpected=1
				echo "   client exit $crc, server exit $src"; tail -n 5 "$tmp/uc.out" "$tmp/us.out"
			fi
			if [ $unexpected -eq 0 ]; then echo "ok   $line"; else fail "$line"; fi
		done
	done

	echo
	echo "== 3b. fi_rdm_stress over tcp (32 server threads on one CQ, 16 client processes)"
	# fi_rdm_stress 1.17 asks for FI_MSG | FI_TAGGED | FI_RMA; the polite
	# job does every kind of request it has (messages, tagged, injected,
	# RMA read and write of the server's registered buffers). Over tcp only:
	# its hello message carries the client's address in 32 bytes, and
	# rustfab's shm and auto addresses are 34 and 58 bytes (fi_getname
	# says -FI_ETOOSMALL).
	cat >"$tmp/polite.json" <<-'EOF'
	"
	rustfab make stress: message and tagged requests of many sizes, then goodbye
	"
	[
		{ "op" : "msg_req", "size" : 1 },
		{ "op" : "msg_resp" },
		{ "op" : "tag_req", "size" : 65536 },
		{ "op" : "tag_resp" },
		{ "op" : "msg_req", "size" : 1000000 },
		{ "op" : "msg_resp" },
		{ "op" : "msg_inject_req", "size" : 32 },
		{ "op" : "msg_resp" },
		{ "op" : "tag_req", "size" : 4000000 },
		{ "op" : "tag_resp" },
		{ "op" : "msg_req", "size" : 3000 },
		{ "op" : "msg_resp" },
		{ "op" : "read_req", "size" : 100 },
		{ "op" : "read_resp" },
		{ "op" : "write_req", "size" : 200000 },
		{ "op" : "write_resp" },
		{ "op" : "read_req", "size" : 3000000 },
		{ "op" : "read_resp" },
		{ "op" : "write_req", "size" : 7 },
		{ "op" : "write_resp" },
		{ "op" : "goodbye" }
	]
	EOF
	cat >"$tmp/rude.json" <<-'EOF'
	"
	rustfab make stress: clients that leave while the server is answering
	"
	[
		{ "op" : "msg_req", "size" : 4000000 },
		{ "op" : "sleep", "ms" : 1 },
		{ "op" : "tag_req", "size" : 3000000 },
		{ "op" : "msg_req", "size" : 100 },
		{ "op" : "exit" }
	]
	EOF
	port=$((port + 1))
	t0=$(date +%s)
	timeout -k 5 600 "$tmp/rf-rdm-stress" -p rustfab -d tcp -s 127.0.0.1 -B $port >"$tmp/rs.out" 2>&1 &
	spid=$!; pids+=($spid)
	sleep 1
	rdm() { # <label> polite|rude <goodbyes expected> <args...>
		local label=$1 chk=$2 want=$3; shift 3
		timeout -k 5 300 "$tmp/rf-rdm-stress" -p rustfab -d tcp -P $port "$@" 127.0.0.1 >"$tmp/rc.out" 2>&1
		local rc=$? ok=1 got
		[ $rc -eq 0 ] || ok=0
		case $chk in
		polite) # every client finished its job and saw no error
			got=$(grep -c 'rpc op goodbye' "$tmp/rc.out")
			[ "$got" -eq "$want" ] || { ok=0; echo "   $got of $want clients said goodbye"; }
			grep -E 'error|ret=-' "$tmp/rc.out" | head -n 5
			grep -qE 'error|ret=-' "$tmp/rc.out" && ok=0 ;;
		rude) ;; # they leave on purpose; the server must survive it
		esac
		if [ $ok -eq 1 ]; then echo "ok   fi_rdm_stress $label"; else
			fail "fi_rdm_stress $label (exit $rc)"; tail -n 5 "$tmp/rc.out"; fi
	}
	rdm "16 polite clients x 3 rounds" polite 48 -C 16 -I 3 -u "$tmp/polite.json"
	rdm "16 clients leaving mid-answer x 3 rounds" rude 0 -C 16 -I 3 -u "$tmp/rude.json"
	rdm "one more polite client after them" polite 1 -C 1 -I 1 -u "$tmp/polite.json"
	if kill -0 $spid 2>/dev/null; then
		echo "ok   fi_rdm_stress server alive after $(grep -c 'start rpc' "$tmp/rs.out") requests," \
			"$(grep -c 'unreachable, removing' "$tmp/rs.out") answers to departed clients failed as they should"
	else
		wait $spid; fail "fi_rdm_stress server died (exit $?)"; tail -n 10 "$tmp/rs.out"
	fi
	kill $spid 2>/dev/null; wait $spid 2>/dev/null
	if grep -q 'Data check error' "$tmp/rs.out"; then
		fail "fi_rdm_stress server: its send buffers changed under it"; grep -m3 'Data check error' "$tmp/rs.out"
	fi
	echo "   fi_rdm_stress: $(($(date +%s) - t0)) s"
fi

echo
for n in "${notes[@]}"; do echo "note: $n"; done
echo "stress: $(($(date +%s) - start)) s, ${#failed[@]} failed"
for f in "${failed[@]}"; do echo "  FAIL $f"; done
[ ${#failed[@]} -eq 0 ]
