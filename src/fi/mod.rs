//! The C face: the one pattern every vtable thunk uses (`boundary`), the
//! checked recovery of rustfab objects from `fid` pointers (`handle`, with
//! `live`, the registry of live handles it consults before any read),
//! memory C frees (`cmem`), the C form of `fi_info` (`attr`), and one module
//! per object with its static operation tables, its `extern "C"` thunks and
//! its C-facing open: the only code that dereferences pointers from C. Each
//! thunk turns C arguments into slices and structs, calls the object's safe
//! core in `crate::core`, and writes the results back into C memory.

pub(crate) mod alias;
pub(crate) mod atomic;
pub(crate) mod attr;
pub(crate) mod av;
pub(crate) mod boundary;
pub(crate) mod cm_args;
pub(crate) mod cmem;
pub(crate) mod cntr;
pub(crate) mod connected;
pub(crate) mod cq;
pub(crate) mod dgram;
pub(crate) mod domain;
pub(crate) mod ep;
pub(crate) mod ep_obj;
pub(crate) mod eq;
pub(crate) mod fabric;
pub(crate) mod handle;
pub(crate) mod live;
pub(crate) mod mr;
pub(crate) mod noops;
pub(crate) mod pep;
pub(crate) mod poll;
pub(crate) mod prefix;
pub(crate) mod rma;
pub(crate) mod scalable;
pub(crate) mod shared_ctx;
pub(crate) mod trigger;
pub(crate) mod wait;

pub(crate) use boundary::*;
pub(crate) use handle::*;
