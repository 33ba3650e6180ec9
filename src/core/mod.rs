//! Safe cores of the libfabric objects (fabric, domain, AV, MR, EQ, CQ,
//! counter, wait and poll sets, endpoint), the endpoint engine and progress.
//! Nothing here dereferences a pointer from C or knows a C layout beyond
//! plain values; the C face (`fi`) turns each call into these types and
//! writes what they return into C memory.

pub(crate) mod atomic;
pub(crate) mod attr;
pub(crate) mod av;
pub(crate) mod av_addr;
pub(crate) mod av_segment;
pub(crate) mod av_shared;
pub(crate) mod cntr;
pub(crate) mod connected;
pub(crate) mod cq;
pub(crate) mod cq_entry;
pub(crate) mod cq_queue;
pub(crate) mod dgram;
pub(crate) mod domain;
pub(crate) mod engine;
pub(crate) mod ep;
pub(crate) mod eq;
pub(crate) mod fabric;
pub(crate) mod mr;
pub(crate) mod mr_map;
pub(crate) mod pep;
pub(crate) mod poll;
pub(crate) mod prefix;
pub(crate) mod progress;
pub(crate) mod rma;
pub(crate) mod scalable;
pub(crate) mod settings;
pub(crate) mod shared_ctx;
pub(crate) mod trigger;
pub(crate) mod users;
pub(crate) mod wait;
