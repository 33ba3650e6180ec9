//! The queue of triggered operations: order, AGAIN, errors, purge, close,
//! bound, threads, and the engine's pass.

use super::*;
use std::sync::atomic::AtomicUsize;

#[derive(Default)]
struct Ctr {
    v: AtomicU64,
    t: Triggers,
}
impl Counted for Ctr {
    fn value(&self) -> u64 {
        self.v.load(Ordering::Acquire)
    }
    fn triggers(&self) -> &Triggers {
        &self.t
    }
}

type Log = Arc<Mutex<Vec<(u32, Option<Error>)>>>;

struct Op {
    id: u32,
    owner: usize,
    log: Log,
    /// Issues answer AGAIN while this is above 0 (and count it down).
    busy: Arc<AtomicUsize>,
    fails: Option<Error>,
    live: Arc<AtomicUsize>,
}
impl Drop for Op {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}
impl Deferred for Op {
    fn issue(&mut self) -> Result<()> {
        if self.busy.load(Ordering::Acquire) > 0 {
            self.busy.fetch_sub(1, Ordering::AcqRel);
            return Err(Error::AGAIN);
        }
        match self.fails {
            Some(e) => Err(e),
            None => {
                self.log.lock().push((self.id, None));
                Ok(())
            }
        }
    }
    fn fail(self: Box<Self>, err: Error) {
        self.log.lock().push((self.id, Some(err)));
    }
    fn owner(&self) -> usize {
        self.owner
    }
}

struct Kit {
    log: Log,
    busy: Arc<AtomicUsize>,
    live: Arc<AtomicUsize>,
}
impl Kit {
    fn new() -> Kit {
        Kit {
            log: Log::default(),
            busy: Arc::new(AtomicUsize::new(0)),
            live: Arc::new(AtomicUsize::new(0)),
        }
    }
    fn op(&self, id: u32, owner: usize, fails: Option<Error>) -> Box<dyn Deferred> {
        self.live.fetch_add(1, Ordering::AcqRel);
        Box::new(Op {
            id,
            owner,
            log: self.log.clone(),
            busy: self.busy.clone(),
            fails,
            live: self.live.clone(),
        })
    }
    fn ids(&self) -> Vec<u32> {
        self.log.lock().iter().map(|(i, _)| *i).collect()
    }
}

/// Threshold order, submission order among equals, nothing before its
/// threshold, several at once when the counter jumps.
#[test]
fn issues_in_threshold_then_submission_order() {
    let k = Kit::new();
    let c = Ctr::default();
    for (id, th) in [(1, 5), (2, 2), (3, 5), (4, 3), (5, 2), (6, 9)] {
        c.t.push(th, k.op(id, 0, None)).unwrap();
    }
    assert_eq!(c.t.len(), 6);
    fire(&c);
    assert!(k.ids().is_empty(), "value 0 reaches no threshold");
    c.v.store(1, Ordering::Release);
    fire(&c);
    assert!(k.ids().is_empty());
    c.v.store(2, Ordering::Release);
    fire(&c);
    assert_eq!(k.ids(), [2, 5]);
    c.v.store(7, Ordering::Release);
    fire(&c);
    assert_eq!(k.ids(), [2, 5, 4, 1, 3]);
    assert!(!c.t.due(8));
    assert!(c.t.due(9));
    assert_eq!(k.live.load(Ordering::Acquire), 1, "issued operations are freed");
}

/// AGAIN keeps the operation first; other errors are reported and the
/// queue goes on.
#[test]
fn again_keeps_the_order_and_errors_are_reported() {
    let k = Kit::new();
    let c = Ctr::default();
    c.t.push(1, k.op(1, 0, None)).unwrap();
    c.t.push(1, k.op(2, 0, Some(Error::INVAL))).unwrap();
    c.t.push(2, k.op(3, 0, None)).unwrap();
    c.v.store(5, Ordering::Release);
    k.busy.store(1, Ordering::Release);
    fire(&c);
    assert!(k.ids().is_empty(), "the first answered AGAIN: nothing overtakes it");
    assert_eq!(c.t.len(), 3);
    fire(&c);
    assert_eq!(*k.log.lock(), [(1, None), (2, Some(Error::INVAL)), (3, None)]);
    assert_eq!(k.live.load(Ordering::Acquire), 0);
}

/// Purge frees one owner's operations; close frees the rest.
#[test]
fn purge_and_close_free_queued_operations() {
    let k = Kit::new();
    let c = Ctr::default();
    c.t.push(3, k.op(1, 7, None)).unwrap();
    c.t.push(1, k.op(2, 8, None)).unwrap();
    c.t.push(2, k.op(3, 7, None)).unwrap();
    assert_eq!(c.t.purge(7), 2);
    assert_eq!(k.live.load(Ordering::Acquire), 1);
    assert!(c.t.due(1), "the kept operation's threshold is next");
    assert!(!c.t.due(0));
    c.t.close();
    assert_eq!(k.live.load(Ordering::Acquire), 0);
    assert!(!c.t.due(u64::MAX - 1));
    c.v.store(10, Ordering::Release);
    fire(&c);
    assert!(k.ids().is_empty());
}

#[test]
fn the_queue_is_bounded() {
    let k = Kit::new();
    let c = Ctr::default();
    for i in 0..MAX_QUEUED {
        c.t.push(i as u64 + 1, k.op(0, 0, None)).unwrap();
    }
    assert_eq!(c.t.push(1, k.op(0, 0, None)).err(), Some(Error::AGAIN));
    c.t.close();
    assert_eq!(k.live.load(Ordering::Acquire), 0);
}

/// Threads firing at once never issue out of order nor twice.
#[test]
fn concurrent_fires_keep_the_order() {
    let k = Kit::new();
    let c = Arc::new(Ctr::default());
    let n = 2000u32;
    for i in 0..n {
        c.t.push(u64::from(i) + 1, k.op(i, 0, None)).unwrap();
    }
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || {
                for _ in 0..n / 4 {
                    c.v.fetch_add(1, Ordering::AcqRel);
                    fire(&*c);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    fire(&*c);
    assert_eq!(k.ids(), (0..n).collect::<Vec<_>>());
}

/// A pass of the engine issues what became due (the source added at the
/// first queued operation), and close takes the source out.
#[test]
fn the_engine_pass_issues() {
    let k = Kit::new();
    let e = Engine::new().unwrap();
    let c: Arc<Ctr> = Arc::new(Ctr::default());
    let dc: Arc<dyn Counted> = c.clone();
    c.t.push(2, k.op(1, 0, None)).unwrap();
    watch(&dc, std::slice::from_ref(&e));
    watch(&dc, std::slice::from_ref(&e));
    assert_eq!(c.t.sources.lock().len(), 1, "one source per engine");
    assert!(!e.has_pending());
    e.progress();
    assert!(k.ids().is_empty());
    c.v.store(2, Ordering::Release);
    assert!(e.has_pending());
    e.progress();
    assert_eq!(k.ids(), [1]);
    c.t.close();
    assert!(c.t.sources.lock().is_empty());
    drop(dc);
    assert_eq!(Arc::strong_count(&c), 1, "the engine no longer holds the counter");
}
