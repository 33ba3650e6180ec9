# make bench: medians of interleaved rounds and their ratio to the fastest
# peer (c-tests/bench/peers.sh and mpi.sh).
#
# Input: the raw CSV (header, then round,class,test,size,peer,value,unit).
# Output: class,test,size,peer,median,unit,runs,fastest_peer,ratio_to_fastest_peer
# (unsorted). Rows whose peer names rustfab ("rustfab shm", "MPICH rustfab") are never "the fastest
# peer": the ratio says where rustfab stands. For test "lat" smaller is
# faster, for any other test larger is.
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
BEGIN { FS = "," }
NR > 1 {
	k = $2 "," $3 "," $4; key[k] = 1; unit[k] = $7
	v[k SUBSEP $5] = v[k SUBSEP $5] " " $6; cnt[k SUBSEP $5]++
	if (!((k SUBSEP $5) in seen)) { seen[k SUBSEP $5] = 1; order[k] = order[k] "|" $5 }
}
END {
	print "class,test,size,peer,median,unit,runs,fastest_peer,ratio_to_fastest_peer"
	for (k in key) {
		split(k, f, ","); n = split(substr(order[k], 2), names, "|")
		best = ""; bv = 0
		for (i = 1; i <= n; i++) {
			m[i] = median(v[k SUBSEP names[i]])
			if (names[i] ~ /rustfab/) continue
			if (best == "" || (f[2] == "lat" ? m[i] < bv : m[i] > bv)) { best = names[i]; bv = m[i] }
		}
		for (i = 1; i <= n; i++)
			printf "%s,%s,%s,%s,%.3f,%s,%d,%s,%s\n", f[1], f[2], f[3], names[i], m[i], unit[k],
				cnt[k SUBSEP names[i]], best, (best != "" && bv > 0 ? sprintf("%.2f", m[i] / bv) : "")
	}
}
