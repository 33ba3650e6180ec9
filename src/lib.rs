//! rustfab: a libfabric provider written in Rust, with its own shared-memory
//! and TCP transports. See README.md and docs/architecture.md.
//!
//! Layers, top to bottom (a module may use only its own layer and those
//! below it; `tests/layering.rs` checks this):
//! * `provider` — `fi_prov_ini`'s descriptor, fi_getinfo, parameters;
//! * `fi` — the C face: static ops tables and the thunks behind them, the
//!   only code that dereferences pointers from C;
//! * `core` — safe object cores (fabric, domain, AV, MR, EQ, CQ, counter,
//!   wait, poll), the endpoint engine, progress;
//! * `transport` — addresses, records, shm, tcp, auto;
//! * `sys` — every system call and libc function.
//!
//! `abi` (the C mirror and the libfabric core's functions) and `base`
//! (errors, logging, small collections) are used by every layer and use
//! nothing above them.

#![deny(unsafe_op_in_unsafe_fn)]
// `pub` means reachable from outside the crate (abi/, the fuzzing entry
// points, the C descriptor); everything else says pub(crate) or pub(super).
#![warn(unreachable_pub)]
#![allow(clippy::missing_safety_doc)] // every unsafe fn documents `# Safety` by hand

pub mod abi;
pub(crate) mod base;
pub mod capi;
pub(crate) mod core;
pub(crate) mod fi;
/// Fuzz harness bodies (tests, and the cargo feature `fuzzing` for `fuzz/`).
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub(crate) mod provider;
pub(crate) mod sys;
pub(crate) mod transport;
