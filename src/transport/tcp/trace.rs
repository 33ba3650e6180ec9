//! Debug lines (`FI_LOG_LEVEL=debug`, subsystem `ep_ctrl`) about a
//! connection's set-up and teardown: dial, accept, handshake done,
//! refused, cut off, closed. One line per event, never per message; at
//! most [`LINES_PER_SEC`] a second for the process, so that a flood of
//! connections cannot flood the log (the next line written says how many
//! were dropped).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Lines written at most per second.
pub(crate) const LINES_PER_SEC: u64 = 32;

/// Admits at most `per_sec` lines in each second: the second and the
/// lines admitted in it, in one word (a race between two threads may admit
/// a line more; it never blocks).
pub(crate) struct Gate {
    window: AtomicU64,
    dropped: AtomicU64,
    per_sec: u64,
}

impl Gate {
    pub(crate) const fn new(per_sec: u64) -> Gate {
        Gate {
            window: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            per_sec,
        }
    }

    /// Whether a line may go in second `sec`; `Some(n)`: yes, `n` lines
    /// were dropped since the last one that went.
    pub(crate) fn admit(&self, sec: u64) -> Option<u64> {
        let w = self.window.load(Ordering::Relaxed);
        let (at, n) = (w >> 32, w & 0xffff_ffff);
        if at == sec && n >= self.per_sec {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let next = if at == sec { w + 1 } else { (sec << 32) | 1 };
        self.window.store(next, Ordering::Relaxed);
        Some(self.dropped.swap(0, Ordering::Relaxed))
    }
}

static GATE: Gate = Gate::new(LINES_PER_SEC);
static START: OnceLock<Instant> = OnceLock::new();

/// Whether debug lines about connections are wanted (for a line whose
/// facts cost a system call to learn).
pub(crate) fn wanted() -> bool {
    crate::base::log::enabled(crate::abi::FI_LOG_DEBUG, crate::abi::FI_LOG_EP_CTRL).is_some()
}

/// A peer's address in a line, if known (formatted only if written).
pub(crate) struct Peer(pub(crate) Option<std::net::SocketAddr>);

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{a}"),
            None => f.write_str("(address unknown)"),
        }
    }
}

/// Writes one debug line about a connection, attributed to the caller,
/// if debug lines are wanted and the gate admits it.
#[track_caller]
pub(crate) fn conn_event(args: std::fmt::Arguments<'_>) {
    let subsys = crate::abi::FI_LOG_EP_CTRL;
    if !wanted() {
        return;
    }
    let sec = START.get_or_init(Instant::now).elapsed().as_secs();
    let Some(dropped) = GATE.admit(sec) else { return };
    let at = std::panic::Location::caller();
    if dropped > 0 {
        crate::base::log::log_at_location!(
            crate::abi::FI_LOG_DEBUG,
            subsys,
            at,
            "{args} ({dropped} connection lines dropped before: at most {LINES_PER_SEC} a second)"
        );
    } else {
        crate::base::log::log_at_location!(crate::abi::FI_LOG_DEBUG, subsys, at, "{args}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_admits_its_lines_per_second_and_counts_the_rest() {
        let g = Gate::new(3);
        assert_eq!(g.admit(5), Some(0));
        assert_eq!(g.admit(5), Some(0));
        assert_eq!(g.admit(5), Some(0));
        assert_eq!(g.admit(5), None, "a fourth in the same second");
        assert_eq!(g.admit(5), None);
        assert_eq!(g.admit(6), Some(2), "the next second: the two dropped are told");
        assert_eq!(g.admit(6), Some(0));
    }
}
