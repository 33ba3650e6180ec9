//! Operation tables for capabilities rustfab does not offer
//! (collectives): every slot returns -FI_ENOSYS, as libfabric's own
//! `fi_no_*` stubs do. fi_getinfo never advertises these capabilities.

use crate::abi::*;
use core::ffi::c_void;
type Ep = *mut fid_ep;
type D = *mut *mut c_void;
type V = *mut c_void;
type C = *const c_void;
const NOSYS: isize = -(FI_ENOSYS as isize);

unsafe extern "C" fn co_barrier(_: Ep, _: fi_addr_t, _: V) -> isize {
    NOSYS
}
unsafe extern "C" fn co_bcast(_: Ep, _: V, _: usize, _: V, _: fi_addr_t, _: fi_addr_t, _: u32, _: u64, _: V) -> isize {
    NOSYS
}
unsafe extern "C" fn co_a2a(_: Ep, _: C, _: usize, _: V, _: V, _: V, _: fi_addr_t, _: u32, _: u64, _: V) -> isize {
    NOSYS
}
unsafe extern "C" fn co_allreduce(
    _: Ep,
    _: C,
    _: usize,
    _: V,
    _: V,
    _: V,
    _: fi_addr_t,
    _: u32,
    _: u32,
    _: u64,
    _: V,
) -> isize {
    NOSYS
}
unsafe extern "C" fn co_reduce(
    _: Ep,
    _: C,
    _: usize,
    _: V,
    _: V,
    _: V,
    _: fi_addr_t,
    _: fi_addr_t,
    _: u32,
    _: u32,
    _: u64,
    _: V,
) -> isize {
    NOSYS
}
unsafe extern "C" fn co_scatter(
    _: Ep,
    _: C,
    _: usize,
    _: V,
    _: V,
    _: V,
    _: fi_addr_t,
    _: fi_addr_t,
    _: u32,
    _: u64,
    _: V,
) -> isize {
    NOSYS
}
unsafe extern "C" fn co_msg(_: Ep, _: C, _: *mut fi_ioc, _: D, _: usize, _: u64) -> isize {
    NOSYS
}
unsafe extern "C" fn co_barrier2(_: Ep, _: fi_addr_t, _: u64, _: V) -> isize {
    NOSYS
}
pub(crate) static COLLECTIVE_OPS: fi_ops_collective = fi_ops_collective {
    size: core::mem::size_of::<fi_ops_collective>(),
    barrier: Some(co_barrier),
    broadcast: Some(co_bcast),
    alltoall: Some(co_a2a),
    allreduce: Some(co_allreduce),
    allgather: Some(co_a2a),
    reduce_scatter: Some(co_allreduce),
    reduce: Some(co_reduce),
    scatter: Some(co_scatter),
    gather: Some(co_scatter),
    msg: Some(co_msg),
    barrier2: Some(co_barrier2),
};
