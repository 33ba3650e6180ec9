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
    budget: usize,
}

impl Matching {
    pub(crate) fn new(budget: usize) -> Matching {
        Matching {
            untagged: VecDeque::with_capacity(64),
            tagged: VecDeque::with_capacity(64),
            unexpected: VecDeque::with_capacity(64),
            unexp_bytes: 0,
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

    /// Whether an unexpected message costing `len` data bytes fits the budget.
    pub(crate) fn can_buffer(&self, len: usize) -> bool {
        self.unexp_bytes + UNEXP_OVERHEAD + len <= self.budget
    }

    fn queue(&mut self, tagged: bool) -> &mut VecDeque<PostedRecv> {
        if tagged {
            &mut self.tagged
        } else {
            &mut self.untagged
        }
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

    /// Index of the first posted receive an arriving message matches.
    pub(crate) fn find_posted(&self, tagged: bool, src: &Addr, tag: u64) -> Option<usize> {
        let q = if tagged { &self.tagged } else { &self.untagged };
        q.iter().position(|r| r.matches(tagged, src, tag))
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

    /// Removes every posted receive (endpoint close), in posting order.
    pub(crate) fn drain_posted(&mut self) -> Vec<PostedRecv> {
        let mut v: Vec<_> = self.untagged.drain(..).collect();
        v.extend(self.tagged.drain(..));
        v
    }

    pub(crate) fn push_unexpected(&mut self, u: Unexpected) {
        self.unexp_bytes += u.charge();
        self.unexpected.push_back(u);
    }

    /// Puts a message back at the head of the queue (it did not fit).
    pub(crate) fn push_unexpected_front(&mut self, u: Unexpected) {
        self.unexp_bytes += u.charge();
        self.unexpected.push_front(u);
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
        self.unexp_bytes -= u.charge();
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
        self.unexp_bytes -= freed;
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
        }
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
        assert!(m.can_buffer(100));
        m.push_unexpected(unex(a(1), true, 5, 60));
        assert!(m.can_buffer(40));
        assert!(!m.can_buffer(41));
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
}
