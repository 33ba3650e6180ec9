//! Buffered receives (fi_msg(3) "Buffered Receives"; the `FI_BUFFERED_RECV`
//! mode bit): "the networking layer allocates and manages the data buffers
//! used to receive network data transfers". A message no posted receive
//! takes goes into the endpoint's bounded pool and is reported with a
//! completion whose `op_context` is a `struct fi_recv_context` held by the
//! provider, `buf` the start of the data and `len` the message size. The
//! application then claims it (`FI_CLAIM`: copied into its buffers, a normal
//! receive completion) or discards it (`FI_DISCARD`).
//!
//! This module is the bookkeeping only — pool, options, the table of held
//! messages and the order of their reports — and does no I/O. The endpoint
//! core (`buffered/mod.rs`) moves bytes and produces
//! completions.
//!
//! # Pool
//! A provider buffer is one allocation of 64-byte lines: line 0 is the
//! message's `fi_recv_context` (the completion's `op_context`), the data
//! starts at line 1 (64-byte aligned, so an application may read structs in
//! place). Buffers up to 64 KiB come in power-of-two classes and are reused
//! (no allocation per message in steady state); larger ones are exact. Every
//! held buffer is charged its size plus [`ENTRY_OVERHEAD`] against the pool
//! budget (`FI_RUSTFAB_BUFFERED_POOL`); the free lists live inside the same
//! budget. An admission that does not fit is refused and the transport
//! stalls that sender (backpressure, never a drop) — except that an empty
//! pool always takes one message, so any message can make progress. Each
//! sender gets a fair share of the pool: one already holding messages may
//! hold at most `pool / (2 + other senders holding some)`, so that one
//! flooding sender cannot stall the others (the ordering reserve below is
//! outside the shares).
//!
//! # Large messages
//! A message above `FI_OPT_BUFFERED_LIMIT` is reported with `FI_MORE` once
//! its first `FI_OPT_BUFFERED_MIN` bytes are here; the rest stays at the
//! sender (rendezvous) until it is claimed (or discarded: the sender is
//! acknowledged without a copy). fi_endpoint(3) describes the minimum as what
//! "a provider [sends] along with" its rendezvous request, and so it is: the
//! endpoint advertises it through its transport (`Hints::set_rts_prefix`: a
//! word in the shm segment header, a field of the TCP HELLO) and every
//! rustfab sender pushes that many bytes in a DATA record right behind each
//! RTS to it. Both options are therefore at most the eager limit (one
//! record).
//!
//! # Order
//! Reports keep each sender's order (`FI_ORDER_SAS`): a message whose prefix
//! is still arriving holds back the later messages of the same sender, and
//! only of that sender. With the push, the prefix is the sender's very next
//! record. Only an RTS sent before the sender knew our wish (TCP: queued
//! before the HELLO exchange ended) has its prefix fetched by a request —
//! CMA on shm, a ranged CTS otherwise — whose answer queues behind what the
//! sender wrote meanwhile; the application cannot free messages it has not
//! been shown, so the messages held back behind such a fetch may use an
//! *ordering reserve* of one more pool's worth of bytes. Beyond it that
//! sender stalls too.

use crate::abi::{fi_recv_context, fid_ep};
use crate::base::collections::{FastMap, Slab};
use crate::base::error::{Error, Result};
use crate::core::engine::matching::{IovList, RtsInfo};
use crate::transport::addr::Addr;
use crate::transport::proto::WireHdr;
use std::collections::VecDeque;
use std::time::Instant;

/// Default pool size per endpoint (`FI_RUSTFAB_BUFFERED_POOL`).
pub(crate) const DEFAULT_POOL: usize = 8 << 20;
/// Smallest pool accepted (smaller settings are raised to it): room for a
/// few of the largest eager messages.
pub(crate) const MIN_POOL: usize = 256 << 10;
/// Default `FI_OPT_BUFFERED_MIN`: enough for an application header.
pub(crate) const DEFAULT_MIN: usize = crate::transport::DEFAULT_RTS_PREFIX;
/// Bookkeeping charged per held message, so that a flood of empty
/// messages is bounded too.
pub(crate) const ENTRY_OVERHEAD: usize = 128;
/// Placement handles of buffered messages have this bit set (the endpoint
/// core's other placements use bit 31 and small slab handles).
pub(crate) const BUF_HANDLE: u32 = 1 << 30;
/// `aux` of a ranged CTS (and of the DATA records answering it) that
/// fetches a buffered message's prefix: this bit plus the message's handle.
pub(crate) const PREFIX_AUX: u32 = 1 << 30;

const LINE: usize = 64;
/// Cached size classes: class 0 holds no data, class k ≥ 1 holds 2^(k-1)
/// lines (64 B .. 64 KiB for k = 1 ..= 11).
const CLASSES: usize = 12;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; LINE]);

/// One provider buffer: `fi_recv_context` in line 0, data from line 1.
/// The allocation never moves or grows, so its addresses stay valid while
/// the buffer is held (handed to the application, or being filled).
pub(crate) struct PoolBuf {
    lines: Vec<Line>,
    /// Address of line 0 (taken once, without creating references to the
    /// contents, which the application and the transports write through
    /// raw pointers).
    base: usize,
    class: Option<usize>,
}

impl PoolBuf {
    fn alloc(lines: usize, class: Option<usize>) -> Option<PoolBuf> {
        let mut v: Vec<Line> = Vec::new();
        v.try_reserve_exact(lines).ok()?;
        v.resize(lines, Line([0; LINE]));
        let base = v.as_mut_ptr() as usize;
        Some(PoolBuf { lines: v, base, class })
    }

    fn bytes(&self) -> usize {
        self.lines.len() * LINE
    }

    /// The `fi_recv_context` address (the completion's `op_context`).
    pub(crate) fn ctx_addr(&self) -> usize {
        self.base
    }

    /// Where the message data starts (the completion's `buf`).
    pub(crate) fn data_addr(&self) -> usize {
        self.base + LINE
    }

    /// Data bytes the buffer can hold.
    pub(crate) fn data_cap(&self) -> usize {
        (self.lines.len() - 1) * LINE
    }

    /// Data bytes `off .. off + n` (clipped) as a placement target.
    pub(crate) fn data_iov(&self, off: usize, n: usize) -> IovList {
        let off = off.min(self.data_cap());
        IovList::single(self.data_addr() + off, n.min(self.data_cap() - off))
    }

    /// Fills in the `fi_recv_context` before the message is reported:
    /// "The 'ep' field will point to the receiving endpoint or Rx context,
    /// and 'context' will be NULL."
    pub(crate) fn write_recv_context(&self, ep: usize) {
        let rc = fi_recv_context {
            ep: ep as *mut fid_ep,
            context: core::ptr::null_mut(),
        };
        // SAFETY: line 0 of our own allocation: 64 bytes, 64-aligned, large
        // enough for the 16-byte struct; nobody else uses it before the
        // report that hands it out.
        unsafe { core::ptr::write_volatile(self.base as *mut fi_recv_context, rc) };
    }

    /// The `context` value the application left in the `fi_recv_context`
    /// ("Applications may modify this field prior to claiming the message").
    pub(crate) fn recv_context_value(&self) -> usize {
        // SAFETY: line 0 of our own allocation (see `write_recv_context`);
        // the application wrote it before the claim call that reads it.
        let rc = unsafe { core::ptr::read_volatile(self.base as *const fi_recv_context) };
        rc.context as usize
    }

    /// Copies data bytes `0 .. n` into application memory `dst` (logical
    /// offset 0); returns bytes copied.
    ///
    /// # Safety
    /// `dst` must describe writable application memory (the claim's iov).
    pub(crate) unsafe fn copy_out(&self, n: usize, dst: &IovList) -> usize {
        let n = n.min(self.data_cap());
        let mut done = 0;
        dst.for_range(0, n, |p, k, off| {
            // SAFETY: the source range lies inside our buffer's data lines
            // (`off + k <= n <= data_cap`); `p..p+k` is application memory
            // per the contract; the two never overlap (ours vs. theirs).
            unsafe { core::ptr::copy_nonoverlapping((self.data_addr() + off) as *const u8, p as *mut u8, k) };
            done += k;
        });
        done
    }
}

/// Size class and line count of a buffer for `n` data bytes.
fn shape(n: usize) -> (Option<usize>, usize) {
    let data = n.div_ceil(LINE);
    if data == 0 {
        return (Some(0), 1);
    }
    let p = data.checked_next_power_of_two().unwrap_or(usize::MAX);
    let k = p.trailing_zeros() as usize + 1;
    if k < CLASSES {
        (Some(k), 1 + p)
    } else {
        (None, data.saturating_add(1))
    }
}

/// The bounded pool of provider buffers.
pub(crate) struct BufPool {
    budget: usize,
    /// Bytes charged for buffers handed out (data lines + overhead).
    held: usize,
    /// Bytes in the free lists.
    cached: usize,
    count: usize,
    free: Vec<Vec<PoolBuf>>,
}

impl BufPool {
    pub(crate) fn new(budget: usize) -> BufPool {
        BufPool {
            budget,
            held: 0,
            cached: 0,
            count: 0,
            free: (0..CLASSES).map(|_| Vec::new()).collect(),
        }
    }

    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    #[cfg(test)]
    pub(crate) fn cached(&self) -> usize {
        self.cached
    }

    #[cfg(test)]
    /// Buffers handed out.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// What a buffer for `n` data bytes is charged (data lines + overhead).
    pub(crate) fn cost(n: usize) -> Option<usize> {
        shape(n).1.checked_mul(LINE)?.checked_add(ENTRY_OVERHEAD)
    }

    /// A buffer for `n` data bytes, if the budget (plus `reserve`) allows
    /// it; an empty pool always gives one. None: over budget (or out of
    /// memory) — the caller stalls the sender.
    pub(crate) fn alloc(&mut self, n: usize, reserve: usize) -> Option<PoolBuf> {
        let (class, lines) = shape(n);
        let cost = lines.checked_mul(LINE)?.checked_add(ENTRY_OVERHEAD)?;
        let limit = self.budget.saturating_add(reserve);
        if self.held > 0 && self.held.checked_add(cost)? > limit {
            return None;
        }
        let b = match class.and_then(|k| self.free[k].pop()) {
            Some(b) => {
                self.cached -= b.bytes();
                b
            }
            None => {
                // Make room in the budget: free lists go first.
                self.trim(limit.saturating_sub(self.held + cost));
                PoolBuf::alloc(lines, class)?
            }
        };
        self.held += cost;
        self.count += 1;
        Some(b)
    }

    /// Gives a buffer back (kept for reuse while the budget allows).
    pub(crate) fn release(&mut self, b: PoolBuf) {
        self.held = self.held.saturating_sub(b.bytes() + ENTRY_OVERHEAD);
        self.count = self.count.saturating_sub(1);
        if let Some(k) = b.class {
            if self.held + self.cached + b.bytes() <= self.budget {
                self.cached += b.bytes();
                self.free[k].push(b);
            }
        }
    }

    /// Frees cached buffers (largest first) until at most `max` bytes stay.
    fn trim(&mut self, max: usize) {
        for k in (0..CLASSES).rev() {
            while self.cached > max {
                let Some(b) = self.free[k].pop() else { break };
                self.cached -= b.bytes();
            }
        }
    }
}

/// `FI_OPT_BUFFERED_LIMIT` / `FI_OPT_BUFFERED_MIN` of an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BufOpts {
    /// Messages up to this size are reported whole (no `FI_MORE`).
    pub(crate) limit: usize,
    /// A message reported with `FI_MORE` has at least this many bytes in
    /// `buf` (all of it when it is shorter).
    pub(crate) min: usize,
    /// The largest value either option takes (what one pool can hold).
    pub(crate) max: usize,
}

impl BufOpts {
    /// Defaults: the transport's eager limit (messages that arrive whole
    /// anyway) and [`DEFAULT_MIN`]. Both options are at most the eager
    /// limit: a message up to the limit arrives whole in one record, and a
    /// larger one's prefix in the one DATA record its sender pushes behind
    /// the RTS — nothing a report waits for has to be asked for (an answer
    /// would queue behind the sender's later messages).
    pub(crate) fn new(eager_limit: usize, pool: usize) -> BufOpts {
        let max = eager_limit.min(pool.saturating_sub(LINE + ENTRY_OVERHEAD)).max(1);
        BufOpts {
            limit: max,
            min: DEFAULT_MIN.min(max),
            max,
        }
    }

    /// fi_endpoint(3): "If the provider cannot support the requested
    /// threshold, it will fail the fi_setopt() call with FI_EMSGSIZE.
    /// Calling fi_setopt() with the threshold set to SIZE_MAX will set the
    /// threshold to the maximum supported by the provider."
    fn checked(&self, v: usize) -> Result<usize> {
        if v == usize::MAX {
            Ok(self.max)
        } else if v > self.max {
            Err(Error::MSGSIZE)
        } else {
            Ok(v)
        }
    }

    pub(crate) fn set_limit(&mut self, v: usize) -> Result<()> {
        self.limit = self.checked(v)?;
        Ok(())
    }

    pub(crate) fn set_min(&mut self, v: usize) -> Result<()> {
        self.min = self.checked(v)?;
        Ok(())
    }

    /// Bytes of a rendezvous message of `len` bytes fetched before it is
    /// reported: all of it up to the limit, else the minimum.
    pub(crate) fn want(&self, len: usize) -> usize {
        if len <= self.limit {
            len
        } else {
            self.min.min(len)
        }
    }

    #[cfg(test)]
    /// Whether a message of `len` bytes is reported with `FI_MORE`.
    pub(crate) fn more(&self, len: usize) -> bool {
        len > self.limit
    }
}

/// Where a held message is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Its bytes are still arriving (eager payload or prefix fetch).
    Filling,
    /// Complete; waits for earlier messages of its sender to be reported.
    Ready,
    /// Reported: the application may claim or discard it.
    Reported,
}

/// A prefix being streamed to us (ranged CTS, DATA records).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PrefixStream {
    /// Prefix bytes placed so far.
    pub(crate) got: usize,
    /// Bytes of the DATA record being placed (0: none in flight).
    pub(crate) chunk: usize,
    /// Last liveness check of the sender.
    pub(crate) last_check: Instant,
    /// Pushed by the sender behind its RTS (DATA with `flag::PUSH`), not
    /// requested by a ranged CTS (DATA with `PREFIX_AUX`).
    pub(crate) pushed: bool,
}

/// A message in the pool.
pub(crate) struct BufMsg {
    pub(crate) buf: PoolBuf,
    pub(crate) src: Addr,
    /// Sender process (shm: CMA pulls, liveness); 0 when not applicable.
    pub(crate) src_pid: i32,
    /// The record that announced it (MSG or RTS): flags, len, tag, data,
    /// msg_id.
    pub(crate) hdr: WireHdr,
    /// Bytes held before it is reported (from offset 0).
    pub(crate) want: usize,
    pub(crate) stage: Stage,
    /// The rest is still at the sender: its RTS is not acknowledged yet.
    pub(crate) remote: Option<RtsInfo>,
    /// The sender failed: what is not here can no longer be fetched.
    pub(crate) sender_gone: bool,
    /// A transport is writing into `buf` (it must not be freed now).
    pub(crate) placing: bool,
    /// Dropped while `placing`: freed when the placement ends.
    pub(crate) doomed: bool,
    pub(crate) stream: Option<PrefixStream>,
}

impl BufMsg {
    pub(crate) fn len(&self) -> usize {
        self.hdr.len as usize
    }
}

/// The buffered-receive state of one endpoint.
pub(crate) struct Buffered {
    pub(crate) opts: BufOpts,
    /// The endpoint's `fid_ep*` (`fi_recv_context.ep`).
    pub(crate) ep_fid: usize,
    pool: BufPool,
    msgs: Slab<BufMsg>,
    /// Reported messages by `fi_recv_context` address: the only way an
    /// application pointer leads to a message (never dereferenced).
    by_ctx: FastMap<usize, u32>,
    /// Admitted, not yet reported, in arrival order.
    unreported: VecDeque<u32>,
    /// Prefix fetches to start after the current poll pass.
    pub(crate) pulls: Vec<u32>,
    /// Pool bytes charged per sender (only senders holding messages).
    per_peer: FastMap<Addr, usize>,
}

impl Buffered {
    pub(crate) fn new(opts: BufOpts, pool: usize) -> Buffered {
        Buffered {
            opts,
            ep_fid: 0,
            pool: BufPool::new(pool),
            msgs: Slab::default(),
            by_ctx: FastMap::default(),
            unreported: VecDeque::new(),
            pulls: Vec::new(),
            per_peer: FastMap::default(),
        }
    }

    #[cfg(test)]
    pub(crate) fn pool(&self) -> &BufPool {
        &self.pool
    }

    #[cfg(test)]
    /// Messages held (any stage).
    pub(crate) fn count(&self) -> usize {
        self.msgs.len()
    }

    /// Admits a message from `src`, holding `want` bytes before its report.
    /// None: no room (stall the sender).
    pub(crate) fn admit(
        &mut self,
        src: Addr,
        src_pid: i32,
        hdr: WireHdr,
        want: usize,
        remote: Option<RtsInfo>,
    ) -> Option<u32> {
        let reserve = if self.holds_back(&src) { self.pool.budget() } else { 0 };
        let mine = self.per_peer.get(&src).copied().unwrap_or(0);
        if reserve == 0 && mine > 0 {
            // Beyond its fair share, a sender waits (the others get in).
            let others = self.per_peer.len() - 1;
            if mine.checked_add(BufPool::cost(want)?)? > self.pool.budget() / (others + 2) {
                return None;
            }
        }
        let buf = self.pool.alloc(want, reserve)?;
        *self.per_peer.entry(src).or_insert(0) += buf.bytes() + ENTRY_OVERHEAD;
        let h = self.msgs.insert(BufMsg {
            buf,
            src,
            src_pid,
            hdr,
            want,
            stage: Stage::Filling,
            remote,
            sender_gone: false,
            placing: false,
            doomed: false,
            stream: None,
        });
        self.unreported.push_back(h);
        Some(h)
    }

    /// Whether a message of `src` still filling holds back its later ones.
    pub(crate) fn holds_back(&self, src: &Addr) -> bool {
        self.unreported.iter().any(|&h| {
            self.msgs
                .get(h)
                .is_some_and(|m| m.src == *src && m.stage == Stage::Filling)
        })
    }

    pub(crate) fn get(&self, h: u32) -> Option<&BufMsg> {
        self.msgs.get(h)
    }

    pub(crate) fn get_mut(&mut self, h: u32) -> Option<&mut BufMsg> {
        self.msgs.get_mut(h)
    }

    /// The next message that may be reported now (each sender's messages in
    /// arrival order), marked reported and claimable from now on.
    pub(crate) fn next_report(&mut self) -> Option<u32> {
        let mut blocked: Vec<Addr> = Vec::new();
        let mut found = None;
        for (i, &h) in self.unreported.iter().enumerate() {
            let Some(m) = self.msgs.get(h) else { continue };
            if blocked.contains(&m.src) {
                continue;
            }
            if m.stage == Stage::Ready {
                found = Some((i, h));
                break;
            }
            blocked.push(m.src);
        }
        let (i, h) = found?;
        self.unreported.remove(i);
        let m = self.msgs.get_mut(h)?;
        m.stage = Stage::Reported;
        self.by_ctx.insert(m.buf.ctx_addr(), h);
        Some(h)
    }

    /// The reported message whose `fi_recv_context` is at `ctx`.
    pub(crate) fn lookup(&self, ctx: usize) -> Option<u32> {
        self.by_ctx.get(&ctx).copied()
    }

    /// Takes a message out of the table (its buffer goes back with
    /// [`Buffered::release`]).
    pub(crate) fn remove(&mut self, h: u32) -> Option<BufMsg> {
        let m = self.msgs.remove(h)?;
        if let Some(c) = self.per_peer.get_mut(&m.src) {
            *c = c.saturating_sub(m.buf.bytes() + ENTRY_OVERHEAD);
            if *c == 0 {
                self.per_peer.remove(&m.src);
            }
        }
        if m.stage == Stage::Reported {
            self.by_ctx.remove(&m.buf.ctx_addr());
        } else if let Some(i) = self.unreported.iter().position(|&x| x == h) {
            self.unreported.remove(i);
        }
        self.pulls.retain(|&x| x != h);
        Some(m)
    }

    /// Drops a message that was never reported. A buffer a transport is
    /// still writing into is only marked (freed when the placement ends);
    /// None then.
    pub(crate) fn drop_unreported(&mut self, h: u32) -> Option<BufMsg> {
        let m = self.msgs.get_mut(h)?;
        if m.stage == Stage::Reported {
            return None;
        }
        if m.placing {
            m.doomed = true;
            if let Some(i) = self.unreported.iter().position(|&x| x == h) {
                self.unreported.remove(i);
            }
            return None;
        }
        self.remove(h)
    }

    pub(crate) fn release(&mut self, b: PoolBuf) {
        self.pool.release(b)
    }

    /// Handles of every message from `src`.
    pub(crate) fn held_from(&self, src: &Addr) -> Vec<u32> {
        self.msgs
            .handles()
            .into_iter()
            .filter(|&h| self.msgs.get(h).is_some_and(|m| m.src == *src))
            .collect()
    }

    /// Handles of every message (endpoint close, liveness sweeps).
    pub(crate) fn handles(&self) -> Vec<u32> {
        self.msgs.handles()
    }

    /// The message of `src` waiting for the prefix pushed behind its RTS.
    pub(crate) fn find_pushed(&self, src: &Addr, msg_id: u64) -> Option<u32> {
        self.unreported.iter().rev().copied().find(|&h| {
            self.msgs
                .get(h)
                .is_some_and(|m| m.src == *src && m.hdr.msg_id == msg_id && m.stream.as_ref().is_some_and(|s| s.pushed))
        })
    }

    /// Whether a prefix is being streamed to us (its sender is watched).
    pub(crate) fn streaming(&self) -> bool {
        self.unreported
            .iter()
            .any(|&h| self.msgs.get(h).is_some_and(|m| m.stream.is_some()))
    }
}

#[cfg(test)]
mod tests;
