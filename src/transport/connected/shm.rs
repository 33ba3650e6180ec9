//! The shm data path of a connected endpoint (docs/shm.md, Connected
//! endpoints): the offers in CONNREQ / ACCEPT, checked before anything is
//! sent to them, the path chosen, and the ring read for the connected
//! peer's records only ([`PeerOnly`]).

use super::cm::ShmOffer;
use super::{Inner, Refusal, ShmUse, CONNECTED_PEER, DROPS_LOGGED};
use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use crate::transport::proto::{self, WireHdr};
use crate::transport::{Delivery, Disposition, PayloadIn, Place, Port};

impl Inner {
    /// What we offer in our CONNREQ / ACCEPT: our segment, if we have one.
    pub(super) fn my_offer(&self) -> Option<ShmOffer> {
        self.shm.as_ref().map(|p| ShmOffer {
            host: crate::transport::addr::host_id(),
            token: p.token(),
            pid: crate::sys::getpid(),
        })
    }

    /// Checks a peer's shm offer (None: it made none): the shm data path to
    /// it, or why not.
    pub(super) fn check_offer(&mut self, offer: Option<ShmOffer>) -> core::result::Result<ShmOffer, Refusal> {
        let Some(o) = offer else {
            return Err(Refusal::NotLocal("the peer offers no shared memory"));
        };
        if o.host != crate::transport::addr::host_id() {
            return Err(Refusal::NotLocal("the peer's host id is not ours"));
        }
        // A host id is not a secret (auto addresses carry it): the peer's
        // end of the TCP connection must be on this host too.
        let peer_ip = self
            .conn
            .as_ref()
            .and_then(|c| c.peer_addr().ok())
            .or(self.peer)
            .map(|a| a.ip());
        if !peer_ip.is_some_and(crate::sys::net::ip_is_local) {
            return Err(Refusal::NotLocal("the peer's address is not one of this host's"));
        }
        let Some(shm) = self.shm.as_mut() else {
            return Err(Refusal::Bad("an offer we did not ask for"));
        };
        match shm.open_peer_owner(o.token) {
            Ok(pid) if pid == o.pid => Ok(o),
            Ok(_) => Err(Refusal::Bad("the offered segment belongs to another process")),
            Err(e) if e == Error::ADDRNOTAVAIL => Err(Refusal::Gone("the offered segment does not exist (any more)")),
            Err(_) => Err(Refusal::Bad("the offered segment does not open")),
        }
    }

    /// Decides the data path from the peer's offer (`offer`; `answered`:
    /// the peer is the server, which offers only when it took ours): Ok(the
    /// peer's offer, None for TCP), or the reason to refuse.
    pub(super) fn choose_path(
        &mut self,
        offer: Option<ShmOffer>,
        answered: bool,
    ) -> core::result::Result<Option<ShmOffer>, Refusal> {
        if self.shm.is_none() {
            return match offer {
                Some(_) if answered => Err(Refusal::Bad("an shm offer we did not ask for")),
                _ => Ok(None),
            };
        }
        match self.check_offer(offer) {
            Ok(o) => Ok(Some(o)),
            // auto: TCP to a peer on another host (a server that offers
            // has switched to shm already: refuse rather than mismatch).
            Err(Refusal::NotLocal(_)) if self.shm_use == ShmUse::Local && (offer.is_none() || !answered) => Ok(None),
            Err(r) => Err(r),
        }
    }

    /// Says (FI_LOG_LEVEL=info) which way the connection's data goes.
    pub(super) fn log_path(&self) {
        match self.via_shm {
            Some(o) => crate::base::log::log_info!(
                crate::abi::FI_LOG_EP_CTRL,
                "connected endpoint: data to {:?} over shm (segment {:#x}, pid {})",
                self.peer,
                o.token,
                o.pid
            ),
            None => crate::base::log::log_info!(
                crate::abi::FI_LOG_EP_CTRL,
                "connected endpoint: data to {:?} over tcp",
                self.peer
            ),
        }
    }

    /// Takes the records of our shm ring: only the connected peer's.
    /// Whether the peer moved (`Port::poll`).
    pub(super) fn poll_shm(&mut self, d: &mut dyn Delivery) -> bool {
        let (Some(shm), Some(o)) = (self.shm.as_mut(), self.via_shm) else {
            return false;
        };
        let mut f = PeerOnly {
            d,
            peer: o,
            dropped: 0,
            bye: false,
        };
        let moved = Port::poll(shm, &mut f);
        let (dropped, bye) = (f.dropped, f.bye);
        let failed = Port::take_events(shm).iter().any(|e| *e.peer() == Addr::Shm(o.token));
        if dropped > 0 {
            if self.dropped < DROPS_LOGGED {
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_DATA,
                    "connected endpoint over shm: dropped {dropped} record(s) not from the connected peer (token {:#x}, pid {})",
                    o.token,
                    o.pid
                );
            }
            self.dropped += dropped;
        }
        if (failed || bye) && self.doomed.is_none() {
            // The peer's ring broke (or its segment went away under a
            // send), or it said BYE there: the end, in this pass, before a
            // rendezvous it had announced is pulled (it cancelled it).
            self.doomed = Some(crate::transport::PEER_FAILED);
        }
        moved
    }
}

/// The core as the shm port's sink on a connected endpoint: records of the
/// connected peer reach the core as [`CONNECTED_PEER`]'s; every other
/// record is consumed and dropped. The peer's records are those of its
/// token whose slot the kernel verified for the peer's pid — or did not
/// verify at all (pid 0: the peer exited before we read its announcement,
/// which a sender that sends and exits at once does; its doorbell was
/// full): those are taken as on RDM endpoints, never with a cross-memory
/// pull (the core pulls only from a pid > 0). A slot the kernel verified
/// for another pid is not the peer's.
struct PeerOnly<'a> {
    d: &'a mut dyn Delivery,
    peer: ShmOffer,
    dropped: u64,
    /// The peer's BYE came through the ring (its fi_shutdown or close,
    /// after everything it wrote before).
    bye: bool,
}

impl PeerOnly<'_> {
    fn ours(&mut self, src: &Addr, src_pid: i32) -> bool {
        let ok = *src == Addr::Shm(self.peer.token) && (src_pid == self.peer.pid || src_pid == 0);
        if !ok {
            self.dropped += 1;
        }
        ok
    }
}

impl Delivery for PeerOnly<'_> {
    fn place(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr) -> Place {
        if !self.ours(src, src_pid) {
            return Place::Discard;
        }
        self.d.place(&CONNECTED_PEER, src_pid, hdr)
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        self.d.placed(handle, result)
    }
    fn buffered(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        // Only after a `place` of ours answered Buffer.
        if *src == Addr::Shm(self.peer.token) && (src_pid == self.peer.pid || src_pid == 0) {
            self.d.buffered(&CONNECTED_PEER, src_pid, hdr, data)
        }
    }
    fn deliver(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        if !self.ours(src, src_pid) {
            return Disposition::Consumed;
        }
        self.d.deliver(&CONNECTED_PEER, src_pid, hdr, payload)
    }
    fn control(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        if !self.ours(src, src_pid) {
            return Disposition::Consumed;
        }
        if hdr.op == proto::op::BYE {
            self.bye = true;
        }
        self.d.control(&CONNECTED_PEER, src_pid, hdr, payload)
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        self.d.sent(msg_id, result)
    }
}
