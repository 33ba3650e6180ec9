//! Announcements and wake-ups: datagrams to a segment owner's doorbell.

use super::peer::PeerOut;

use super::segment;
use crate::base::error::Error;
use crate::sys::doorbell::{DoorbellAddr, Ringer};
use segment::Segment;
use std::time::{Duration, Instant};

/// How long a sender retries its "who I am" datagram when the owner's
/// doorbell queue is full (it then goes on unverified: no CMA from it).
pub(super) const HELLO_PATIENCE: Duration = Duration::from_millis(50);

/// Sends a sender's "who I am" to the owner's doorbell, retrying briefly
/// while the owner's queue is full; without it the owner takes no pid from
/// us (our large messages are streamed, not read with CMA).
pub(super) fn announce(tx: &Ringer, seg: &Segment, bell: &DoorbellAddr, hello: [u8; segment::HELLO_LEN]) {
    tell_owner(
        tx,
        seg,
        bell,
        &hello,
        "claim announcement (the owner will not use CMA with us)",
    );
}

/// Sends `msg` to `seg`'s owner's doorbell, retrying a full one for at most
/// HELLO_PATIENCE (the owner drains it when `claim_seq` moves).
pub(super) fn tell_owner(tx: &Ringer, seg: &Segment, bell: &DoorbellAddr, msg: &[u8; segment::HELLO_LEN], what: &str) {
    let t0 = Instant::now();
    while let Err(e) = tx.send(bell, msg) {
        // A busy owner drains its doorbell when claim_seq moves.
        seg.nudge();
        if e != Error::AGAIN || t0.elapsed() >= HELLO_PATIENCE {
            crate::base::log::log_debug!(crate::abi::FI_LOG_EP_DATA, "shm: {what} not sent ({e})");
            return;
        }
        // Short: the whole process (every endpoint it progresses) waits.
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// After publishing records towards `p`: signal its ring if its owner does
/// not watch it, ring its doorbell if the owner may sleep (one barrier for
/// both: sync.rs, ready.rs).
#[inline]
pub(super) fn after_publish(tx: &Ringer, p: &PeerOut) {
    let (wake, signal) = p.seg.after_publish(p.slot);
    if signal {
        p.seg.signal(p.slot);
    }
    if wake {
        // As in `ring_doorbell`: a failure needs no handling.
        tx.ring(&p.bell);
    }
}

pub(super) fn ring_doorbell(tx: &Ringer, seg: &Segment, bell: &DoorbellAddr) {
    // Dekker with the sleeper (sync.rs, checked by its loom models): we
    // published a record's first word, then make our barrier and read
    // `sleepers`; it stored `sleepers`, then made its barrier (membarrier or
    // a fence) and re-reads its rings' head cells.
    // One sees the other.
    if !seg.must_wake() {
        return;
    }
    // Failure (full queue, no listener) needs no handling: a full queue
    // already means "readable", and a gone owner is noticed by liveness.
    tx.ring(bell);
}
