//! Safe cores of the libfabric objects, the endpoint engine and progress.
//! Nothing here dereferences a pointer from C; the C face (`fi`) turns each
//! call into these types.

pub(crate) mod attr;
pub(crate) mod av;
pub(crate) mod cntr;
pub(crate) mod cq;
pub(crate) mod domain;
pub(crate) mod engine;
pub(crate) mod ep;
pub(crate) mod eq;
pub(crate) mod fabric;
pub(crate) mod host;
pub(crate) mod mr;
pub(crate) mod poll;
pub(crate) mod progress;
pub(crate) mod settings;
pub(crate) mod users;
pub(crate) mod wait;
