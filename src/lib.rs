//! rustfab: a libfabric provider written in Rust, with its own shared-memory
//! and TCP transports. See README.md and docs/ for the design.
//!
//! Layers (ARCHITECTURE.md): `abi` (C mirror) → `ffi` (boundary) →
//! `provider`/`info`/`params` → one module per libfabric object →
//! endpoint core (`ep`) → `progress` → `transport` → `sys`.

#![deny(unsafe_op_in_unsafe_fn)]
#![allow(clippy::missing_safety_doc)] // every unsafe fn documents `# Safety` by hand

pub mod abi;
pub mod addr;
pub mod attr;
pub mod capi;
pub mod collections;
pub mod error;
pub mod ffi;
pub mod log;
pub mod params;
pub mod progress;
pub mod provider;
pub mod sys;
pub mod transport;
pub mod wait;

pub mod av;
pub mod cntr;
pub mod cq;
pub mod domain;
pub mod ep;
pub mod eq;
pub mod fabric;
pub mod info;
pub mod mr;
pub mod poll;

pub use error::{Error, Result};
