//! The endpoint engine (RDM endpoints, and connected `FI_EP_MSG` ones with
//! a fixed peer): posting sends and receives, the message protocols on top
//! of a transport, completion generation, cancel, peer failure. No C types
//! beyond plain values: the thunks in `src/fi/ep/msg.rs` translate the
//! libfabric calls into [`SendArgs`] / [`RecvArgs`]. It reaches its
//! transport only through [`Port`](crate::transport::Port) and is reached
//! back through [`Delivery`](crate::transport::Delivery)
//! (`progress::EngineDelivery` during a poll).
//!
//! Modules: `send` (post-time checks, eager records, `sent`/ACK, send
//! completions), `recv` (posting, cancel, matching arrivals, the unexpected
//! queue, peek/claim), `matching` (posted and unexpected queues, tag rule,
//! budget; pure), `directed` (which receives read, or must name, their
//! source, and which may be multi-receive buffers, per caps and API
//! version), `rendezvous` (RTS, CTS/DATA streaming; the receiver's pulls,
//! CMA or a CTS, in `rendezvous_pull`),
//! `buffered` (buffered receives; `buffered/held.rs` is their pure
//! bookkeeping), `peers` (liveness, failure events), `connected` (what
//! FI_EP_MSG adds: the fixed peer, `fail_all`), `completion` (CQ entries and
//! counters), `stall` (backpressure stalls, for the debug log), `types`
//! (the data each path keeps in the state), `state` (`State`, `Inner`,
//! the configuration, bindings and call arguments), `progress` (the
//! progress pass, `EngineDelivery`, the close). This file only declares
//! and re-exports. Tests: `sim.rs` (an in-memory network of engines) and
//! `tests/`.
//!
//! Protocols (docs/protocol.md):
//! * **eager** (≤ `EAGER_MAX`, and every inject): one EAGER record carries the
//!   data; the receiver copies it straight from the ring into the matched
//!   buffer (one copy each way), or into the unexpected queue within the
//!   endpoint's budget and the sending peer's fair share of it — beyond
//!   either the ring is left full (backpressure) and the sender's posts
//!   return -FI_EAGAIN.
//! * **rendezvous** (larger): an RTS record names the sender's buffer; the
//!   receiver, once matched, copies it with `process_vm_readv` (single copy)
//!   and ACKs; without CMA it answers CTS and the sender streams DATA records
//!   through the ring (pipelined copy-through-segment). The send completes on
//!   the ACK.
//! * **delivery complete** on eager sends: the record asks for an ACK, sent
//!   once the data is in the application's buffer.
//!
//! Completion levels: inject-complete and transmit-complete are reached when
//! the eager record is in the receiver's ring (the target's memory);
//! delivery-complete waits for the ACK. Every posted operation yields exactly
//! one completion (success or error), except `fi_inject*` (none) and
//! selective-completion successes without FI_COMPLETION.
//!
//! Locking: one mutex per endpoint around all of its state; completions are
//! pushed to CQs (their own locks) while it is held — the order is always
//! endpoint → CQ, never the reverse (CQ reads progress before locking).

mod atomic;
pub(crate) mod buffered;
mod completion;
mod connected;
mod contexts;
pub(crate) mod directed;
pub(crate) mod lanes;
pub(crate) mod matching;
mod peers;
mod progress;
mod recv;
mod rendezvous;
mod rendezvous_pull;
mod rma;
mod rma_target;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use rendezvous::parse_rts;
mod send;
pub(crate) mod srx;
mod stall;
mod state;
mod types;

pub(crate) use self::state::{Binds, EpConfig, FrozenBinds, Inner, RecvArgs, SendArgs};
pub(crate) use self::types::{AtomicArgs, RmaArgs, RmaIov, RmaIovList, RmaKind, RMA_IOV_MAX};

#[cfg(test)]
use self::state::*;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;
