#!/bin/sh
# make fuzz: every target of fuzz/ for FUZZ_SECONDS (default 60) each, from
# the committed seed corpus, when nightly Rust and cargo-fuzz are there;
# otherwise the same harness bodies as property tests on stable, and a clear
# note of what is missing. A crash fails (its input is left in
# fuzz/artifacts/<target>/); new corpus entries go to build/fuzz-corpus/.
set -u
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}
targets="tcp_reader records shm_ring getinfo_hints av_insert tcp_live"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: needs a nightly toolchain and cargo-fuzz (rustup toolchain install nightly; cargo install cargo-fuzz)"
  echo "fuzz: running the harness bodies as property tests on stable instead (PROPTEST_CASES=${PROPTEST_CASES:-20000})"
  # tcp_live runs cases/32 (real sockets, two ports per case): 625 by default.
  PROPTEST_CASES=${PROPTEST_CASES:-20000} cargo test --release --lib fuzzing::
  exit $?
fi
rc=0
for t in $targets; do
  mkdir -p build/fuzz-corpus/$t
  echo "== fuzz $t (${secs}s)"
  cargo +nightly fuzz run $t build/fuzz-corpus/$t fuzz/corpus/$t -- \
    -max_total_time=$secs -rss_limit_mb=2048 -timeout=60 -print_final_stats=1 2>build/fuzz-$t.log
  r=$?
  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+ *DONE' build/fuzz-$t.log
  if [ $r -ne 0 ]; then echo "fuzz $t: FAILED (build/fuzz-$t.log, fuzz/artifacts/$t/)"; tail -30 build/fuzz-$t.log; rc=1; fi
done
exit $rc
