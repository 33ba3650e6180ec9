//! The conditions a pass rarely finds set, in one word it tests once
//! ([`ShmPort::poll_records`], `rare_pass`). Each has a bit; the fields are
//! private to this module, so a condition and its bit cannot disagree.
//! Who sets and clears each (owner-private state: nothing here is read from
//! a segment):
//! * [`SLEEPING`]: set by `set_sleepers(n > 0)` (the doorbell is drained on
//!   every pass from then on); cleared by the pass that finds the segment's
//!   sleeper count back at zero.
//! * [`BACKLOGGED`]: set by `send_ctl` when it queues a control record for
//!   want of ring space (the send side); cleared by `flush_backlogs` once no
//!   peer has one queued.
//! * [`SCAN_DUE`]: set by `discover_slots` when `claim_seq` moved with nothing
//!   new announced or signalled; cleared by the full scan (`scan_if_due`, at
//!   most every LIVENESS_PERIOD).
//! * the ring waited on ([`Rare::waiting`]): set by a send refused for want
//!   of room (the send side); kept, moved or dropped by `outbound_moved` on
//!   each pass (dropped once its consumer took every record we wrote, or the
//!   peer failed), dropped by `close`.

pub(super) const SLEEPING: u8 = 1;
pub(super) const BACKLOGGED: u8 = 2;
pub(super) const SCAN_DUE: u8 = 4;
const WAITING: u8 = 8;

#[derive(Default)]
pub(super) struct Rare {
    pub(super) bits: u8,
    /// With `WAITING`: the outbound ring a send was last refused on for
    /// want of room (its index in `peers`) and its consumer's head when
    /// last looked at: each pass compares the head, so a consumer that
    /// makes room counts as a peer that moved.
    pub(super) waiting: (usize, u64),
}

impl Rare {
    /// Whether any condition is set (the pass's one test).
    #[inline(always)]
    pub(super) fn any(&self) -> bool {
        self.bits != 0
    }

    #[inline(always)]
    pub(super) fn get(&self, bit: u8) -> bool {
        self.bits & bit != 0
    }

    #[inline(always)]
    pub(super) fn set(&mut self, bit: u8, on: bool) {
        debug_assert!(bit != WAITING, "the ring waited on: set_waiting");
        if on {
            self.bits |= bit;
        } else {
            self.bits &= !bit;
        }
    }

    #[inline(always)]
    pub(super) fn waiting(&self) -> Option<(usize, u64)> {
        (self.bits & WAITING != 0).then_some(self.waiting)
    }

    #[inline(always)]
    pub(super) fn set_waiting(&mut self, w: Option<(usize, u64)>) {
        match w {
            Some(w) => {
                self.waiting = w;
                self.bits |= WAITING;
            }
            None => self.bits &= !WAITING,
        }
    }
}
