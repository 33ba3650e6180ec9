#!/usr/bin/env bash
# make scale: rf_scale (what an RDM endpoint costs per peer, and what each
# endpoint costs) for 1, 8, 64 and 256 peers, rustfab shm / tcp / auto next
# to libfabric's shm and tcp;ofi_rxm, printed as the markdown table of
# docs/performance-history.md "## Scale". Every run is under a timeout; a run that
# fails or times out shows as such in its row (exit status 1).
#
#   c-tests/scale/run.sh [rf_scale]   (FI_PROVIDER_PATH must be set)
#   PEERS="1 8 64 256"  T=60 (seconds per run)  RXM_MAX=64 (tcp;ofi_rxm's
#   set-up takes seconds per 8 peers: larger counts are left out)
set -u
bin=${1:-build/scale/rf_scale}
: "${FI_PROVIDER_PATH:?FI_PROVIDER_PATH must point at the directory holding librustfab-fi.so}"
PEERS=${PEERS:-1 8 64 256}
T=${T:-60}
RXM_MAX=${RXM_MAX:-64}
status=0
echo "| provider | peers | first round µs/peer | steady round µs/peer | RSS KiB/peer | fds/peer | shm mapped KiB/peer | RSS KiB/endpoint | fds/endpoint | shm mapped KiB/endpoint |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
# label | FI_RUSTFAB_TRANSPORT | -p
for row in "rustfab shm|shm|rustfab" "rustfab auto (same host)|auto|rustfab" "shm|all|shm" \
	"rustfab tcp|tcp|rustfab" "tcp;ofi_rxm|all|tcp;ofi_rxm"; do
	IFS='|' read -r label tr prov <<<"$row"
	for n in $PEERS; do
		if [ "$prov" = "tcp;ofi_rxm" ] && [ "$n" -gt "$RXM_MAX" ]; then
			continue
		fi
		out=$(FI_RUSTFAB_TRANSPORT=$tr timeout -k 5 "$T" "$bin" -p "$prov" -n "$n" 2>&1)
		rc=$?
		line=$(echo "$out" | grep "^scale ")
		if [ $rc -ne 0 ] || [ -z "$line" ]; then
			echo "| $label | $n | FAILED (rc=$rc) $(echo "$out" | tail -n 1 | cut -c1-80) |||||||"
			status=1
			continue
		fi
		echo "$line" | awk -v label="$label" -v n="$n" '{
			for (i = 4; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			printf "| %s | %d | %.0f | %.1f | %s | %s | %s | %s | %s | %s |\n", label, n,
				v["setup_us"] / n, v["steady_us"] / n, v["peer_rss_kb"], v["peer_fds"],
				v["peer_shm_kb"], v["ep_rss_kb"], v["ep_fds"], v["ep_shm_kb"]
		}'
	done
done
exit $status
