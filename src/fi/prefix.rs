//! The message and tagged operation tables of an endpoint opened with
//! `FI_MSG_PREFIX` (`core/prefix.rs`): each call's buffers begin with
//! [`P`] bytes the provider owns. Every thunk here checks that the prefix
//! is there (the one buffer, or the first iovec: fi_msg(3) "Message prefix
//! space cannot be split between multiple IO vectors"; -FI_EINVAL when it
//! is shorter), moves the buffer past it and calls the endpoint's common
//! thunk (`fi/ep.rs`) with the rest, so the prefix bytes are neither sent
//! nor written. Limits (`inject_size`, `max_msg_size`) therefore apply to
//! the payload only, as fi_getinfo(3) says. Endpoints without the mode get
//! the common tables themselves: nothing here is on their path.

use super::ep::{EP_MSG_OPS, EP_TAGGED_OPS};
use crate::abi::*;
use crate::base::error::Result;
use crate::core::attr::Info;
use crate::core::engine::matching::IOV_MAX;
use crate::core::prefix::{msg_prefix, MSG_PREFIX_SIZE};
use core::ffi::c_void;

/// The prefix every buffer of a prefix endpoint begins with.
const P: usize = MSG_PREFIX_SIZE;
const INVAL: isize = -(FI_EINVAL as isize);

/// The message and tagged tables of an endpoint opened with `info`: the
/// prefix ones when its mode has `FI_MSG_PREFIX` (-FI_EINVAL for a
/// `msg_prefix_size` other than the one fi_getinfo answers).
pub(crate) fn tables(info: &Info) -> Result<(&'static fi_ops_msg, &'static fi_ops_tagged)> {
    Ok(if msg_prefix(info)? == 0 {
        (&EP_MSG_OPS, &EP_TAGGED_OPS)
    } else {
        (&PREFIX_MSG_OPS, &PREFIX_TAGGED_OPS)
    })
}

/// The common thunk in slot `$f` of table `$t`.
macro_rules! common {
    ($t:ident . $f:ident) => {
        match $t.$f {
            Some(f) => f,
            None => return -(FI_ENOSYS as isize),
        }
    };
}

/// The payload of a one-buffer call: after the prefix (None when `len`
/// cannot hold it).
fn past(buf: *const c_void, len: usize) -> Option<(*mut c_void, usize)> {
    if buf.is_null() || len < P {
        return None;
    }
    Some((buf.cast::<u8>().wrapping_add(P).cast_mut().cast(), len - P))
}

/// The iovecs of a vector call with the first one moved past the prefix,
/// in `out` (None when there is no first iovec that holds it, or more than
/// `iov_limit` of them).
///
/// # Safety
/// `iov` must be NULL or point to `count` iovecs.
unsafe fn past_iov(iov: *const libc::iovec, count: usize, out: &mut [libc::iovec; IOV_MAX]) -> Option<()> {
    if count == 0 || count > IOV_MAX {
        return None;
    }
    // SAFETY: per the contract (NULL is refused by slice_in).
    let v = unsafe { crate::fi::slice_in(iov, count) }.ok()?;
    let (base, len) = past(v[0].iov_base, v[0].iov_len)?;
    out[..count].copy_from_slice(v);
    out[0] = libc::iovec {
        iov_base: base,
        iov_len: len,
    };
    Some(())
}

fn no_iovs() -> [libc::iovec; IOV_MAX] {
    [libc::iovec {
        iov_base: core::ptr::null_mut(),
        iov_len: 0,
    }; IOV_MAX]
}

/// Receives whose buffers are never written, passed on as they are:
/// `FI_DISCARD` (fi_msg(3): the buffers "are ignored") and `FI_PEEK` (it
/// only reports a message; a later `FI_CLAIM` receive brings the buffer).
fn buffers_unused(flags: u64) -> bool {
    flags & (FI_DISCARD | FI_PEEK) != 0
}

unsafe extern "C" fn msg_recv(
    e: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    let Some((b, n)) = past(buf, len) else { return INVAL };
    // SAFETY: the caller's arguments, the buffer moved within itself.
    unsafe { common!(EP_MSG_OPS.recv)(e, b, n, desc, src, ctx) }
}

unsafe extern "C" fn msg_recvv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    let mut v = no_iovs();
    // SAFETY: the caller's iovec array.
    if unsafe { past_iov(iov, count, &mut v) }.is_none() {
        return INVAL;
    }
    // SAFETY: the caller's arguments, `v` its iovecs past the prefix.
    unsafe { common!(EP_MSG_OPS.recvv)(e, v.as_ptr(), desc, count, src, ctx) }
}

unsafe extern "C" fn msg_recvmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    // SAFETY: the caller's fi_msg (NULL refused).
    let Ok(m) = (unsafe { crate::fi::read_in(msg) }) else {
        return INVAL;
    };
    if flags & FI_MULTI_RECV != 0 {
        return INVAL;
    }
    if buffers_unused(flags) {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { common!(EP_MSG_OPS.recvmsg)(e, msg, flags) };
    }
    let mut v = no_iovs();
    // SAFETY: the caller's iovec array.
    if unsafe { past_iov(m.msg_iov, m.iov_count, &mut v) }.is_none() {
        return INVAL;
    }
    let m = fi_msg {
        msg_iov: v.as_ptr(),
        ..*m
    };
    // SAFETY: the caller's message with its iovecs past the prefix.
    unsafe { common!(EP_MSG_OPS.recvmsg)(e, &m, flags) }
}

unsafe extern "C" fn msg_send(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    let Some((b, n)) = past(buf, len) else { return INVAL };
    // SAFETY: the caller's arguments, the buffer moved within itself.
    unsafe { common!(EP_MSG_OPS.send)(e, b, n, desc, dest, ctx) }
}

unsafe extern "C" fn msg_sendv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    let mut v = no_iovs();
    // SAFETY: the caller's iovec array.
    if unsafe { past_iov(iov, count, &mut v) }.is_none() {
        return INVAL;
    }
    // SAFETY: the caller's arguments, `v` its iovecs past the prefix.
    unsafe { common!(EP_MSG_OPS.sendv)(e, v.as_ptr(), desc, count, dest, ctx) }
}

unsafe extern "C" fn msg_sendmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    // SAFETY: the caller's fi_msg (NULL refused).
    let Ok(m) = (unsafe { crate::fi::read_in(msg) }) else {
        return INVAL;
    };
    let mut v = no_iovs();
    // SAFETY: the caller's iovec array.
    if unsafe { past_iov(m.msg_iov, m.iov_count, &mut v) }.is_none() {
        return INVAL;
    }
    let m = fi_msg {
        msg_iov: v.as_ptr(),
        ..*m
    };
    // SAFETY: the caller's message with its iovecs past the prefix.
    unsafe { common!(EP_MSG_OPS.sendmsg)(e, &m, flags) }
}

unsafe extern "C" fn msg_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t) -> isize {
    let Some((b, n)) = past(buf, len) else { return INVAL };
    // SAFETY: the caller's arguments, the buffer moved within itself.
    unsafe { common!(EP_MSG_OPS.inject)(e, b, n, dest) }
}

unsafe extern "C" fn msg_senddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    let Some((b, n)) = past(buf, len) else { return INVAL };
    // SAFETY: the caller's arguments, the buffer moved within itself.
    unsafe { common!(EP_MSG_OPS.senddata)(e, b, n, desc, data, dest, ctx) }
}

unsafe extern "C" fn msg_injectdata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
) -> isize {
    let Some((b, n)) = past(buf, len) else { return INVAL };
    // SAFETY: the caller's arguments, the buffer moved within itself.
    unsafe { common!(EP_MSG_OPS.injectdata)(e, b, n, data, dest) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_recv(
    e: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    let Some((b, n)) = past(buf, len) else { return INVAL };
    // SAFETY: the caller's arguments, the buffer moved within itself.
    unsafe { common!(EP_TAGGED_OPS.recv)(e, b, n, desc, src, tag, ignore, ctx) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_recvv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    let mut v = no_iovs();
    // SAFETY: the caller's iovec array.
    if unsafe { past_iov(iov, count, &mut v) }.is_none() {
        return INVAL;
    }
    // SAFETY: the caller's arguments, `v` its iovecs past the prefix.
    unsafe { common!(EP_TAGGED_OPS.recvv)(e, v.as_ptr(), desc, count, src, tag, ignore, ctx) }
}

unsafe extern "C" fn tag_recvmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: the caller's fi_msg_tagged (NULL refused).
    let Ok(m) = (unsafe { crate::fi::read_in(msg) }) else {
        return INVAL;
    };
    if flags & FI_MULTI_RECV != 0 {
        return INVAL;
    }
    if buffers_unused(flags) {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { common!(EP_TAGGED_OPS.recvmsg)(e, msg, flags) };
    }
    let mut v = no_iovs();
    // SAFETY: the caller's iovec array.
    if unsafe { past_iov(m.msg_iov, m.iov_count, &mut v) }.is_none() {
        return INVAL;
    }
    let m = fi_msg_tagged {
        msg_iov: v.as_ptr(),
        ..*m
    };
    // SAFETY: the caller's message with its iovecs past the prefix.
    unsafe { common!(EP_TAGGED_OPS.recvmsg)(e, &m, flags) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_send(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    let Some((b, n)) = past(buf, len) else { return INVAL };
    // SAFETY: the caller's arguments, the buffer moved within itself.
    unsafe { common!(EP_TAGGED_OPS.send)(e, b, n, desc, dest, tag, ctx) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_sendv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    let mut v = no_iovs();
    // SAFETY: the caller's iovec array.
    if unsafe { past_iov(iov, count, &mut v) }.is_none() {
        return INVAL;
    }
    // SAFETY: the caller's arguments, `v` its iovecs past the prefix.
    unsafe { common!(EP_TAGGED_OPS.sendv)(e, v.as_ptr(), desc, count, dest, tag, ctx) }
}

unsafe extern "C" fn tag_sendmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: the caller's fi_msg_tagged (NULL refused).
    let Ok(m) = (unsafe { crate::fi::read_in(msg) }) else {
        return INVAL;
    };
    let mut v = no_iovs();
    // SAFETY: the caller's iovec array.
    if unsafe { past_iov(m.msg_iov, m.iov_count, &mut v) }.is_none() {
        return INVAL;
    }
    let m = fi_msg_tagged {
        msg_iov: v.as_ptr(),
        ..*m
    };
    // SAFETY: the caller's message with its iovecs past the prefix.
    unsafe { common!(EP_TAGGED_OPS.sendmsg)(e, &m, flags) }
}

unsafe extern "C" fn tag_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t, tag: u64) -> isize {
    let Some((b, n)) = past(buf, len) else { return INVAL };
    // SAFETY: the caller's arguments, the buffer moved within itself.
    unsafe { common!(EP_TAGGED_OPS.inject)(e, b, n, dest, tag) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_senddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    let Some((b, n)) = past(buf, len) else { return INVAL };
    // SAFETY: the caller's arguments, the buffer moved within itself.
    unsafe { common!(EP_TAGGED_OPS.senddata)(e, b, n, desc, data, dest, tag, ctx) }
}

unsafe extern "C" fn tag_injectdata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
) -> isize {
    let Some((b, n)) = past(buf, len) else { return INVAL };
    // SAFETY: the caller's arguments, the buffer moved within itself.
    unsafe { common!(EP_TAGGED_OPS.injectdata)(e, b, n, data, dest, tag) }
}

static PREFIX_MSG_OPS: fi_ops_msg = fi_ops_msg {
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

static PREFIX_TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_buffer_past_the_prefix() {
        let buf = [0u8; 100];
        let p = buf.as_ptr().cast::<c_void>();
        assert_eq!(past(p, 100), Some((buf[P..].as_ptr().cast_mut().cast(), 100 - P)));
        assert_eq!(past(p, P), Some((buf[P..].as_ptr().cast_mut().cast(), 0)));
        assert_eq!(past(p, P - 1), None);
        assert_eq!(past(core::ptr::null(), 100), None);
    }

    #[test]
    fn first_iovec_holds_the_prefix() {
        let a = [0u8; 80];
        let b = [0u8; 8];
        let iov = [
            libc::iovec {
                iov_base: a.as_ptr().cast_mut().cast(),
                iov_len: 80,
            },
            libc::iovec {
                iov_base: b.as_ptr().cast_mut().cast(),
                iov_len: 8,
            },
        ];
        let mut out = no_iovs();
        // SAFETY: `iov` holds two iovecs.
        assert!(unsafe { past_iov(iov.as_ptr(), 2, &mut out) }.is_some());
        assert_eq!(out[0].iov_base, a[P..].as_ptr().cast_mut().cast());
        assert_eq!(out[0].iov_len, 80 - P);
        assert_eq!((out[1].iov_base, out[1].iov_len), (iov[1].iov_base, 8));
        // The prefix may not be split across iovecs, nor be missing.
        let split = [iov[1], iov[0]];
        // SAFETY: as above.
        unsafe {
            assert!(past_iov(split.as_ptr(), 2, &mut out).is_none());
            assert!(past_iov(iov.as_ptr(), 0, &mut out).is_none());
            assert!(past_iov(core::ptr::null(), 1, &mut out).is_none());
            assert!(past_iov(iov.as_ptr(), IOV_MAX + 1, &mut out).is_none());
        }
    }
}
