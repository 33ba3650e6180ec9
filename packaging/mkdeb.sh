#!/usr/bin/env bash
# packaging/mkdeb.sh STAGE OUTDIR: turns a staged `make install DESTDIR=STAGE`
# into two Debian packages with dpkg-deb (no debhelper, no source package):
#
#   OUTDIR/rustfab_<version>_<arch>.deb         the stripped provider, its man
#       page (gzipped), <rdma/fi_ext_rustfab.h>, copyright (DEP-5), changelog
#   OUTDIR/rustfab-dbgsym_<version>_<arch>.deb  the debug symbols split off the
#       provider, as /usr/lib/debug/.build-id/xx/yyyy.debug (what gdb and
#       debuginfod clients look up by the library's build id)
#
# The header is in the main package rather than a rustfab-dev: it holds only
# macros describing this very build (version, address lengths), has nothing
# to link, and needs no other -dev package than libfabric-dev, which an
# application using it has anyway; one package keeps it in step with the
# installed provider.
#
# Environment (from the Makefile): VERSION, PROVDIR, MANDIR, DEB_MAINTAINER.
set -euo pipefail
stage=$1 outdir=$2
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
: "${VERSION:?}" "${PROVDIR:?}" "${MANDIR:?}" "${DEB_MAINTAINER:?}"
arch=$(dpkg --print-architecture)
dbg=$outdir/deb/rustfab-dbgsym
die() { echo "mkdeb: $*" >&2; exit 1; }

# CHANGELOG.md (Keep a Changelog) in Debian's changelog format, which a
# native package's /usr/share/doc/<package>/changelog.gz must use: one entry
# per release, newest first, its date that of the release.
debian_changelog() {
	grep -q "^## \[$VERSION\] - [0-9-]*" "$1" || die "CHANGELOG.md has no '## [$VERSION] - <date>' entry"
	local v d
	grep -o '^## \[[0-9][^]]*\] - [0-9-]*' "$1" | sed 's/^## \[\(.*\)\] - \(.*\)/\1 \2/' |
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
				{ print "  " $0 }' "$1" | cat -s | sed -e '/./,$!d' -e :a -e '/^\n*$/{$d;N;ba' -e '}'
			echo
			echo " -- $DEB_MAINTAINER  $(date -u -R -d "$d")"
			echo
		done
}

lib=$stage$PROVDIR/librustfab-fi.so
[ -f "$lib" ] || die "$lib missing (make install DESTDIR=$stage first)"
rm -rf "$dbg" "$stage/DEBIAN"

# Every crate compiled into the library must be named in the copyright file.
crates=$(cd "$top" && cargo tree --locked --offline -e normal --prefix none \
	--target "$(rustc -vV | sed -n 's/^host: //p')" | awk '$1 != "rustfab" {print $1}' | sort -u)
[ -n "$crates" ] || die "cargo tree listed no crates"
for c in $crates; do
	grep -q "^  $c " "$here/debian/copyright" ||
		die "crate $c is compiled into the library but not listed in packaging/debian/copyright"
done

# Split the debug symbols (dh_strip's way): keep them, compressed, under the
# build id; strip the library; point it at its symbols.
build_id=$(readelf -n "$lib" | sed -n 's/^ *Build ID: *//p')
[ -n "$build_id" ] || die "$lib has no GNU build id"
debug=/usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug
install -d "$dbg$(dirname "$debug")"
objcopy --only-keep-debug --compress-debug-sections "$lib" "$dbg$debug"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$lib"
objcopy --add-gnu-debuglink="$dbg$debug" "$lib"

# Documentation: compressed man page, copyright, changelog. The dbgsym
# package shares the main package's documentation directory (as Debian's
# automatic -dbgsym packages do).
gzip -9nf "$stage$MANDIR/man7/fi_rustfab.7"
install -d "$stage/usr/share/doc/rustfab" "$dbg/usr/share/doc"
install -m 0644 "$here/debian/copyright" "$stage/usr/share/doc/rustfab/copyright"
debian_changelog "$top/CHANGELOG.md" | gzip -9n >"$stage/usr/share/doc/rustfab/changelog.gz"
ln -s rustfab "$dbg/usr/share/doc/rustfab-dbgsym"

# Library dependencies as dpkg-shlibdeps computes them, with libfabric
# raised to the API rustfab implements (1.17).
# (It wants a debian/control, and the binary inside a package tree: under a
# directory holding DEBIAN/.)
shl=$outdir/deb/shlibdeps
install -D -m 0644 "$lib" "$shl/debian/rustfab$PROVDIR/librustfab-fi.so"
mkdir -p "$shl/debian/rustfab/DEBIAN"
printf 'Source: rustfab\n\nPackage: rustfab\nArchitecture: any\n' >"$shl/debian/control"
deps=$(cd "$shl" && dpkg-shlibdeps -O -e"debian/rustfab$PROVDIR/librustfab-fi.so" 2>"$shl/log" |
	sed -n 's/^shlibs:Depends=//p') || { cat "$shl/log" >&2; die "dpkg-shlibdeps failed"; }
[ -s "$shl/log" ] && { cat "$shl/log" >&2; die "dpkg-shlibdeps warned"; }
deps=$(echo "$deps" | tr ',' '\n' | sed 's/^ *//' | grep -v '^libfabric1\b' | paste -sd, - | sed 's/,/, /g')
depends="libfabric1 (>= 1.17)${deps:+, $deps}"

# Ownership and modes as Debian expects (shared libraries are not executable).
for root in "$stage" "$dbg"; do
	find "$root" -type d -exec chmod 0755 {} +
	find "$root" -type f -exec chmod 0644 {} +
done

size() { du -sk --apparent-size --exclude=DEBIAN "$1" | cut -f1; }
control() { # root package
	mkdir -p "$1/DEBIAN"
	(cd "$1" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) >"$1/DEBIAN/md5sums"
	chmod 0644 "$1/DEBIAN/md5sums"
	cat >"$1/DEBIAN/control"
	chmod 0644 "$1/DEBIAN/control"
}

control "$stage" <<EOF
Package: rustfab
Version: $VERSION
Architecture: $arch
Maintainer: $DEB_MAINTAINER
Installed-Size: $(size "$stage")
Depends: $depends
Suggests: libfabric-bin, libfabric-dev
Enhances: libfabric1
Section: libs
Priority: optional
Description: libfabric provider written in Rust (shared memory and TCP)
 rustfab is a libfabric provider: a plugin that libfabric loads from its
 provider directory, so that unmodified libfabric applications (Open MPI,
 fabtests, fi_pingpong) can use it. It moves data over its own transports:
 shared memory between the processes of a host, TCP between hosts, and
 "auto", both behind one address. It offers reliable-datagram and
 connected endpoints on all three, with tagged messages, RMA, atomics and
 buffered receives.
 .
 With this package installed, "fi_info -p rustfab" lists the provider
 without any environment variable. See fi_rustfab(7).
EOF

control "$dbg" <<EOF
Package: rustfab-dbgsym
Source: rustfab
Version: $VERSION
Auto-Built-Package: debug-symbols
Architecture: $arch
Maintainer: $DEB_MAINTAINER
Installed-Size: $(size "$dbg")
Depends: rustfab (= $VERSION)
Section: debug
Priority: optional
Description: debug symbols for rustfab
Build-Ids: $build_id
EOF

mkdir -p "$outdir"
for root in "$stage" "$dbg"; do
	name=$(sed -n 's/^Package: //p' "$root/DEBIAN/control")
	dpkg-deb --root-owner-group -Zxz --build "$root" "$outdir/${name}_${VERSION}_${arch}.deb" >/dev/null
	echo "mkdeb: $outdir/${name}_${VERSION}_${arch}.deb ($(du -k "$outdir/${name}_${VERSION}_${arch}.deb" | cut -f1) KiB)"
done
echo "mkdeb: provider $(du -k "$lib" | cut -f1) KiB stripped, build id $build_id; Depends: $depends"
