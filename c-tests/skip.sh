# Sourced by the test scripts that need what a machine may lack (root,
# namespaces, a wheel from PyPI): `skip WHAT` prints "SKIP <WHAT>" and exits 0,
# unless skipping is forbidden, where it prints "FAIL <WHAT> (...)" and
# exits 1. Skipping is forbidden under CI (CI=true, which CI sets) and with
# RUSTFAB_NO_SKIP=1 (.ci/run sets it too): a green CI must mean every part ran.
no_skip() { [ "${CI:-}" = true ] || [ "${RUSTFAB_NO_SKIP:-0}" = 1 ]; }
skip() {
	if no_skip; then
		echo "FAIL $* (skipping is not allowed here: CI=true or RUSTFAB_NO_SKIP=1)"
		exit 1
	fi
	echo "SKIP $*"
	exit 0
}
