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
