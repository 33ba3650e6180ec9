//! Poll sets (`fi_poll(3)`): `fi_poll_open` (a domain op without a context
//! argument), `fi_poll_add`/`fi_poll_del` and `fi_poll`.
//!
//! A [`PollSet`] holds its domain and *weak* references to its members, so a
//! member can be closed while still in a set (it simply stops being
//! reported) and nothing in the set keeps a closed object's memory alive.
//! Decisions:
//! * Members are CQs and counters ("Associates a completion queue or counter
//!   with a poll set"); any other fid, EQs included, is -FI_EINVAL, as in
//!   libfabric's util for application poll sets. Adding a member twice is a
//!   no-op; deleting a fid that is not a member is -FI_EINVAL.
//! * `fi_poll` first progresses every member's engines ("Progresses all
//!   completion queues and counters associated with a poll set"), then
//!   returns, in the order they were added, the `context` given to
//!   `fi_cq_open`/`fi_cntr_open` of each CQ that is not empty (errors
//!   included) and of each counter whose value or error value changed since
//!   the previous `fi_poll` on this set (util's reading of the man page; the
//!   checkpoint starts at the value the counter had when it was added).
//!   0 when nothing happened; `context` NULL or `count <= 0` is -FI_EINVAL.
//! * `attr->flags` "is reserved and must be set to 0": anything else is
//!   -FI_EINVAL.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::cntr::Cntr;
use crate::core::cq::Cq;
use crate::core::domain::Domain;
use crate::core::progress::Engine;
use crate::core::users::Held;
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_int, c_void};
use parking_lot::Mutex;
use std::sync::{Arc, Weak};

enum Member {
    Cq(Weak<Cq>),
    /// The counter and its (value, error value) at the previous fi_poll.
    Cntr(Weak<Cntr>, (u64, u64)),
}

impl Member {
    fn is(&self, p: *const ()) -> bool {
        match self {
            Member::Cq(w) => w.as_ptr() as *const () == p,
            Member::Cntr(w, _) => w.as_ptr() as *const () == p,
        }
    }
    fn alive(&self) -> bool {
        match self {
            Member::Cq(w) => w.strong_count() > 0,
            Member::Cntr(w, _) => w.strong_count() > 0,
        }
    }
}

/// The poll-set core.
pub struct PollSet {
    members: Mutex<Vec<Member>>,
    _domain: Option<Held<Domain>>,
}

impl FiObject for PollSet {
    type Header = fid_poll;
    const CLASS: usize = FI_CLASS_POLL;
}

impl PollSet {
    pub fn new(domain: Option<Held<Domain>>) -> Arc<PollSet> {
        Arc::new(PollSet {
            members: Mutex::new(Vec::new()),
            _domain: domain,
        })
    }

    pub fn add_cq(&self, cq: &Arc<Cq>) {
        let mut m = self.members.lock();
        m.retain(Member::alive);
        if !m.iter().any(|x| x.is(Arc::as_ptr(cq) as *const ())) {
            m.push(Member::Cq(Arc::downgrade(cq)));
        }
    }

    pub fn add_cntr(&self, c: &Arc<Cntr>) {
        let mut m = self.members.lock();
        m.retain(Member::alive);
        if !m.iter().any(|x| x.is(Arc::as_ptr(c) as *const ())) {
            m.push(Member::Cntr(Arc::downgrade(c), c.peek()));
        }
    }

    /// Removes a member (by core identity); `Err(INVAL)` if it is not one.
    fn remove(&self, p: *const ()) -> Result<()> {
        let mut m = self.members.lock();
        // Drop closed members first: a new object may reuse a dead one's
        // address.
        m.retain(Member::alive);
        let before = m.len();
        m.retain(|x| !x.is(p));
        if m.len() == before {
            return Err(Error::INVAL);
        }
        Ok(())
    }

    /// `fi_poll`: the contexts of members with events, at most `max`.
    pub fn poll(&self, max: usize) -> Vec<*mut c_void> {
        // Progress first, each engine once, outside the members lock (a
        // progress pass may complete operations into these very members).
        let mut engines: Vec<Arc<Engine>> = Vec::new();
        {
            let m = self.members.lock();
            for x in m.iter() {
                let list = match x {
                    Member::Cq(w) => w.upgrade().map(|c| c.wait().engines()),
                    Member::Cntr(w, _) => w.upgrade().map(|c| c.wait().engines()),
                };
                for e in list.iter().flat_map(|l| l.iter()) {
                    if !engines.iter().any(|x| Arc::ptr_eq(x, e)) {
                        engines.push(e.clone());
                    }
                }
            }
        }
        for e in &engines {
            e.progress();
        }
        let mut out = Vec::new();
        let mut m = self.members.lock();
        m.retain(Member::alive);
        for x in m.iter_mut() {
            match x {
                // "Completion queues will return their context if they are
                // not empty."
                Member::Cq(w) => {
                    if let Some(cq) = w.upgrade() {
                        if cq.has_events() && out.len() < max {
                            out.push(cq.context());
                        }
                    }
                }
                // "The context associated with a counter will be returned if
                // the counter's success value or error value have changed".
                Member::Cntr(w, last) => {
                    if let Some(c) = w.upgrade() {
                        let now = c.peek();
                        if now != *last && out.len() < max {
                            *last = now;
                            out.push(c.context());
                        }
                    }
                }
            }
        }
        out
    }
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
pub fn open(d: &Obj<Domain>, attr: &fi_poll_attr) -> Result<*mut fid_poll> {
    if attr.flags != 0 {
        return Err(Error::INVAL);
    }
    let core = PollSet::new(Some(Held::new(d.core.clone())));
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
        fi::call_obj::<PollSet, c_int>("poll set close", f as *const c_void, |o| {
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
            match fi::read_in(member)?.fclass {
                FI_CLASS_CQ => o.core.add_cq(&crate::core::cq::from_fid(member)?),
                FI_CLASS_CNTR => o.core.add_cntr(&crate::core::cntr::from_fid(member)?),
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
            let core: *const () = match fi::read_in(member)?.fclass {
                FI_CLASS_CQ => Arc::as_ptr(&crate::core::cq::from_fid(member)?) as *const (),
                FI_CLASS_CNTR => Arc::as_ptr(&crate::core::cntr::from_fid(member)?) as *const (),
                _ => return Err(Error::INVAL),
            };
            o.core.remove(core)?;
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
            let got = o.core.poll(count as usize);
            for (i, c) in got.iter().enumerate() {
                // SAFETY: the application's array holds `count` pointers and
                // `got` has at most `count` entries.
                context.add(i).write(*c);
            }
            Ok(got.len() as c_int)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::cq::CqEntry;

    fn cq(ctx: usize) -> Arc<Cq> {
        let a = fi_cq_attr {
            size: 8,
            flags: 0,
            format: FI_CQ_FORMAT_CONTEXT,
            wait_obj: FI_WAIT_NONE,
            signaling_vector: 0,
            wait_cond: 0,
            wait_set: core::ptr::null_mut(),
        };
        Cq::new(&a, fi_version(1, 17), None, None, ctx as *mut c_void).unwrap()
    }

    fn cntr(ctx: usize) -> Arc<Cntr> {
        let a = fi_cntr_attr {
            events: FI_CNTR_EVENTS_COMP,
            wait_obj: FI_WAIT_NONE,
            wait_set: core::ptr::null_mut(),
            flags: 0,
        };
        Cntr::new(&a, None, None, ctx as *mut c_void).unwrap()
    }

    #[test]
    fn reports_the_members_with_events() {
        let p = PollSet::new(None);
        let (a, b, c) = (cq(0x10), cq(0x20), cntr(0x30));
        p.add_cq(&a);
        p.add_cq(&b);
        p.add_cq(&b);
        p.add_cntr(&c);
        assert!(p.poll(8).is_empty());
        b.push(CqEntry::new(core::ptr::null_mut(), FI_SEND)).unwrap();
        assert_eq!(p.poll(8), vec![0x20 as *mut c_void]);
        assert_eq!(p.poll(8), vec![0x20 as *mut c_void], "a CQ stays reported until empty");
        c.add(1);
        assert_eq!(p.poll(8), vec![0x20 as *mut c_void, 0x30 as *mut c_void]);
        assert_eq!(
            p.poll(8),
            vec![0x20 as *mut c_void],
            "a counter is reported once per change"
        );
        c.inc_err();
        a.push(CqEntry::new(core::ptr::null_mut(), FI_SEND)).unwrap();
        assert_eq!(p.poll(1).len(), 1, "bounded by count");
        assert_eq!(
            p.poll(8),
            vec![0x10 as *mut c_void, 0x20 as *mut c_void, 0x30 as *mut c_void]
        );
        assert_eq!(p.remove(Arc::as_ptr(&b) as *const ()), Ok(()));
        assert_eq!(p.remove(Arc::as_ptr(&b) as *const ()), Err(Error::INVAL));
        drop(a); // a closed member just disappears
        assert!(p.poll(8).is_empty());
    }
}
