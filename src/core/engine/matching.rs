//! Receive-side matching: posted receives (untagged and tagged, optionally
//! directed at one source) and the unexpected queue (messages that arrived
//! before a matching receive), with the memory budget for unexpected data.
//!
//! Pure logic, no I/O: the endpoint decides where bytes move; this module
//! decides *which* receive a message belongs to, in the order fi_msg(3) and
//! fi_tagged(3) require: receives match in the order they were posted,
//! messages in the order they arrived (per-peer FIFO gives FI_ORDER_SAS).
//! Tag rule (fi_tagged(3)): a message tag `t` matches a receive with tag `r`
//! and ignore mask `i` when `(t | i) == (r | i)`.
//!
//! Budget (`FI_RUSTFAB_UNEXP_BUDGET`): the unexpected queue holds at most
//! `budget` bytes (data plus [`UNEXP_OVERHEAD`] per message), and each peer
//! at most its fair share of it ([`Matching::can_buffer`]): one peer that
//! floods unexpected messages is back-pressured (its records stay in the
//! transport) while the others' still get in.

use crate::base::collections::FastMap;
use crate::transport::addr::Addr;
use std::collections::VecDeque;

pub(crate) use crate::transport::iov::{IovList, IOV_MAX};

/// A posted receive.
#[derive(Clone, Debug)]
pub(crate) struct PostedRecv {
    /// Application context (opaque pointer value).
    pub(crate) context: usize,
    pub(crate) iov: IovList,
    /// Directed receive: only messages from this peer match.
    pub(crate) src: Option<Addr>,
    pub(crate) tagged: bool,
    pub(crate) tag: u64,
    pub(crate) ignore: u64,
    /// Operation flags (FI_COMPLETION, FI_MULTI_RECV, ...).
    pub(crate) flags: u64,
    /// Multi-receive: bytes of the buffer already used.
    pub(crate) used: usize,
    /// The receive holds a CQ slot for its completion (FI_RM_ENABLED
    /// admission control; a multi-recv buffer's claim is for its release).
    pub(crate) claimed: bool,
    /// The receive context of a scalable endpoint it was posted on
    /// (`lanes.rs`; 0 on other endpoints).
    pub(crate) lane: u8,
}

impl PostedRecv {
    pub(crate) fn matches(&self, tagged: bool, src: &Addr, tag: u64) -> bool {
        self.tagged == tagged
            && self.src.as_ref().is_none_or(|s| s == src)
            && (!tagged || (tag | self.ignore) == (self.tag | self.ignore))
    }
}

/// How an unexpected message's data is held.
#[derive(Debug)]
pub(crate) enum UnexBody {
    /// Eager data copied out of the transport (charged to the budget).
    Eager(Vec<u8>),
    /// A rendezvous request: the data is still at the sender.
    Rendezvous(RtsInfo),
}

/// What the receiver needs to pull a rendezvous message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RtsInfo {
    pub(crate) msg_id: u64,
    /// The sender's buffer segments (addresses in the sender's process).
    pub(crate) remote: Vec<(u64, u64)>,
    pub(crate) cma_ok: bool,
}

/// A message that arrived before a matching receive.
#[derive(Debug)]
pub(crate) struct Unexpected {
    pub(crate) src: Addr,
    /// Sender process (shm: for CMA pulls); 0 when not applicable.
    pub(crate) src_pid: i32,
    /// The sender's message id (for ACKs).
    pub(crate) msg_id: u64,
    pub(crate) tagged: bool,
    pub(crate) tag: u64,
    pub(crate) data: u64,
    /// Transport record flags (remote CQ data, ack request).
    pub(crate) wire_flags: u32,
    pub(crate) len: usize,
    pub(crate) body: UnexBody,
    /// FI_CLAIM: the message is reserved for the receive with this context.
    pub(crate) claimed_by: Option<usize>,
    /// The sender failed after the message arrived (the cause): nothing is
    /// answered for it any more (an answer would reach whatever endpoint
    /// opens at that address next), and a rendezvous message's data, in
    /// the sender's memory, is gone.
    pub(crate) sender_failed: Option<crate::base::error::Error>,
}

impl Unexpected {
    fn charge(&self) -> usize {
        UNEXP_OVERHEAD
            + match &self.body {
                UnexBody::Eager(v) => v.len(),
                UnexBody::Rendezvous(r) => r.remote.len() * 16,
            }
    }
}

/// Bookkeeping bytes charged per unexpected message, so that a flood of
/// zero-length messages is bounded too.
pub(crate) const UNEXP_OVERHEAD: usize = 128;

pub(crate) struct Matching {
    untagged: VecDeque<PostedRecv>,
    tagged: VecDeque<PostedRecv>,
    unexpected: VecDeque<Unexpected>,
    unexp_bytes: usize,
    /// Bytes charged per peer; only peers holding something have an entry.
    per_peer: FastMap<Addr, usize>,
    budget: usize,
}

impl Matching {
    pub(crate) fn new(budget: usize) -> Matching {
        Matching {
            untagged: VecDeque::with_capacity(64),
            tagged: VecDeque::with_capacity(64),
            unexpected: VecDeque::with_capacity(64),
            unexp_bytes: 0,
            per_peer: FastMap::default(),
            budget,
        }
    }

    pub(crate) fn posted_count(&self) -> usize {
        self.untagged.len() + self.tagged.len()
    }

    #[cfg(test)]
    pub(crate) fn unexpected_bytes(&self) -> usize {
        self.unexp_bytes
    }

    /// Whether an unexpected message of `src` costing `len` data bytes may
    /// be queued: it must fit the endpoint's budget, and `src` must stay
    /// within its fair share, `budget / (n + 2)` with `n` the other peers
    /// holding unexpected messages (alone, a peer gets half: the other half
    /// stays for peers that have not sent yet). A peer that holds nothing
    /// is always admitted when the budget has room, so every message can
    /// make progress whatever its size.
    pub(crate) fn can_buffer(&self, src: &Addr, len: usize) -> bool {
        let cost = UNEXP_OVERHEAD.saturating_add(len);
        if self.unexp_bytes.saturating_add(cost) > self.budget {
            return false;
        }
        let held = self.unexpected_held(src);
        if held == 0 {
            return true;
        }
        let others = self.per_peer.len() - 1;
        held + cost <= self.budget / (others + 2)
    }

    /// Bytes charged to `src`'s unexpected messages.
    pub(crate) fn unexpected_held(&self, src: &Addr) -> usize {
        self.per_peer.get(src).copied().unwrap_or(0)
    }

    fn charge(&mut self, u: &Unexpected) {
        let c = u.charge();
        self.unexp_bytes += c;
        *self.per_peer.entry(u.src).or_insert(0) += c;
    }

    fn discharge(&mut self, src: &Addr, c: usize) {
        self.unexp_bytes -= c;
        if let Some(h) = self.per_peer.get_mut(src) {
            *h -= c;
            if *h == 0 {
                self.per_peer.remove(src);
            }
        }
    }

    fn queue(&mut self, tagged: bool) -> &mut VecDeque<PostedRecv> {
        if tagged {
            &mut self.tagged
        } else {
            &mut self.untagged
        }
    }

    /// Marks every unexpected message of `src` as its sender's failure
    /// leaves it (`Unexpected::sender_failed`); returns how many of them
    /// were owed an answer (an ACK for an eager one that asked delivery
    /// complete, an ACK or CTS for a rendezvous one).
    pub(crate) fn sender_failed(&mut self, src: &Addr, cause: crate::base::error::Error) -> usize {
        let mut owed = 0;
        for u in self
            .unexpected
            .iter_mut()
            .filter(|u| u.src == *src && u.sender_failed.is_none())
        {
            u.sender_failed = Some(cause);
            if matches!(u.body, UnexBody::Rendezvous(_)) || u.wire_flags & crate::transport::proto::flag::ACK_REQ != 0 {
                owed += 1;
            }
        }
        owed
    }

    /// Whether any unexpected message is queued.
    #[inline]
    pub(crate) fn has_unexpected(&self) -> bool {
        !self.unexpected.is_empty()
    }

    #[inline]
    pub(crate) fn post(&mut self, r: PostedRecv) {
        self.queue(r.tagged).push_back(r);
    }

    /// [`Matching::post`] of `r` with `iov` as its buffer list (`r.iov` is
    /// not read). A one-buffer receive's entry is pushed with only its one
    /// segment written (`IovList::head`): moving the 216-byte entry with
    /// the caller's whole list would be a call to `memcpy` per post; a
    /// longer list is copied whole. The two pushes are separate arms: with
    /// one push of either list the compiler copies the whole list again.
    #[inline(always)]
    pub(crate) fn post_with_iov(&mut self, r: PostedRecv, iov: &IovList) {
        let q = self.queue(r.tagged);
        match iov.head() {
            Some(l) => q.push_back(PostedRecv { iov: l, ..r }),
            None => q.push_back(PostedRecv { iov: *iov, ..r }),
        }
    }

    /// Index of the first posted receive an arriving message matches: the
    /// queue's front tested first, without the iterator over the deque's
    /// two halves (a ping-pong's receive is the only one posted, or the
    /// oldest).
    #[inline(always)]
    pub(crate) fn find_posted(&self, tagged: bool, src: &Addr, tag: u64) -> Option<usize> {
        let q = if tagged { &self.tagged } else { &self.untagged };
        match q.front() {
            None => None,
            Some(r) if r.matches(tagged, src, tag) => Some(0),
            Some(_) => q
                .iter()
                .skip(1)
                .position(|r| r.matches(tagged, src, tag))
                .map(|i| i + 1),
        }
    }

    /// [`Matching::find_posted`] with the receive itself.
    #[inline(always)]
    pub(crate) fn first_match(&mut self, tagged: bool, src: &Addr, tag: u64) -> Option<(usize, &mut PostedRecv)> {
        let idx = self.find_posted(tagged, src, tag)?;
        self.queue(tagged).get_mut(idx).map(|r| (idx, r))
    }

    pub(crate) fn posted_mut(&mut self, tagged: bool, idx: usize) -> Option<&mut PostedRecv> {
        self.queue(tagged).get_mut(idx)
    }

    /// Removes a posted receive whose completion is made from a copy of
    /// its few words (the receive itself is not moved out).
    #[inline]
    pub(crate) fn drop_posted(&mut self, tagged: bool, idx: usize) {
        let q = self.queue(tagged);
        if idx == 0 {
            q.pop_front();
        } else {
            q.remove(idx);
        }
    }

    pub(crate) fn take_posted(&mut self, tagged: bool, idx: usize) -> Option<PostedRecv> {
        self.queue(tagged).remove(idx)
    }

    /// `fi_cancel`: removes the posted receive with this context.
    pub(crate) fn cancel(&mut self, context: usize) -> Option<PostedRecv> {
        for tagged in [false, true] {
            let q = self.queue(tagged);
            if let Some(i) = q.iter().position(|r| r.context == context) {
                return q.remove(i);
            }
        }
        None
    }

    /// Exchanges this queue's posted receives with `other`'s (the
    /// unexpected messages stay): a shared receive context's queue put in
    /// an endpoint's engine for one call and taken back after it
    /// (`srx.rs`).
    pub(crate) fn swap_posted(&mut self, other: &mut Matching) {
        std::mem::swap(&mut self.untagged, &mut other.untagged);
        std::mem::swap(&mut self.tagged, &mut other.tagged);
    }

    /// Removes every posted receive (endpoint close), in posting order.
    pub(crate) fn drain_posted(&mut self) -> Vec<PostedRecv> {
        let mut v: Vec<_> = self.untagged.drain(..).collect();
        v.extend(self.tagged.drain(..));
        v
    }

    pub(crate) fn push_unexpected(&mut self, u: Unexpected) {
        self.charge(&u);
        self.unexpected.push_back(u);
    }

    /// Puts a message taken from `idx` back there (it did not fit), so
    /// the messages keep their arrival order.
    pub(crate) fn put_back_unexpected(&mut self, idx: usize, u: Unexpected) {
        self.charge(&u);
        self.unexpected.insert(idx.min(self.unexpected.len()), u);
    }

    /// Index of the first unexpected message a receive would match. Claimed
    /// messages only match their claimer (`claim` = that context).
    pub(crate) fn find_unexpected(&self, r: &PostedRecv, claim: Option<usize>) -> Option<usize> {
        if self.unexpected.is_empty() {
            return None; // the common case of a receive posted ahead of time
        }
        self.unexpected.iter().position(|u| {
            let claim_ok = match (u.claimed_by, claim) {
                (None, None) => true,
                (Some(c), Some(k)) => c == k,
                _ => false,
            };
            claim_ok && r.matches(u.tagged, &u.src, u.tag)
        })
    }

    pub(crate) fn unexpected_at(&self, idx: usize) -> Option<&Unexpected> {
        self.unexpected.get(idx)
    }

    pub(crate) fn unexpected_mut(&mut self, idx: usize) -> Option<&mut Unexpected> {
        self.unexpected.get_mut(idx)
    }

    pub(crate) fn take_unexpected(&mut self, idx: usize) -> Option<Unexpected> {
        let u = self.unexpected.remove(idx)?;
        self.discharge(&u.src, u.charge());
        Some(u)
    }

    /// Removes every unexpected message from `src` (peer gone).
    pub(crate) fn drop_unexpected_from(&mut self, src: &Addr) -> usize {
        let before = self.unexpected.len();
        let mut freed = 0;
        self.unexpected.retain(|u| {
            if &u.src == src {
                freed += u.charge();
                false
            } else {
                true
            }
        });
        self.discharge(src, freed);
        before - self.unexpected.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(t: u64) -> Addr {
        Addr::Shm(t)
    }

    fn recv(ctx: usize, tagged: bool, tag: u64, ignore: u64, src: Option<Addr>) -> PostedRecv {
        PostedRecv {
            context: ctx,
            iov: IovList::single(0x1000, 64),
            src,
            tagged,
            tag,
            ignore,
            flags: 0,
            used: 0,
            claimed: false,
            lane: 0,
        }
    }

    fn unex(src: Addr, tagged: bool, tag: u64, len: usize) -> Unexpected {
        Unexpected {
            src,
            src_pid: 0,
            msg_id: 0,
            tagged,
            tag,
            data: 0,
            wire_flags: 0,
            len,
            body: UnexBody::Eager(vec![0; len]),
            claimed_by: None,
            sender_failed: None,
        }
    }

    /// A shared receive context's queue put in an engine's place: the
    /// posted receives are exchanged both ways, the unexpected messages
    /// stay where they were.
    #[test]
    fn swap_posted_moves_posted_receives_only() {
        let (mut eng, mut shared) = (Matching::new(1 << 20), Matching::new(0));
        eng.post(recv(1, false, 0, 0, None));
        eng.push_unexpected(unex(a(1), true, 5, 8));
        shared.post(recv(2, true, 5, 0, None));
        shared.post(recv(3, false, 0, 0, None));
        eng.swap_posted(&mut shared);
        assert_eq!(eng.posted_count(), 2);
        assert_eq!(eng.find_posted(true, &a(1), 5), Some(0));
        assert!(eng.has_unexpected() && !shared.has_unexpected());
        assert_eq!(shared.cancel(1).map(|r| r.context), Some(1));
        eng.swap_posted(&mut shared);
        assert_eq!((eng.posted_count(), shared.posted_count()), (0, 2));
    }

    #[test]
    fn tag_rule_and_order() {
        let mut m = Matching::new(1 << 20);
        m.post(recv(1, true, 0x10, 0x0f, None));
        m.post(recv(2, true, 0x10, 0, None));
        // tag 0x1f matches the first (ignore low nibble), not the second.
        assert_eq!(m.find_posted(true, &a(1), 0x1f), Some(0));
        assert_eq!(m.find_posted(true, &a(1), 0x20), None);
        let r = m.take_posted(true, 0).unwrap();
        assert_eq!(r.context, 1);
        assert_eq!(m.find_posted(true, &a(1), 0x10), Some(0));
        // Untagged receives never match tagged messages and vice versa.
        assert_eq!(m.find_posted(false, &a(1), 0x10), None);
    }

    #[test]
    fn first_match_is_find_posted() {
        // The front, a later receive, none; both queues; the deque wrapped
        // round its buffer (posts and pops past its capacity): the same
        // receive as a plain walk of the queue every time.
        let mut m = Matching::new(1 << 20);
        let mut seen = [0usize; 3];
        for round in 0..300u64 {
            let tagged = round % 3 != 0;
            m.post(recv(
                round as usize,
                tagged,
                round % 5,
                0,
                (round % 4 == 0).then(|| a(2)),
            ));
            for (src, tag) in [(1, round % 5), (2, (round + 1) % 5), (1, 7)] {
                // The plain walk the front-first search must agree with.
                let q = if tagged { &m.tagged } else { &m.untagged };
                let want = q.iter().position(|r| r.matches(tagged, &a(src), tag));
                assert_eq!(m.find_posted(tagged, &a(src), tag), want, "round {round}");
                let got = m.first_match(tagged, &a(src), tag).map(|(i, r)| (i, r.context));
                let want_ctx = want.map(|i| (i, m.posted_mut(tagged, i).unwrap().context));
                assert_eq!(got, want_ctx, "round {round}");
                seen[match want {
                    Some(0) => 0,
                    Some(_) => 1,
                    None => 2,
                }] += 1;
            }
            if round % 2 == 1 {
                if let Some(i) = m.find_posted(tagged, &a(1), round % 5) {
                    m.drop_posted(tagged, i);
                }
                m.drop_posted(!tagged, 0);
            }
        }
        assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
    }

    #[test]
    fn directed_receive_filters_source() {
        let mut m = Matching::new(1 << 20);
        m.post(recv(1, false, 0, 0, Some(a(7))));
        m.post(recv(2, false, 0, 0, None));
        assert_eq!(m.find_posted(false, &a(9), 0), Some(1));
        assert_eq!(m.find_posted(false, &a(7), 0), Some(0));
    }

    #[test]
    fn unexpected_budget_and_claims() {
        let mut m = Matching::new(UNEXP_OVERHEAD * 2 + 100);
        assert!(m.can_buffer(&a(1), 100));
        m.push_unexpected(unex(a(1), true, 5, 60));
        assert!(m.can_buffer(&a(2), 40));
        assert!(!m.can_buffer(&a(2), 41));
        m.push_unexpected(unex(a(2), true, 5, 40));
        let r = recv(9, true, 5, 0, None);
        assert_eq!(m.find_unexpected(&r, None), Some(0));
        m.unexpected_mut(0).unwrap().claimed_by = Some(9);
        // Claimed: invisible to others, visible to the claimer.
        assert_eq!(m.find_unexpected(&r, None), Some(1));
        assert_eq!(m.find_unexpected(&r, Some(9)), Some(0));
        let u = m.take_unexpected(0).unwrap();
        assert_eq!(u.len, 60);
        assert_eq!(m.unexpected_bytes(), UNEXP_OVERHEAD + 40);
        assert_eq!(m.drop_unexpected_from(&a(2)), 1);
        assert_eq!(m.unexpected_bytes(), 0);
    }

    /// One peer cannot hold the whole budget.
    #[test]
    fn each_peer_gets_a_fair_share_of_the_budget() {
        let cost = UNEXP_OVERHEAD + 100;
        let mut m = Matching::new(12 * cost);
        // Alone, a peer takes half of the budget.
        let mut n = 0;
        while m.can_buffer(&a(1), 100) {
            m.push_unexpected(unex(a(1), false, 0, 100));
            n += 1;
        }
        assert_eq!(n, 6);
        assert_eq!(m.unexpected_held(&a(1)), 6 * cost);
        // Another peer still gets in, up to its own share (12/3 = 4).
        n = 0;
        while m.can_buffer(&a(2), 100) {
            m.push_unexpected(unex(a(2), false, 0, 100));
            n += 1;
        }
        assert_eq!(n, 4);
        // Both are at their share now; a third peer gets the rest (its
        // share, 12/4 = 3, is more than what is left), then the total stops.
        assert!(!m.can_buffer(&a(1), 100) && !m.can_buffer(&a(2), 100));
        for _ in 0..2 {
            assert!(m.can_buffer(&a(3), 100));
            m.push_unexpected(unex(a(3), false, 0, 100));
        }
        assert!(!m.can_buffer(&a(3), 0), "the budget is full");
        assert_eq!(m.unexpected_bytes(), 12 * cost);
        // A message bigger than any share still gets in alone.
        let mut big = Matching::new(cost);
        assert!(big.can_buffer(&a(1), 100));
        big.push_unexpected(unex(a(1), false, 0, 100));
        assert!(!big.can_buffer(&a(2), 0), "the total is a hard bound");
        // Draining gives the share back.
        while m.take_unexpected(0).is_some() {}
        assert_eq!(m.unexpected_bytes(), 0);
        assert_eq!(m.unexpected_held(&a(1)), 0);
        assert!(m.per_peer.is_empty());
    }

    #[test]
    fn cancel_by_context() {
        let mut m = Matching::new(1024);
        m.post(recv(1, false, 0, 0, None));
        m.post(recv(2, true, 0, 0, None));
        assert_eq!(m.cancel(2).unwrap().context, 2);
        assert!(m.cancel(2).is_none());
        assert_eq!(m.posted_count(), 1);
    }

    #[test]
    fn iov_ranges() {
        let mut l = IovList::new();
        l.push(100, 10);
        l.push(0, 0); // empty segments are dropped
        l.push(200, 5);
        assert_eq!(l.total(), 15);
        let mut pieces = vec![];
        l.for_range(8, 5, |p, n, o| pieces.push((p, n, o)));
        assert_eq!(pieces, vec![(108, 2, 8), (200, 3, 10)]);
        assert_eq!(l.addr_at(12), 202);
        let mut full = IovList::new();
        for i in 0..IOV_MAX {
            assert!(full.push(i * 10 + 1, 1));
        }
        assert!(!full.push(5, 5));
    }

    /// `post_with_iov` queues the receive with the list it is given, whatever
    /// its length (one segment written in place, none, or several copied
    /// whole), in its queue and in order, and nothing of `r.iov`.
    #[test]
    fn post_with_iov_keeps_the_given_list() {
        let mut three = IovList::new();
        for (p, n) in [(0x100, 10), (0x200, 20), (0x300, 30)] {
            assert!(three.push(p, n));
        }
        let lists = [
            IovList::single(0x4000, 8),
            IovList::new(),
            IovList::single(0x5000, 0),
            three,
        ];
        let mut m = Matching::new(1024);
        for (i, l) in lists.iter().enumerate() {
            let r = PostedRecv {
                iov: IovList::single(0xdead, 1),
                ..recv(i, i % 2 == 1, 0, 0, None)
            };
            m.post_with_iov(r, l);
        }
        assert_eq!(m.posted_count(), lists.len());
        let mut got = m.drain_posted();
        got.sort_by_key(|r| r.context);
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.iov, lists[i], "receive {i}");
            assert_eq!(r.iov.segments(), lists[i].segments());
            assert_eq!(r.tagged, i % 2 == 1);
        }
        assert_eq!(got[3].iov.total(), 60);
    }
}
