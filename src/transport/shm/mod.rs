//! The shared-memory transport (see docs/shm.md).

pub mod ring;
pub mod segment;
