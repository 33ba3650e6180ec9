//! The C face: the one pattern every vtable thunk uses, the checked recovery
//! of rustfab objects from `fid` pointers, C-allocated helpers, and the
//! operation tables of every object.

pub mod attr;
pub mod boundary;
pub mod cmem;
pub mod connected;
pub mod ep;
pub mod handle;
pub mod noops;
pub mod pep;

pub use boundary::*;
pub use handle::*;
