//! Unit tests of the CQ core (`cq.rs`): attributes, reads in each format,
//! error and overrun handling, capacity and slot claims, blocking reads,
//! wait sets and the idle yields of a polling reader.

use super::*;
use crate::core::wait::NativeWait;
use core::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const V17: u32 = fi_version(1, 17);

fn attr(size: usize, format: u32, wait_obj: u32) -> CqAttr {
    CqAttr {
        size,
        flags: 0,
        format,
        wait_obj,
        wait_cond: FI_CQ_COND_NONE,
    }
}

fn cq(size: usize, format: u32, wait_obj: u32) -> Arc<Cq> {
    Cq::new(&attr(size, format, wait_obj), V17, Holds::none(), 0).unwrap()
}

/// Reads up to `n` entries into `buf` through the core's callback.
fn read(q: &Cq, buf: &mut [CqEntry], n: usize) -> Result<usize> {
    assert!(n <= buf.len());
    q.read(n, |i, e| buf[i] = *e)
}

/// An fi_cq_read loop on an empty CQ yields the processor once it has
/// polled for a while (every IDLE_YIELD_EVERY-th empty read after
/// IDLE_YIELD_AFTER), never before, and a read that returns a
/// completion starts the count anew; sread does not count.
#[test]
// Wait objects: eventfd/epoll system calls Miri does not run (make miri).
#[cfg_attr(miri, ignore)]
fn idle_read_loop_yields_after_a_while() {
    let q = cq(8, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD);
    // Every yield ran someone else: the interval stays IDLE_YIELD_EVERY.
    q.yield_took_ns.store(1_000_000, Ordering::Relaxed);
    let mut c = [CqEntry::default(); 4];
    let yields = || q.yields.load(Ordering::Relaxed);
    for _ in 0..IDLE_YIELD_AFTER - 1 {
        assert_eq!(read(&q, &mut c, 4), Err(Error::AGAIN));
    }
    assert_eq!(yields(), 0, "yielded before IDLE_YIELD_AFTER empty reads");
    for _ in 0..IDLE_YIELD_EVERY * 10 {
        assert_eq!(read(&q, &mut c, 4), Err(Error::AGAIN));
    }
    assert_eq!(yields(), 10);
    // A completion: the count starts again.
    q.push(CqEntry::new(ctx(1), FI_SEND)).unwrap();
    assert_eq!(read(&q, &mut c, 4), Ok(1));
    for _ in 0..IDLE_YIELD_AFTER - 1 {
        assert_eq!(read(&q, &mut c, 4), Err(Error::AGAIN));
    }
    assert_eq!(yields(), 10, "a completion did not reset the idle count");
    // sread's own wait (timeout 0) does not count as idle polling.
    for _ in 0..2 * IDLE_YIELD_AFTER {
        assert_eq!(sread(&q, &mut c, 4, 1, 0), Err(Error::AGAIN));
    }
    assert_eq!(yields(), 10);
}

/// Yields that ran nobody else space out: each doubles the empty reads
/// to the next, up to IDLE_YIELD_EVERY_MAX; the interval outlives a
/// completion (the next idle spell starts where the last one ended);
/// one yield that ran someone brings it back to IDLE_YIELD_EVERY.
#[test]
#[cfg_attr(miri, ignore)]
fn yields_that_run_nobody_else_space_out_and_one_that_does_resets_them() {
    let q = cq(8, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD);
    let mut c = [CqEntry::default(); 4];
    let yields = || q.yields.load(Ordering::Relaxed);
    let every = || q.yield_every.load(Ordering::Relaxed);
    let idle = |n: u32| {
        let mut b = [CqEntry::default(); 4];
        for _ in 0..n {
            assert_eq!(read(&q, &mut b, 4), Err(Error::AGAIN));
        }
    };
    q.yield_took_ns.store(500, Ordering::Relaxed); // alone
    idle(IDLE_YIELD_AFTER);
    assert_eq!((yields(), every()), (1, 2 * IDLE_YIELD_EVERY));
    // The next yields come 4, 8, ... reads apart.
    idle(2 * IDLE_YIELD_EVERY - 1);
    assert_eq!(yields(), 1, "yielded before the doubled interval");
    idle(1);
    assert_eq!((yields(), every()), (2, 4 * IDLE_YIELD_EVERY));
    let mut n = 0u32;
    while every() < IDLE_YIELD_EVERY_MAX {
        idle(every());
        n += 1;
        assert!(n < 32, "the interval does not reach its bound");
    }
    let y = yields();
    idle(4 * IDLE_YIELD_EVERY_MAX);
    assert!(yields() - y <= 4, "more than one yield per IDLE_YIELD_EVERY_MAX reads");
    assert_eq!(every(), IDLE_YIELD_EVERY_MAX, "the interval grew past its bound");
    // A completion resets the count, not the interval.
    q.push(CqEntry::new(ctx(1), FI_SEND)).unwrap();
    assert_eq!(read(&q, &mut c, 4), Ok(1));
    assert_eq!(every(), IDLE_YIELD_EVERY_MAX);
    // The next idle spell's first yield comes at the interval reached
    // (not at IDLE_YIELD_AFTER); it ran someone else: back to every
    // IDLE_YIELD_EVERY-th read.
    q.yield_took_ns.store(1_000_000, Ordering::Relaxed);
    let y = yields();
    idle(IDLE_YIELD_EVERY_MAX - 1);
    assert_eq!(yields(), y, "yielded before the interval reached");
    idle(1);
    assert_eq!(yields(), y + 1);
    assert_eq!(every(), IDLE_YIELD_EVERY);
    idle(IDLE_YIELD_EVERY * 3);
    assert_eq!(yields(), y + 4);
}

/// A source whose passes report a peer that moves, or not.
struct Peer {
    moving: AtomicBool,
}

impl crate::core::progress::Source for Peer {
    fn progress(&self) -> bool {
        self.moving.load(Ordering::Relaxed)
    }
}

/// Empty reads yield only while no peer moves: a peer seen moving on
/// every pass runs on another processor (no yield however long the
/// loop); a still one gets the yields after IDLE_YIELD_AFTER reads, as
/// before; one pass that sees a peer move starts the count anew.
#[test]
#[cfg_attr(miri, ignore)]
fn idle_reads_yield_only_while_no_peer_moves() {
    let q = cq(8, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD);
    let engine = crate::core::progress::Engine::new().unwrap();
    let peer = Arc::new(Peer {
        moving: AtomicBool::new(true),
    });
    engine.add_source(peer.clone());
    q.wait().add_engine(&engine).unwrap();
    q.yield_took_ns.store(1_000_000, Ordering::Relaxed);
    let mut c = [CqEntry::default(); 4];
    let yields = || q.yields.load(Ordering::Relaxed);
    for _ in 0..4 * IDLE_YIELD_AFTER {
        assert_eq!(read(&q, &mut c, 4), Err(Error::AGAIN));
    }
    assert_eq!(yields(), 0, "yielded while a peer moved");
    peer.moving.store(false, Ordering::Relaxed);
    for _ in 0..IDLE_YIELD_AFTER - 1 {
        assert_eq!(read(&q, &mut c, 4), Err(Error::AGAIN));
    }
    assert_eq!(yields(), 0, "yielded before IDLE_YIELD_AFTER still reads");
    for _ in 0..IDLE_YIELD_EVERY * 5 {
        assert_eq!(read(&q, &mut c, 4), Err(Error::AGAIN));
    }
    assert_eq!(yields(), 5, "a still peer did not get the yields");
    peer.moving.store(true, Ordering::Relaxed);
    assert_eq!(read(&q, &mut c, 4), Err(Error::AGAIN));
    peer.moving.store(false, Ordering::Relaxed);
    for _ in 0..IDLE_YIELD_AFTER - 1 {
        assert_eq!(read(&q, &mut c, 4), Err(Error::AGAIN));
    }
    assert_eq!(yields(), 5, "a peer that moved did not start the count anew");
    assert_eq!(read(&q, &mut c, 4), Err(Error::AGAIN));
    assert_eq!(yields(), 6);
}

/// The next error as a Rust record (the overrun event as an entry with
/// err FI_EOVERRUN and nothing else).
fn read_err(q: &Cq) -> Result<CqErrEntry> {
    q.read_err(|r| match r {
        CqErrRead::Entry(e) => e.clone(),
        CqErrRead::Overrun => CqErrEntry::new(CqEntry::default(), FI_EOVERRUN),
    })
}

fn sread(q: &Cq, buf: &mut [CqEntry], n: usize, cond: usize, timeout: i32) -> Result<usize> {
    assert!(n <= buf.len());
    q.sread(n, cond, timeout, |i, e| buf[i] = *e)
}

fn ctx(n: usize) -> *mut c_void {
    n as *mut c_void
}

fn full_entry(n: usize) -> CqEntry {
    CqEntry {
        op_context: ctx(n),
        flags: FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA,
        len: 100 + n,
        buf: ctx(0x1000 + n),
        data: 0xdada_0000 + n as u64,
        tag: 0x7a90_0000 + n as u64,
        src: n as u64,
    }
}

fn fd_of(q: &Cq) -> i32 {
    match q.shown_wait().native() {
        Ok(NativeWait::Fd(fd)) => fd,
        _ => panic!("an FD CQ shows an fd"),
    }
}

/// Entries come out whole (every field the formats cut from), in order,
/// and `count` bounds a read.
#[test]
fn entries_come_out_whole_and_in_order() {
    let q = cq(8, FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE);
    for n in 1..=3 {
        q.push(full_entry(n)).unwrap();
    }
    let mut c = [CqEntry::default(); 4];
    assert_eq!(read(&q, &mut c, 2), Ok(2));
    for (i, n) in [1usize, 2].iter().enumerate() {
        let e = full_entry(*n);
        assert_eq!(
            (c[i].op_context, c[i].flags, c[i].len, c[i].buf),
            (e.op_context, e.flags, e.len, e.buf)
        );
        assert_eq!((c[i].data, c[i].tag, c[i].src), (e.data, e.tag, e.src));
    }
    assert_eq!(read(&q, &mut c, 4), Ok(1));
    assert_eq!(c[0].op_context, ctx(3));
    assert_eq!(read(&q, &mut c, 4), Err(Error::AGAIN));
}

#[test]
fn zero_count_tests_for_entries() {
    let q = cq(8, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
    assert_eq!(q.read(0, |_, _| unreachable!()), Err(Error::AGAIN));
    q.push(CqEntry::new(ctx(1), FI_SEND)).unwrap();
    assert_eq!(q.read(0, |_, _| unreachable!()), Ok(0));
    let mut c = [CqEntry::default(); 1];
    assert_eq!(read(&q, &mut c, 1), Ok(1));
    assert_eq!(read_err(&q).err(), Some(Error::AGAIN));
}

/// "Attempting to read from a CQ while an item is in the error queue
/// results in fi_cq_read failing with a return code of -FI_EAVAIL."
#[test]
fn errors_come_first_and_successes_stay_in_order() {
    let q = cq(8, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
    q.push(CqEntry::new(ctx(1), FI_SEND)).unwrap();
    q.push_err(CqErrEntry::new(CqEntry::new(ctx(2), FI_SEND), FI_ECANCELED))
        .unwrap();
    q.push(CqEntry::new(ctx(3), FI_SEND)).unwrap();
    let mut c = [CqEntry::default(); 4];
    assert_eq!(read(&q, &mut c, 4), Err(Error::AVAIL));
    let e = read_err(&q).unwrap();
    assert_eq!(
        (e.entry.op_context, e.err, e.entry.flags),
        (ctx(2), FI_ECANCELED, FI_SEND)
    );
    assert_eq!(read_err(&q).err(), Some(Error::AGAIN));
    assert_eq!(read(&q, &mut c, 4), Ok(2));
    assert_eq!((c[0].op_context, c[1].op_context), (ctx(1), ctx(3)));
}

#[test]
fn error_records_keep_every_field() {
    let q = cq(8, FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE);
    let mut ent = full_entry(4);
    ent.len = 4096;
    q.push_err(CqErrEntry::truncated(ent, 4096)).unwrap();
    let raw = b"fi_rustfab_shm://00000000deadbeef\0";
    q.push_err(CqErrEntry::source_unknown(full_entry(1), raw)).unwrap();
    let e = read_err(&q).unwrap();
    assert_eq!(
        (e.err, e.entry.len, e.olen, e.entry.tag),
        (FI_ETRUNC, 4096, 4096, ent.tag)
    );
    // The err_data of the entry read stays readable until the next read.
    let held = q.read_err(|r| match r {
        CqErrRead::Entry(e) => (e.err, e.prov_errno, e.err_data.as_ptr(), e.err_data.clone()),
        CqErrRead::Overrun => unreachable!(),
    });
    let (err, prov, p, data) = held.unwrap();
    assert_eq!((err, prov, &data[..]), (FI_EADDRNOTAVAIL, FI_EADDRNOTAVAIL, &raw[..]));
    assert_eq!(q.last_err_data_ptr(), Some(p));
}

/// fi_cq(3) NOTES: valid entries first, then one FI_EOVERRUN error event,
/// then the CQ is unusable. Nothing grows past the capacity.
#[test]
fn overrun_state() {
    let q = cq(4, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
    for i in 0..4 {
        q.push(CqEntry::new(ctx(i + 1), FI_SEND)).unwrap();
    }
    assert!(!q.has_room());
    assert_eq!(q.push(CqEntry::new(ctx(5), FI_SEND)), Err(Error::OVERRUN));
    assert_eq!(q.push(CqEntry::new(ctx(6), FI_SEND)), Err(Error::OVERRUN));
    let mut c = [CqEntry::default(); 8];
    // The error is not visible while valid entries remain.
    assert_eq!(read_err(&q).err(), Some(Error::AGAIN));
    assert_eq!(read(&q, &mut c, 3), Ok(3));
    assert_eq!(read(&q, &mut c, 8), Ok(1));
    assert_eq!(c[0].op_context, ctx(4));
    assert_eq!(read(&q, &mut c, 8), Err(Error::AVAIL));
    assert!(q.has_events());
    let e = read_err(&q).unwrap();
    assert_eq!(e.err, FI_EOVERRUN);
    assert!(e.entry.op_context.is_null());
    assert_eq!(read(&q, &mut c, 8), Err(Error::OVERRUN));
    assert_eq!(read_err(&q).err(), Some(Error::OVERRUN));
    assert_eq!(q.push(CqEntry::new(ctx(7), FI_SEND)), Err(Error::OVERRUN));
    assert_eq!(q.claim_slot(), Err(Error::OVERRUN));
}

#[test]
fn overrun_after_queued_errors() {
    let q = cq(3, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
    q.push(CqEntry::new(ctx(1), FI_SEND)).unwrap();
    q.push_err(CqErrEntry::new(CqEntry::new(ctx(2), FI_SEND), FI_EIO))
        .unwrap();
    q.push(CqEntry::new(ctx(3), FI_SEND)).unwrap();
    assert_eq!(
        q.push_err(CqErrEntry::new(CqEntry::new(ctx(4), FI_SEND), FI_EIO)),
        Err(Error::OVERRUN)
    );
    let mut c = [CqEntry::default(); 8];
    assert_eq!(read(&q, &mut c, 8), Err(Error::AVAIL));
    let e = read_err(&q).unwrap();
    assert_eq!((e.err, e.entry.op_context), (FI_EIO, ctx(2)));
    assert_eq!(read(&q, &mut c, 8), Ok(2));
    assert_eq!(read(&q, &mut c, 8), Err(Error::AVAIL));
    let e = read_err(&q).unwrap();
    assert_eq!(e.err, FI_EOVERRUN);
}

/// The capacity grows with the endpoints' queue depths, so a size-2 CQ
/// takes every completion of 10 pre-posted receives.
#[test]
fn reserved_capacity_and_release() {
    let q = cq(2, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
    q.reserve_capacity(10).unwrap();
    assert_eq!(q.capacity(), 10);
    for i in 0..10 {
        q.push(CqEntry::new(ctx(i + 1), FI_RECV)).unwrap();
    }
    assert!(!q.has_room());
    q.release_capacity(10);
    assert_eq!(q.capacity(), 2);
    let mut c = [CqEntry::default(); 16];
    // What the endpoint left behind stays readable.
    assert_eq!(read(&q, &mut c, 16), Ok(10));
    assert!(q.has_room());
}

#[test]
fn claimed_slots_bound_posts() {
    let q = cq(3, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
    q.claim_slot().unwrap();
    q.claim_slot().unwrap();
    q.push(CqEntry::new(ctx(9), FI_RECV)).unwrap(); // unclaimed (multi-recv)
    assert!(!q.has_room());
    assert_eq!(q.claim_slot(), Err(Error::AGAIN));
    q.push_claimed(CqEntry::new(ctx(1), FI_SEND)).unwrap();
    q.push_err_claimed(CqErrEntry::new(CqEntry::new(ctx(2), FI_SEND), FI_EIO))
        .unwrap();
    assert_eq!(q.claim_slot(), Err(Error::AGAIN));
    let mut c = [CqEntry::default(); 4];
    assert_eq!(read_err(&q).unwrap().err, FI_EIO);
    assert_eq!(read(&q, &mut c, 4), Ok(2));
    q.claim_slot().unwrap();
    q.unclaim_slot();
    assert!(q.has_room());
}

#[test]
// Wait objects: eventfd/epoll system calls Miri does not run (make miri).
#[cfg_attr(miri, ignore)]
fn bad_attributes() {
    let mk = |a: CqAttr| Cq::new(&a, V17, Holds::none(), 0).err();
    assert_eq!(mk(attr(0, 99, FI_WAIT_NONE)), Some(Error::INVAL));
    assert_eq!(mk(attr(0, FI_CQ_FORMAT_MSG, 99)), Some(Error::INVAL));
    assert_eq!(
        mk(attr(MAX_CQ_SIZE + 1, FI_CQ_FORMAT_MSG, FI_WAIT_NONE)),
        Some(Error::INVAL)
    );
    assert_eq!(mk(attr(0, FI_CQ_FORMAT_MSG, FI_WAIT_SET)), Some(Error::INVAL));
    let mut a = attr(0, FI_CQ_FORMAT_MSG, FI_WAIT_UNSPEC);
    a.flags = FI_SEND;
    assert_eq!(mk(a), Some(Error::INVAL));
    a.flags = FI_AFFINITY;
    assert_eq!(mk(a), None);
    a.wait_cond = 7;
    assert_eq!(mk(a), Some(Error::INVAL));
    // "This field is ignored if wait_obj is set to FI_WAIT_NONE."
    let mut a = attr(0, FI_CQ_FORMAT_MSG, FI_WAIT_NONE);
    a.wait_cond = 7;
    assert_eq!(mk(a), None);
    let q = cq(0, FI_CQ_FORMAT_MSG, FI_WAIT_NONE);
    assert_eq!(q.capacity(), DEFAULT_CQ_SIZE);
}

#[test]
// Wait objects: eventfd/epoll system calls Miri does not run (make miri).
#[cfg_attr(miri, ignore)]
fn sread_needs_a_wait_object() {
    let q = cq(4, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
    let mut c = [CqEntry::default(); 1];
    let r = sread(&q, &mut c, 1, 0, 10);
    assert_eq!(r, Err(Error::NOSYS));
    assert_eq!(q.signal(), Err(Error::NOSYS));
    assert_eq!(q.trywait(), Err(Error::INVAL));
    let set = WaitSet::new(FI_WAIT_FD, None).unwrap();
    let q = Cq::new(
        &attr(4, FI_CQ_FORMAT_CONTEXT, FI_WAIT_SET),
        V17,
        Holds {
            parent: None,
            set: Some(Held::new(set.clone())),
        },
        0,
    )
    .unwrap();
    let r = sread(&q, &mut c, 1, 0, 10);
    assert_eq!(r, Err(Error::NOSYS));
    assert_eq!(set.users().count(), 1, "a member holds its wait set");
    drop(q);
    assert_eq!(set.users().count(), 0);
}

#[test]
// Wait objects: eventfd/epoll system calls Miri does not run (make miri).
#[cfg_attr(miri, ignore)]
fn sread_timeout_is_honoured() {
    for kind in [
        FI_WAIT_UNSPEC,
        FI_WAIT_FD,
        FI_WAIT_MUTEX_COND,
        FI_WAIT_YIELD,
        FI_WAIT_POLLFD,
    ] {
        let q = cq(4, FI_CQ_FORMAT_CONTEXT, kind);
        let mut c = [CqEntry::default(); 1];
        let t = Instant::now();
        let r = sread(&q, &mut c, 1, 0, 50);
        assert_eq!(r, Err(Error::AGAIN));
        assert!(
            t.elapsed() >= Duration::from_millis(50),
            "kind {kind}: {:?}",
            t.elapsed()
        );
    }
}

#[test]
// Wait objects: eventfd/epoll system calls Miri does not run (make miri).
#[cfg_attr(miri, ignore)]
fn sread_returns_at_once_when_something_is_queued() {
    let q = cq(4, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD);
    q.push(CqEntry::new(ctx(1), FI_SEND)).unwrap();
    let mut c = [CqEntry::default(); 2];
    let t = Instant::now();
    let r = sread(&q, &mut c, 2, 0, 5000);
    assert_eq!(r, Ok(1));
    assert!(t.elapsed() < Duration::from_millis(1000));
    q.push_err(CqErrEntry::new(CqEntry::new(ctx(2), FI_SEND), FI_EIO))
        .unwrap();
    let r = sread(&q, &mut c, 2, 0, 5000);
    assert_eq!(r, Err(Error::AVAIL));
}

/// fi_close from another thread: a blocked sread returns CANCELED, and
/// the entries queued meanwhile go with the CQ.
#[test]
// Wait objects: eventfd/epoll system calls Miri does not run (make miri).
#[cfg_attr(miri, ignore)]
fn close_ends_a_blocked_sread_with_canceled() {
    for kind in [FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD] {
        let q = cq(4, FI_CQ_FORMAT_CONTEXT, kind);
        let q2 = q.clone();
        let h = std::thread::spawn(move || {
            let mut c = [CqEntry::default(); 1];
            sread(&q2, &mut c, 1, 0, 10_000)
        });
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        q.wait().close();
        assert_eq!(h.join().unwrap(), Err(Error::CANCELED), "kind {kind}");
        assert!(t.elapsed() < Duration::from_secs(2));
        q.push(CqEntry::new(ctx(1), FI_SEND)).unwrap();
        let mut c = [CqEntry::default(); 1];
        assert_eq!(sread(&q, &mut c, 1, 0, 10_000), Err(Error::CANCELED));
    }
}

#[test]
// Wait objects: eventfd/epoll system calls Miri does not run (make miri).
#[cfg_attr(miri, ignore)]
fn signal_wakes_a_blocked_sread_and_is_sticky() {
    let q = cq(4, FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC);
    // fabtests cq_signal: signal first, then sread returns at once.
    q.signal().unwrap();
    let mut c = [CqEntry::default(); 1];
    let t = Instant::now();
    let r = sread(&q, &mut c, 1, 0, 2000);
    assert_eq!(r, Err(Error::AGAIN));
    assert!(t.elapsed() < Duration::from_millis(1000));
    let q2 = q.clone();
    let h = std::thread::spawn(move || {
        let mut c = [CqEntry::default(); 1];
        let t = Instant::now();
        let r = sread(&q2, &mut c, 1, 0, -1);
        (r, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(50));
    q.signal().unwrap();
    let (r, el) = h.join().unwrap();
    assert_eq!(r, Err(Error::AGAIN));
    assert!(el >= Duration::from_millis(40));
}

/// FI_CQ_COND_THRESHOLD: the blocked reader sleeps until `cond` entries
/// are queued; on timeout it still returns what is there.
#[test]
// Wait objects: eventfd/epoll system calls Miri does not run (make miri).
#[cfg_attr(miri, ignore)]
fn threshold_condition() {
    let mut a = attr(16, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD);
    a.wait_cond = FI_CQ_COND_THRESHOLD;
    let q = Cq::new(&a, V17, Holds::none(), 0).unwrap();
    let q2 = q.clone();
    let producer = std::thread::spawn(move || {
        for i in 0..3 {
            std::thread::sleep(Duration::from_millis(30));
            q2.push(CqEntry::new(ctx(i + 1), FI_RECV)).unwrap();
        }
    });
    let mut c = [CqEntry::default(); 8];
    let t = Instant::now();
    let r = sread(&q, &mut c, 8, 3, 5000);
    let el = t.elapsed();
    producer.join().unwrap();
    assert_eq!(r, Ok(3));
    assert!(el >= Duration::from_millis(80), "returned before the 3rd entry: {el:?}");
    // Timeout with fewer entries than the threshold: they are returned.
    q.push(CqEntry::new(ctx(7), FI_RECV)).unwrap();
    let t = Instant::now();
    let r = sread(&q, &mut c, 8, 5, 60);
    assert_eq!(r, Ok(1));
    assert!(t.elapsed() >= Duration::from_millis(60));
    // The threshold is capped at `count`.
    q.push(CqEntry::new(ctx(8), FI_RECV)).unwrap();
    let t = Instant::now();
    let r = sread(&q, &mut c, 1, 5, 5000);
    assert_eq!(r, Ok(1));
    assert!(t.elapsed() < Duration::from_millis(1000));
}

/// Producer/consumer stress through the public read path: every pushed
/// completion is read, none is slept through (a lost wake-up shows up as
/// a reader stuck until its generous timeout).
#[test]
// Wait objects: eventfd/epoll system calls Miri does not run (make miri).
#[cfg_attr(miri, ignore)]
fn no_lost_wakeups_between_push_and_sread() {
    for kind in [FI_WAIT_FD, FI_WAIT_UNSPEC, FI_WAIT_MUTEX_COND] {
        let q = cq(64, FI_CQ_FORMAT_CONTEXT, kind);
        let total = 20_000usize;
        let q2 = q.clone();
        let producer = std::thread::spawn(move || {
            let mut i = 0;
            while i < total {
                if q2.has_room() {
                    q2.push(CqEntry::new(ctx(i + 1), FI_SEND)).unwrap();
                    i += 1;
                    if i % 97 == 0 {
                        std::thread::yield_now();
                    }
                } else {
                    std::thread::yield_now();
                }
            }
        });
        let mut got = 0usize;
        let mut next = 1usize;
        let mut c = [CqEntry::default(); 16];
        while got < total {
            let r = sread(&q, &mut c, 16, 0, 10_000);
            let n = r.unwrap_or_else(|e| panic!("kind {kind}: sread failed after {got}: {e:?}"));
            for e in &c[..n] {
                assert_eq!(e.op_context, ctx(next), "order");
                next += 1;
            }
            got += n;
        }
        producer.join().unwrap();
    }
}

/// The fi_trywait protocol with an external poll() on the CQ's fd.
#[test]
// Wait objects: eventfd/epoll system calls Miri does not run (make miri).
#[cfg_attr(miri, ignore)]
fn trywait_then_poll_sees_every_push() {
    let q = cq(64, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD);
    let fd = fd_of(&q);
    assert_eq!(q.shown_wait().kind(), FI_WAIT_FD);
    let stop = Arc::new(AtomicBool::new(false));
    let total = 2000usize;
    let q2 = q.clone();
    let producer = std::thread::spawn(move || {
        for i in 0..total {
            while !q2.has_room() {
                std::thread::yield_now();
            }
            q2.push(CqEntry::new(ctx(i + 1), FI_SEND)).unwrap();
            if i % 3 == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    });
    let mut got = 0;
    let mut c = [CqEntry::default(); 16];
    while got < total {
        match q.trywait() {
            Ok(()) => assert!(
                crate::sys::poll_readable(fd, Some(Duration::from_secs(10))),
                "lost wake-up after {got}"
            ),
            Err(e) => assert_eq!(e, Error::AGAIN),
        }
        loop {
            match read(&q, &mut c, 16) {
                Ok(n) => got += n,
                Err(e) => {
                    assert_eq!(e, Error::AGAIN);
                    break;
                }
            }
        }
    }
    stop.store(true, Ordering::Release);
    producer.join().unwrap();
    // Empty CQ: trywait succeeds and the fd is quiet; fi_cq_signal makes it readable.
    assert_eq!(q.trywait(), Ok(()));
    assert!(!crate::sys::poll_readable(fd, Some(Duration::ZERO)));
    q.signal().unwrap();
    assert!(crate::sys::poll_readable(fd, Some(Duration::ZERO)));
    // Something queued: trywait says EAGAIN.
    q.push(CqEntry::new(ctx(1), FI_SEND)).unwrap();
    assert_eq!(q.trywait(), Err(Error::AGAIN));
}
