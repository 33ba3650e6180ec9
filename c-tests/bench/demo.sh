#!/usr/bin/env bash
# make demo: shows a newcomer, in words, that rustfab works and how fast it
# is. Lists rustfab's fi_getinfo entries, then measures a ping-pong between
# two processes over rustfab's shm and over libfabric's built-in shm provider
# in the same run (rf_bench, the program behind make bench), and prints
# latency and bandwidth side by side with their ratio and how to read it.
# About 10 seconds. REPEAT (default 5), ITERS (2000) and SIZES (64,4k,1m)
# can be changed.
set -u
bin=${1:-build/bench/rf_bench}
REPEAT=${REPEAT:-5}
ITERS=${ITERS:-5000}
SIZES=${SIZES:-64,4k,1m}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
start=$(date +%s)
out=$(mktemp)
trap 'rm -f "$out" "$out.run"' EXIT

libfabric=$(fi_info --version 2>/dev/null | sed -n 's/^libfabric: *//p')
version=$(fi_info -l 2>/dev/null | awk '/^rustfab:/ {getline; print $2}')
if [ -z "$version" ]; then
	echo "demo: libfabric does not find rustfab in FI_PROVIDER_PATH=$FI_PROVIDER_PATH (make lib builds it)"
	exit 1
fi
echo "rustfab $version is a libfabric provider written in Rust. libfabric ${libfabric:-?} loads it"
echo "from $FI_PROVIDER_PATH/librustfab-fi.so (FI_PROVIDER_PATH; an installed package needs none)."
echo
echo "1. The endpoints rustfab offers (fi_info -p rustfab; details: fi_info -p rustfab -v, man fi_rustfab):"
echo
fi_info -p rustfab 2>&1 | awk '
	/domain:/ { d = $2 }
	/type:/ {
		what = $2 == "FI_EP_DGRAM" ? (d == "tcp" ? "UDP datagrams, any host (unreliable, one datagram per message)" : \
		                                           "datagrams over shared memory, processes of this host") : \
		       d == "auto" ? "shared memory to this host, TCP to other hosts, one address" : \
		       d == "shm"  ? "shared memory, processes of this host" : \
		       $2 == "FI_EP_MSG" ? "TCP, connected endpoints (fi_connect/fi_accept)" : "TCP, any host"
		printf "     %-5s %-11s %s\n", d, $2, what
	}'
echo
cpus=$(nproc 2>/dev/null || echo '?')
echo "2. A ping-pong between two processes on this host, one on each of two CPUs: rustfab's shm"
echo "   against libfabric's built-in shm provider, same program (rf_bench), same run, $REPEAT runs each"
echo "   (interleaved), medians. One-way latency is half a round trip; bandwidth streams 64 messages"
echo "   at a time (MB/s = 10^6 bytes per second)."
printf '\n   Measuring '
builtin=ok
for r in $(seq "$REPEAT"); do
	for who in rustfab shm; do
		args="-p rustfab -d shm"
		if [ $who = shm ]; then
			[ "$builtin" = ok ] || continue
			args="-p shm"
		fi
		# shellcheck disable=SC2086
		timeout 60 "$bin" $args -s "$SIZES" -i "$ITERS" >"$out.run" 2>&1
		rc=$?
		if [ $rc -ne 0 ] && [ $who = rustfab ]; then
			printf '\ndemo: rf_bench %s failed (exit %d):\n' "$args" $rc; cat "$out.run"
			exit 1
		elif [ $rc -ne 0 ]; then
			builtin="failed (exit $rc): $(head -n 1 "$out.run")"
			continue
		fi
		sed "s/^/$who /" "$out.run" >>"$out"
	done
	printf '.'
done
rm -f "$out.run"
printf ' done.\n\n'
[ "$builtin" = ok ] || printf "   libfabric's built-in shm could not be measured here, %s\n\n" "$builtin"
awk -v cpus="$cpus" -v load="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null)" '
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	if (n == 0) return ""
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function label(b) { return b >= 1048576 ? b / 1048576 " MiB" : b >= 1024 ? b / 1024 " KiB" : b " B" }
function num(x) { return x == "" ? "-" : x >= 100 ? sprintf("%.0f", x) : sprintf("%.2f", x) }
function ratio(r) { return r > 0 ? sprintf("%.2f", r) : "-" }
function judge(better) { if (better > 1.10) faster++; else if (better < 1 / 1.10) slower++; else par++ }
# input: <who> <lat|bw> <prov> <bytes> <value>
{ v[$1 " " $2 " " $4] = v[$1 " " $2 " " $4] " " $5; if (!($4 in seen)) { seen[$4] = 1; sizes[++n] = $4 } }
END {
	printf "                   one-way latency (µs)             bandwidth (MB/s)\n"
	printf "   message     rustfab  built-in   ratio      rustfab  built-in   ratio\n"
	for (i = 1; i <= n; i++) {
		s = sizes[i]
		lo = median(v["rustfab lat " s]); lt = median(v["shm lat " s])
		bo = median(v["rustfab bw " s]); bt = median(v["shm bw " s])
		lr = lt > 0 ? lo / lt : 0; br = bt > 0 ? bo / bt : 0
		printf "   %7s  %10s %9s %7s   %10s %9s %7s\n", label(s), num(lo), num(lt), ratio(lr), num(bo), num(bt), ratio(br)
		if (lr > 0) judge(1 / lr)
		if (br > 0) judge(br)
	}
	print ""
	print "   ratio = rustfab / built-in. Latency: lower is better, a ratio below 1 means rustfab is faster."
	print "   Bandwidth: higher is better, a ratio above 1 means rustfab is faster."
	if (faster + par + slower)
		printf "   In this run rustfab was faster in %d, within 10 %% in %d and slower in %d of the %d comparisons.\n",
			faster, par, slower, faster + par + slower
	else
		print "   Nothing to compare with in this run: only rustfab was measured."
	printf "   (This machine: %s CPUs, load average %s; figures move by 10 %% or more between runs on a\n", cpus, load
	print "   busy or virtual machine. make bench measures more sizes and TCP too.)"
}' "$out"
echo
echo "Done in $(($(date +%s) - start)) s. Next: make test runs every test; man fi_rustfab (after make install or"
echo "installing the Debian packages from make deb) or man/fi_rustfab.7.md is the manual."
