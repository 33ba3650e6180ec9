//! Exhaustive models (loom, C11 memory model) of the protocol of
//! `cq_queue.rs` with concurrent producers (endpoints completing
//! operations) and readers (application threads of an FI_THREAD_SAFE
//! domain): `make loom`.

use super::*;
use crate::abi::FI_EIO;
use core::ffi::c_void;
use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::sync::Arc;
use loom::thread;

struct Loom;

impl Prims for Loom {
    type Lock = loom::sync::Mutex<Queue>;
    type Guard<'a> = loom::sync::MutexGuard<'a, Queue>;
    type Flag = AtomicBool;
    fn new_lock(q: Queue, _mode: std::sync::Arc<LockMode>) -> Self::Lock {
        loom::sync::Mutex::new(q)
    }
    fn serial(_l: &Self::Lock) -> bool {
        false
    }
    fn lock(l: &Self::Lock) -> Self::Guard<'_> {
        l.lock().expect("model lock")
    }
    fn new_flag(v: bool) -> Self::Flag {
        AtomicBool::new(v)
    }
    fn load(f: &Self::Flag, o: Ordering) -> bool {
        f.load(o)
    }
    fn store(f: &Self::Flag, v: bool, o: Ordering) {
        f.store(v, o)
    }
    type Count = AtomicUsize;
    fn new_count(v: usize) -> Self::Count {
        AtomicUsize::new(v)
    }
    fn get(c: &Self::Count, o: Ordering) -> usize {
        c.load(o)
    }
    fn set(c: &Self::Count, v: usize, o: Ordering) {
        c.store(v, o)
    }
    fn cas(c: &Self::Count, cur: usize, new: usize) -> bool {
        c.compare_exchange(cur, new, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
    fn fetch_sub(c: &Self::Count, v: usize) -> usize {
        c.fetch_sub(v, Ordering::Relaxed)
    }
    fn fetch_or(c: &Self::Count, v: usize) -> usize {
        c.fetch_or(v, Ordering::Relaxed)
    }
}

type Q = CqQueue<Loom>;

fn entry(n: usize) -> CqEntry {
    CqEntry::new(n as *mut c_void, 0)
}

fn id(e: &CqEntry) -> usize {
    e.op_context as usize
}

fn queue(size: usize) -> Arc<Q> {
    Arc::new(CqQueue::new(Queue::new(size).expect("queue"), LockMode::locked()))
}

/// What a reader got: success entries and error entries by id.
#[derive(Default)]
struct Got {
    ok: Vec<usize>,
    errs: Vec<usize>,
    overrun_events: usize,
}

impl Got {
    /// One read as an application does it: fi_cq_read, and on
    /// -FI_EAVAIL fi_cq_readerr. Returns the read's result.
    fn read_once(&mut self, q: &Q) -> Result<usize> {
        let r = q.take(4, |_, e| self.ok.push(id(e)));
        if r == Err(Error::AVAIL) {
            q.take_err(|r| match r {
                CqErrRead::Entry(e) => self.errs.push(id(&e.entry)),
                CqErrRead::Overrun => self.overrun_events += 1,
            })
            .expect("-FI_EAVAIL, then fi_cq_readerr finds nothing");
        }
        r
    }

    /// Reads until the queue says -FI_EAGAIN or -FI_EOVERRUN.
    fn drain(&mut self, q: &Q) -> Error {
        loop {
            match self.read_once(q) {
                Ok(n) => assert!(n > 0, "Ok(0) from a read of 4"),
                Err(Error::AVAIL) => {}
                Err(e) => return e,
            }
        }
    }
}

/// How a model's producer pushes an unclaimed completion: the real
/// [`CqQueue::push`], or (planted) around the guard, as code that
/// locked the queue directly would.
type PushFn = fn(&Q, CqEntry) -> Result<()>;

fn push_real(q: &Q, e: CqEntry) -> Result<()> {
    q.push(e)
}

fn push_around_the_guard(q: &Q, e: CqEntry) -> Result<()> {
    Loom::lock(&q.m).ok.push_back(e);
    Ok(())
}

/// Two producers that claimed their slots (one completes with an
/// error) and two readers, on a CQ of 2: every completion read exactly
/// once (nothing lost, nothing doubled), no overrun, and once everything
/// is read the claims are all returned (2 claims fit again, a third
/// does not). `claimed_push: false` (planted) pushes the claimed
/// operations' completions as unclaimed ones.
fn claimed_model(claimed_push: bool) {
    loom::model(move || {
        let q = queue(2);
        let (q1, q2, q3) = (q.clone(), q.clone(), q.clone());
        let w1 = thread::spawn(move || {
            q1.claim().expect("slot accounting: claim refused on a CQ with room");
            let r = if claimed_push {
                q1.push_claimed(entry(1))
            } else {
                q1.push(entry(1))
            };
            assert_eq!(r, Ok(()), "slot accounting: a claimed completion overran");
        });
        let w2 = thread::spawn(move || {
            q2.claim().expect("slot accounting: claim refused on a CQ with room");
            let e = CqErrEntry::new(entry(2), FI_EIO);
            let r = if claimed_push {
                q2.push_err_claimed(e)
            } else {
                q2.push_err(e)
            };
            assert_eq!(r, Ok(()), "slot accounting: a claimed completion overran");
        });
        let r1 = thread::spawn(move || {
            let mut g = Got::default();
            let _ = g.read_once(&q3);
            g
        });
        let mut mine = Got::default();
        let _ = mine.read_once(&q);
        w1.join().expect("writer 1");
        w2.join().expect("writer 2");
        let theirs = r1.join().expect("reader");
        // After the writers: a read sees everything not yet read.
        assert_eq!(mine.drain(&q), Error::AGAIN);
        let mut ok = [mine.ok, theirs.ok].concat();
        let mut errs = [mine.errs, theirs.errs].concat();
        ok.sort_unstable();
        errs.sort_unstable();
        assert_eq!(ok, [1], "completion lost or read twice");
        assert_eq!(errs, [2], "error completion lost or read twice");
        assert_eq!(
            mine.overrun_events + theirs.overrun_events,
            0,
            "overrun event without overrun"
        );
        assert_eq!(q.claim(), Ok(()), "slot accounting: claims not returned");
        assert_eq!(q.claim(), Ok(()), "slot accounting: claims not returned");
        assert_eq!(
            q.claim(),
            Err(Error::AGAIN),
            "slot accounting: more claims than capacity"
        );
    });
}

#[test]
fn claimed_completions_are_read_once_and_never_overrun() {
    claimed_model(true);
}

#[test]
#[should_panic(expected = "slot accounting")]
fn claimed_completions_overrun_when_pushed_unclaimed() {
    claimed_model(false);
}

/// A CQ of 1, a producer pushing two unclaimed completions, a reader
/// reading once meanwhile: the second push overruns exactly when the
/// first entry is still queued — always if the reader found nothing,
/// never if the reader's read of it happened before the push. Then the
/// valid entries are read first, then one FI_EOVERRUN event, then
/// -FI_EOVERRUN for reads, claims and pushes; without an overrun the
/// second entry is read and the queue is empty.
#[test]
fn overrun_exactly_when_full() {
    loom::model(|| {
        let q = queue(1);
        let read_done = Arc::new(AtomicBool::new(false));
        let (q1, d1) = (q.clone(), read_done.clone());
        let w = thread::spawn(move || {
            assert_eq!(q1.push(entry(1)), Ok(()), "push into an empty CQ");
            let freed = d1.load(Ordering::Acquire);
            let r = q1.push(entry(2));
            if freed {
                assert_eq!(r, Ok(()), "overrun although the first entry was read");
            }
            r
        });
        let mut g = Got::default();
        let first = g.read_once(&q);
        if first == Ok(1) {
            read_done.store(true, Ordering::Release);
        }
        let second = w.join().expect("writer");
        match first {
            Ok(1) => assert_eq!(g.ok, [1]),
            Err(Error::AGAIN) => {
                assert_eq!(second, Err(Error::OVERRUN), "a push into a full CQ did not overrun")
            }
            r => panic!("unexpected first read {r:?}"),
        }
        let end = g.drain(&q);
        if second.is_ok() {
            assert_eq!(end, Error::AGAIN);
            assert_eq!(g.ok, [1, 2], "lost, doubled or reordered");
            assert_eq!(g.overrun_events, 0);
        } else {
            assert_eq!(end, Error::OVERRUN, "overrun never reported");
            assert_eq!(g.ok, [1], "the valid entry was not read before the overrun event");
            assert_eq!(g.overrun_events, 1, "not exactly one FI_EOVERRUN event");
            assert_eq!(q.take_err(|_| ()), Err(Error::OVERRUN));
            assert_eq!(q.claim(), Err(Error::OVERRUN));
            assert_eq!(q.push(entry(3)), Err(Error::OVERRUN));
            assert_eq!(q.take(4, |_, _| panic!("entry after overrun")), Err(Error::OVERRUN));
        }
    });
}

/// Two producers, each telling the reader when its push has returned
/// (a Release store the reader Acquires: the read runs after the write
/// completed), one reader reading meanwhile, then after both writers: the
/// read of an empty CQ (the `any` flag, no lock) never hides an entry
/// whose push completed before the read, and every entry is read once.
fn empty_read_model(push: PushFn) {
    loom::model(move || {
        let q = queue(4);
        let done = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let mut ws = Vec::new();
        for i in 0..2 {
            let (q1, d1) = (q.clone(), done.clone());
            ws.push(thread::spawn(move || {
                push(&q1, entry(i + 1)).expect("push into a CQ with room");
                d1[i].store(true, Ordering::Release);
            }));
        }
        let mut g = Got::default();
        let before: Vec<usize> = (0..2)
            .filter(|&i| done[i].load(Ordering::Acquire))
            .map(|i| i + 1)
            .collect();
        let _ = g.read_once(&q);
        for e in before {
            assert!(g.ok.contains(&e), "a read after a completed push did not see its entry");
        }
        for w in ws {
            w.join().expect("writer");
        }
        // Both pushes completed before these reads.
        assert_eq!(g.drain(&q), Error::AGAIN);
        let mut all = g.ok;
        all.sort_unstable();
        assert_eq!(all, [1, 2], "a read after a completed push did not see its entry");
    });
}

#[test]
fn empty_read_never_hides_a_completed_push() {
    empty_read_model(push_real);
}

#[test]
#[should_panic(expected = "did not see its entry")]
fn empty_read_hides_a_push_made_around_the_guard() {
    empty_read_model(push_around_the_guard);
}

/// How a model's claimer takes a slot: the real [`CqQueue::claim`], or
/// (planted) with `taken` loaded before `freed`, the order the module
/// documentation rules out.
type ClaimFn = fn(&Q) -> Result<()>;

fn claim_real(q: &Q) -> Result<()> {
    q.claim()
}

fn claim_taken_first(q: &Q) -> Result<()> {
    loop {
        let t = q.taken.load(Ordering::Relaxed);
        let f = q.freed.load(Ordering::Acquire);
        if t.wrapping_sub(f) >= q.cap.load(Ordering::Relaxed) {
            return Err(if t & DEAD != 0 { Error::OVERRUN } else { Error::AGAIN });
        }
        if q.taken
            .compare_exchange(t, t + 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(());
        }
    }
}

/// A CQ of 2 that never holds more than one slot's worth while a
/// third thread claims: a producer claims and pushes one completion,
/// a reader reads it (concurrently with the claim, so the take and the
/// read can both land between the claimer's two loads). The claim
/// (no lock) must succeed: the CQ is never full. Then, with the
/// claimer's slot still held, one more claim fits and a third does not
/// (slots taken − read = 2 = capacity), and an unclaim gives one back.
fn lock_free_claim_model(claim: ClaimFn) {
    loom::model(move || {
        let q = queue(2);
        let (q1, q2) = (q.clone(), q.clone());
        let w = thread::spawn(move || {
            q1.claim().expect("claim refused on an empty CQ");
            q1.push_claimed(entry(1)).expect("a claimed completion overran");
        });
        let r = thread::spawn(move || {
            let mut g = Got::default();
            for _ in 0..2 {
                if g.read_once(&q2).is_ok() {
                    break;
                }
                thread::yield_now();
            }
            g
        });
        let q3 = q.clone();
        let c = thread::spawn(move || claim(&q3));
        w.join().expect("writer");
        let claimed = c.join().expect("claimer");
        assert_eq!(claimed, Ok(()), "a claim was refused on a CQ that was never full");
        let mut g = r.join().expect("reader");
        assert_eq!(g.drain(&q), Error::AGAIN);
        assert_eq!(g.ok, [1], "completion lost or read twice");
        assert_eq!(q.claim(), Ok(()), "slot accounting: a freed slot not reusable");
        assert_eq!(
            q.claim(),
            Err(Error::AGAIN),
            "slot accounting: more claims than capacity"
        );
        q.unclaim();
        assert_eq!(q.claim(), Ok(()), "slot accounting: an unclaimed slot not returned");
    });
}

#[test]
fn lock_free_claim_never_refuses_a_cq_with_room() {
    lock_free_claim_model(claim_real);
}

#[test]
#[should_panic(expected = "never full")]
fn lock_free_claim_loading_taken_first_refuses_a_cq_with_room() {
    lock_free_claim_model(claim_taken_first);
}
