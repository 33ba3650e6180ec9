//! The C face: the one pattern every vtable thunk uses, the checked recovery
//! of rustfab objects from `fid` pointers, C-allocated helpers, and the
//! operation tables of every object.

pub mod attr;
pub mod av;
pub mod boundary;
pub mod cmem;
pub mod cntr;
pub mod connected;
pub mod cq;
pub mod domain;
pub mod ep;
pub mod eq;
pub mod fabric;
pub mod handle;
pub mod mr;
pub mod noops;
pub mod pep;
pub mod poll;
pub mod wait;

pub use boundary::*;
pub use handle::*;
