//! Debug lines about peers' set-up and teardown (a ring claimed, a sender
//! taken in or freed, a peer left, buried or looked at again), at most
//! [`DEBUG_PER_SEC`] a second in a process: a process of our user that
//! claims and closes slots in a loop must not flood the log. Never on the
//! per-message path; nothing is read (not even the clock) unless
//! `FI_LOG_LEVEL=debug` asks for these lines.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Lines written at most per second (the rest of that second's are left
/// out, and the first line of the next second says how many).
pub(super) const DEBUG_PER_SEC: u64 = 100;

/// The second (since the first line) and the lines asked for in it:
/// `second << 32 | count`.
static WINDOW: AtomicU64 = AtomicU64::new(0);

/// Whether a debug line may be written now; with the number of lines left
/// out in the last second that had any, when this is the first of a new
/// second.
pub(super) fn debug_quota() -> (bool, u64) {
    static START: OnceLock<Instant> = OnceLock::new();
    let second = START.get_or_init(Instant::now).elapsed().as_secs() & 0xffff_ffff;
    let mut cur = WINDOW.load(Ordering::Relaxed);
    loop {
        let (sec, n) = (cur >> 32, cur & 0xffff_ffff);
        let next = if sec == second { cur + 1 } else { second << 32 | 1 };
        match WINDOW.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) if sec == second => return (n < DEBUG_PER_SEC, 0),
            Ok(_) => return (true, n.saturating_sub(DEBUG_PER_SEC)),
            Err(now) => cur = now,
        }
    }
}

/// `shm_debug!(fmt, args..)`: one line at FI_LOG_DEBUG (FI_LOG_EP_CTRL)
/// within [`DEBUG_PER_SEC`].
macro_rules! shm_debug {
    ($($arg:tt)+) => {
        if $crate::base::log::enabled($crate::abi::FI_LOG_DEBUG, $crate::abi::FI_LOG_EP_CTRL).is_some() {
            let (ok, left_out) = $crate::transport::shm::logs::debug_quota();
            if left_out > 0 {
                $crate::base::log::log_debug!(
                    $crate::abi::FI_LOG_EP_CTRL,
                    "shm: {left_out} set-up and teardown lines left out (more than {} a second)",
                    $crate::transport::shm::logs::DEBUG_PER_SEC
                );
            }
            if ok {
                $crate::base::log::log_debug!($crate::abi::FI_LOG_EP_CTRL, $($arg)+);
            }
        }
    };
}
pub(super) use shm_debug;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_debug_quota_allows_its_lines_a_second_then_none() {
        // Asked three quotas' worth at once (microseconds: within one
        // second, or two if one ends meanwhile): some are refused.
        let allowed = (0..3 * DEBUG_PER_SEC).filter(|_| debug_quota().0).count() as u64;
        assert!(
            (DEBUG_PER_SEC..=2 * DEBUG_PER_SEC).contains(&allowed),
            "{allowed} allowed"
        );
    }
}
