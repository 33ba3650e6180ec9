//! Safe cores of the libfabric objects, the endpoint engine and progress.
//! Nothing here dereferences a pointer from C; the C face (`fi`) turns each
//! call into these types.

pub mod attr;
pub mod av;
pub mod cntr;
pub mod connected;
pub mod cq;
pub mod domain;
pub mod engine;
pub mod eq;
pub mod fabric;
pub mod mr;
pub mod pep;
pub mod poll;
pub mod progress;
pub mod settings;
pub mod users;
pub mod wait;
