//! The shared-memory transport (docs/shm.md): one [`ShmPort`] per endpoint.
//!
//! * Inbound: the endpoint's own [`segment::Segment`]; every peer that sends
//!   to it claims a slot and produces records into that slot's SPSC ring;
//!   [`ShmPort::poll`] consumes them in per-peer FIFO order. A pass polls
//!   only the rings that carried records lately and those their senders
//!   signalled on the segment's ready list (`ready.rs`): an idle peer costs
//!   a pass nothing.
//! * Outbound: for each destination, its segment mapped, a slot claimed in
//!   it, and our producer tail.
//! * Waking: a sleeping owner publishes `sleepers > 0` in its header; a
//!   sender that sees it after publishing sends one datagram to the owner's
//!   doorbell (a unix socket file the owner's progress engine watches).
//!   The busy path makes no system call and, with membarrier (segment
//!   version 4, sync.rs), no full barrier: the owner's side of the
//!   handshake is a membarrier when it goes to sleep.
//! * Large messages: the receiver copies straight from the sender's buffer
//!   with `process_vm_readv` (CMA) when allowed; otherwise the sender streams
//!   the message through its ring in DATA records (pipelined copy-through).
//! * Failure: records are validated before use (`proto::WireHdr::check`); a
//!   corrupt ring or dead peer (pid + start time) costs only that peer; the
//!   slots of senders that died without closing are reclaimed.
//! * Identity: a sender announces its claim to the owner's doorbell, whose
//!   kernel credentials give the pid CMA reads from; an unverified sender
//!   reports pid 0 and its large messages are streamed (docs/security.md).
//!
//! Files, each one concern (docs/architecture.md "The shared-memory transport"):
//! `port` (the [`ShmPort`] state, its creation and close), `as_port` (it as a
//! transport `Port`), `pass` (a progress pass: consuming rings, eviction,
//! sweeps, discovery), `inbound` (one sender's ring as the endpoint reads
//! it), `hello` (senders' announcements to the doorbell), `send` (records
//! to a peer, its backlog and budget), `peers` (the peers we send to,
//! first contact, revisits), `peer` (one of them: our ring in its segment),
//! `outbound` (claiming cells, writing records), `doorbell` (datagrams to
//! an owner), `tombs` (departed peers), `cma` (cross-memory attach),
//! `copy` (small fixed-size copies), `rare` (a pass's rare conditions), `logs`
//! (rate-limited set-up and teardown debug lines);
//! below them `segment`, `ring`, `ready` and `sync`.

pub(crate) mod ready;
pub(crate) mod ring;
pub(crate) mod segment;
pub(crate) mod sync;

mod as_port;
mod cma;
mod copy;
mod doorbell;
mod hello;
mod inbound;
mod logs;
mod outbound;
mod pass;
mod peer;
mod peers;
mod port;
mod rare;
mod send;
mod tombs;

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use inbound::consume_image;
pub(crate) use outbound::EAGER_MAX;
pub(crate) use port::ShmPort;

#[cfg(test)]
mod garbage_tests;
#[cfg(test)]
mod tests;
