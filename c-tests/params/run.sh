#!/usr/bin/env bash
# c-tests/params/run.sh: what fi_info shows of rustfab's parameters.
# - FI_LOG_LEVEL=info: one "settings in effect" line naming every parameter
#   of `fi_info -e`, with the ring size chosen from /dev/shm's free space;
# - every value that is not understood, or is replaced or clamped, gives
#   exactly one warning naming the parameter, the value given and the value
#   used, attributed to the line that decided it (src/provider/...), never to
#   a shared helper.
# Needs FI_PROVIDER_PATH (the Makefile sets it). Prints "N passed, N failed".
set -u
export FI_PROVIDER=rustfab
passed=0; failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }
out=$(mktemp); trap 'rm -f "$out"' EXIT

# Only the defaults apply (the caller's FI_RUSTFAB_* would change the lines).
for v in $(env | sed -n 's/^\(FI_RUSTFAB_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

FI_LOG_LEVEL=info timeout 30 fi_info -p rustfab >"$out" 2>&1
n=$(grep -c 'rustfab:core:.*<info> settings in effect' "$out")
[ "$n" -eq 1 ] && ok "fi_info at FI_LOG_LEVEL=info shows the settings in effect once" || bad "settings line shown $n times"
line=$(grep '<info> settings in effect' "$out" | head -n 1)
missing=""
for p in $(timeout 30 fi_info -e 2>/dev/null | sed -n 's/^# \(FI_RUSTFAB_[A-Z_]*\): .*/\1/p'); do
	case "$line" in *" $p="*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && ok "the settings line names every parameter fi_info -e lists" || bad "the settings line lacks:$missing"
case "$line" in *"SHM_RING_CELLS="*"MiB free)"*) ok "the ring size is shown with /dev/shm's free space" ;; *) bad "no ring size with free space: $line" ;; esac

# name=value, then what the warning must say.
cases=(
	"FI_RUSTFAB_SHM_RING_CELLS=1000|FI_RUSTFAB_SHM_RING_CELLS=1000 is not a power of two from 2048 to 65536; using "
	"FI_RUSTFAB_BUFFERED_POOL=1|FI_RUSTFAB_BUFFERED_POOL=1 is below its minimum; using 262144"
	"FI_RUSTFAB_TCP_MAX_CONNS=0|FI_RUSTFAB_TCP_MAX_CONNS=0 is below its minimum; using 4"
	"FI_RUSTFAB_TCP_COALESCE=maybe|FI_RUSTFAB_TCP_COALESCE=\"maybe\" is not a boolean"
	"FI_RUSTFAB_SHM_CLOSE_WAIT=1k|FI_RUSTFAB_SHM_CLOSE_WAIT=\"1k\" is not a number of milliseconds"
	"FI_RUSTFAB_UNEXP_BUDGET=lots|FI_RUSTFAB_UNEXP_BUDGET=\"lots\" is not a size"
	"FI_RUSTFAB_TRANSPORT=foo|FI_RUSTFAB_TRANSPORT=\"foo\" is not all or a list of auto, shm, tcp; using all"
)
for c in "${cases[@]}"; do
	set_=${c%%|*} want=${c#*|}
	# Two fi_getinfo calls in one process (fi_info -l lists, then the
	# entries): still one warning.
	env "$set_" FI_LOG_LEVEL=warn timeout 30 fi_info -p rustfab >"$out" 2>&1
	n=$(grep -cF -- "$want" "$out")
	where=$(grep -F -- "$want" "$out" | sed -n 's/.*rustfab:core:\([^(]*\)():\([0-9]*\)<warn>.*/\1:\2/p' | head -n 1)
	if [ "$n" -ne 1 ]; then bad "$set_: $n warnings saying '$want' (one wanted)"
	else
		case "$where" in
		src/provider/*) ok "$set_: one warning, from $where" ;;
		*) bad "$set_: the warning names '$where', not the line that decided it" ;;
		esac
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
