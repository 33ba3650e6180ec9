//! Unit tests of the buffered-receive bookkeeping (`held.rs`): buffer
//! shapes and alignment, the pool's budget, fair shares and reuse, the
//! options' rules, the order of reports and what may be claimed.

use super::*;
use crate::transport::proto::op;

fn a(t: u64) -> Addr {
    Addr::Shm(t)
}

fn hdr(len: usize) -> WireHdr {
    WireHdr {
        len: len as u64,
        ..WireHdr::new(op::EAGER)
    }
}

#[test]
fn shapes_are_classes_then_exact() {
    assert_eq!(shape(0), (Some(0), 1));
    assert_eq!(shape(1), (Some(1), 2));
    assert_eq!(shape(64), (Some(1), 2));
    assert_eq!(shape(65), (Some(2), 3));
    assert_eq!(shape(1000), (Some(5), 17));
    assert_eq!(shape(64 << 10), (Some(11), 1025));
    assert_eq!(shape((64 << 10) + 1), (None, 1026));
    assert_eq!(shape(1 << 20).0, None);
}

#[test]
fn buffers_are_aligned_and_sized() {
    let mut p = BufPool::new(1 << 20);
    let b = p.alloc(100, 0).unwrap();
    assert_eq!(b.ctx_addr() % 64, 0);
    assert_eq!(b.data_addr(), b.ctx_addr() + 64);
    assert!(b.data_cap() >= 100);
    assert_eq!(b.data_iov(0, 100).total(), 100);
    assert_eq!(b.data_iov(100, 1000).total(), b.data_cap() - 100);
    assert_eq!(p.count(), 1);
    assert_eq!(p.held(), b.bytes() + ENTRY_OVERHEAD);
    p.release(b);
    assert_eq!(p.held(), 0);
    assert_eq!(p.count(), 0);
}

#[test]
fn recv_context_round_trip_and_copy_out() {
    let mut p = BufPool::new(1 << 20);
    let b = p.alloc(10, 0).unwrap();
    b.write_recv_context(0x1234);
    // The application rewrites `context` before claiming.
    // SAFETY: test: line 0 of the buffer is a fi_recv_context.
    unsafe { (*(b.ctx_addr() as *mut fi_recv_context)).context = 0xbeef as *mut _ };
    assert_eq!(b.recv_context_value(), 0xbeef);
    // SAFETY: test: the data lines belong to the buffer.
    unsafe { core::ptr::copy_nonoverlapping(b"0123456789".as_ptr(), b.data_addr() as *mut u8, 10) };
    let mut out = [0u8; 12];
    let mut iov = IovList::new();
    iov.push(out.as_mut_ptr() as usize, 4);
    iov.push(out.as_mut_ptr() as usize + 4, 8);
    // SAFETY: `iov` covers `out`.
    assert_eq!(unsafe { b.copy_out(10, &iov) }, 10);
    assert_eq!(&out[..10], b"0123456789");
    p.release(b);
}

#[test]
fn pool_budget_stalls_and_always_admits_one() {
    let mut p = BufPool::new(4096);
    // One message larger than the whole pool still goes (nothing held).
    let big = p.alloc(100_000, 0).unwrap();
    assert!(p.alloc(1, 0).is_none(), "over budget while the big one is held");
    p.release(big);
    assert_eq!(p.cached(), 0, "an oversized buffer is not cached");
    let mut held = Vec::new();
    while let Some(b) = p.alloc(100, 0) {
        held.push(b);
    }
    // 100 bytes → 3 lines (192 B) + overhead = 320 B per message.
    assert_eq!(held.len(), 4096 / 320);
    assert!(p.held() <= p.budget());
    // The ordering reserve lets the same number through again, no more.
    let mut extra = Vec::new();
    while let Some(b) = p.alloc(100, 4096) {
        extra.push(b);
    }
    assert_eq!(held.len() + extra.len(), 8192 / 320);
    for b in held.drain(..).chain(extra.drain(..)) {
        p.release(b);
    }
    assert_eq!(p.held(), 0);
    assert!(p.cached() <= p.budget());
}

/// A sender beyond its share of the pool waits,
/// another still gets in; removing messages gives the share back.
#[test]
fn each_sender_gets_a_fair_share_of_the_pool() {
    // 100 bytes → 320 B charged; a pool of 12 such messages.
    let mut t = Buffered::new(BufOpts::new(16384, 12 * 320), 12 * 320);
    let mut n = 0;
    let mut first = Vec::new();
    while let Some(h) = t.admit(a(1), 0, hdr(100), 100, None) {
        t.get_mut(h).unwrap().stage = Stage::Ready;
        first.push(h);
        n += 1;
    }
    assert_eq!(n, 6, "alone: half of the pool");
    n = 0;
    while let Some(h) = t.admit(a(2), 0, hdr(100), 100, None) {
        t.get_mut(h).unwrap().stage = Stage::Ready;
        n += 1;
    }
    assert_eq!(n, 4, "12 / (1 + 2)");
    assert!(t.admit(a(1), 0, hdr(100), 100, None).is_none());
    for h in first {
        let m = t.remove(h).unwrap();
        t.release(m.buf);
    }
    assert!(t.admit(a(1), 0, hdr(100), 100, None).is_some(), "drained: in again");
}

#[test]
fn pool_reuses_buffers_within_budget() {
    let mut p = BufPool::new(8192);
    let b = p.alloc(1000, 0).unwrap();
    let addr = b.ctx_addr();
    p.release(b);
    assert_eq!(p.cached(), 17 * 64);
    let again = p.alloc(900, 0).unwrap();
    assert_eq!(again.ctx_addr(), addr, "same class: the cached buffer");
    assert_eq!(p.cached(), 0);
    p.release(again);
    assert_eq!(p.cached(), 17 * 64);
    // A buffer that does not fit next to the cache evicts it.
    let big = p.alloc(6000, 0).unwrap();
    assert_eq!(p.cached(), 0);
    p.release(big);
    assert_eq!(p.cached(), 0, "over the budget: not kept");
    assert_eq!(p.held(), 0);
}

#[test]
fn options_follow_setopt_rules() {
    let mut o = BufOpts::new(16384, 1 << 20);
    assert_eq!(o.limit, 16384);
    assert_eq!(o.min, DEFAULT_MIN);
    assert_eq!(o.max, 16384);
    assert_eq!(BufOpts::new(1 << 20, 4096).max, 4096 - 64 - ENTRY_OVERHEAD);
    assert_eq!(o.set_limit(o.max + 1), Err(Error::MSGSIZE));
    o.set_limit(usize::MAX).unwrap();
    assert_eq!(o.limit, o.max);
    o.set_limit(1000).unwrap();
    o.set_min(100).unwrap();
    assert_eq!(o.want(1000), 1000);
    assert!(!o.more(1000));
    assert_eq!(o.want(1001), 100);
    assert!(o.more(1001));
    o.set_min(5000).unwrap();
    assert_eq!(o.want(3000), 3000, "a minimum above the size: all of it");
    assert_eq!(o.want(9000), 5000);
}

#[test]
fn reports_keep_each_senders_order() {
    let mut t = Buffered::new(BufOpts::new(16384, 1 << 20), 1 << 20);
    let a1 = t.admit(a(1), 0, hdr(10), 10, None).unwrap();
    let b1 = t.admit(a(2), 0, hdr(10), 10, None).unwrap();
    let a2 = t.admit(a(1), 0, hdr(10), 10, None).unwrap();
    assert_eq!(t.next_report(), None, "nothing complete yet");
    t.get_mut(a2).unwrap().stage = Stage::Ready;
    t.get_mut(b1).unwrap().stage = Stage::Ready;
    // a2 waits for a1 (same sender); b1 does not.
    assert!(t.holds_back(&a(1)));
    assert!(!t.holds_back(&a(2)));
    assert_eq!(t.next_report(), Some(b1));
    assert_eq!(t.next_report(), None);
    t.get_mut(a1).unwrap().stage = Stage::Ready;
    assert_eq!(t.next_report(), Some(a1));
    assert_eq!(t.next_report(), Some(a2));
    assert_eq!(t.next_report(), None);
    assert_eq!(t.get(a2).unwrap().stage, Stage::Reported);
}

#[test]
fn only_reported_messages_are_claimable() {
    let mut t = Buffered::new(BufOpts::new(16384, 1 << 20), 1 << 20);
    let h = t.admit(a(1), 0, hdr(10), 10, None).unwrap();
    let ctx = t.get(h).unwrap().buf.ctx_addr();
    assert_eq!(t.lookup(ctx), None, "not reported yet");
    t.get_mut(h).unwrap().stage = Stage::Ready;
    assert_eq!(t.next_report(), Some(h));
    assert_eq!(t.lookup(ctx), Some(h));
    assert_eq!(t.lookup(ctx + 64), None);
    assert_eq!(t.drop_unreported(h).map(|_| ()), None, "reported: the application's");
    let m = t.remove(h).unwrap();
    assert_eq!(t.lookup(ctx), None, "claimed or discarded once");
    t.release(m.buf);
    assert_eq!(t.count(), 0);
    assert_eq!(t.pool().held(), 0);
}

#[test]
fn dropping_while_a_transport_writes_defers_the_free() {
    let mut t = Buffered::new(BufOpts::new(16384, 1 << 20), 1 << 20);
    let h = t.admit(a(1), 0, hdr(10), 10, None).unwrap();
    let h2 = t.admit(a(1), 0, hdr(10), 10, None).unwrap();
    t.get_mut(h).unwrap().placing = true;
    t.get_mut(h2).unwrap().stage = Stage::Ready;
    assert!(t.drop_unreported(h).is_none());
    assert!(t.get(h).unwrap().doomed);
    // It no longer holds back its sender's later message.
    assert_eq!(t.next_report(), Some(h2));
    t.get_mut(h).unwrap().placing = false;
    let m = t.remove(h).unwrap();
    t.release(m.buf);
}

#[test]
fn a_flood_of_empty_messages_is_bounded() {
    let mut t = Buffered::new(BufOpts::new(16384, MIN_POOL), MIN_POOL);
    let mut n = 0;
    while let Some(h) = t.admit(a(1), 0, hdr(0), 0, None) {
        t.get_mut(h).unwrap().stage = Stage::Ready;
        n += 1;
        assert!(n < 100_000);
    }
    // One sender alone: half of the pool (its fair share).
    assert_eq!(n, MIN_POOL / 2 / (64 + ENTRY_OVERHEAD));
}
