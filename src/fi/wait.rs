//! The C face of wait objects and wait sets: `fi_wait_open`, the `fid_wait`
//! operations (`fi_wait`, close, `FI_GETWAIT`/`FI_GETWAITOBJ`), the
//! `FI_GETWAIT` answer every CQ, EQ and counter shares, and the recovery of
//! a wait set from the `wait_set` field of a CQ/EQ/counter attribute.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::fabric::Fabric;
use crate::core::wait::{NativeWait, WaitObj, WaitSet};
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_int, c_void};
use std::sync::Arc;

impl FiObject for WaitSet {
    const CLOSE: &'static str = "wait set close";
    type Header = fid_wait;
    const CLASS: usize = FI_CLASS_WAIT;
    fn wake_for_close(&self) {
        self.obj.close();
    }
}

static WAIT_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    // fi_poll(3): "The wait set must not be bound to any other opened
    // resources prior to being closed, otherwise the call will return
    // -FI_EBUSY."
    close: Some(fi::close_when_idle::<WaitSet>),
    bind: Some(noops::no_bind),
    control: Some(wait_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static WAIT_OPS: fi_ops_wait = fi_ops_wait {
    size: core::mem::size_of::<fi_ops_wait>(),
    wait: Some(wait_wait),
};

/// `fi_wait_open`.
pub(crate) fn open(f: &Obj<Fabric>, attr: &fi_wait_attr) -> Result<*mut fid_wait> {
    let set = WaitSet::open(&f.core, attr.wait_obj, attr.flags)?;
    let hdr = fid_wait {
        fid: fid {
            fclass: FI_CLASS_WAIT,
            context: core::ptr::null_mut(),
            ops: &WAIT_FI_OPS,
        },
        ops: &WAIT_OPS,
    };
    Ok(Obj::create(hdr, set))
}

/// The wait set behind `attr->wait_set` of a CQ/EQ/counter being opened;
/// it must belong to `fabric`.
/// Any pointer: one that is not a live rustfab wait set is `-FI_EINVAL`.
pub(crate) fn set_for_fabric(p: *mut fid, fabric: &Arc<Fabric>) -> Result<Arc<WaitSet>> {
    let set = fi::core_of::<WaitSet>(p)?;
    if !set.belongs_to(fabric) {
        return Err(Error::INVAL);
    }
    Ok(set)
}

/// `fi_trywait` on a wait set fid.
/// Any pointer: one that is not a live rustfab wait set is `-FI_EINVAL`.
pub(crate) fn trywait_fid(p: *mut fid) -> Result<()> {
    fi::core_of::<WaitSet>(p)?.trywait()
}

/// `fi_control(FI_GETWAIT / FI_GETWAITOBJ)` answered for wait object `w`
/// (a CQ's, EQ's or counter's shown object, or a wait set's); any other
/// command is -FI_ENOSYS.
///
/// # Safety
/// `arg` must be NULL or point to what the command takes for `w`'s kind:
/// `int` (FD), `struct fi_mutex_cond` (MUTEX_COND), `struct fi_wait_pollfd`
/// (POLLFD) for FI_GETWAIT, `enum fi_wait_obj` for FI_GETWAITOBJ.
pub(crate) unsafe fn control(w: &WaitObj, cmd: c_int, arg: *mut c_void) -> Result<()> {
    match cmd {
        // SAFETY: forwarded from this function's contract.
        FI_GETWAIT => unsafe { write_native(w, arg) },
        // SAFETY: FI_GETWAITOBJ takes an `enum fi_wait_obj *`.
        FI_GETWAITOBJ => unsafe { fi::write_out(arg as *mut u32, w.kind()) },
        _ => Err(Error::NOSYS),
    }
}

/// Writes `FI_GETWAIT`'s answer into the application's argument.
///
/// # Safety
/// As [`control`] for FI_GETWAIT.
unsafe fn write_native(w: &WaitObj, arg: *mut c_void) -> Result<()> {
    if arg.is_null() {
        return Err(Error::INVAL);
    }
    match w.native()? {
        // SAFETY: per the contract, `arg` is an `int*`.
        NativeWait::Fd(fd) => unsafe { (arg as *mut i32).write_unaligned(fd) },
        NativeWait::MutexCond(mc) => {
            // SAFETY: per the contract, `arg` is a `struct fi_mutex_cond*`.
            unsafe {
                (arg as *mut fi_mutex_cond).write_unaligned(fi_mutex_cond {
                    mutex: mc.mutex_ptr(),
                    cond: mc.cond_ptr(),
                })
            }
        }
        NativeWait::PollFd(fd) => {
            let p = arg as *mut fi_wait_pollfd;
            // SAFETY: per the contract, `arg` is a `struct fi_wait_pollfd*`
            // whose `fd` array has `nfds` entries.
            unsafe {
                let have = (*p).nfds;
                (*p).nfds = 1;
                (*p).change_index = 1;
                if have < 1 || (*p).fd.is_null() {
                    return Err(Error::TOOSMALL);
                }
                *(*p).fd = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
            }
        }
    }
    Ok(())
}

unsafe extern "C" fn wait_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments come from the application through fi_control().
    unsafe {
        fi::call_obj::<WaitSet, c_int>("wait set control", f as *const c_void, |o| {
            control(&o.core.obj, cmd, arg)?;
            Ok(0)
        })
    }
}

/// `fi_wait`: 0 once a member has something, -FI_ETIMEDOUT on timeout,
/// -FI_ECANCELED when the set is closed meanwhile.
unsafe extern "C" fn wait_wait(w: *mut fid_wait, timeout: c_int) -> c_int {
    // SAFETY: arguments come from the application through fi_wait().
    unsafe {
        fi::call_obj_blocking::<WaitSet, c_int>("fi_wait", w as *const c_void, |o| {
            o.core.wait(timeout)?;
            Ok(0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getwait_per_kind() {
        let obj = |kind| WaitObj::new(kind, None).unwrap();
        let mut fd = -1i32;
        let fdp = &mut fd as *mut i32 as *mut c_void;
        // SAFETY (the control calls below): `fdp` is an int*, which the
        // kinds without an object never write; NULL is rejected.
        unsafe {
            assert_eq!(control(&obj(FI_WAIT_UNSPEC), FI_GETWAIT, fdp), Err(Error::NODATA));
            assert_eq!(control(&obj(FI_WAIT_NONE), FI_GETWAIT, fdp), Err(Error::NODATA));
            assert_eq!(control(&obj(FI_WAIT_YIELD), FI_GETWAIT, fdp), Err(Error::NODATA));
            assert_eq!(
                control(&obj(FI_WAIT_FD), FI_GETWAIT, core::ptr::null_mut()),
                Err(Error::INVAL)
            );
            assert_eq!(control(&obj(FI_WAIT_FD), FI_ENABLE, fdp), Err(Error::NOSYS));
            control(&obj(FI_WAIT_FD), FI_GETWAIT, fdp).unwrap();
        }
        assert!(fd >= 0);
        let mut mc = fi_mutex_cond {
            mutex: core::ptr::null_mut(),
            cond: core::ptr::null_mut(),
        };
        let w = obj(FI_WAIT_MUTEX_COND);
        // SAFETY: MUTEX_COND takes a struct fi_mutex_cond*.
        unsafe { control(&w, FI_GETWAIT, &mut mc as *mut fi_mutex_cond as *mut c_void) }.unwrap();
        assert!(!mc.mutex.is_null() && !mc.cond.is_null());
        let mut kind = 0u32;
        // SAFETY: FI_GETWAITOBJ takes an enum fi_wait_obj*.
        unsafe { control(&w, FI_GETWAITOBJ, &mut kind as *mut u32 as *mut c_void) }.unwrap();
        assert_eq!(kind, FI_WAIT_MUTEX_COND);
    }

    #[test]
    fn pollfd_array_too_small() {
        let w = WaitObj::new(FI_WAIT_POLLFD, None).unwrap();
        let mut pfd = libc::pollfd {
            fd: -1,
            events: 0,
            revents: 0,
        };
        let mut arg = fi_wait_pollfd {
            change_index: 0,
            nfds: 0,
            fd: &mut pfd,
        };
        let p = &mut arg as *mut fi_wait_pollfd as *mut c_void;
        // SAFETY: a struct fi_wait_pollfd with `nfds` entries (0, then 1).
        assert_eq!(unsafe { control(&w, FI_GETWAIT, p) }, Err(Error::TOOSMALL));
        assert_eq!((arg.nfds, arg.change_index), (1, 1));
        // SAFETY: as above.
        unsafe { control(&w, FI_GETWAIT, p) }.unwrap();
        assert!(pfd.fd >= 0 && pfd.events == libc::POLLIN);
    }
}
