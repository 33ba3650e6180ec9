//! Peer budgets for answers (docs/security.md "Peer budgets"): what a
//! peer's requests (READ_REQ, messages asking for an ACK, RMA and atomic
//! requests, RTS) make an endpoint queue back towards it, bounded per
//! connection, for RDM ports and connected endpoints alike.
//!
//! Each record a connection's reader takes is charged one answer
//! ([`super::framing::REPLY_COST`]) before the core sees it
//! ([`super::conn::CoreSink`]); answers the core queued are counted in the
//! connection's [`super::framing::WriteQueue`] until written. A record the
//! budget cannot pay for is left in the stream: the socket is not read
//! (backpressure), and a connection stopped so for [`PeerBudget::timeout`]
//! is cut off by its owner, its operations ending in error.

use super::conn::{CoreSink, Read};
use super::framing::WriteQueue;
use std::time::{Duration, Instant};

/// Bytes of queued answers (ACK, RMA_ACK, CTS, ... : what a peer's
/// requests make an endpoint send back) a peer may make the endpoint hold,
/// and for how long it may stay at its bound. Beyond `per_peer`, or beyond
/// `total` across all peers once it holds [`BUDGET_FLOOR`], its records are
/// left unread (its socket is not read: backpressure) until its queue
/// drains; a peer that stays stopped for `timeout` is cut off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerBudget {
    pub(crate) per_peer: usize,
    pub(crate) total: usize,
    pub(crate) timeout: Duration,
}

/// [`PeerBudget`] by default: 4 MiB a peer, 16 MiB in all, 10 s.
pub(crate) const PEER_BUDGET_DEFAULT: usize = 4 << 20;
pub(crate) const PEER_BUDGET_TOTAL_DEFAULT: usize = 16 << 20;
pub(crate) const PEER_BUDGET_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);

/// Answers every peer may hold whatever the total: a peer that reads its
/// socket always gets its answers (a ping-pong holds one or two), so a
/// flood that fills the total stops only the flooders.
pub(crate) const BUDGET_FLOOR: usize = 16 << 10;

impl Default for PeerBudget {
    fn default() -> PeerBudget {
        PeerBudget {
            per_peer: PEER_BUDGET_DEFAULT,
            total: PEER_BUDGET_TOTAL_DEFAULT,
            timeout: PEER_BUDGET_TIMEOUT_DEFAULT,
        }
    }
}

/// Bytes of answers a peer whose queue holds `mine` may make us queue now,
/// with `total` held across all peers: up to its own budget while the
/// total has room, and up to [`BUDGET_FLOOR`] whatever the total (a peer
/// that reads its socket is never stopped by others' floods).
pub(crate) fn reply_room(b: &PeerBudget, mine: usize, total: usize) -> usize {
    let own = b.per_peer.saturating_sub(mine).min(b.total.saturating_sub(total));
    own.max(BUDGET_FLOOR.saturating_sub(mine))
}

/// One connection's answers as its budget counts them.
#[derive(Debug, Default)]
pub(crate) struct Account {
    /// Bytes of answers its queue held when last counted into its owner's
    /// total ([`Account::recount`]).
    pub(crate) counted: usize,
    /// Bytes of answers its records were charged in pass `charged_in` (the
    /// core sends them after the pass: not in the queue yet).
    charged: usize,
    charged_in: u64,
    /// Its records have been left unread since then for want of budget
    /// (the connection's deadline is then the cut-off).
    pub(crate) over_since: Option<Instant>,
}

/// What a budgeted read did ([`Account::read`]).
pub(crate) struct Charged {
    pub(crate) read: Read,
    /// Bytes of answers its records were charged.
    pub(crate) spent: usize,
    /// The connection started (`Some(true)`) or stopped (`Some(false)`)
    /// being left unread for want of budget: its owner sets or clears the
    /// cut-off deadline ([`Account::deadline`]).
    pub(crate) changed: Option<bool>,
}

impl Account {
    /// Brings `total` (the owner's count over all its connections) up to
    /// date with the connection's queue `q`.
    #[inline]
    pub(crate) fn recount(&mut self, total: &mut usize, q: &WriteQueue) {
        let was = self.counted;
        if self.count(q) != was {
            *total = total.saturating_sub(was) + self.counted;
        }
    }

    /// Counts the answers the connection's queue `q` holds (an owner of one
    /// connection keeps no total).
    #[inline]
    pub(crate) fn count(&mut self, q: &WriteQueue) -> usize {
        self.counted = q.replies();
        self.counted
    }

    /// Bytes of answers it holds in pass `pass`: counted in its queue and
    /// charged in this pass.
    pub(crate) fn held(&self, pass: u64) -> usize {
        self.counted + if self.charged_in == pass { self.charged } else { 0 }
    }

    /// Reads a connection (`read`: its `Conn::read` into the sink it is
    /// given) into `sink` in pass `pass`, its records charged within `b`
    /// with `total` bytes of answers counted and charged over all the
    /// owner's connections (this one's included).
    pub(crate) fn read<'a>(
        &mut self,
        b: &PeerBudget,
        pass: u64,
        total: usize,
        mut sink: CoreSink<'a>,
        read: impl FnOnce(&mut CoreSink<'a>) -> Read,
    ) -> Charged {
        if self.charged_in != pass {
            self.charged_in = pass;
            self.charged = 0;
        }
        let room = reply_room(b, self.counted + self.charged, total);
        sink.reply_room = room;
        sink.over_budget = false;
        let read = read(&mut sink);
        let over = sink.over_budget && read == Read::Stalled;
        let spent = room - sink.reply_room;
        self.charged += spent;
        let changed = (over != self.over_since.is_some()).then(|| {
            self.over_since = over.then(Instant::now);
            over
        });
        Charged { read, spent, changed }
    }

    /// The connection's cut-off: `timeout` after it was stopped, if it is.
    pub(crate) fn deadline(&self, b: &PeerBudget) -> Option<Instant> {
        self.over_since.map(|t| t + b.timeout)
    }
}

/// Logs that `peer`'s records are left unread: it holds `bytes` of answers
/// it does not read.
pub(crate) fn log_stopped(peer: &dyn std::fmt::Display, bytes: usize) {
    crate::base::log::log_info!(
        crate::abi::FI_LOG_EP_DATA,
        "tcp: {peer} holds {bytes} bytes of answers it does not read (FI_RUSTFAB_PEER_BUDGET): not reading it"
    );
}

/// Logs that `peer` is cut off: it left `bytes` of answers unread since
/// `since`.
pub(crate) fn log_cut_off(peer: &dyn std::fmt::Display, bytes: usize, since: Instant) {
    crate::base::log::log_warn!(
        crate::abi::FI_LOG_EP_DATA,
        "tcp: cutting off {peer}: it left {bytes} bytes of answers unread for {:?} (FI_RUSTFAB_PEER_BUDGET, \
         FI_RUSTFAB_PEER_BUDGET_TIMEOUT)",
        since.elapsed()
    );
}
