#!/usr/bin/env bash
# Runs the MPI test program with Open MPI's pml cm + mtl ofi forced onto
# rustfab, under a timeout, for -np 2 and -np 4 (oversubscribed), and checks
# from mtl_ofi_verbose that every rank really used rustfab. Transport:
# RF_TRANSPORT (default: whatever fi_getinfo offers first that Open MPI
# accepts). Exits non-zero on any failure.
set -u
exe=${1:-build/mpi/mpi_test}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
if ! command -v mpirun >/dev/null; then
	echo "mpi: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"; exit 1
fi
export FI_PROVIDER=rustfab OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -n "${RF_TRANSPORT:-}" ] && export FI_RUSTFAB_TRANSPORT=$RF_TRANSPORT
status=0
total_pass=0; total_fail=0
for np in 2 4; do
	log=$(mktemp)
	timeout -k 10 180 mpirun --oversubscribe -np $np \
		-x FI_PROVIDER_PATH -x FI_PROVIDER -x FI_RUSTFAB_TRANSPORT \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include rustfab \
		--mca mtl_ofi_verbose 1 --mca btl self \
		"$exe" >"$log" 2>&1
	rc=$?
	used=$(grep -c "mtl:ofi:prov: rustfab" "$log")
	line=$(grep -E "^mpi \([0-9]+ ranks\): [0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
	if [ -n "$line" ]; then
		total_pass=$((total_pass + $(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')))
		total_fail=$((total_fail + $(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')))
	fi
	grep -E "FAIL|passed|failed|rror" "$log" | grep -v "^\[" | head -n 20
	if [ $rc -ne 0 ]; then
		echo "mpi -np $np: FAILED (exit $rc)"; tail -n 30 "$log"; status=1
		total_fail=$((total_fail + 1))
	elif [ "$used" -lt $np ]; then
		echo "mpi -np $np: FAILED (only $used of $np ranks report mtl:ofi:prov: rustfab)"; status=1
		total_fail=$((total_fail + 1))
	else
		echo "mpi -np $np: every rank used rustfab"
	fi
	rm -f "$log"
done
echo "mpi: $total_pass passed, $total_fail failed"
exit $status
