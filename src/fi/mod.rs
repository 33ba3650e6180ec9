//! The C face: the one pattern every vtable thunk uses, the checked recovery
//! of rustfab objects from `fid` pointers, C-allocated helpers, and the
//! operation tables of every object.

pub(crate) mod attr;
pub(crate) mod av;
pub(crate) mod boundary;
pub(crate) mod cmem;
pub(crate) mod cntr;
pub(crate) mod connected;
pub(crate) mod cq;
pub(crate) mod domain;
pub(crate) mod ep;
pub(crate) mod eq;
pub(crate) mod fabric;
pub(crate) mod handle;
pub(crate) mod mr;
pub(crate) mod noops;
pub(crate) mod pep;
pub(crate) mod poll;
pub(crate) mod wait;

pub(crate) use boundary::*;
pub(crate) use handle::*;
