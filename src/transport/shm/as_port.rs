//! [`ShmPort`] as a transport [`Port`].

use super::cma::{pull, pull_batch, push, push_batch};
use super::inbound::InRecord;
use super::outbound::EAGER_MAX;
use super::port::ShmPort;
use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{self, WireHdr};
use crate::transport::{Delivery, Disposition, Hints, Payload, PeerEvent, Port, PullJob, PushJob, Sent, SingleCopy};
use std::os::fd::RawFd;

/// Hands one ring record to the endpoint core.
pub(super) fn dispatch(d: &mut dyn Delivery, rec: InRecord<'_>) -> Disposition {
    if !proto::op::placed(rec.hdr.op) {
        return d.control(&rec.src, rec.src_pid, &rec.hdr, &rec);
    }
    d.deliver(&rec.src, rec.src_pid, &rec.hdr, &rec)
}

impl Port for ShmPort {
    fn addr(&self) -> Addr {
        ShmPort::addr(self)
    }
    fn wait_fd(&self) -> RawFd {
        ShmPort::wait_fd(self)
    }
    fn set_sleepers(&mut self, n: usize) {
        ShmPort::set_sleepers(self, n)
    }
    fn has_pending(&self) -> bool {
        ShmPort::has_pending(self)
    }
    fn eager_limit(&self) -> usize {
        EAGER_MAX
    }
    fn send(&mut self, peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, _copy: bool) -> Result<Sent> {
        // A ring record is a copy already: the buffer is reusable at once.
        self.send_record(peer, hdr, payload).map(|_| Sent::Done)
    }
    fn queued_at_peer(&self, _peer: &Addr) -> bool {
        true // `send` writes the record into the peer's ring, or refuses
    }
    fn send_ctl(&mut self, peer: &Addr, hdr: &WireHdr) -> Result<()> {
        ShmPort::send_ctl(self, peer, hdr)
    }
    fn room(&mut self, peer: &Addr) -> usize {
        ShmPort::room(self, peer)
    }
    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        self.poll_records(&mut |rec| dispatch(d, rec))
    }
    fn check_peer(&mut self, peer: &Addr) -> bool {
        match peer {
            Addr::Shm(t) => ShmPort::check_peer(self, *t),
            _ => false,
        }
    }
    fn sender_alive(&self, src_pid: i32, peer: &Addr) -> bool {
        match peer {
            Addr::Shm(t) => ShmPort::sender_alive(self, src_pid, *t),
            _ => false,
        }
    }
    fn take_events(&mut self) -> Vec<PeerEvent> {
        ShmPort::take_events(self)
    }
    fn has_events(&self) -> bool {
        !self.events.is_empty()
    }
    fn single_copy(&self) -> Option<&dyn SingleCopy> {
        Some(self)
    }
    fn close(&mut self) {
        ShmPort::close(self)
    }
    fn hints(&mut self) -> Option<&mut dyn Hints> {
        Some(self)
    }
}

/// Cross-memory attach, with peers the kernel named only.
impl SingleCopy for ShmPort {
    fn pull(&self, src_pid: i32, remote: &[(u64, u64)], dst: &IovList, len: usize) -> Result<usize> {
        if len == 0 {
            return Ok(0);
        }
        // Only from a sender the kernel named (never a pid a record names).
        if !self.verified_sender(src_pid) {
            return Err(Error::CONNRESET);
        }
        pull(src_pid, remote, dst, len)
    }
    fn pull_batch(&self, src_pid: i32, jobs: &[PullJob<'_>]) -> Result<()> {
        if !self.verified_sender(src_pid) {
            return Err(Error::CONNRESET);
        }
        pull_batch(src_pid, jobs)
    }
    fn push(&self, dst_pid: i32, remote: &[(u64, u64)], src: &IovList, len: usize) -> Result<usize> {
        if len == 0 {
            return Ok(0);
        }
        // Only into a sender the kernel named, as `pull`.
        if !self.verified_sender(dst_pid) {
            return Err(Error::CONNRESET);
        }
        push(dst_pid, remote, src, len)
    }
    fn push_batch(&self, dst_pid: i32, jobs: &[PushJob<'_>]) -> Result<()> {
        if !self.verified_sender(dst_pid) {
            return Err(Error::CONNRESET);
        }
        push_batch(dst_pid, jobs)
    }
}

/// The RTS prefix travels in the segment header.
impl Hints for ShmPort {
    fn set_rts_prefix(&mut self, n: usize) {
        self.seg.set_rts_prefix(n.min(EAGER_MAX) as u64);
    }
    fn rts_prefix(&mut self, peer: &Addr) -> usize {
        let Addr::Shm(token) = *peer else { return 0 };
        match self.peer(token) {
            Ok(p) => p.seg.rts_prefix().min(EAGER_MAX as u64) as usize,
            Err(_) => 0,
        }
    }
    fn push_whole(&mut self, peer: &Addr) -> usize {
        let Addr::Shm(token) = *peer else { return 0 };
        match self.peer(token) {
            Ok(p) if p.ring.ncells() >= PUSH_WHOLE_RING_MIN => PUSH_WHOLE_MAX,
            _ => 0,
        }
    }
    fn watch_consumer(&mut self, peer: &Addr) {
        let Addr::Shm(token) = *peer else { return };
        self.watch_head(token);
    }
}

/// Largest rendezvous message pushed whole behind its RTS
/// ([`Hints::push_whole`]): up to it the sender's copy into a large ring is
/// cheaper than the CTS round trip it saves (docs/shm.md, Large messages).
pub(crate) const PUSH_WHOLE_MAX: usize = 64 << 10;

/// Rings of fewer cells than this (1 MiB) take no whole pushes: in a 128 KiB
/// ring a 64 KiB message would hold half of it, and its cells would be
/// written again while the receiver's cache still holds them.
const PUSH_WHOLE_RING_MIN: u64 = 16384;
