#!/usr/bin/env bash
# Runs an *installed* upstream fabtests (libfabric v1.17.0's fabtests/, or a
# 2.x one) against rustfab. It never builds fabtests. Point it at the install:
#
#   FABTESTS_PREFIX=/opt/fabtests fabtests-integration/run.sh [shm|tcp|auto] [set|test...]
#
# A fabtests of libfabric 2.x runs on the 2.x core it was built with: its
# binaries find it through their RUNPATH, or through LIBFABRIC_PREFIX (its
# lib/ goes first on LD_LIBRARY_PATH), e.g.
#
#   FABTESTS_PREFIX=/opt/fabtests-2.6 LIBFABRIC_PREFIX=/opt/libfabric-2.6 \
#       fabtests-integration/run.sh tcp unit functional short standard
#
# The core the binaries load is printed first.
#
# Sets: "foundation" (issue 2 unit tests), "cq" (issue 3 unit tests), or the
# runfabtests.sh sets "unit", "functional", "short", "standard", "complex" (run through the upstream
# runfabtests.sh with this directory's exclude file). Without FABTESTS_PREFIX
# (or with no binaries there) it says "fabtests not found" and exits 77:
# that is a skip, never a pass.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
prefix=${FABTESTS_PREFIX:-}
bin="$prefix/bin"
if [ -z "$prefix" ] || [ ! -x "$bin/fi_getinfo_test" ]; then
	echo "fabtests not found (set FABTESTS_PREFIX to an installed fabtests prefix, v1.17.0 or 2.x); nothing was run"
	exit 77
fi
if [ -n "${LIBFABRIC_PREFIX:-}" ]; then
	export LD_LIBRARY_PATH="$LIBFABRIC_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "libfabric core: $(ldd "$bin/fi_getinfo_test" 2>/dev/null | awk '/libfabric\.so/ {print $3; exit}')"
transport=${1:-shm}
shift || true
[ $# -gt 0 ] || set -- foundation
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$root/build}
export FI_RUSTFAB_TRANSPORT=$transport
T=${FT_TIMEOUT:-60}
host=127.0.0.1
passed=0; failed=0; notrun=0

run_one() { # name, command... (rc 61/38 = FI_ENODATA/FI_ENOSYS: "notrun", as runfabtests.sh counts it)
	local name=$1; shift
	timeout -k 5 "$T" "$@" >"/tmp/rustfab-ft.$$.log" 2>&1
	local rc=$?
	if [ $rc -eq 0 ]; then
		echo "pass    $name"; passed=$((passed + 1))
	elif [ $rc -eq 61 ] || [ $rc -eq 38 ]; then
		echo "notrun  $name (rc=$rc)"; notrun=$((notrun + 1))
	else
		echo "FAIL    $name (rc=$rc)"; sed 's/^/      /' "/tmp/rustfab-ft.$$.log" | tail -n 20
		failed=$((failed + 1))
	fi
}

for set in "$@"; do
	case $set in
	foundation)
		# The command lines runfabtests.sh's "unit" set uses.
		run_one "fi_getinfo_test -s $host $host" "$bin/fi_getinfo_test" -s $host $host -p rustfab
		run_one "fi_av_test -g $host -n 1 -s $host -e rdm" "$bin/fi_av_test" -g $host -n 1 -s $host -e rdm -p rustfab
		run_one "fi_dom_test -n 2" "$bin/fi_dom_test" -n 2 -p rustfab
		run_one fi_eq_test "$bin/fi_eq_test" -p rustfab
		run_one fi_mr_test "$bin/fi_mr_test" -p rustfab
		;;
	cq)
		run_one fi_cq_test "$bin/fi_cq_test" -p rustfab
		run_one fi_cntr_test "$bin/fi_cntr_test" -p rustfab
		run_one fi_eq_test "$bin/fi_eq_test" -p rustfab
		;;
	unit|functional|short|standard|complex)
		# In a scratch directory: runfabtests.sh leaves its output files
		# (and a crashing test its backtrace) in the current one.
		work=$(mktemp -d)
		(cd "$work" && "$bin/runfabtests.sh" -T "$T" -p "$bin" -t "$set" -v -R \
			-e "$(grep -v '^#' "$here/exclude.$transport" 2>/dev/null | cut -d'#' -f1 | xargs | tr ' ' ',')" \
			rustfab) | tee "/tmp/rustfab-ft-set.$$.log"
		ls "$work"/*.btr >/dev/null 2>&1 && { echo "backtraces left by crashed tests:"; cat "$work"/*.btr; }
		rm -rf "$work"
		# Add runfabtests.sh's own totals to ours.
		read -r p f n < <(awk '/# Total Pass/ {p = $NF} /# Total Fail/ {f = $NF}
			/# Total Notrun/ {n = $NF} END {print p + 0, f + 0, n + 0}' "/tmp/rustfab-ft-set.$$.log")
		passed=$((passed + p)); failed=$((failed + f)); notrun=$((notrun + n))
		rm -f "/tmp/rustfab-ft-set.$$.log"
		;;
	*)
		echo "unknown set: $set"; exit 2 ;;
	esac
done
rm -f "/tmp/rustfab-ft.$$.log"
echo "fabtests ($transport): $passed passed, $failed failed, $notrun notrun"
[ "$failed" -eq 0 ]
