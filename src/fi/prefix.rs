//! The message and tagged operation tables of an endpoint opened with
//! `FI_MSG_PREFIX` (`core/prefix.rs`): each call's buffers begin with
//! [`P`] bytes the provider owns. Every thunk here checks that the prefix
//! is there (the one buffer, or the first iovec: fi_msg(3) "Message prefix
//! space cannot be split between multiple IO vectors"; -FI_EINVAL when it
//! is shorter), moves the buffer past it and calls the endpoint's common
//! thunk (`fi/ep/msg.rs`) with the rest, so the prefix bytes are neither sent
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
pub(crate) fn tables(info: &Info) -> Result<super::ep::MsgTables> {
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

/// A thunk for a one-buffer call, `(ep, buf, len, rest...)`: the buffer
/// moved past the prefix, the rest passed on.
macro_rules! one_buffer {
    ($name:ident, $t:ident . $f:ident, $bt:ty; $($a:ident: $at:ty),*) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $name(e: *mut fid_ep, buf: $bt, len: usize, $($a: $at),*) -> isize {
            let Some((b, n)) = past(buf, len) else { return INVAL };
            // SAFETY: the caller's arguments, the buffer moved within itself.
            unsafe { common!($t.$f)(e, b as $bt, n, $($a),*) }
        }
    };
}

/// A thunk for a vector call, `(ep, iov, desc, count, rest...)`: the first
/// iovec moved past the prefix, the rest passed on.
macro_rules! vector {
    ($name:ident, $t:ident . $f:ident; $($a:ident: $at:ty),*) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $name(
            e: *mut fid_ep,
            iov: *const libc::iovec,
            desc: *mut *mut c_void,
            count: usize,
            $($a: $at),*
        ) -> isize {
            let mut v = no_iovs();
            // SAFETY: the caller's iovec array.
            if unsafe { past_iov(iov, count, &mut v) }.is_none() {
                return INVAL;
            }
            // SAFETY: the caller's arguments, `v` its iovecs past the prefix.
            unsafe { common!($t.$f)(e, v.as_ptr(), desc, count, $($a),*) }
        }
    };
}

/// A thunk for a `*msg` call, `(ep, msg, flags)`: the message's first
/// iovec moved past the prefix. A receive (`recv`) whose buffers are
/// never written, or that asks for a multi-receive buffer (a prefix
/// endpoint has none), is passed on as it is or refused.
macro_rules! message {
    ($name:ident, $t:ident . $f:ident, $mt:ident, $recv:literal) => {
        unsafe extern "C" fn $name(e: *mut fid_ep, msg: *const $mt, flags: u64) -> isize {
            // SAFETY: the caller's message (NULL refused).
            let Ok(m) = (unsafe { crate::fi::read_in(msg) }) else {
                return INVAL;
            };
            if $recv && flags & FI_MULTI_RECV != 0 {
                return INVAL;
            }
            if $recv && buffers_unused(flags) {
                // SAFETY: the caller's arguments, unchanged.
                return unsafe { common!($t.$f)(e, msg, flags) };
            }
            let mut v = no_iovs();
            // SAFETY: the caller's iovec array.
            if unsafe { past_iov(m.msg_iov, m.iov_count, &mut v) }.is_none() {
                return INVAL;
            }
            let m = $mt {
                msg_iov: v.as_ptr(),
                ..*m
            };
            // SAFETY: the caller's message with its iovecs past the prefix.
            unsafe { common!($t.$f)(e, &m, flags) }
        }
    };
}

type Buf = *mut c_void;
type CBuf = *const c_void;
type Desc = *mut c_void;
type Ctx = *mut c_void;

one_buffer!(msg_recv, EP_MSG_OPS.recv, Buf; desc: Desc, src: fi_addr_t, ctx: Ctx);
vector!(msg_recvv, EP_MSG_OPS.recvv; src: fi_addr_t, ctx: Ctx);
message!(msg_recvmsg, EP_MSG_OPS.recvmsg, fi_msg, true);
one_buffer!(msg_send, EP_MSG_OPS.send, CBuf; desc: Desc, dest: fi_addr_t, ctx: Ctx);
vector!(msg_sendv, EP_MSG_OPS.sendv; dest: fi_addr_t, ctx: Ctx);
message!(msg_sendmsg, EP_MSG_OPS.sendmsg, fi_msg, false);
one_buffer!(msg_inject, EP_MSG_OPS.inject, CBuf; dest: fi_addr_t);
one_buffer!(msg_senddata, EP_MSG_OPS.senddata, CBuf; desc: Desc, data: u64, dest: fi_addr_t, ctx: Ctx);
one_buffer!(msg_injectdata, EP_MSG_OPS.injectdata, CBuf; data: u64, dest: fi_addr_t);

one_buffer!(tag_recv, EP_TAGGED_OPS.recv, Buf; desc: Desc, src: fi_addr_t, tag: u64, ignore: u64, ctx: Ctx);
vector!(tag_recvv, EP_TAGGED_OPS.recvv; src: fi_addr_t, tag: u64, ignore: u64, ctx: Ctx);
message!(tag_recvmsg, EP_TAGGED_OPS.recvmsg, fi_msg_tagged, true);
one_buffer!(tag_send, EP_TAGGED_OPS.send, CBuf; desc: Desc, dest: fi_addr_t, tag: u64, ctx: Ctx);
vector!(tag_sendv, EP_TAGGED_OPS.sendv; dest: fi_addr_t, tag: u64, ctx: Ctx);
message!(tag_sendmsg, EP_TAGGED_OPS.sendmsg, fi_msg_tagged, false);
one_buffer!(tag_inject, EP_TAGGED_OPS.inject, CBuf; dest: fi_addr_t, tag: u64);
one_buffer!(tag_senddata, EP_TAGGED_OPS.senddata, CBuf; desc: Desc, data: u64, dest: fi_addr_t, tag: u64, ctx: Ctx);
one_buffer!(tag_injectdata, EP_TAGGED_OPS.injectdata, CBuf; data: u64, dest: fi_addr_t, tag: u64);

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
