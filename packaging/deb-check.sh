#!/usr/bin/env bash
# packaging/deb-check.sh HELLO: what a user of the Debian packages sees.
# Checks what each package holds (the provider in rustfab; the header and
# man page in rustfab-dev; the debug symbols in rustfab-dbgsym), installs
# build/rustfab_*.deb, rustfab-dev_*.deb and rustfab-dbgsym_*.deb (make deb:
# dpkg-buildpackage of debian/) with dpkg -i, then checks, with
# FI_PROVIDER_PATH and FI_PROVIDER unset:
#   * fi_info -p rustfab lists the six entries (RDM and MSG on auto, shm and tcp), fi_info -l the version;
#   * the installed provider is stripped, exports only fi_prov_ini, and its
#     debug symbols are found by build id;
#   * man fi_rustfab opens the page;
#   * a C program built against the installed <rdma/fi_ext_rustfab.h> (no -I)
#     agrees with the installed provider;
#   * an Open MPI job (HELLO, 2 ranks) run with the man page's command line
#     uses rustfab on every rank;
# then removes all three with dpkg -r and checks that no file or directory the
# packages brought is left. Needs root: prints SKIP and succeeds otherwise.
# Leaves the system as it found it: refuses to run if rustfab is installed
# already or a file of the packages exists (a make install), and removes the
# packages on any failure.
#
# Environment (from the Makefile): DEB, DEB_DEV, DEB_DBGSYM, VERSION, PROVDIR.
set -u
hello=$1
: "${DEB:?}" "${DEB_DEV:?}" "${DEB_DBGSYM:?}" "${VERSION:?}" "${PROVDIR:?}"
top=$(cd "$(dirname "$0")/.." && pwd)
pkgs=(rustfab rustfab-dev rustfab-dbgsym)
say() { echo "deb-check: $*"; }
status=0
fail() { say "FAIL: $*"; status=1; }
clean_env() { env -u FI_PROVIDER_PATH -u FI_PROVIDER -u FI_RUSTFAB_TRANSPORT "$@"; }

. "$(dirname "$0")/../c-tests/skip.sh"
[ "$(id -u)" = 0 ] || skip "deb-check: installing packages needs root (CI runs as root)"
for f in "$DEB" "$DEB_DEV" "$DEB_DBGSYM" "$hello"; do
	[ -f "$f" ] || { say "FAIL: $f missing (make deb-check builds it)"; exit 1; }
done
tmp=$(mktemp -d)
installed=0
cleanup() {
	if [ $installed = 1 ]; then
		say "removing the packages after a failure"
		dpkg -r "${pkgs[@]}" >/dev/null 2>&1
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# ---- the system as we find it
for p in "${pkgs[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)
	if [ -n "$st" ] && [ "$st" != not-installed ]; then
		say "FAIL: package $p is already on this system ($st); remove it first (dpkg -P $p)"
		exit 1
	fi
done
# ---- which package holds what (libfabric's own split: the library in the
# runtime package, header and manual in -dev)
holds() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's/^\.//' | grep -qE "$2"; }
if holds "$DEB" 'librustfab-fi\.so$' && ! holds "$DEB" 'fi_ext_rustfab\.h$|fi_rustfab\.7' &&
	holds "$DEB_DEV" '/usr/include/rdma/fi_ext_rustfab\.h$' && holds "$DEB_DEV" '/usr/share/man/man7/fi_rustfab\.7\.gz$' &&
	! holds "$DEB_DEV" '\.so$' && holds "$DEB_DBGSYM" '^/usr/lib/debug/\.build-id/.*\.debug$'; then
	say "ok: rustfab holds the provider, rustfab-dev the header and man page, rustfab-dbgsym the debug symbols"
else
	fail "the packages do not split as they should:"; for d in "$DEB" "$DEB_DEV" "$DEB_DBGSYM"; do echo "$d:"; dpkg-deb -c "$d" | awk '{print "   " $6}'; done
fi
dpkg-deb -c "$DEB" >"$tmp/contents"
dpkg-deb -c "$DEB_DEV" >>"$tmp/contents"
dpkg-deb -c "$DEB_DBGSYM" >>"$tmp/contents"
# paths as dpkg records them: /usr/..., no trailing slash
awk '{ p = $6; sub(/^\./, "", p); sub(/\/$/, "", p); if (p != "") print p }' "$tmp/contents" | sort -u >"$tmp/paths"
: >"$tmp/before"
while read -r p; do
	if [ -e "$p" ] || [ -L "$p" ]; then
		if [ -d "$p" ] && [ ! -L "$p" ]; then
			echo "$p" >>"$tmp/before"
		else
			say "FAIL: $p exists already and is not from a package (a make install? make uninstall first)"
			exit 1
		fi
	fi
done <"$tmp/paths"

# Minimal images tell dpkg not to install documentation (path-exclude in
# /etc/dpkg/dpkg.cfg.d/). The last matching rule wins, as in dpkg.
include=()
cfgs=$(ls /etc/dpkg/dpkg.cfg.d/* 2>/dev/null; ls /etc/dpkg/dpkg.cfg 2>/dev/null)
while read -r p; do
	verdict=include rule=
	for cfg in $cfgs; do
		while IFS= read -r line; do
			case $line in
			path-exclude=* | path-include=*)
				# shellcheck disable=SC2053
				if [[ $p == ${line#*=} ]]; then verdict=${line%%=*}; rule="$cfg: $line"; fi ;;
			esac
		done <"$cfg"
	done
	if [ "$verdict" = path-exclude ] && grep -q " \.$p$" "$tmp/contents"; then
		say "note: dpkg on this system excludes $p ($rule); a plain dpkg -i installs the package without it. Installing with --path-include=$p to check it."
		include+=("--path-include=$p")
	fi
done <"$tmp/paths"

# ---- install
say "dpkg -i $(basename "$DEB") $(basename "$DEB_DEV") $(basename "$DEB_DBGSYM")"
installed=1
if ! dpkg "${include[@]}" -i "$DEB" "$DEB_DEV" "$DEB_DBGSYM" >"$tmp/dpkg.log" 2>&1; then
	cat "$tmp/dpkg.log"
	fail "dpkg -i failed"
	exit 1
fi
dpkg -L "${pkgs[@]}" | grep -vx "/\." | sort -u >"$tmp/files"
say "installed: $(grep -c . "$tmp/files") paths, e.g. $(grep -E '\.so$|\.7\.gz$|fi_ext|\.debug$' "$tmp/files" | paste -sd' ')"

# ---- fi_info without FI_PROVIDER_PATH
out=$(clean_env fi_info -p rustfab 2>&1)
n=$(printf '%s\n' "$out" | grep -c '^provider: rustfab')
# RDM, MSG and DGRAM entries, each on auto, shm and tcp.
if [ "$n" -eq 9 ]; then
	say "ok: fi_info -p rustfab (no FI_PROVIDER_PATH) lists $n entries: $(printf '%s\n' "$out" |
		awk '/domain:/ {d = $2} /type:/ {printf "%s%s/%s", sep, d, $2; sep = ", "}')"
else
	fail "fi_info -p rustfab without FI_PROVIDER_PATH lists $n entries, not 9:"; printf '%s\n' "$out" | head -n 20
fi
want=$(echo "$VERSION" | cut -d. -f1-2)
got=$(clean_env fi_info -l 2>/dev/null | awk '/^rustfab:/ {getline; print $2}')
[ "$got" = "$want" ] && say "ok: fi_info -l: rustfab $got" || fail "fi_info -l reports rustfab version '$got', not $want"

# ---- the installed library: stripped, only fi_prov_ini, symbols by build id
lib=$PROVDIR/librustfab-fi.so
id=$(readelf -n "$lib" | sed -n 's/^ *Build ID: *//p')
dbg=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
syms=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u | paste -sd' ')
if readelf -S "$lib" | grep -q '\.debug_'; then fail "$lib still has debug sections"
elif ! readelf -S "$lib" | grep -q '\.gnu_debuglink'; then fail "$lib has no .gnu_debuglink"
elif [ "$syms" != fi_prov_ini ]; then fail "$lib exports: $syms"
elif ! [ -f "$dbg" ] || ! readelf -S "$dbg" | grep -q '\.debug_line'; then fail "no debug symbols at $dbg"
else say "ok: $lib stripped ($(du -k "$lib" | cut -f1) KiB), exports only fi_prov_ini, symbols in $dbg"
fi

# ---- man fi_rustfab
if ! command -v man >/dev/null; then
	fail "man is not installed (apt-get install man-db), man fi_rustfab cannot be checked"
elif page=$(man -w fi_rustfab 2>&1) && MANPAGER=cat MANWIDTH=80 man fi_rustfab 2>/dev/null | grep -q '^OPEN MPI'; then
	say "ok: man fi_rustfab opens $page"
else
	fail "man fi_rustfab: ${page:-not found}"
fi

# ---- the installed header, with the installed provider
cat >"$tmp/hdr.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_ext_rustfab.h>
int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->fabric_attr->prov_name = strdup(FI_RUSTFAB_PROV_NAME);
	hints->domain_attr->name = strdup(FI_RUSTFAB_DOMAIN_SHM);
	int r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (r) {
		printf("fi_getinfo: %s\n", fi_strerror(-r));
		return 1;
	}
	int ok = info->fabric_attr->prov_version == FI_RUSTFAB_VERSION &&
		 info->ep_attr->protocol == FI_RUSTFAB_PROTO_SHM &&
		 info->src_addrlen == FI_RUSTFAB_SHM_ADDR_LEN;
	printf("%s %s\n", FI_RUSTFAB_VERSION_STRING, ok ? "agrees" : "DISAGREES");
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return !ok;
}
EOF
if ! cc -Wall -o "$tmp/hdr" "$tmp/hdr.c" -lfabric 2>"$tmp/cc.log"; then
	fail "a program including <rdma/fi_ext_rustfab.h> does not build:"; cat "$tmp/cc.log"
elif out=$(clean_env "$tmp/hdr") && [ "$out" = "$VERSION agrees" ]; then
	say "ok: <rdma/fi_ext_rustfab.h> (installed, no -I) says rustfab $VERSION and agrees with the provider"
else
	fail "installed header vs provider: $out"
fi

# ---- Open MPI with the man page's command line
cmd=$(sed -n '/^# OPEN MPI/,/^# /p' "$top/man/fi_rustfab.7.md" | grep -m1 '^mpirun ' | sed -E 's/( -np [0-9]+)? \.\/app$//')
if ! command -v mpirun >/dev/null; then
	fail "mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)"
elif [ -z "$cmd" ]; then
	fail "no 'mpirun ...' line in the OPEN MPI section of man/fi_rustfab.7.md"
else
	# shellcheck disable=SC2086
	clean_env timeout -k 10 120 $cmd --allow-run-as-root --oversubscribe --mca mtl_ofi_verbose 1 \
		-np 2 "$hello" >"$tmp/mpi.log" 2>&1
	rc=$?
	used=$(grep -c 'mtl:ofi:prov: rustfab' "$tmp/mpi.log")
	if [ $rc -eq 0 ] && [ "$used" -eq 2 ] && grep -q '^mpi hello: 2 ranks, ring and allreduce ok' "$tmp/mpi.log"; then
		say "ok: $cmd --allow-run-as-root --oversubscribe -np 2: both ranks used rustfab ($(grep '^mpi hello' "$tmp/mpi.log"))"
	else
		fail "Open MPI over the installed rustfab (exit $rc, $used of 2 ranks report mtl:ofi:prov: rustfab):"
		tail -n 30 "$tmp/mpi.log"
	fi
fi

# ---- remove; nothing may be left
say "dpkg -r ${pkgs[*]}"
if ! dpkg -r "${pkgs[@]}" >"$tmp/dpkg.log" 2>&1; then
	cat "$tmp/dpkg.log"; fail "dpkg -r failed"; exit 1
fi
installed=0
for p in "${pkgs[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)
	# (a package without conffiles leaves dpkg's database altogether)
	[ -z "$st" ] || [ "$st" = not-installed ] || fail "after dpkg -r, $p is '$st', not gone"
done
left=0
while read -r p; do
	if { [ -e "$p" ] || [ -L "$p" ]; } && ! grep -qxF "$p" "$tmp/before"; then
		fail "left behind: $p"; left=$((left + 1))
	fi
done <"$tmp/files"
[ $left -eq 0 ] && say "ok: dpkg -r left none of the $(grep -c . "$tmp/files") paths the packages installed (directories that existed before stay)"
if clean_env fi_info -p rustfab >/dev/null 2>&1; then
	fail "fi_info still finds rustfab after removal"
else
	say "ok: fi_info -p rustfab finds nothing after removal"
fi

[ $status -eq 0 ] && say "passed" || say "FAILED"
exit $status
