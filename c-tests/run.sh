#!/usr/bin/env bash
# Runs every built C test program (build/c-tests/test_*) under a timeout
# against the rustfab in $FI_PROVIDER_PATH, and prints a closing
# "N passed, N failed" line over all of them. A program that crashes or times
# out counts one failure on top of whatever it printed; one that exits 0
# without its own summary line counts one failure too (it stopped before its
# end, or never ran its checks).
set -u
dir=${1:-build/c-tests}
per_test_timeout=${C_TEST_TIMEOUT:-120}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
export FI_PROVIDER=${FI_PROVIDER:-rustfab}
passed=0; failed=0; bad=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "$dir"/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	echo "== $name"
	# Output through a file, not a pipe: a helper process the program
	# forked and left behind cannot keep the runner waiting for EOF.
	timeout -k 5 "$per_test_timeout" "$t" >"$log" 2>&1; rc=$?
	out=$(cat "$log")
	printf '%s\n' "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
	p=0; f=0
	if [ -n "$line" ]; then
		p=$(echo "$line" | awk '{print $1}'); f=$(echo "$line" | awk '{print $3}')
	fi
	if [ $rc -eq 0 ] && [ -z "$line" ]; then
		echo "FAIL $name: exited 0 without its 'N passed, N failed' line"
		f=$((f + 1))
	elif [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "FAIL $name: timed out after ${per_test_timeout}s"
		else echo "FAIL $name: exited with status $rc"; fi
		f=$((f + 1))
	fi
	passed=$((passed + p)); failed=$((failed + f))
	[ "$f" -gt 0 ] && bad+=("$name")
done
[ ${#bad[@]} -gt 0 ] && echo "failing programs: ${bad[*]}"
echo "c-tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
