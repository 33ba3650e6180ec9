//! What the tcp port tells the CQ's idle rule (`Port::poll`'s result,
//! core/cq.rs `IDLE_YIELD_AFTER`): whether a peer moved lately.
//!
//! After IDLE_YIELD_AFTER empty `fi_cq_read`s in a row with no peer moving,
//! a CQ read yields the processor, so that ranks sharing a core with a
//! waiting one get to run. Between hosts the wait for an answer is a round
//! trip over the network, from a few kilobytes up longer than those reads,
//! so without a signal from the tcp port every such wait would end in a
//! yield; when the machine has something else to run, the yield hands it
//! the core and the arriving message waits for it. A socket cannot say
//! cheaply whether its peer is running, so the
//! port says what it knows: it sent a record, or read bytes of one (a whole
//! record or part of one), within the last [`MOVED_WINDOW`]. While that
//! holds an answer is plausibly on its way and the reads do not count
//! towards a yield; once the connection has been quiet that long they do,
//! and a rank waiting over TCP in a barrier yields as before.
//!
//! Cost: no system call and no clock reading of its own. A send sets a
//! flag; a pass stamps its own clock reading (`TcpPort::now`, taken once
//! per pass anyway) when the flag is set or a read got bytes, and compares
//! it with the stamp. Nothing here runs on the shm path.

use super::TcpPort;
use std::time::Duration;

/// How long after the last record sent or bytes read a pass still reports
/// that a peer moved: longer than a 64 KiB round trip between hosts, short
/// enough that an idle wait still yields within a fraction of a
/// millisecond.
pub(crate) const MOVED_WINDOW: Duration = Duration::from_micros(200);

impl TcpPort {
    /// This pass (its clock, `now`) moved bytes: a record was queued to a
    /// peer since the last pass, or a read got bytes.
    #[inline(always)]
    pub(super) fn note_moved(&mut self) {
        self.moved_at = Some(self.now);
    }

    /// `Port::poll`'s result: whether a record went out or bytes came in
    /// within [`MOVED_WINDOW`] of this pass's clock.
    #[inline(always)]
    pub(super) fn moved_lately(&mut self) -> bool {
        if std::mem::take(&mut self.queued_since_pass) {
            self.note_moved();
        }
        self.moved_at
            .is_some_and(|t| self.now.saturating_duration_since(t) < MOVED_WINDOW)
    }
}
