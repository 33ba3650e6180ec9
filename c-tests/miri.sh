#!/bin/sh
# make miri (not part of make test): the unit tests of rustfab's pure-Rust
# modules under Miri, the Rust interpreter that fails on undefined behaviour
# (out-of-bounds or dangling accesses, invalid values, aliasing violations
# of the Stacked Borrows model, data races, leaks). Needs a nightly toolchain
# with the miri component (rustup +nightly component add miri rust-src);
# without it this says so and fails (make miri was asked for and not run).
#
# Modules: those whose tests make no foreign call and no system call beyond
# what Miri emulates (threads, the clock, reading files):
#   base::                   the error type, FastMap, Slab
#   transport::proto         the record header (from_bytes/check/encode)
#   transport::addr          address encodings
#   transport::iov           the buffer list (segments past its count are
#                            never written nor read)
#   transport::tcp::framing  the TCP stream reader over in-memory streams
#   transport::tcp::hello    the RDM handshake record
#   transport::tcp::cm       the connection-management record
#   transport::shm::ring     the shm ring on a private buffer (raw pointers
#                            and AtomicU64::from_ptr, as on the segment)
#   core::cq_queue, core::cq the CQ queue and core (FI_WAIT_NONE CQs; the
#                            wait-object tests use eventfd/epoll and are
#                            skipped under Miri)
#   core::engine::matching   posted/unexpected queues
#   fuzzing::                the fuzz harness bodies over a few proptest
#                            cases each (PROPTEST_CASES, default 4) and the
#                            seed corpus (files: isolation disabled)
# Not here: anything that maps a segment, opens a socket, calls libfabric
# (fi_log, fi_param) or libc (sys/, and what reaches it).
#
# MIRI_FILTERS replaces the module list (test-name filters).
set -u
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
	echo "miri: NOT RUN: needs a nightly toolchain with the miri component"
	echo "miri:   (rustup toolchain install nightly; rustup +nightly component add miri rust-src)"
	exit 1
fi
filters=${MIRI_FILTERS:-"base:: transport::proto transport::addr transport::iov transport::tcp::framing transport::tcp::hello
 transport::tcp::cm transport::shm::ring core::cq core::engine::matching fuzzing::"}
echo "miri: $(cargo +nightly miri --version)"
# shellcheck disable=SC2086
PROPTEST_CASES=${PROPTEST_CASES:-4} MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}" \
	CARGO_TARGET_DIR=target/miri cargo +nightly miri test --lib -- $filters
