//! The data path of an endpoint's C face: the `fi_ops_msg` and
//! `fi_ops_tagged` tables ([`EP_MSG_OPS`], [`EP_TAGGED_OPS`]) and their
//! thunks, each turning one send or receive call (its iovecs, its
//! `fi_msg`/`fi_msg_tagged`) into a [`SendOp`] or [`RecvOp`] posted to the
//! endpoint core. A leaf: `ep.rs` and `prefix.rs` name the tables, and
//! nothing here uses `ep.rs`.

use crate::abi::*;
use crate::base::error::Result;
use crate::core::engine::matching::IovList;
use crate::core::ep::{RecvOp, SendMode, SendOp, TagMatch};
use crate::fi;
use crate::fi::ep_obj::{iov_from_c, iov_recv_single, iov_single, with_ep, EpObj};
use core::ffi::c_void;

pub(crate) static EP_MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: core::mem::size_of::<fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(msg_senddata),
    injectdata: Some(msg_injectdata),
};

pub(crate) static EP_TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: core::mem::size_of::<fi_ops_tagged>(),
    recv: Some(tag_recv),
    recvv: Some(tag_recvv),
    recvmsg: Some(tag_recvmsg),
    send: Some(tag_send),
    sendv: Some(tag_sendv),
    sendmsg: Some(tag_sendmsg),
    inject: Some(tag_inject),
    senddata: Some(tag_senddata),
    injectdata: Some(tag_injectdata),
};

// ------------------------------------------------------------------ data ops

/// The buffers of a `fi_recvmsg`/`fi_trecvmsg`: none with FI_DISCARD
/// (fi_msg(3): "the receive input buffer(s) and length parameters are
/// ignored").
///
/// # Safety
/// As [`iov_from_c`] when `flags` has no FI_DISCARD.
unsafe fn recv_iov(iov: *const libc::iovec, count: usize, flags: u64) -> Result<IovList> {
    if flags & FI_DISCARD != 0 {
        return Ok(IovList::new());
    }
    // SAFETY: forwarded contract.
    unsafe { iov_from_c(iov, count) }
}

// Inlined into each thunk: the op is built in place, with no call frame
// of its own per post.
#[inline(always)]
fn send(o: &EpObj, op: SendOp) -> Result<isize> {
    o.core.post_send(op)?;
    Ok(0)
}

#[inline(always)]
fn recv(o: &EpObj, op: RecvOp) -> Result<isize> {
    o.core.post_recv(op)?;
    Ok(0)
}

unsafe extern "C" fn msg_recv(
    e: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_recv().
    unsafe {
        with_ep("fi_recv", e as *const c_void, |o| {
            recv(o, RecvOp::new(iov_recv_single(buf, len)?, src, ctx as usize))
        })
    }
}

unsafe extern "C" fn msg_recvv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_recvv().
    unsafe {
        with_ep("fi_recvv", e as *const c_void, |o| {
            recv(o, RecvOp::new(iov_from_c(iov, count)?, src, ctx as usize))
        })
    }
}

unsafe extern "C" fn msg_recvmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    if flags & FI_TRIGGER != 0 {
        // SAFETY: this call's arguments, replayed later through this thunk.
        return unsafe { crate::fi::trigger::msg("fi_recvmsg", e, msg, flags, msg_recvmsg, true) };
    }
    // SAFETY: arguments from fi_recvmsg().
    unsafe {
        with_ep("fi_recvmsg", e as *const c_void, |o| {
            let m = fi::read_in(msg)?;
            recv(
                o,
                RecvOp {
                    iov: recv_iov(m.msg_iov, m.iov_count, flags)?,
                    src: m.addr,
                    tag: None,
                    flags: Some(flags),
                    context: m.context as usize,
                },
            )
        })
    }
}

unsafe extern "C" fn msg_send(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_send().
    unsafe {
        with_ep("fi_send", e as *const c_void, |o| {
            send(o, SendOp::post(iov_single(buf, len)?, dest, ctx as usize))
        })
    }
}

unsafe extern "C" fn msg_sendv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_sendv().
    unsafe {
        with_ep("fi_sendv", e as *const c_void, |o| {
            send(o, SendOp::post(iov_from_c(iov, count)?, dest, ctx as usize))
        })
    }
}

unsafe extern "C" fn msg_sendmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    if flags & FI_TRIGGER != 0 {
        // SAFETY: this call's arguments, replayed later through this thunk.
        return unsafe { crate::fi::trigger::msg("fi_sendmsg", e, msg, flags, msg_sendmsg, false) };
    }
    // SAFETY: arguments from fi_sendmsg().
    unsafe {
        with_ep("fi_sendmsg", e as *const c_void, |o| {
            let m = fi::read_in(msg)?;
            send(
                o,
                SendOp {
                    iov: iov_from_c(m.msg_iov, m.iov_count)?,
                    dest: m.addr,
                    tag: None,
                    data: (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data),
                    flags: Some(flags),
                    context: m.context as usize,
                    mode: SendMode::Post,
                },
            )
        })
    }
}

unsafe extern "C" fn msg_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t) -> isize {
    // SAFETY: arguments from fi_inject().
    unsafe {
        with_ep("fi_inject", e as *const c_void, |o| {
            send(o, SendOp::inject(iov_single(buf, len)?, dest))
        })
    }
}

unsafe extern "C" fn msg_senddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_senddata().
    unsafe {
        with_ep("fi_senddata", e as *const c_void, |o| {
            send(
                o,
                SendOp::post(iov_single(buf, len)?, dest, ctx as usize).with_data(data),
            )
        })
    }
}

unsafe extern "C" fn msg_injectdata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
) -> isize {
    // SAFETY: arguments from fi_injectdata().
    unsafe {
        with_ep("fi_injectdata", e as *const c_void, |o| {
            send(o, SendOp::inject(iov_single(buf, len)?, dest).with_data(data))
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_recv(
    e: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_trecv().
    unsafe {
        with_ep("fi_trecv", e as *const c_void, |o| {
            recv(
                o,
                RecvOp::new(iov_recv_single(buf, len)?, src, ctx as usize).tagged(tag, ignore),
            )
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_recvv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_trecvv().
    unsafe {
        with_ep("fi_trecvv", e as *const c_void, |o| {
            recv(
                o,
                RecvOp::new(iov_from_c(iov, count)?, src, ctx as usize).tagged(tag, ignore),
            )
        })
    }
}

unsafe extern "C" fn tag_recvmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    if flags & FI_TRIGGER != 0 {
        // SAFETY: this call's arguments, replayed later through this thunk.
        return unsafe { crate::fi::trigger::tagged("fi_trecvmsg", e, msg, flags, tag_recvmsg, true) };
    }
    // SAFETY: arguments from fi_trecvmsg().
    unsafe {
        with_ep("fi_trecvmsg", e as *const c_void, |o| {
            let m = fi::read_in(msg)?;
            recv(
                o,
                RecvOp {
                    iov: recv_iov(m.msg_iov, m.iov_count, flags)?,
                    src: m.addr,
                    tag: Some(TagMatch {
                        tag: m.tag,
                        ignore: m.ignore,
                    }),
                    flags: Some(flags),
                    context: m.context as usize,
                },
            )
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_send(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_tsend().
    unsafe {
        with_ep("fi_tsend", e as *const c_void, |o| {
            send(o, SendOp::post(iov_single(buf, len)?, dest, ctx as usize).tagged(tag))
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_sendv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_tsendv().
    unsafe {
        with_ep("fi_tsendv", e as *const c_void, |o| {
            send(o, SendOp::post(iov_from_c(iov, count)?, dest, ctx as usize).tagged(tag))
        })
    }
}

unsafe extern "C" fn tag_sendmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    if flags & FI_TRIGGER != 0 {
        // SAFETY: this call's arguments, replayed later through this thunk.
        return unsafe { crate::fi::trigger::tagged("fi_tsendmsg", e, msg, flags, tag_sendmsg, false) };
    }
    // SAFETY: arguments from fi_tsendmsg().
    unsafe {
        with_ep("fi_tsendmsg", e as *const c_void, |o| {
            let m = fi::read_in(msg)?;
            send(
                o,
                SendOp {
                    iov: iov_from_c(m.msg_iov, m.iov_count)?,
                    dest: m.addr,
                    tag: Some(m.tag),
                    data: (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data),
                    flags: Some(flags),
                    context: m.context as usize,
                    mode: SendMode::Post,
                },
            )
        })
    }
}

unsafe extern "C" fn tag_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t, tag: u64) -> isize {
    // SAFETY: arguments from fi_tinject().
    unsafe {
        with_ep("fi_tinject", e as *const c_void, |o| {
            send(o, SendOp::inject(iov_single(buf, len)?, dest).tagged(tag))
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_senddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_tsenddata().
    unsafe {
        with_ep("fi_tsenddata", e as *const c_void, |o| {
            let iov = iov_single(buf, len)?;
            send(o, SendOp::post(iov, dest, ctx as usize).tagged(tag).with_data(data))
        })
    }
}

unsafe extern "C" fn tag_injectdata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
) -> isize {
    // SAFETY: arguments from fi_tinjectdata().
    unsafe {
        with_ep("fi_tinjectdata", e as *const c_void, |o| {
            send(
                o,
                SendOp::inject(iov_single(buf, len)?, dest).tagged(tag).with_data(data),
            )
        })
    }
}
