//! What a shared receive context (`core/shared_ctx.rs`) needs of an
//! endpoint's engine: its posted receives are one queue, owned by the
//! context, which is put in place of the engine's own posted queue for
//! each call that may match a message (`swap_posted`, a pointer exchange);
//! the engine's unexpected messages stay its own. And, to place a receive
//! posted on the context, whether a message one engine holds unexpected
//! would match it (`unexpected_would_match`).

use super::matching::{IovList, Matching, PostedRecv};
use super::state::{Bound, Inner};
use crate::abi::*;

/// The posted-receive queue of a shared receive context (its unexpected
/// side is never used: messages wait in the engine that received them).
pub(crate) fn posted_queue() -> Matching {
    Matching::new(0)
}

impl Inner {
    /// Exchanges the engine's posted receives with `q`'s.
    #[inline]
    pub(crate) fn swap_posted(&mut self, q: &mut Matching) {
        self.st.m.swap_posted(q);
    }

    /// Whether a message this engine holds unexpected matches a receive
    /// from `src` (an AV address, or `FI_ADDR_UNSPEC`) with these tag
    /// fields (`tagged`, `tag`, `ignore`), by the rules `recv_in` applies:
    /// a source is read only where the endpoint's caps make receives
    /// directed (`directed.rs`); one the AV does not hold matches nothing.
    pub(crate) fn unexpected_would_match(
        &self,
        b: &Bound<'_>,
        src: fi_addr_t,
        tagged: bool,
        tag: u64,
        ignore: u64,
    ) -> bool {
        if !self.st.m.has_unexpected() {
            return false;
        }
        let from = if src != FI_ADDR_UNSPEC && self.st.cfg.matching.directed(tagged) {
            match b.av.as_ref().and_then(|av| av.lookup_addr(src)) {
                Some(a) => Some(self.port.canonical(&a)),
                None => return false,
            }
        } else {
            None
        };
        let probe = PostedRecv {
            context: 0,
            iov: IovList::new(),
            src: from,
            tagged,
            tag,
            ignore,
            flags: 0,
            used: 0,
            claimed: false,
            lane: 0,
        };
        self.st.m.find_unexpected(&probe, None).is_some()
    }
}
