#!/usr/bin/env bash
# make bench-idle: instructions of one empty fi_cq_read of an endpoint with
# 1, 8, 64 and 256 connected peers (c-tests/bench/rf_idle), counted by
# valgrind's callgrind, so the figure does not depend on machine load: a
# progress pass whose cost grows with the number of peers shows as a
# growing row. Only the loop of empty reads is counted (--toggle-collect);
# for each peer count: Ir(3E reads) - Ir(E reads), over 2E.
#
#   c-tests/bench/idle.sh <rf_idle binary>
#   PEERS="1 8 64 256"  IDLE_READS=5000  ROWS="rustfab shm|..." (see below)
set -u
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib=${FI_PROVIDER_PATH:-$root/build}
PEERS=${PEERS:-1 8 64 256}
E=${IDLE_READS:-5000}
if ! command -v valgrind >/dev/null 2>&1; then
	echo "idle: NOT RUN (no valgrind; Debian: valgrind)"
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# label | -p | environment
rows=("rustfab shm|rustfab|FI_PROVIDER_PATH=$lib FI_RUSTFAB_TRANSPORT=shm"
	"rustfab tcp|rustfab|FI_PROVIDER_PATH=$lib FI_RUSTFAB_TRANSPORT=tcp"
	"rustfab auto|rustfab|FI_PROVIDER_PATH=$lib FI_RUSTFAB_TRANSPORT=auto"
	"1.17 shm|shm|")
if [ -n "${ROWS:-}" ]; then
	IFS=';' read -r -a rows <<<"$ROWS"
fi
count() { # envs prov peers reads -> total Ir
	# shellcheck disable=SC2086
	env -u FI_PROVIDER -u FI_PROVIDER_PATH $1 timeout 600 valgrind --tool=callgrind --toggle-collect=idle_reads \
		--callgrind-out-file="$work/cg" "$bin" -p "$2" -n "$3" -e "$4" >"$work/out" 2>"$work/err" || {
		echo "idle: $2 with $3 peers failed: $(tail -n 2 "$work/err" | tr '\n' ' ')" >&2
		return 1
	}
	callgrind_annotate "$work/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
status=0
printf "| instructions per empty fi_cq_read |"
for n in $PEERS; do printf " %s peers |" "$n"; done
printf "\n|---|"
for _ in $PEERS; do printf -- "---:|"; done
printf "\n"
for r in "${rows[@]}"; do
	IFS='|' read -r name prov envs <<<"$r"
	printf "| %s |" "$name"
	for n in $PEERS; do
		if a=$(count "$envs" "$prov" "$n" "$E") && b=$(count "$envs" "$prov" "$n" $((3 * E))); then
			printf " %d |" $(((b - a) / (2 * E)))
		else
			printf " failed |"
			status=1
		fi
	done
	printf "\n"
done
exit $status
