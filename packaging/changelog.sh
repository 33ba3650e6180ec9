#!/usr/bin/env bash
# packaging/changelog.sh CHANGELOG.md MAINTAINER: prints CHANGELOG.md (Keep a
# Changelog) in Debian's changelog format, one entry per release, newest
# first, dated as the release. debian/changelog is this output, committed
# (dpkg-buildpackage reads the version from it); make deb fails while they
# differ (make deb-changelog rewrites it).
set -euo pipefail
src=$1 maintainer=$2
grep -o '^## \[[0-9][^]]*\] - [0-9-]*' "$src" | sed 's/^## \[\(.*\)\] - \(.*\)/\1 \2/' |
	while read -r v d; do
		echo "rustfab ($v) unstable; urgency=medium"
		echo
		awk -v v="$v" '
			$0 ~ "^## \\[" { on = index($0, "[" v "]") == 4; next }
			!on { next }
			/^### / { sub(/^### /, ""); print "  " $0 ":"; group = 1; next }
			/^$/ { if (!group) print ""; next }
			{ group = 0 }
			/^- / { sub(/^- /, ""); print "  * " $0; next }
			/^  / { print "  " $0; next }
			{ print "  " $0 }' "$src" | cat -s | sed -e '/./,$!d' -e :a -e '/^\n*$/{$d;N;ba' -e '}'
		echo
		echo " -- $maintainer  $(date -u -R -d "$d")"
		echo
	done
