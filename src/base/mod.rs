//! What every layer uses: the error type, logging through libfabric, and
//! small collections for the data path.

pub mod collections;
pub mod error;
pub mod log;
pub(crate) mod serial;
