//! The state of a peer's extra links (`links.rs`): kept apart from the
//! port's methods so that the peer entry (`mod.rs`) can hold it without a
//! loop between the files.

use super::framing::{Body, OutRecord};
use crate::base::collections::FastMap;
use crate::transport::proto::HDR_LEN;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

/// Links per peer at most, link 0 included.
pub(crate) const MAX_LINKS: usize = 4;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum State {
    #[default]
    Free,
    Dialing(u64),
    Up(u64),
    /// Closed here; the peer's count of what it read is awaited.
    Down,
}

/// A DATA record kept until the receiver's count covers it.
pub(super) struct Kept {
    pub(super) hdr: [u8; HDR_LEN],
    pub(super) body: Body,
    pub(super) msg: u64,
    /// Its send was told "queued": reported through `Delivery::sent`
    /// once written, wherever that ends up being.
    pub(super) notify: bool,
}

impl Kept {
    pub(super) fn record(self) -> OutRecord {
        let mut r = OutRecord::new(self.hdr, self.body);
        if self.notify {
            r.notify = Some(self.msg);
        }
        r
    }
}

pub(super) fn copy_body(b: &Body) -> Body {
    match b {
        Body::None => Body::None,
        Body::Owned(v) => Body::Owned(v.clone()),
        Body::Iov(l) => Body::Iov(*l),
    }
}

#[derive(Default)]
pub(super) struct Link {
    /// The peer's address for this link (its `LINK_ADDR`).
    pub(super) remote: Option<SocketAddr>,
    pub(super) state: State,
    /// The generation of the link's current (or last) connection.
    pub(super) gen: u64,
    /// DATA records sent over the current connection, the first of
    /// `kept` being number `acked`.
    pub(super) sent: u64,
    pub(super) acked: u64,
    pub(super) kept: VecDeque<Kept>,
    /// Chunks of this link's messages sent while it is down: they follow
    /// the chunks sent again.
    pub(super) limbo: Vec<Kept>,
    pub(super) limbo_bytes: usize,
    /// DATA records read from the current connection, and the count the
    /// last `LINK_ACK` carried.
    pub(super) read: u64,
    pub(super) read_acked: u64,
    /// The peer's `LINK_DOWN` count, when it came before ours was sent.
    pub(super) theirs: Option<u64>,
    pub(super) retry_at: Option<Instant>,
}

/// A peer's extra links (index 1..MAX_LINKS; 0 is the peer's connection).
#[derive(Default)]
pub(super) struct Links {
    pub(super) link: [Link; MAX_LINKS],
    /// Messages whose chunks go over an extra link, until their last.
    pub(super) msgs: FastMap<u64, usize>,
    /// The link the next message takes (in turn).
    pub(super) next: usize,
    /// The peer's listener takes links (its `LINK_ADDR`s carry a port).
    pub(super) peer_accepts: bool,
}
