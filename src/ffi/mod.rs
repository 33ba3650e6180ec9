//! The C boundary: the one pattern every vtable thunk follows, the checked
//! recovery of rustfab objects from `fid` pointers, and C-allocated helpers.

pub mod boundary;
pub mod cmem;
pub mod handle;
pub mod noops;

pub use boundary::*;
pub use handle::*;
