#!/usr/bin/env bash
# packaging/crates-check.sh: every crate compiled into librustfab-fi.so must
# be named in debian/copyright (cargo tree of the normal dependencies for
# this host, from Cargo.lock). Run by debian/rules before the packages are
# assembled.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
crates=$(cd "$top" && cargo tree --locked --offline -e normal --prefix none \
	--target "$(rustc -vV | sed -n 's/^host: //p')" | awk '$1 != "rustfab" {print $1}' | sort -u)
[ -n "$crates" ] || { echo "crates-check: cargo tree listed no crates" >&2; exit 1; }
for c in $crates; do
	grep -q "^  $c " "$top/debian/copyright" || {
		echo "crates-check: crate $c is compiled into the library but not listed in debian/copyright" >&2
		exit 1
	}
done
echo "crates-check: the $(echo "$crates" | wc -l) crates compiled in are named in debian/copyright"
