//! libfabric 2.x's receive matching (docs/libfabric2.md, "Receive matching
//! and addressing of 2.x"): which receives read or must name their source,
//! in which order receives take messages, tagged multi-receive buffers, and
//! the source an error completion names.

use super::*;
use crate::abi::v2::{FI_EXACT_DIRECTED_RECV, FI_TAGGED_DIRECTED_RECV, FI_TAGGED_MULTI_RECV};

const C: fi_addr_t = 2;

/// A spec whose endpoint has `caps` as a 2.x application gave them.
fn spec(caps: u64) -> Spec {
    let mut s = Spec::new(SimOpts::shm());
    s.cfg.caps = crate::core::engine::directed::engine_caps(FI_MSG | FI_TAGGED | caps, API_NEWEST);
    s.cfg.matching = RecvMatching::of(FI_MSG | FI_TAGGED | caps, API_NEWEST);
    s
}

/// A, B (the receiver, with `caps`) and C.
fn three(caps: u64) -> (Net, Vec<Ep>) {
    network(&[Spec::new(SimOpts::shm()), spec(caps), Spec::new(SimOpts::shm())])
}

fn trecv(buf: &mut [u8], ctx: usize, src: fi_addr_t, tag: u64) -> RecvArgs {
    RecvArgs {
        src,
        tagged: true,
        tag,
        ..rargs(buf, ctx)
    }
}

/// A tagged multi-receive buffer for tags `0x100..=0x1ff`, any source.
fn multi_0x1xx(buf: &mut [u8], ctx: usize) -> RecvArgs {
    RecvArgs {
        ignore: 0xff,
        flags: FI_MULTI_RECV,
        ..trecv(buf, ctx, FI_ADDR_UNSPEC, 0x100)
    }
}

/// A tagged receive completion.
fn tcomp(ctx: usize, flags: u64, tag: u64, len: usize, buf: usize) -> Comp {
    Comp {
        tag,
        ..Comp::recv(ctx, flags, len, buf)
    }
}

fn tsend(buf: &[u8], ctx: usize, tag: u64) -> SendArgs {
    SendArgs {
        tagged: true,
        tag,
        ..sargs(B, buf, ctx)
    }
}

/// Context → completion, for checks that do not depend on the order in
/// which one pass reports them.
fn by_ctx(mut v: Vec<Comp>) -> Vec<Comp> {
    v.sort_by_key(|c| c.ctx);
    v
}

/// FI_TAGGED_DIRECTED_RECV alone: tagged receives honour `src_addr`,
/// untagged ones ignore it.
#[test]
fn tagged_directed_recv_directs_tagged_receives_only() {
    let (_net, mut v) = three(FI_TAGGED_DIRECTED_RECV);
    let (mut from_c, mut any, mut plain) = (vec![0u8; 8], vec![0u8; 8], vec![0u8; 8]);
    v[1].recv(trecv(&mut from_c, 1, C, 5)).unwrap();
    v[1].recv(trecv(&mut any, 2, FI_ADDR_UNSPEC, 5)).unwrap();
    // Untagged, "from C": src_addr is ignored, A's message takes it.
    v[1].recv(RecvArgs {
        src: C,
        ..rargs(&mut plain, 3)
    })
    .unwrap();
    let (ma, mc, mu) = (pattern(8, 1), pattern(8, 2), pattern(8, 3));
    v[0].send(tsend(&ma, 10, 5)).unwrap();
    v[0].send(sargs(B, &mu, 11)).unwrap();
    v[2].send(tsend(&mc, 30, 5)).unwrap();
    v[1].progress();
    assert_eq!(
        by_ctx(v[1].rx_ok()),
        vec![
            tcomp(1, TRECV, 5, 8, from_c.as_ptr() as usize),
            tcomp(2, TRECV, 5, 8, any.as_ptr() as usize),
            Comp::recv(3, MRECV, 8, plain.as_ptr() as usize),
        ]
    );
    assert_eq!((from_c, any, plain), (mc, ma, mu));
}

/// FI_EXACT_DIRECTED_RECV: a receive it applies to must name its source
/// (-FI_EINVAL, nothing queued); alone it applies to both kinds, with
/// FI_TAGGED_DIRECTED_RECV to tagged receives only. Named receives match
/// as directed ones.
#[test]
fn exact_directed_recv_refuses_fi_addr_unspec() {
    let (_net, mut v) = three(FI_EXACT_DIRECTED_RECV);
    let mut buf = vec![0u8; 8];
    for tagged in [false, true] {
        let a = RecvArgs {
            tagged,
            ..rargs(&mut buf, 1)
        };
        assert_eq!(v[1].recv(a), Err(Error::INVAL), "tagged {tagged}");
    }
    let peek = RecvArgs {
        flags: FI_PEEK,
        ..trecv(&mut buf, 2, FI_ADDR_UNSPEC, 0)
    };
    assert_eq!(v[1].recv(peek), Err(Error::INVAL), "peek");
    assert_eq!(v[1].inner.rx_posted(), 0, "nothing queued");
    // Named: from C only.
    let (mut from_c, mut from_a) = (vec![0u8; 8], vec![0u8; 8]);
    v[1].recv(RecvArgs {
        src: C,
        ..rargs(&mut from_c, 3)
    })
    .unwrap();
    v[1].recv(RecvArgs {
        src: A,
        ..rargs(&mut from_a, 4)
    })
    .unwrap();
    let (ma, mc) = (pattern(8, 1), pattern(8, 2));
    v[0].send(sargs(B, &ma, 10)).unwrap();
    v[2].send(sargs(B, &mc, 30)).unwrap();
    v[1].progress();
    assert_eq!(
        by_ctx(v[1].rx_ok()),
        vec![
            Comp::recv(3, MRECV, 8, from_c.as_ptr() as usize),
            Comp::recv(4, MRECV, 8, from_a.as_ptr() as usize),
        ]
    );
    assert_eq!((from_c, from_a), (mc, ma));

    // As a modifier of FI_TAGGED_DIRECTED_RECV: untagged receives are
    // untouched (any source), tagged ones must name theirs.
    let (_net, mut v) = three(FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV);
    let mut buf = vec![0u8; 8];
    v[1].recv(rargs(&mut buf, 1)).unwrap();
    let mut tbuf = vec![0u8; 8];
    assert_eq!(v[1].recv(trecv(&mut tbuf, 2, FI_ADDR_UNSPEC, 0)), Err(Error::INVAL));
    v[1].recv(trecv(&mut tbuf, 2, A, 0)).unwrap();
}

/// Receives take messages in posting order among those that match: a
/// directed receive posted after a matching any-source one waits; a
/// receive posted late takes the oldest queued message it matches.
#[test]
fn posting_order_decides_between_directed_and_any_source() {
    let (_net, mut v) = three(FI_TAGGED_DIRECTED_RECV);
    let mut bufs = vec![vec![0u8; 4]; 3];
    let [b1, b2, b3] = &mut bufs[..] else { unreachable!() };
    v[1].recv(trecv(b1, 1, FI_ADDR_UNSPEC, 7)).unwrap();
    v[1].recv(trecv(b2, 2, C, 7)).unwrap();
    v[1].recv(trecv(b3, 3, A, 7)).unwrap();
    let (m1, m2) = (pattern(4, 1), pattern(4, 2));
    v[0].send(tsend(&m1, 10, 7)).unwrap();
    v[0].send(tsend(&m2, 11, 7)).unwrap();
    v[1].progress();
    // A's first to the any-source receive, its second past C's receive.
    let got: Vec<usize> = v[1].rx_ok().iter().map(|c| c.ctx).collect();
    assert_eq!(got, vec![1, 3]);
    assert_eq!((&bufs[0], &bufs[2]), (&m1, &m2));
    // Unexpected: A's then C's message queue; a receive directed at C
    // takes C's (the older A message does not match it), an any-source
    // one A's.
    let (ma, mc) = (pattern(4, 5), pattern(4, 6));
    v[0].send(tsend(&ma, 12, 9)).unwrap();
    v[2].send(tsend(&mc, 30, 9)).unwrap();
    v[1].progress();
    let (mut x, mut y) = (vec![0u8; 4], vec![0u8; 4]);
    v[1].recv(trecv(&mut x, 4, C, 9)).unwrap();
    v[1].recv(trecv(&mut y, 5, FI_ADDR_UNSPEC, 9)).unwrap();
    let got: Vec<usize> = v[1].rx_ok().iter().map(|c| c.ctx).collect();
    assert_eq!(got, vec![4, 5]);
    assert_eq!((x, y), (mc, ma));
    // C's receive (ctx 2) still waits.
    assert_eq!(v[1].inner.rx_posted(), 1);
}

/// FI_TAGGED_MULTI_RECV: one tagged buffer takes every message its tag
/// matches, packed; the last one that leaves less than min_multi_recv
/// carries FI_MULTI_RECV; a message that does not fit releases the buffer
/// with a completion of its own (FI_MULTI_RECV only) and goes on to the
/// next receive.
#[test]
fn tagged_multi_recv_fills_then_releases() {
    let (_net, mut v) = three(FI_TAGGED_MULTI_RECV);
    let mut big = vec![0u8; 1000];
    let base = big.as_ptr() as usize;
    v[1].recv(multi_0x1xx(&mut big, 9)).unwrap();
    let sizes = [(0x101, 300), (0x1ff, 300), (0x200, 100), (0x102, 300), (0x103, 200)];
    let msgs: Vec<Vec<u8>> = sizes.iter().map(|&(t, n)| pattern(n, t as u8)).collect();
    for (i, (&(tag, _), m)) in sizes.iter().zip(&msgs).enumerate() {
        v[0].send(tsend(m, i, tag)).unwrap();
    }
    v[1].progress();
    let t = |tag, len, buf| tcomp(9, TRECV, tag, len, buf);
    assert_eq!(
        v[1].rx_ok(),
        vec![
            t(0x101, 300, base),
            t(0x1ff, 300, base + 300),
            t(0x102, 300, base + 600),
            // 200 bytes do not fit the 100 left.
            Comp::recv(9, FI_MULTI_RECV, 0, base + 900),
        ]
    );
    assert_eq!(&big[..300], &msgs[0][..]);
    assert_eq!(&big[300..600], &msgs[1][..]);
    assert_eq!(&big[600..900], &msgs[3][..]);
    // A buffer the queued 0x103 fills exactly is released with it; the
    // 0x200 message matches neither and stays queued.
    let mut next = vec![0u8; 200];
    v[1].recv(multi_0x1xx(&mut next, 10)).unwrap();
    assert_eq!(
        v[1].rx_ok(),
        vec![tcomp(10, TRECV | FI_MULTI_RECV, 0x103, 200, next.as_ptr() as usize)]
    );
    assert_eq!(next, msgs[4]);
    let mut last = vec![0u8; 100];
    v[1].recv(trecv(&mut last, 11, FI_ADDR_UNSPEC, 0x200)).unwrap();
    assert_eq!(v[1].rx_ok().len(), 1);
    assert_eq!(last, msgs[2]);
    // Not with FI_PEEK / FI_CLAIM; not without the capability.
    let mut b = vec![0u8; 100];
    let peek = RecvArgs {
        flags: FI_MULTI_RECV | FI_PEEK,
        ..trecv(&mut b, 12, FI_ADDR_UNSPEC, 0)
    };
    assert_eq!(v[1].recv(peek), Err(Error::BADFLAGS));
    let (_n, mut w) = three(FI_MULTI_RECV);
    let multi = RecvArgs {
        flags: FI_MULTI_RECV,
        ..trecv(&mut b, 13, FI_ADDR_UNSPEC, 0)
    };
    assert_eq!(w[1].recv(multi), Err(Error::BADFLAGS));
}

/// A directed tagged multi-receive buffer takes only its source's
/// messages; under selective completion its release is still reported.
#[test]
fn directed_tagged_multi_recv_and_selective_release() {
    let mut sb = spec(FI_TAGGED_MULTI_RECV | FI_TAGGED_DIRECTED_RECV);
    sb.rx_selective = true;
    let (_net, mut v) = network(&[Spec::new(SimOpts::shm()), sb, Spec::new(SimOpts::shm())]);
    let mut big = vec![0u8; 290];
    let base = big.as_ptr() as usize;
    v[1].recv(RecvArgs {
        flags: FI_MULTI_RECV,
        ..trecv(&mut big, 9, C, 1)
    })
    .unwrap();
    let (ma, mc) = (pattern(100, 1), pattern(100, 2));
    v[0].send(tsend(&ma, 10, 1)).unwrap();
    v[2].send(tsend(&mc, 30, 1)).unwrap();
    v[2].send(tsend(&mc, 31, 1)).unwrap();
    v[2].send(tsend(&mc, 32, 1)).unwrap();
    v[1].progress();
    // Selective: the messages' completions are not written, the release
    // (the third C message does not fit the 90 bytes left) is.
    assert_eq!(v[1].rx_ok(), vec![Comp::recv(9, FI_MULTI_RECV, 0, base + 200)]);
    assert_eq!(&big[..100], &mc[..]);
    assert_eq!(&big[100..200], &mc[..]);
    assert_eq!(v[1].recv_count(), (2, 0));
}

/// The source of each error entry (fi_cq_err_entry.src_addr at 1.20+):
/// `(context, src)`.
fn err_sources(cq: &crate::core::cq::Cq) -> Vec<(usize, fi_addr_t)> {
    use crate::core::cq::CqErrRead;
    let mut v = Vec::new();
    while let Ok(Some(e)) = cq.read_err(|r| match r {
        CqErrRead::Entry(e) => Some((e.entry.op_context as usize, e.entry.src)),
        CqErrRead::Overrun => None,
    }) {
        v.push(e);
    }
    v
}

/// A truncated receive's error entry names its sender (without FI_SOURCE
/// too), as a user id when the AV has one; a cancelled one names none.
#[test]
fn error_entries_name_the_sender() {
    let (_net, mut v) = three(0);
    let mut small = vec![0u8; 4];
    v[1].recv(rargs(&mut small, 1)).unwrap();
    v[0].send(sargs(B, &pattern(10, 1), 10)).unwrap();
    v[1].progress();
    let mut other = vec![0u8; 4];
    v[1].recv(rargs(&mut other, 2)).unwrap();
    v[1].cancel(2).unwrap();
    assert_eq!(err_sources(&v[1].s.rx_cq), vec![(1, A), (2, FI_ADDR_NOTAVAIL)]);

    // User ids: C inserted again into a fresh AV with id 0x5eed.
    let (_net, mut v) = three(0);
    let c = v[2].addr;
    v[1].s.av = AvState::new(0, TransportKind::Shm, AvFormat::Str, 1);
    v[1].s.av.insert_batch(&[Ok(c)], Some(&[0x5eed])).unwrap();
    let mut small = vec![0u8; 4];
    v[1].recv(rargs(&mut small, 3)).unwrap();
    v[2].send(sargs(B, &pattern(10, 1), 30)).unwrap();
    v[1].progress();
    assert_eq!(err_sources(&v[1].s.rx_cq), vec![(3, 0x5eed)]);
}

/// A queued message too large for a multi-receive buffer stays where it
/// was in the unexpected queue: messages of one sender keep their order
/// (FI_ORDER_SAS) for the receives that follow.
#[test]
fn a_message_a_multi_recv_buffer_gives_back_keeps_its_place() {
    let (_net, mut v) = three(FI_TAGGED_MULTI_RECV);
    let (x, y) = (pattern(10, 1), pattern(500, 2));
    v[0].send(tsend(&x, 10, 0x200)).unwrap();
    v[0].send(tsend(&y, 11, 0x101)).unwrap();
    v[1].progress();
    let mut small = vec![0u8; 100];
    v[1].recv(multi_0x1xx(&mut small, 9)).unwrap();
    assert_eq!(
        v[1].rx_ok(),
        vec![Comp::recv(9, FI_MULTI_RECV, 0, small.as_ptr() as usize)]
    );
    let mut any = vec![0u8; 500];
    v[1].recv(RecvArgs {
        ignore: !0,
        ..trecv(&mut any, 12, FI_ADDR_UNSPEC, 0)
    })
    .unwrap();
    let got = v[1].rx_ok();
    assert_eq!((got[0].tag, got[0].len), (0x200, 10), "the older message first");
    assert_eq!(&any[..10], &x[..]);
}
