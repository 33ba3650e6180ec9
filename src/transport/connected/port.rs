//! The endpoint core's view of the connection: [`ConnectedPort`], the
//! [`Port`] of a connected endpoint.

use super::{ConnectedPort, LinkState, CONNECTED_PEER};
use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::WireHdr;
use crate::transport::shm::ShmPort;
use crate::transport::tcp::EAGER_MAX;
use crate::transport::{Delivery, Hints, Payload, PeerEvent, Port, Sent, SingleCopy};
use std::os::fd::RawFd;

impl ConnectedPort {
    /// A cross-memory copy with `pid` through the connection's shm port:
    /// only with the connected peer (the shm port checks that the pid is a
    /// sender the kernel named; records reach the core only with the
    /// connected peer's), only while the connection is up — after the end
    /// (a rendezvous whose RTS was drained before it) nothing more is taken
    /// from the peer, as over TCP, where its data would never come.
    fn peer_cma(&self, pid: i32, copy: impl FnOnce(&ShmPort) -> Result<usize>) -> Result<usize> {
        let c = self.shared.inner.lock();
        match (c.shm.as_ref(), c.via_shm) {
            (Some(_), Some(_)) if c.state() != LinkState::Up => Err(crate::transport::PEER_FAILED),
            (Some(s), Some(o)) if o.pid == pid => copy(s),
            _ => Err(Error::OPNOTSUPP),
        }
    }
}

impl Port for ConnectedPort {
    fn addr(&self) -> Addr {
        self.shared.local().map(Addr::Inet).unwrap_or(CONNECTED_PEER)
    }

    fn wait_fd(&self) -> RawFd {
        self.shared.wait_fd
    }

    /// Arrivals need nothing (the kernel makes the epoll set readable), but
    /// a sleeper must not leave records waiting for a pass (see `Cork`).
    fn set_sleepers(&mut self, n: usize) {
        self.shared.with(|c| {
            if let Some(s) = c.shm.as_mut() {
                s.set_sleepers(n);
            }
            c.cork.set_sleepers(n);
            if n > 0 {
                c.flush_corked();
            }
        })
    }

    fn has_pending(&self) -> bool {
        let c = self.shared.inner.lock();
        !c.sent.is_empty()
            || !c.events.is_empty()
            || c.doomed.is_some()
            || c.corked
            || (c.via_shm.is_some() && c.shm.as_ref().is_some_and(|s| s.has_pending()))
    }

    fn eager_limit(&self) -> usize {
        if self.shared.via_shm() {
            crate::transport::shm::EAGER_MAX
        } else {
            EAGER_MAX
        }
    }

    /// Over shm, a record the port took is in the peer's ring.
    fn queued_at_peer(&self, _peer: &Addr) -> bool {
        self.shared.via_shm()
    }

    /// Over shm a chunk is a ring record (the eager limit); over TCP up to
    /// [`crate::transport::tcp::CHUNK_MAX`].
    fn chunk_limit_for(&self, _peer: &Addr) -> usize {
        if self.shared.via_shm() {
            crate::transport::shm::EAGER_MAX
        } else {
            crate::transport::tcp::CHUNK_MAX
        }
    }

    fn send(&mut self, _peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, copy: bool) -> Result<Sent> {
        self.shared.with(|c| c.send(hdr, payload, copy))
    }

    fn send_ctl(&mut self, _peer: &Addr, hdr: &WireHdr) -> Result<()> {
        self.shared.with(|c| c.send_ctl(hdr))
    }

    fn room(&mut self, _peer: &Addr) -> usize {
        self.shared.inner.lock().room()
    }

    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        self.polled = true;
        let (moved, stalled) = self.shared.with(|c| {
            let moved = c.poll(d);
            (moved, c.stalled())
        });
        self.stalled = stalled;
        moved
    }

    fn check_peer(&mut self, _peer: &Addr) -> bool {
        self.shared.state() == LinkState::Up
    }

    fn sender_alive(&self, _src_pid: i32, _peer: &Addr) -> bool {
        self.shared.state() == LinkState::Up
    }

    /// The endpoint layer ends operations on disconnection (they all belong
    /// to the one peer), so no peer events. As on the RDM transport, a call
    /// without a pass before it means a receive may have been posted: a
    /// stalled stream gets EPOLLIN back so that a sleeper wakes and retries.
    fn take_events(&mut self) -> Vec<PeerEvent> {
        if !self.polled && self.stalled {
            let mut g = self.shared.inner.lock();
            let c = &mut *g;
            if c.stalled() {
                if let Some(conn) = c.conn.as_mut() {
                    if conn.offer_input(&c.epoll) {
                        // What waits is in our buffers, not in the socket:
                        // fire the timer so that a sleeper wakes and retries.
                        c.alarm.ring();
                    }
                }
            }
        }
        self.polled = false;
        Vec::new()
    }

    /// Over shm: cross-memory attach from the peer ([`ConnectedPort::peer_cma`]).
    fn single_copy(&self) -> Option<&dyn SingleCopy> {
        Some(self)
    }

    fn close(&mut self) {
        self.shared.with(|c| c.close())
    }

    fn hints(&mut self) -> Option<&mut dyn Hints> {
        Some(self)
    }
}

/// Over shm: cross-memory attach from the peer ([`ConnectedPort::peer_cma`]).
impl SingleCopy for ConnectedPort {
    fn pull(&self, src_pid: i32, remote: &[(u64, u64)], dst: &IovList, len: usize) -> Result<usize> {
        self.peer_cma(src_pid, |s| SingleCopy::pull(s, src_pid, remote, dst, len))
    }

    fn push(&self, dst_pid: i32, remote: &[(u64, u64)], src: &IovList, len: usize) -> Result<usize> {
        self.peer_cma(dst_pid, |s| SingleCopy::push(s, dst_pid, remote, src, len))
    }
}

/// The RTS prefix travels in CONNREQ / ACCEPT; `FI_MORE` corks the stream.
impl Hints for ConnectedPort {
    fn more_coming(&mut self) {
        self.shared.with(|c| c.cork.more())
    }

    /// Sent in our CONNREQ / ACCEPT: a change after the handshake reaches
    /// the peer no more (it then fetches what it misses with a ranged CTS).
    fn set_rts_prefix(&mut self, n: usize) {
        self.shared.with(|c| {
            c.rts_prefix = n.min(EAGER_MAX);
            if let Some(s) = c.shm.as_mut() {
                Hints::set_rts_prefix(s, n);
            }
        })
    }

    /// From the peer's CONNREQ / ACCEPT (no data flows before either).
    fn rts_prefix(&mut self, _peer: &Addr) -> usize {
        self.shared.with(|c| c.peer_rts_prefix)
    }
}
