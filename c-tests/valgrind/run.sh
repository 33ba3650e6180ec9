#!/usr/bin/env bash
# make memcheck: the C test programs (c-tests/test_*, over shm, and the
# transport-parametrized ones over tcp and auto too), a ping-pong between two
# processes (rf_bench: RDM over shm, tcp and auto, MSG over tcp, buffered
# receives) and a short run of the stress program (c-tests/stress), each
# under valgrind memcheck, rustfab loaded as usual.
#
#   c-tests/valgrind/run.sh <build dir>
#
# Every process is checked, not only the one started: forked helpers are
# followed by valgrind itself, exec'd ones through --trace-children=yes, and
# each writes its own log (--log-file=...%p). A run fails when
#   * any process's log reports an error (ERROR SUMMARY not 0): invalid
#     reads or writes, uses of uninitialised values, syscalls given
#     uninitialised or unaddressable memory, bad frees, overlapping copies —
#     in rustfab (librustfab-fi.so), in the test program or anywhere else
#     that is not suppressed;
#   * any process leaks memory definitely or indirectly (leak kinds
#     "definite,indirect" count as errors). "Possibly lost" and "still
#     reachable" do not: at exit rustfab's long-lived objects (the progress
#     thread, the provider's statics) and libfabric's own are reachable or
#     only reachable through interior pointers, which is no leak;
#   * the program itself fails or times out (C_TEST_TIMEOUT seconds, 600 by
#     default here: valgrind is 20-50 times slower).
# The only suppressions are c-tests/valgrind/rustfab.supp, each for
# libfabric, glibc or ld.so with its reason; none may name rustfab.
#
# Deadlines inside the tests stretch by RF_TIMEOUT_SCALE (rdm_common.h), and
# valgrind runs with --fair-sched=yes: its default scheduler lets a spinning
# thread starve the others for many seconds (seen with test_threads).
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
supp=$here/rustfab.supp
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
export FI_PROVIDER=${FI_PROVIDER:-rustfab}
# tcp endpoints bound to a wildcard advertise loopback: traffic stays local.
export FI_RUSTFAB_IFACE=${FI_RUSTFAB_IFACE:-lo}
export RF_TIMEOUT_SCALE=${RF_TIMEOUT_SCALE:-4}
# test_threads: 1000 messages per sender instead of 3000 (test_threads.c).
export RF_THREADS_MESSAGES=${RF_THREADS_MESSAGES:-1000}
# Split rendezvous off (docs/shm.md, Large messages): the sender's
# process_vm_writev fills the receive buffer from another process, which
# valgrind cannot see (the bytes stay "uninitialised" in its shadow and every
# check of them is reported). The split's logic is tested in the sim tests.
export FI_RUSTFAB_SHM_SPLIT_MIN=${FI_RUSTFAB_SHM_SPLIT_MIN:-0}
per_run_timeout=${C_TEST_TIMEOUT:-600}

if ! command -v valgrind >/dev/null; then
	echo "memcheck: valgrind is not installed (apt-get install valgrind); nothing was checked"
	exit 1
fi
if grep -v '^#' "$supp" | grep -qi rustfab; then
	echo "memcheck: $supp names rustfab: only libfabric, glibc and ld.so may be suppressed"
	exit 1
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
runs=0; bad=()
start=$(date +%s)

# run <label> <env assignments...> -- <program> [args...]
run() {
	local label=$1; shift
	local envs=()
	while [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	local dir=$logs/$runs
	mkdir -p "$dir"
	runs=$((runs + 1))
	local t0=$(date +%s)
	env "${envs[@]}" timeout -k 10 "$per_run_timeout" valgrind --tool=memcheck \
		--trace-children=yes --fair-sched=yes --num-callers=40 \
		--leak-check=full --show-leak-kinds=definite,indirect \
		--errors-for-leak-kinds=definite,indirect \
		--suppressions="$supp" --error-exitcode=97 \
		--log-file="$dir/vg.%p.log" "$@" >"$dir/out" 2>&1
	local rc=$? why=""
	# A log with errors: its summary line says so (a process killed by
	# SIGKILL, as some tests do to their helpers, writes none and has
	# nothing to report).
	local errlogs
	errlogs=$(grep -l -E 'ERROR SUMMARY: [1-9]' "$dir"/vg.*.log 2>/dev/null)
	if [ -n "$errlogs" ]; then
		why="valgrind found errors"
	elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		why="timed out after ${per_run_timeout}s"
	elif [ $rc -ne 0 ]; then
		why="exited with status $rc"
	fi
	if [ -z "$why" ]; then
		printf 'ok   %-44s %4ss, %s processes\n' "$label" $(($(date +%s) - t0)) "$(ls "$dir"/vg.*.log 2>/dev/null | wc -l)"
		return
	fi
	printf 'FAIL %-44s %s\n' "$label" "$why"
	bad+=("$label")
	grep -E '^(FAIL|    )' "$dir/out" | head -n 20
	[ $rc -ne 0 ] && [ -z "$errlogs" ] && tail -n 20 "$dir/out"
	for l in $errlogs; do
		# The errors and leak records, without valgrind's banner.
		echo "---- $(basename "$l")"
		sed '1,/^==[0-9]*== Command:/d' "$l" | head -n 120
	done
}

for t in "$build"/c-tests/test_*; do
	[ -x "$t" ] || continue
	run "$(basename "$t") (shm)" RF_TRANSPORT=shm -- "$t"
done
for tr in tcp auto; do
	for n in test_rdm test_threads test_buffered test_rma test_atomic test_close_wait test_shared_av test_scalable test_dgram; do
		[ -x "$build/c-tests/$n" ] && run "$n ($tr)" RF_TRANSPORT=$tr -- "$build/c-tests/$n"
	done
done

# A ping-pong between two processes (the parent and a forked child), the
# sizes crossing the eager, rendezvous and CMA paths.
bench=$build/bench/rf_bench
pp="-s 1,4096,65537,1048576 -i 50 -w 8"
run "rf_bench ping-pong shm" -- "$bench" -p rustfab -d shm $pp
run "rf_bench ping-pong tcp" -- "$bench" -p rustfab -d tcp $pp
run "rf_bench ping-pong auto" -- "$bench" -p rustfab -d auto $pp
run "rf_bench ping-pong tcp MSG" -- "$bench" -p rustfab -d tcp -e msg $pp
run "rf_bench ping-pong shm buffered" -- "$bench" -p rustfab -d shm -B $pp

# The stress program, small: 3 processes x 3 threads, up to 1 MiB, every
# byte checked.
stress=$build/stress/rf_stress
if [ -x "$stress" ]; then
	for tr in shm tcp auto; do
		run "rf_stress $tr (3 peers x 3 threads)" -- "$stress" -t "$tr" -p 3 -n 3 -o 300 -m 1048576 -T 240
	done
fi

echo "memcheck: $runs runs in $(($(date +%s) - start))s, ${#bad[@]} failed${bad:+: ${bad[*]}}"
[ ${#bad[@]} -eq 0 ]
