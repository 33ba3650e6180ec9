//! What every layer uses: the error type, logging through libfabric, and
//! small collections for the data path.

pub(crate) mod collections;
pub(crate) mod error;
pub(crate) mod log;
pub(crate) mod serial;
