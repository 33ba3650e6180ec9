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

use crate::base::error::{Error, Result};
use crate::core::cntr::Cntr;
use crate::core::cq::Cq;
use crate::core::domain::Domain;
use crate::core::progress::Engine;
use crate::core::users::Held;
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
pub(crate) struct PollSet {
    members: Mutex<Vec<Member>>,
    _domain: Option<Held<Domain>>,
}

impl PollSet {
    /// `fi_poll_open`: `attr->flags` "is reserved and must be set to 0".
    pub(crate) fn open(domain: &Arc<Domain>, flags: u64) -> Result<Arc<PollSet>> {
        if flags != 0 {
            return Err(Error::INVAL);
        }
        Ok(PollSet::new(Some(Held::new(domain.clone()))))
    }

    /// `domain` is None only for sets driven directly (unit tests).
    pub(crate) fn new(domain: Option<Held<Domain>>) -> Arc<PollSet> {
        Arc::new(PollSet {
            members: Mutex::new(Vec::new()),
            _domain: domain,
        })
    }

    pub(crate) fn add_cq(&self, cq: &Arc<Cq>) {
        self.lock_foreign(&cq.wait().engines());
        let mut m = self.members.lock();
        m.retain(Member::alive);
        if !m.iter().any(|x| x.is(Arc::as_ptr(cq) as *const ())) {
            m.push(Member::Cq(Arc::downgrade(cq)));
        }
    }

    pub(crate) fn add_cntr(&self, c: &Arc<Cntr>) {
        self.lock_foreign(&c.wait().engines());
        let mut m = self.members.lock();
        m.retain(Member::alive);
        if !m.iter().any(|x| x.is(Arc::as_ptr(c) as *const ())) {
            m.push(Member::Cntr(Arc::downgrade(c), c.peek()));
        }
    }

    /// `fi_poll` progresses a member's engines: those of another domain
    /// than the set's are then reached outside their domain's
    /// serialisation, so their locks become real for good (base/serial.rs).
    fn lock_foreign(&self, engines: &[Arc<Engine>]) {
        for e in engines {
            let ours = self
                ._domain
                .as_ref()
                .is_some_and(|d| Arc::ptr_eq(d.engine.mode(), e.mode()));
            if !ours {
                e.mode().lock_for_good();
            }
        }
    }

    /// `fi_poll_del` of a CQ; `Err(INVAL)` if it is not a member.
    pub(crate) fn remove_cq(&self, cq: &Arc<Cq>) -> Result<()> {
        self.remove(Arc::as_ptr(cq) as *const ())
    }

    /// `fi_poll_del` of a counter; `Err(INVAL)` if it is not a member.
    pub(crate) fn remove_cntr(&self, c: &Arc<Cntr>) -> Result<()> {
        self.remove(Arc::as_ptr(c) as *const ())
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

    /// `fi_poll`: hands `out` the context of each member with events, at
    /// most `max` of them, and returns how many.
    pub(crate) fn poll(&self, max: usize, mut out: impl FnMut(usize)) -> usize {
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
        let mut n = 0;
        let mut m = self.members.lock();
        m.retain(Member::alive);
        for x in m.iter_mut() {
            match x {
                // "Completion queues will return their context if they are
                // not empty."
                Member::Cq(w) => {
                    if let Some(cq) = w.upgrade() {
                        if cq.has_events() && n < max {
                            out(cq.context());
                            n += 1;
                        }
                    }
                }
                // "The context associated with a counter will be returned if
                // the counter's success value or error value have changed".
                Member::Cntr(w, last) => {
                    if let Some(c) = w.upgrade() {
                        let now = c.peek();
                        if now != *last && n < max {
                            *last = now;
                            out(c.context());
                            n += 1;
                        }
                    }
                }
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::*;
    use crate::core::cq::CqEntry;
    use crate::core::wait::Holds;

    fn cq(ctx: usize) -> Arc<Cq> {
        let a = crate::core::cq::CqAttr {
            size: 8,
            flags: 0,
            format: FI_CQ_FORMAT_CONTEXT,
            wait_obj: FI_WAIT_NONE,
            wait_cond: 0,
        };
        Cq::new(&a, fi_version(1, 17), Holds::none(), ctx).unwrap()
    }

    fn cntr(ctx: usize) -> Arc<Cntr> {
        let a = crate::core::cntr::CntrAttr {
            events: FI_CNTR_EVENTS_COMP,
            wait_obj: FI_WAIT_NONE,
            flags: 0,
        };
        Cntr::new(&a, Holds::none(), ctx).unwrap()
    }

    fn poll(p: &PollSet, max: usize) -> Vec<usize> {
        let mut v = Vec::new();
        assert_eq!(p.poll(max, |c| v.push(c)), v.len());
        v
    }

    #[test]
    fn reports_the_members_with_events() {
        let p = PollSet::new(None);
        let (a, b, c) = (cq(0x10), cq(0x20), cntr(0x30));
        p.add_cq(&a);
        p.add_cq(&b);
        p.add_cq(&b);
        p.add_cntr(&c);
        assert!(poll(&p, 8).is_empty());
        b.push(CqEntry::new(core::ptr::null_mut(), FI_SEND)).unwrap();
        assert_eq!(poll(&p, 8), vec![0x20]);
        assert_eq!(poll(&p, 8), vec![0x20], "a CQ stays reported until empty");
        c.add(1);
        assert_eq!(poll(&p, 8), vec![0x20, 0x30]);
        assert_eq!(poll(&p, 8), vec![0x20], "a counter is reported once per change");
        c.inc_err();
        a.push(CqEntry::new(core::ptr::null_mut(), FI_SEND)).unwrap();
        assert_eq!(poll(&p, 1).len(), 1, "bounded by count");
        assert_eq!(poll(&p, 8), vec![0x10, 0x20, 0x30]);
        assert_eq!(p.remove_cq(&b), Ok(()));
        assert_eq!(p.remove_cq(&b), Err(Error::INVAL));
        assert_eq!(p.remove_cntr(&c), Ok(()));
        drop(a); // a closed member just disappears
        assert!(poll(&p, 8).is_empty());
    }
}
