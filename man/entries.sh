#!/usr/bin/env bash
# entries.sh: prints, from `fi_info -p rustfab -v` (the provider in
# $FI_PROVIDER_PATH), the ENTRIES list the man page must carry word for word:
# one definition per fi_getinfo entry, in fi_getinfo's order, with the
# entry's domain, endpoint type, address format and capabilities.
# make man-check compares it with man/fi_rustfab.7.md, so an entry or a
# capability added to fi_getinfo and not to the manual fails the check.
set -eu
if [ "${1:-}" = --check ]; then
	# --check MAN.md: the list in the man page (from the line that introduces
	# it to the next "Hints select" paragraph) must be what fi_info says.
	want=$("$0")
	have=$(awk '/^\*fi_getinfo\* returns these entries/ {s = 1; next} s && /^:|^\*/ {p = 1} s && /^Hints select/ {exit} p' "$2")
	if [ "$want" != "$have" ]; then
		echo "man-check: $2's entry list is not what fi_info -p rustfab -v says (< fi_info, > $2):"
		diff <(echo "$want") <(echo "$have") || true
		exit 1
	fi
	echo "man-check: $2 lists fi_getinfo's $(echo "$want" | grep -c '^\*') entries with their capabilities"
	exit 0
fi
if [ "${1:-}" = --check-control ]; then
	# --check-control debian/control: the runtime package's description names
	# every transport (domain) and endpoint kind fi_info lists, and each
	# capability family it claims is offered by some entry.
	ctl=$2
	desc=$(awk '/^Package: rustfab$/ {p = 1} p && /^Description:/ {d = 1} d && /^$/ {exit} d' "$ctl")
	list=$("$0")
	bad=0
	need() { # need WHAT PATTERN: the description must match PATTERN
		echo "$desc" | grep -qiE "$2" || { echo "man-check: $ctl's description does not mention $1 (fi_info lists it)"; bad=1; }
	}
	claims() { # claims WORD CAP: a description that says WORD needs an entry with CAP
		if echo "$desc" | grep -qiE "$1" && ! echo "$list" | grep -q "$2"; then
			echo "man-check: $ctl's description says '$1' but no fi_info entry has $2"; bad=1
		fi
	}
	echo "$list" | grep -q '^\*shm\*' && need "shared memory (shm)" 'shared memory'
	echo "$list" | grep -q '^\*tcp\*' && need "TCP (tcp)" 'TCP'
	echo "$list" | grep -q '^\*auto\*' && need 'the "auto" transport' 'auto'
	echo "$list" | grep -q 'FI_EP_RDM' && need "reliable-datagram endpoints (FI_EP_RDM)" 'reliable.datagram'
	echo "$list" | grep -q 'FI_EP_MSG' && need "connected endpoints (FI_EP_MSG)" 'connected'
	echo "$list" | grep -q 'FI_EP_DGRAM' && need "datagram endpoints (FI_EP_DGRAM)" '(^|[^-])datagram endpoints'
	claims 'tagged' FI_TAGGED
	claims 'RMA' FI_RMA
	claims 'atomic' FI_ATOMIC
	if echo "$desc" | grep -qi 'on all three'; then
		for d in auto shm tcp; do for t in FI_EP_RDM FI_EP_MSG; do
			echo "$list" | grep -q "^\*$d\*, \*$t\*" || { echo "man-check: $ctl says 'on all three' but fi_info has no $d $t entry"; bad=1; }
		done; done
	fi
	[ $bad = 0 ] || exit 1
	echo "man-check: $ctl's description matches fi_info's entries"
	exit 0
fi
# Only the defaults: a parameter in the caller's environment could hide or
# change an entry.
for v in $(env | sed -n 's/^\(FI_RUSTFAB_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
FI_PROVIDER=rustfab fi_info -p rustfab -v | awk '
	function flush() {
		if (dom == "") return
		printf "*%s*, *%s*, *%s*\n: %s\n\n", dom, type, fmt, caps
		dom = ""
	}
	/^---/ { flush(); top = 1; next }
	/^    caps: \[/ && top { c = $0; sub(/^    caps: \[ /, "", c); sub(/ \]$/, "", c); caps = c; top = 0 }
	/^    addr_format:/ { fmt = $2 }
	/^    fi_ep_attr:/ { sect = "ep" }
	/^    fi_domain_attr:/ { sect = "domain" }
	/^    fi_fabric_attr:/ { sect = "fabric" }
	/^        type:/ && sect == "ep" { type = $2 }
	/^        name:/ && sect == "domain" { dom = $2 }
	END { flush() }
'
