//! The C face of counters: `fi_cntr_open` and the `fid_cntr` operations
//! (read, add, set, wait, `fi_control`) over the core in `core/cntr.rs`.

use crate::abi::*;
use crate::base::error::Result;
use crate::core::cntr::{Cntr, CntrAttr};
use crate::core::domain::Domain;
use crate::core::trigger::{self, Counted};
use crate::core::users::{AnyParent, Held};
use crate::core::wait::Holds;
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_int, c_void};
use std::sync::Arc;

impl FiObject for Cntr {
    const CLOSE: &'static str = "cntr close";
    type Header = fid_cntr;
    const CLASS: usize = FI_CLASS_CNTR;
    fn wake_for_close(&self) {
        self.wait().close();
        // Queued triggered operations are freed, never issued.
        self.triggers().close();
    }
}

static CNTR_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(fi::close_when_idle::<Cntr>),
    bind: Some(noops::no_bind),
    control: Some(cntr_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static CNTR_OPS: fi_ops_cntr = fi_ops_cntr {
    size: core::mem::size_of::<fi_ops_cntr>(),
    read: Some(cntr_read),
    readerr: Some(cntr_readerr),
    add: Some(cntr_add),
    set: Some(cntr_set),
    wait: Some(cntr_wait),
    adderr: Some(cntr_adderr),
    seterr: Some(cntr_seterr),
};

/// The core's form of an `fi_cntr_attr` (its wait set is taken in `open`).
fn cntr_attr(a: &fi_cntr_attr) -> CntrAttr {
    CntrAttr {
        events: a.events,
        wait_obj: a.wait_obj,
        flags: a.flags,
    }
}

/// `fi_cntr_open`.
pub(crate) fn open(d: &Obj<Domain>, attr: &fi_cntr_attr, ctx: *mut c_void) -> Result<*mut fid_cntr> {
    let set = if attr.wait_obj == FI_WAIT_SET {
        let s = fi::wait::set_for_fabric(attr.wait_set as *mut fid, d.core.fabric())?;
        Some(Held::new(s))
    } else {
        None
    };
    let holds = Holds {
        parent: Some(Held::new(Arc::clone(&d.core) as Arc<AnyParent>)),
        set,
    };
    let c = Cntr::new(&cntr_attr(attr), holds, ctx as usize)?;
    c.wait().add_engine(&d.core.engine)?;
    let hdr = fid_cntr {
        fid: fid {
            fclass: FI_CLASS_CNTR,
            context: ctx,
            ops: &CNTR_FI_OPS,
        },
        ops: &CNTR_OPS,
    };
    Ok(Obj::create_counting(hdr, c, fi::counts_every_call(&d.core)))
}

/// The counter core behind a `struct fid*` (endpoints' and MRs' binds).
/// Any pointer: one that is not a live rustfab Cntr is `-FI_EINVAL`.
pub(crate) fn from_fid(p: *mut fid) -> Result<Arc<Cntr>> {
    fi::core_of(p)
}

unsafe extern "C" fn cntr_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments come from the application through fi_control().
    unsafe {
        fi::call_obj::<Cntr, c_int>("cntr control", f as *const c_void, |o| {
            match cmd {
                // FI_GETOPSFLAG takes a `uint64_t *`.
                FI_GETOPSFLAG => fi::write_out(arg as *mut u64, o.core.ops_flags())?,
                // FI_SETOPSFLAG takes a `uint64_t *`.
                FI_SETOPSFLAG => o.core.set_ops_flags(*fi::read_in(arg as *const u64)?)?,
                _ => fi::wait::control(o.core.shown_wait(), cmd, arg)?,
            }
            Ok(0)
        })
    }
}

/// fi_cntr_read has no error channel: an invalid counter reads as 0.
unsafe extern "C" fn cntr_read(c: *mut fid_cntr) -> u64 {
    // SAFETY: the argument comes from the application through fi_cntr_read().
    unsafe { fi::call_obj::<Cntr, u64>("fi_cntr_read", c as *const c_void, |o| Ok(o.core.read())) }
}

unsafe extern "C" fn cntr_readerr(c: *mut fid_cntr) -> u64 {
    // SAFETY: the argument comes from the application through fi_cntr_readerr().
    unsafe { fi::call_obj::<Cntr, u64>("fi_cntr_readerr", c as *const c_void, |o| Ok(o.core.read_err())) }
}

unsafe extern "C" fn cntr_add(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_cntr_add().
    unsafe {
        fi::call_obj::<Cntr, c_int>("fi_cntr_add", c as *const c_void, |o| {
            o.core.add(v);
            trigger::fire(&**o.core);
            Ok(0)
        })
    }
}

unsafe extern "C" fn cntr_adderr(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_cntr_adderr().
    unsafe {
        fi::call_obj::<Cntr, c_int>("fi_cntr_adderr", c as *const c_void, |o| {
            o.core.add_err(v);
            Ok(0)
        })
    }
}

unsafe extern "C" fn cntr_set(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_cntr_set().
    unsafe {
        fi::call_obj::<Cntr, c_int>("fi_cntr_set", c as *const c_void, |o| {
            o.core.set(v);
            trigger::fire(&**o.core);
            Ok(0)
        })
    }
}

unsafe extern "C" fn cntr_seterr(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_cntr_seterr().
    unsafe {
        fi::call_obj::<Cntr, c_int>("fi_cntr_seterr", c as *const c_void, |o| {
            o.core.set_err(v);
            Ok(0)
        })
    }
}

unsafe extern "C" fn cntr_wait(c: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    // SAFETY: arguments come from the application through fi_cntr_wait().
    unsafe {
        fi::call_obj_blocking::<Cntr, c_int>("fi_cntr_wait", c as *const c_void, |o| {
            o.core.wait_for(threshold, timeout)?;
            Ok(0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fi_control on a counter: the ops-flag commands and the wait ones.
    #[test]
    fn control_commands() {
        let a = fi_cntr_attr {
            events: FI_CNTR_EVENTS_COMP,
            wait_obj: FI_WAIT_UNSPEC,
            wait_set: core::ptr::null_mut(),
            flags: 0,
        };
        let core = Cntr::new(&cntr_attr(&a), Holds::none(), 0).unwrap();
        let hdr = fid_cntr {
            fid: fid {
                fclass: FI_CLASS_CNTR,
                context: core::ptr::null_mut(),
                ops: &CNTR_FI_OPS,
            },
            ops: &CNTR_OPS,
        };
        let c = Obj::create(hdr, core) as *mut fid;
        let mut f = 5u64;
        let fp = &mut f as *mut u64 as *mut c_void;
        // SAFETY (the thunk calls below): `c` is a live counter fid and
        // `fp` a u64*, which the UNSPEC kind's FI_GETWAIT never writes.
        unsafe {
            assert_eq!(cntr_control(c, FI_GETOPSFLAG, fp), 0);
            assert_eq!(f, 0);
            assert_eq!(cntr_control(c, FI_GETWAIT, fp), -FI_ENODATA);
            (fp as *mut u64).write(1);
            assert_eq!(cntr_control(c, FI_SETOPSFLAG, fp), -FI_EBADFLAGS);
            assert_eq!(cntr_control(c, FI_SETOPSFLAG, core::ptr::null_mut()), -FI_EINVAL);
            assert_eq!(cntr_control(c, FI_ENABLE, fp), -FI_ENOSYS);
            assert_eq!(cntr_add(c as *mut fid_cntr, 3), 0);
            assert_eq!(cntr_read(c as *mut fid_cntr), 3);
            assert_eq!(fi::close_when_idle::<Cntr>(c), 0);
        }
    }
}
