//! The peers we send to, by token; first contact and a failed or departed
//! peer's address looked at again.

use super::doorbell::{announce, ring_doorbell};
use super::logs::shm_debug;
use super::peer::{PeerOut, LIVENESS_PERIOD};
use super::segment;
use crate::base::collections::{FastMap, FastSet};
use crate::base::error::{Error, Result};
use crate::sys::doorbell::{DoorbellAddr, Ringer};
use crate::transport::addr::Addr;
use crate::transport::PeerEvent;
use segment::{Segment, SlotSender};
use std::time::Instant;

/// The outbound side towards `token` (opened, with a slot claimed and
/// announced, on first use): one hash lookup for a known peer.
/// The peers we send to, by token. A failed peer keeps its entry, marked,
/// while its owner lives; one whose owner is gone (its segment closed, or
/// its process dead) is taken out (`ShmPort::bury`: its mapping released,
/// the index of the last entry moves into its place) and leaves a
/// [`Tomb`] in `gone`. The last peer used is remembered: a run of sends to
/// one peer (a ping-pong, a rank's exchange with a neighbour) costs no hash
/// lookup.
#[derive(Default)]
pub(super) struct Peers {
    pub(super) v: Vec<PeerOut>,
    pub(super) at: FastMap<u64, usize>,
    /// (token, index in `v`) of the last lookup that found its peer.
    pub(super) last: Option<(u64, usize)>,
    /// Peers whose owner is gone, their segments unmapped: at most
    /// [`GONE_MAX`].
    pub(super) gone: FastMap<u64, Tomb>,
    /// The entry of `v` whose owner's process the next look is at.
    pub(super) look_next: usize,
    /// Sweeps since a process was last looked at.
    pub(super) proc_sweeps: u32,
    /// Peers that gave up their rings to us before we had one to them
    /// (`ShmPort::refuse`), or to whom we could not open one to reply
    /// (`ShmPort::unreachable`): never opened.
    pub(super) refused: FastSet<u64>,
    /// Tests: the segments `open_peer` opens have no room for a claim.
    #[cfg(test)]
    pub(super) no_room_for_claims: bool,
}

/// What is kept of a peer whose owner is gone once its segment is unmapped
/// (a tmpfs file keeps its pages while anyone maps it, even unlinked): the
/// token (the key) and these two words. A later send to the token reports
/// the failure first, if it was not yet, then looks for a new owner there
/// as `revisit` does.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tomb {
    /// `PeerEvent::Failed` was reported for the incarnation that is gone.
    pub(super) reported: bool,
    /// The address is looked at again (a new owner?) no earlier than this.
    pub(super) next_look: Option<Instant>,
}

/// Tombs kept at most (a few words each): past it, an arbitrary one goes,
/// its failure reported if it was not yet. A token whose tomb went is a
/// new address to a later send (a random token is never reused; a named
/// one's failure was reported).
pub(super) const GONE_MAX: usize = 4096;

impl Peers {
    /// Whether the answers queued towards `token` reached `bound`
    /// ([`Budget::records`]; only asked while some backlog exists:
    /// `rare::BACKLOGGED`).
    #[cold]
    pub(super) fn backlog_full(&self, token: u64, bound: usize) -> bool {
        self.at
            .get(&token)
            .and_then(|&i| self.v.get(i))
            .is_some_and(|p| p.backlog.len() >= bound)
    }

    #[inline]
    pub(super) fn index(&mut self, token: u64) -> Option<usize> {
        if let Some((t, i)) = self.last {
            if t == token {
                return Some(i);
            }
        }
        let i = *self.at.get(&token)?;
        self.last = Some((token, i));
        Some(i)
    }

    pub(super) fn get_mut(&mut self, token: u64) -> Option<&mut PeerOut> {
        let i = self.index(token)?;
        self.v.get_mut(i)
    }

    pub(super) fn insert(&mut self, token: u64, p: PeerOut) -> &mut PeerOut {
        let i = self.v.len();
        self.v.push(p);
        self.at.insert(token, i);
        self.last = Some((token, i));
        &mut self.v[i]
    }

    pub(super) fn values_mut(&mut self) -> core::slice::IterMut<'_, PeerOut> {
        self.v.iter_mut()
    }

    /// Takes the entry at `i` out, leaving a tomb for its token; the last
    /// entry moves to `i`. Returns the entry (its segment unmapped when it
    /// is dropped) and the index the moved entry had, if one moved.
    pub(super) fn remove(&mut self, i: usize, tomb: Tomb, events: &mut Vec<PeerEvent>) -> (PeerOut, Option<usize>) {
        let last = self.v.len() - 1;
        let p = self.v.swap_remove(i);
        let token = p.seg.token();
        self.at.remove(&token);
        let moved = (i != last).then_some(last);
        if let Some(q) = self.v.get(i).filter(|_| moved.is_some()) {
            self.at.insert(q.seg.token(), i);
        }
        self.last = None;
        if self.gone.len() >= GONE_MAX {
            if let Some((&t, &old)) = self.gone.iter().next() {
                shm_debug!("shm: the tomb of peer {t:016x} goes (more than {GONE_MAX} kept)");
                self.gone.remove(&t);
                if !old.reported {
                    events.push(PeerEvent::Failed(Addr::Shm(t)));
                }
            }
        }
        self.gone.insert(token, tomb);
        (p, moved)
    }

    pub(super) fn clear(&mut self) {
        self.last = None;
        self.at.clear();
        self.v.clear();
        self.gone.clear();
    }
}

// Always inlined: with its cold paths (`open_peer`, `revisit`) it grew
// past what the compiler inlines on its own, and the call cost a small
// send more than the check it added.
#[inline(always)]
pub(super) fn peer_out<'a>(
    peers: &'a mut Peers,
    ring_tx: &Ringer,
    me: SlotSender,
    my_token: u64,
    token: u64,
    events: &mut Vec<PeerEvent>,
) -> Result<&'a mut PeerOut> {
    let Some(i) = peers.index(token) else {
        return open_peer(peers, ring_tx, me, my_token, token, events);
    };
    // The segment's `closed` word (a line nobody writes while the owner
    // lives): its owner closed the endpoint, or a process that found the
    // owner dead marked it before removing it — the address may have a
    // new owner already, whom this send must reach, not the dead ring.
    if peers.v[i].failed || peers.v[i].seg.closed() {
        return revisit(peers, i, ring_tx, me, my_token, token, events);
    }
    Ok(&mut peers.v[i])
}

/// A send to a peer whose ring failed or whose segment was closed. The
/// failure is reported first (`PeerEvent::Failed`), and until the endpoint
/// has taken it (ending what waited on the old incarnation: an ACK, a CTS,
/// read data), nothing more goes to the address (`-FI_EAGAIN`: the engine
/// makes a pass, which takes it, and tries again). Then, if the segment's
/// owner is gone (closed, or its process dead) and a live one holds the
/// address now — a restarted peer, an endpoint reopened at it — our ring
/// moves there: a new segment, slot and ring, nothing of the old one's
/// backlog. Otherwise (nobody there yet, or an owner still alive that we
/// failed for cause: a corrupt ring, no room) `-FI_ECONNRESET`, and the
/// address is looked at again at most every `LIVENESS_PERIOD`.
#[cold]
#[inline(never)]
pub(super) fn revisit<'a>(
    peers: &'a mut Peers,
    i: usize,
    ring_tx: &Ringer,
    me: SlotSender,
    my_token: u64,
    token: u64,
    events: &mut Vec<PeerEvent>,
) -> Result<&'a mut PeerOut> {
    let p = &mut peers.v[i];
    if !p.failed {
        p.backlog.clear();
    }
    time_to_look(&mut p.failed, &mut p.next_look, token, events)?;
    if !p.seg.closed() && p.seg.owner_alive() {
        shm_debug!("shm: peer {token:016x} failed while its owner lives: not reopened");
        return Err(Error::CONNRESET);
    }
    p.gone = true;
    #[cfg(test)]
    let no_room = peers.no_room_for_claims;
    #[cfg(not(test))]
    let no_room = false;
    let fresh = connect_new_owner(ring_tx, me, my_token, token, no_room)?;
    let old = core::mem::replace(&mut peers.v[i], fresh);
    // Our slot in the old segment (the owner is gone: nobody frees it).
    old.seg.close_slot(old.slot);
    Ok(&mut peers.v[i])
}

/// First contact with a peer: open its segment, claim a slot, announce.
/// A departed peer's token (a [`Tomb`]) is `revisit`'s case: its failure
/// reported first, then a new owner at the address reached, if one is
/// there (looked for at most every `LIVENESS_PERIOD`).
#[cold]
#[inline(never)]
pub(super) fn open_peer<'a>(
    peers: &'a mut Peers,
    ring_tx: &Ringer,
    me: SlotSender,
    my_token: u64,
    token: u64,
    events: &mut Vec<PeerEvent>,
) -> Result<&'a mut PeerOut> {
    if peers.refused.contains(&token) {
        return Err(Error::CONNRESET);
    }
    #[cfg(test)]
    let no_room = peers.no_room_for_claims;
    #[cfg(not(test))]
    let no_room = false;
    if let Some(t) = peers.gone.get_mut(&token) {
        time_to_look(&mut t.reported, &mut t.next_look, token, events)?;
        // The owner we knew is gone: a live one there now is a new one.
        let fresh = connect_new_owner(ring_tx, me, my_token, token, no_room)?;
        peers.gone.remove(&token);
        return Ok(peers.insert(token, fresh));
    }
    let p = connect(ring_tx, me, my_token, token, no_room)?;
    Ok(peers.insert(token, p))
}

/// The gate in front of a failed or departed peer's address: its failure
/// reported once (`reported` set), `-FI_EAGAIN` until the endpoint has taken
/// that report, then `-FI_ECONNRESET` except once every `LIVENESS_PERIOD`,
/// when `Ok` says: look whether a new owner holds the address.
fn time_to_look(
    reported: &mut bool,
    next_look: &mut Option<Instant>,
    token: u64,
    events: &mut Vec<PeerEvent>,
) -> Result<()> {
    if !*reported {
        *reported = true;
        events.push(PeerEvent::Failed(Addr::Shm(token)));
    }
    if events.iter().any(|e| *e.peer() == Addr::Shm(token)) {
        return Err(Error::AGAIN);
    }
    let now = Instant::now();
    if next_look.is_some_and(|t| now < t) {
        return Err(Error::CONNRESET);
    }
    *next_look = Some(now + LIVENESS_PERIOD);
    Ok(())
}

/// Our ring at a failed peer's address, held now by a new owner (the one we
/// knew is gone), or `-FI_ECONNRESET` when nobody holds it yet.
fn connect_new_owner(ring_tx: &Ringer, me: SlotSender, my_token: u64, token: u64, no_room: bool) -> Result<PeerOut> {
    let Ok(fresh) = connect(ring_tx, me, my_token, token, no_room) else {
        shm_debug!("shm: peer {token:016x} is gone and nobody holds its address yet");
        return Err(Error::CONNRESET);
    };
    crate::base::log::log_info!(
        crate::abi::FI_LOG_EP_DATA,
        "shm: peer {token:016x} has a new owner (pid {}, the last one is gone): sending there",
        fresh.seg.owner_pid
    );
    Ok(fresh)
}

/// Our ring in the segment of the endpoint `token`: the segment opened
/// (checked, its owner alive), a slot claimed (its ring reset), announced
/// and activated. `no_room` (tests): the segment has no room for a claim.
pub(super) fn connect(ring_tx: &Ringer, me: SlotSender, my_token: u64, token: u64, no_room: bool) -> Result<PeerOut> {
    let seg = Segment::open(token)?;
    if !seg.owner_alive() {
        return Err(Error::ADDRNOTAVAIL);
    }
    let bell = DoorbellAddr::new(&segment::doorbell_path(token))?;
    #[cfg(test)]
    if no_room {
        seg.no_room_from.store(0, core::sync::atomic::Ordering::Relaxed);
    }
    #[cfg(not(test))]
    let _ = no_room;
    let claim = match seg.claim_slot(me) {
        Ok(c) => c,
        Err(e) => {
            // No free slot: the owner was asked to reclaim the slots of
            // dead senders; wake it if it sleeps.
            ring_doorbell(ring_tx, &seg, &bell);
            return Err(e);
        }
    };
    announce(ring_tx, &seg, &bell, segment::hello_bytes(token, claim, my_token));
    seg.activate(claim, me);
    shm_debug!(
        "shm: ring claimed in peer {token:016x}'s segment (slot {}, owner pid {})",
        claim.slot,
        seg.owner_pid
    );
    Ok(PeerOut::new(seg, bell, claim.slot))
}
