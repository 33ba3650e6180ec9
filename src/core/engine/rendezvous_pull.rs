//! The receiving end of a rendezvous once matched (`engine/rendezvous.rs`
//! has the protocol): the pulls, by CMA (one copy, batched when the
//! transport can, a large one split between the two sides) or, when the
//! transport cannot or the pull fails, a CTS that asks the sender to stream.

use super::completion::{Received, RxFailure};
use super::rendezvous::remote_from;
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::error::Error;
use crate::transport::proto::SPLIT_IOV_MAX;
use crate::transport::proto::{flag, op, WireHdr, IOV_ENTRY};
use crate::transport::{Payload, Port, PullJob, PEER_FAILED};

impl State {
    /// Moves matched rendezvous messages into place: CMA when the transport
    /// can, else asks the sender to stream (CTS).
    pub(super) fn run_pulls(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let mut pulls = std::mem::take(&mut self.pulls);
        let mut lone = lone_pulls(&pulls);
        let tails = self.pushed_tails(port, &pulls);
        if !tails.is_empty() {
            // First the sender's part (its CTS|SPLITs out before our
            // copies start, so both copy at once), then ours.
            let (all, all_lone) = (std::mem::take(&mut pulls), std::mem::take(&mut lone));
            for ((p, l), tail) in all
                .into_iter()
                .zip(all_lone)
                .zip(tails.iter().copied().chain(std::iter::repeat(false)))
            {
                let back = if tail {
                    let take = (p.hdr.len as usize).min(p.dst.total());
                    self.start_split(port, p, take, 0)
                } else {
                    Some(p)
                };
                if let Some(p) = back {
                    pulls.push(p);
                    lone.push(l);
                }
            }
        }
        let batched = self.pull_batches(port, &pulls);
        for (i, mut p) in pulls.into_iter().enumerate() {
            let len = p.hdr.len as usize;
            let take = len.min(p.dst.total());
            let buf = p.dst.addr_at(0);
            let lone_one = lone.get(i).copied().unwrap_or(false);
            // A lone message within `stream_lone_max` (our rings are large:
            // the sender's copies into them are cheap) streams: CTS below.
            let stream = lone_one && p.range.is_none() && take <= self.cfg.stream_lone_max;
            if !stream {
                if let Some(at) = self.split_point(&p, take, lone_one) {
                    match self.start_split(port, p, take, at) {
                        None => continue,
                        Some(back) => p = back,
                    }
                }
            }
            if !stream && self.can_pull(&p) {
                let pulled = if batched.get(i).copied().unwrap_or(false) {
                    Ok(take)
                } else if let Some((lo, hi)) = p.range {
                    let remote = remote_from(&p.rts.remote, lo as u64);
                    port.copier()
                        .and_then(|c| c.pull(p.src_pid, &remote, &p.dst.sub(lo, hi - lo), hi - lo))
                        .map(|_| take)
                } else {
                    port.copier()
                        .and_then(|c| c.pull(p.src_pid, &p.rts.remote, &p.dst, take))
                };
                match pulled {
                    Ok(_) => {
                        self.ack(p.src, p.hdr.msg_id, None, take);
                        crate::base::log::log_debug_limited!(
                            FI_LOG_EP_DATA,
                            "rendezvous from {:?}: msg {}, {take} bytes pulled (CMA), done",
                            p.src,
                            p.hdr.msg_id
                        );
                        self.complete_rx(
                            b,
                            &p.recv,
                            Received {
                                src: Some(p.src),
                                hdr: &p.hdr,
                                buf,
                                len: take,
                                olen: len - take,
                                extra: p.extra_flags,
                            },
                        );
                        continue;
                    }
                    Err(e) if e == Error::OPNOTSUPP => {
                        self.no_cma.insert(p.src);
                    }
                    Err(e) => {
                        self.ack(p.src, p.hdr.msg_id, Some(e), 0);
                        let err = if e == Error::CONNRESET { PEER_FAILED } else { e };
                        self.complete_rx_err(b, &p.recv, RxFailure::of(err, p.src, &p.hdr, p.extra_flags));
                        continue;
                    }
                }
            }
            let msg_id = p.hdr.msg_id;
            let src = p.src;
            crate::base::log::log_debug_limited!(
                FI_LOG_EP_DATA,
                "rendezvous from {src:?}: msg {msg_id}, {take} bytes, CTS sent (the sender streams it)"
            );
            let handle = self.rx.insert(RxStream::of(p, buf, take, None));
            let mut cts = WireHdr::new(op::CTS);
            cts.msg_id = msg_id;
            cts.aux = handle;
            self.outbox.push((src, cts));
        }
    }

    /// Where a matched message is split (the receiver pulls bytes below,
    /// the sender pushes the rest), or `None`: not CMA, below
    /// `split_min` (below `split_lone_min` for a `lone` pull: its sender's
    /// only one in this pass, which no batch would take), or the missing
    /// part of a split already.
    pub(super) fn split_point(&self, p: &PendingPull, take: usize, lone: bool) -> Option<usize> {
        let (min, lone_min) = (self.cfg.split_min, self.cfg.split_lone_min);
        let big = take >= min || (lone && lone_min != 0 && take >= lone_min);
        if min == 0 || !big || take < 2 * SPLIT_ALIGN || p.range.is_some() || !self.can_pull(p) {
            return None;
        }
        Some(take / 2 / SPLIT_ALIGN * SPLIT_ALIGN)
    }

    /// Asks the sender to push bytes `at .. take` (`CTS|SPLIT` with the
    /// receive buffer's table for them), then pulls bytes `0 .. at`: both
    /// processes copy at once. The receive waits in `rx` for `PUSHED`.
    /// `Some(p)`: not split (the part's buffer has more than
    /// `SPLIT_IOV_MAX` segments, or no room for the CTS): pull it whole.
    pub(super) fn start_split(
        &mut self,
        port: &mut dyn Port,
        p: PendingPull,
        take: usize,
        at: usize,
    ) -> Option<PendingPull> {
        let part = p.dst.sub(at, take - at);
        let segs = part.segments();
        if segs.len() > SPLIT_IOV_MAX {
            return Some(p);
        }
        let mut table = Vec::with_capacity(segs.len() * IOV_ENTRY);
        for &(a, l) in segs {
            table.extend_from_slice(&(a as u64).to_le_bytes());
            table.extend_from_slice(&(l as u64).to_le_bytes());
        }
        let (src, msg_id) = (p.src, p.hdr.msg_id);
        let buf = p.dst.addr_at(0);
        let handle = self.rx.insert(RxStream::of(p, buf, take, Some(at)));
        let mut cts = WireHdr::new(op::CTS);
        cts.flags = flag::SPLIT;
        cts.msg_id = msg_id;
        cts.aux = handle;
        cts.offset = at as u64;
        cts.len = take as u64;
        cts.reserved = segs.len() as u64;
        if port.send(&src, &cts, Payload::Bytes(&table), true).is_err() {
            let mut s = self.rx.remove(handle).expect("split just inserted");
            let sp = s.split.take().expect("split just inserted");
            return Some(s.into_pull(sp.rts, None));
        }
        if at > 0 {
            let s = self.rx.get_mut(handle).expect("split just inserted");
            if let Some(sp) = s.split.as_mut() {
                sp.first = port
                    .copier()
                    .and_then(|c| c.pull(s.src_pid, &sp.rts.remote, &s.dst, at))
                    .map(|_| ());
            }
        }
        None
    }

    /// The pulls the sender pushes whole (`true` at their index; empty:
    /// none), a batch-level split (docs/shm.md, Large messages): of each
    /// run of consecutive pulls from one sender that `pull_batches` may
    /// join, at least two and `split_min` bytes together, the last
    /// messages, up to half of the run's bytes, are asked of the sender
    /// (`CTS|SPLIT` from offset 0 each) while we pull the others in
    /// batches. Whole messages, so no message costs two copies' fixed
    /// costs, and the last ones, so the run still completes in order (its
    /// pulled head now, the pushed tail as the `PUSHED` answers come, which
    /// the sender makes in message order). The tail stops short at a
    /// message whose buffer has more than `SPLIT_IOV_MAX` segments and
    /// where the sender's ring has no room for the CTS records.
    pub(super) fn pushed_tails(&self, port: &mut dyn Port, pulls: &[PendingPull]) -> Vec<bool> {
        let mut tails = Vec::new();
        let min = self.cfg.split_min;
        if min == 0 || pulls.len() < 2 {
            return tails;
        }
        let take = |p: &PendingPull| (p.hdr.len as usize).min(p.dst.total());
        let mut i = 0;
        while i < pulls.len() {
            let first = &pulls[i];
            let mut j = i;
            let mut bytes = 0usize;
            while j < pulls.len()
                && self.batchable(&pulls[j])
                && pulls[j].src == first.src
                && pulls[j].src_pid == first.src_pid
            {
                bytes += take(&pulls[j]);
                j += 1;
            }
            if j - i >= 2 && bytes >= min {
                let mut room = port.room(&first.src);
                let (mut k, mut pushed) = (j, 0usize);
                // The run's first message stays ours whatever the sizes.
                while k > i + 1 {
                    let p = &pulls[k - 1];
                    let t = take(p);
                    let segs = p.dst.sub(0, t).segments().len();
                    let need = 2 * crate::transport::proto::HDR_LEN + segs * IOV_ENTRY;
                    if 2 * (pushed + t) > bytes || segs > SPLIT_IOV_MAX || need > room {
                        break;
                    }
                    (pushed, room, k) = (pushed + t, room - need, k - 1);
                }
                if k < j {
                    tails.resize(j, false);
                    tails[k..j].fill(true);
                }
            }
            i = j.max(i + 1);
        }
        tails
    }

    /// Whether `pull_batches` may join a pending pull to others: pulled
    /// (CMA), whole, not empty, not split on its own.
    pub(super) fn batchable(&self, p: &PendingPull) -> bool {
        let t = (p.hdr.len as usize).min(p.dst.total());
        self.can_pull(p) && t != 0 && p.range.is_none() && self.split_point(p, t, false).is_none()
    }

    /// Whether a matched rendezvous message is copied with CMA (else the
    /// sender streams it).
    #[inline]
    pub(super) fn can_pull(&self, p: &PendingPull) -> bool {
        self.cfg.cma && p.rts.cma_ok && !self.no_cma.contains(&p.src) && p.src_pid > 0
    }

    /// Copies runs of pending pulls from one sender with one
    /// `SingleCopy::pull_batch` each (a window of 64 KiB sends: one
    /// `process_vm_readv` per `PULL_BATCH_BYTES` instead of one per
    /// message). `true` at the index of each pull that is done; a batch
    /// that failed in any way leaves its pulls to be made one by one.
    pub(super) fn pull_batches(&self, port: &dyn Port, pulls: &[PendingPull]) -> Vec<bool> {
        let mut done = Vec::new();
        if pulls.len() < 2 || self.cfg.pull_batch_bytes == 0 {
            return done;
        }
        let limit = self.cfg.pull_batch_bytes;
        let mut i = 0;
        while i < pulls.len() {
            let first = &pulls[i];
            let take = |p: &PendingPull| (p.hdr.len as usize).min(p.dst.total());
            let mut j = i;
            let mut bytes = 0usize;
            while j < pulls.len() && j - i < PULL_BATCH_MAX {
                let p = &pulls[j];
                let t = take(p);
                if !self.batchable(p) || p.src != first.src || p.src_pid != first.src_pid {
                    break;
                }
                if j > i && bytes + t > limit {
                    break;
                }
                bytes += t;
                j += 1;
            }
            if j - i >= 2 {
                let jobs: Vec<PullJob<'_>> = pulls[i..j]
                    .iter()
                    .map(|p| PullJob {
                        remote: &p.rts.remote,
                        dst: &p.dst,
                        len: take(p),
                    })
                    .collect();
                if port.copier().and_then(|c| c.pull_batch(first.src_pid, &jobs)).is_ok() {
                    done.resize(j, false);
                    done[i..j].fill(true);
                }
                i = j;
            } else {
                i = j.max(i + 1);
            }
        }
        done
    }
}
