//! The endpoint core's RMA calls (`fi_rma(3)`): what the C face's thunks
//! (`fi/rma.rs`) hand over as an [`RmaOp`], its flags checked and
//! completed from the endpoint's defaults, then posted to the engine
//! (`core/engine/rma.rs`, which has the protocol).

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::atomic::AtomicKind;
use crate::core::engine::matching::IovList;
use crate::core::engine::{AtomicArgs, Inner, RmaArgs, RmaIovList, RmaKind};
use crate::core::ep::{Connection, Endpoint};

/// The RMA capabilities every endpoint kind offers (docs/rma.md): reads
/// and writes, both ends, with remote events.
pub(crate) const RMA_CAPS: u64 = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT;
/// The atomic capabilities every endpoint kind offers (docs/rma.md,
/// Atomics): initiator and target.
pub(crate) const ATOMIC_CAPS: u64 = FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

const COMPLETION_LEVELS: u64 = FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_COMMIT_COMPLETE;
/// Flags `fi_readmsg`/`fi_writemsg` take (fi_rma(3) FLAGS, and the
/// operation and direction bits an application may leave in them).
const RMA_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_REMOTE_CQ_DATA
    | FI_MORE
    | FI_FENCE
    | COMPLETION_LEVELS
    | FI_TRANSMIT
    | FI_RMA
    | FI_READ
    | FI_WRITE;
/// Flags that apply to writes only ("Applies to fi_writemsg"): a read
/// ignores them, whether they come from the call or the defaults.
const WRITE_ONLY: u64 = FI_INJECT | FI_REMOTE_CQ_DATA | FI_INJECT_COMPLETE;
/// Flags `fi_atomicmsg`, `fi_fetch_atomicmsg` and `fi_compare_atomicmsg`
/// take (fi_atomic(3) FLAGS; the operation bits an application may leave).
const ATOMIC_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_REMOTE_CQ_DATA
    | FI_MORE
    | FI_FENCE
    | COMPLETION_LEVELS
    | FI_TRANSMIT
    | FI_ATOMIC
    | FI_READ
    | FI_WRITE;

/// An atomic call as the C face describes it (bytes, not elements: the
/// thunks multiply counts by the datatype's size).
pub(crate) struct AtomicOp {
    pub(crate) kind: AtomicKind,
    pub(crate) op: u32,
    pub(crate) datatype: u32,
    pub(crate) operand: IovList,
    pub(crate) compare: IovList,
    pub(crate) result: IovList,
    pub(crate) remote: RmaIovList,
    pub(crate) dest: fi_addr_t,
    pub(crate) data: Option<u64>,
    /// The flags of the `*msg` calls; `None`: the endpoint's defaults.
    pub(crate) flags: Option<u64>,
    pub(crate) context: usize,
    /// `fi_inject_atomic`.
    pub(crate) inject: bool,
}

/// An RMA call as the C face describes it.
pub(crate) struct RmaOp {
    pub(crate) kind: RmaKind,
    pub(crate) local: IovList,
    pub(crate) remote: RmaIovList,
    pub(crate) dest: fi_addr_t,
    /// Remote CQ data (`fi_writedata`, `FI_REMOTE_CQ_DATA` on `fi_writemsg`).
    pub(crate) data: Option<u64>,
    /// The flags of `fi_readmsg`/`fi_writemsg`; `None`: the endpoint's
    /// default operation flags.
    pub(crate) flags: Option<u64>,
    pub(crate) context: usize,
    /// `fi_inject_write`/`fi_inject_writedata`.
    pub(crate) inject: bool,
}

/// The effective flags of a call: explicit ones checked against
/// `allowed`, the endpoint's completion level when they name none.
fn call_flags(defaults: u64, flags: Option<u64>, allowed: u64) -> Result<u64> {
    Ok(match flags {
        None => defaults,
        Some(f) => {
            if f & !allowed != 0 {
                return Err(Error::BADFLAGS);
            }
            if f & COMPLETION_LEVELS == 0 {
                f | (defaults & COMPLETION_LEVELS)
            } else {
                f
            }
        }
    })
}

/// The effective flags of an RMA call.
fn rma_flags(defaults: u64, op: &RmaOp) -> Result<u64> {
    let f = call_flags(defaults, op.flags, RMA_FLAGS)?;
    Ok(match op.kind {
        RmaKind::Read => f & !WRITE_ONLY,
        RmaKind::Write => f,
    })
}

impl<L: Connection> Endpoint<L> {
    /// What every RMA and atomic call goes through once its flags are
    /// known: the endpoint's state (enabled, connected), `FI_FENCE`, then
    /// `start` on the engine (one lock for all of it).
    fn post_op(
        &self,
        flags: impl FnOnce(u64) -> Result<u64>,
        start: impl FnOnce(&mut Inner, &crate::core::engine::FrozenBinds, u64) -> Result<()>,
    ) -> Result<()> {
        let mut g = self.inner.lock();
        let flags = flags(g.config().tx_op_flags)?;
        let b = self.bound()?;
        if flags & FI_FENCE != 0 && g.tx_outstanding() > 0 {
            // Fence: do not start before every earlier operation completed
            // (one progress pass first, so a caller that only retries
            // still gets there).
            match &self.shared {
                None => g.progress(b),
                Some(s) => s.run(&mut g, |g| g.progress(b)),
            }
            if g.tx_outstanding() > 0 {
                return Err(Error::AGAIN);
            }
        }
        if let Some(m) = &self.msg {
            m.check_send()?;
        }
        let entered = match &self.shared {
            None => None,
            Some(s) => Some(s.enter_send(&mut g, b)?),
        };
        let r = start(&mut g, b, flags);
        if let Some(e) = entered {
            e.leave(&mut g);
        }
        r
    }

    /// Every atomic call (`fi_atomic(3)`).
    pub(crate) fn post_atomic(&self, op: AtomicOp) -> Result<()> {
        let with_data = |f: u64| if op.data.is_some() { f | FI_REMOTE_CQ_DATA } else { f };
        self.post_op(
            |d| call_flags(d, op.flags, ATOMIC_FLAGS).map(with_data),
            |g, b, flags| {
                g.atomic(
                    b,
                    AtomicArgs {
                        kind: op.kind,
                        op: op.op,
                        datatype: op.datatype,
                        dest: op.dest,
                        operand: op.operand,
                        compare: op.compare,
                        result: op.result,
                        remote: op.remote,
                        data: op.data,
                        flags,
                        context: op.context,
                        inject_call: op.inject,
                    },
                )
            },
        )
    }

    /// Every RMA call: flags first, then as [`Endpoint::post_op`].
    pub(crate) fn post_rma(&self, op: RmaOp) -> Result<()> {
        let data = match op.kind {
            RmaKind::Write => op.data,
            RmaKind::Read => None,
        };
        let flags = |d| rma_flags(d, &op).map(|f| if data.is_some() { f | FI_REMOTE_CQ_DATA } else { f });
        let tally = match op.kind {
            RmaKind::Write => &self.rma_tally.writes,
            RmaKind::Read => &self.rma_tally.reads,
        };
        self.post_op(flags, |g, b, flags| {
            g.rma(
                b,
                RmaArgs {
                    kind: op.kind,
                    dest: op.dest,
                    local: op.local,
                    remote: op.remote,
                    data,
                    flags,
                    context: op.context,
                    inject_call: op.inject,
                },
            )
        })
        .map(|()| {
            tally.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: RmaKind, flags: Option<u64>) -> RmaOp {
        RmaOp {
            kind,
            local: IovList::new(),
            remote: RmaIovList::default(),
            dest: 0,
            data: None,
            flags,
            context: 0,
            inject: false,
        }
    }

    #[test]
    fn flags_checked_and_defaulted() {
        let w = |f| rma_flags(FI_DELIVERY_COMPLETE | FI_COMPLETION, &op(RmaKind::Write, f));
        assert_eq!(w(None), Ok(FI_DELIVERY_COMPLETE | FI_COMPLETION));
        assert_eq!(
            w(Some(FI_MORE)),
            Ok(FI_MORE | FI_DELIVERY_COMPLETE),
            "the default level"
        );
        assert_eq!(w(Some(FI_INJECT_COMPLETE)), Ok(FI_INJECT_COMPLETE));
        assert_eq!(w(Some(FI_TAGGED)), Err(Error::BADFLAGS));
        assert_eq!(w(Some(FI_MULTI_RECV)), Err(Error::BADFLAGS));
        let r = |d, f| rma_flags(d, &op(RmaKind::Read, f));
        assert_eq!(r(FI_INJECT, None), Ok(0), "a default FI_INJECT is for writes");
        assert_eq!(
            r(0, Some(FI_INJECT | FI_REMOTE_CQ_DATA | FI_COMPLETION)),
            Ok(FI_COMPLETION)
        );
    }
}
