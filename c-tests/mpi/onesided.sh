#!/usr/bin/env bash
# MPI one-sided communication over rustfab's RMA: runs the onesided program
# (c-tests/mpi/onesided.c) with Open MPI's osc rdma over btl ofi on rustfab
# (and pml cm + mtl ofi on rustfab for everything else), under a timeout,
# for -np 2 and -np 4 (oversubscribed), on RF_TRANSPORT (default: the first
# entry Open MPI accepts, auto). Checks, per run: exit status 0, the
# program's "0 failed" line, every rank's mtl ofi on rustfab
# (mtl_ofi_verbose), and every rank's rustfab endpoint reporting, when it
# closed, RMA writes and reads it started (FI_LOG_LEVEL=info: btl ofi
# really moved the window data through rustfab).
#
# Open MPI 4.1's btl ofi asks fi_getinfo for FI_RMA|FI_ATOMIC: a rustfab
# that does not offer both fails the run (btl ofi would quietly leave
# rustfab out). Usage: onesided.sh PROGRAM. Exits non-zero on a failure.
set -u
exe=${1:-build/mpi/onesided}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
if ! command -v mpirun >/dev/null; then
	echo "onesided: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"; exit 1
fi
export FI_PROVIDER=rustfab OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -n "${RF_TRANSPORT:-}" ] && export FI_RUSTFAB_TRANSPORT=$RF_TRANSPORT
transport=${RF_TRANSPORT:-default}
export FI_LOG_LEVEL=info FI_LOG_PROV=rustfab

# The request btl ofi makes (caps FI_RMA|FI_ATOMIC, RDM).
if ! fi_info -p rustfab -t FI_EP_RDM -c "FI_RMA|FI_ATOMIC" >/dev/null 2>&1; then
	echo "onesided ($transport): FAILED: rustfab offers no FI_EP_RDM entry with FI_RMA|FI_ATOMIC (fi_info -p rustfab -t FI_EP_RDM -c 'FI_RMA|FI_ATOMIC' finds none), which btl ofi requires"
	exit 1
fi

status=0
for np in 2 4; do
	log=$(mktemp)
	timeout -k 10 180 mpirun --oversubscribe -np $np \
		-x FI_PROVIDER_PATH -x FI_PROVIDER -x FI_RUSTFAB_TRANSPORT -x FI_LOG_LEVEL -x FI_LOG_PROV \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include rustfab --mca mtl_ofi_verbose 1 \
		--mca osc rdma --mca btl ofi,self --mca btl_ofi_provider_include rustfab \
		"$exe" >"$log" 2>&1
	rc=$?
	mtl=$(grep -c "mtl:ofi:prov: rustfab" "$log")
	# every rank's btl ofi endpoint: "... N writes, M reads" with N, M > 0
	rma=$(grep -E "rustfab:.*endpoint closed: RMA operations started: [1-9][0-9]* writes, [1-9][0-9]* reads" "$log" | wc -l)
	line=$(grep -E "^onesided \([0-9]+ ranks\): [0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
	grep -E "^(FAIL|SKIP)" "$log" | sort -u | head -n 20
	[ -n "$line" ] && echo "$line"
	if [ $rc -ne 0 ] || [ -z "$line" ] || ! echo "$line" | grep -q " 0 failed"; then
		echo "onesided ($transport) -np $np: FAILED (exit $rc)"; grep -v "libfabric:" "$log" | tail -n 30; status=1
	elif [ "$mtl" -lt $np ]; then
		echo "onesided ($transport) -np $np: FAILED (only $mtl of $np ranks report mtl:ofi:prov: rustfab)"; status=1
	elif [ "$rma" -lt $np ]; then
		echo "onesided ($transport) -np $np: FAILED (only $rma of $np ranks' rustfab endpoints started RMA writes and reads: btl ofi did not use rustfab)"
		grep "RMA operations" "$log"; status=1
	else
		echo "onesided ($transport) -np $np: ok: every rank's one-sided traffic went through rustfab RMA ($(grep -oE "RMA operations started: [0-9]+ writes, [0-9]+ reads" "$log" | head -n 1) on the first)"
	fi
	rm -f "$log"
done
exit $status
