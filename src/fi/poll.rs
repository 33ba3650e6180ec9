//! The C face of poll sets: `fi_poll_open` and the `fid_poll` operations
//! (`fi_poll_add`, `fi_poll_del`, `fi_poll`) over `core/poll.rs`.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::domain::Domain;
use crate::core::poll::PollSet;
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_int, c_void};

impl FiObject for PollSet {
    type Header = fid_poll;
    const CLASS: usize = FI_CLASS_POLL;
}

static POLL_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(poll_close),
    bind: Some(noops::no_bind),
    control: Some(noops::no_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static POLL_OPS: fi_ops_poll = fi_ops_poll {
    size: core::mem::size_of::<fi_ops_poll>(),
    poll: Some(poll_poll),
    poll_add: Some(poll_add),
    poll_del: Some(poll_del),
};

/// `fi_poll_open`.
pub(crate) fn open(d: &Obj<Domain>, attr: &fi_poll_attr) -> Result<*mut fid_poll> {
    let core = PollSet::open(&d.core, attr.flags)?;
    let hdr = fid_poll {
        fid: fid {
            fclass: FI_CLASS_POLL,
            context: core::ptr::null_mut(),
            ops: &POLL_FI_OPS,
        },
        ops: &POLL_OPS,
    };
    Ok(Obj::create(hdr, core))
}

unsafe extern "C" fn poll_close(f: *mut fid) -> c_int {
    // SAFETY: `f` comes from the application as this object's fid.
    unsafe {
        fi::call_close::<PollSet>("poll set close", f as *const c_void, |o| {
            // Nothing binds to a poll set; its members are weak references.
            Obj::destroy(o);
            Ok(0)
        })
    }
}

unsafe extern "C" fn poll_add(p: *mut fid_poll, member: *mut fid, _flags: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_poll_add().
    unsafe {
        fi::call_obj::<PollSet, c_int>("fi_poll_add", p as *const c_void, |o| {
            match fi::class_of(member)? {
                FI_CLASS_CQ => o.core.add_cq(&fi::cq::from_fid(member)?),
                FI_CLASS_CNTR => o.core.add_cntr(&fi::cntr::from_fid(member)?),
                _ => return Err(Error::INVAL),
            }
            Ok(0)
        })
    }
}

unsafe extern "C" fn poll_del(p: *mut fid_poll, member: *mut fid, _flags: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_poll_del().
    unsafe {
        fi::call_obj::<PollSet, c_int>("fi_poll_del", p as *const c_void, |o| {
            match fi::class_of(member)? {
                FI_CLASS_CQ => o.core.remove_cq(&fi::cq::from_fid(member)?)?,
                FI_CLASS_CNTR => o.core.remove_cntr(&fi::cntr::from_fid(member)?)?,
                _ => return Err(Error::INVAL),
            }
            Ok(0)
        })
    }
}

unsafe extern "C" fn poll_poll(p: *mut fid_poll, context: *mut *mut c_void, count: c_int) -> c_int {
    // SAFETY: arguments come from the application through fi_poll().
    unsafe {
        fi::call_obj::<PollSet, c_int>("fi_poll", p as *const c_void, |o| {
            if context.is_null() || count <= 0 {
                return Err(Error::INVAL);
            }
            let mut i = 0;
            let n = o.core.poll(count as usize, |c| {
                // SAFETY: the application's array holds `count` pointers and
                // the core hands out at most `count` contexts.
                context.add(i).write(c as *mut c_void);
                i += 1;
            });
            Ok(n as c_int)
        })
    }
}
