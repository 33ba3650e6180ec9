//! A deterministic in-memory network for the engine's tests (the way
//! quinn-proto tests a connection pair): N endpoints in one process, each
//! with a [`SimPort`], records kept in per-pair FIFO queues. Nothing moves
//! until a test polls an endpoint; no threads, no sockets, no clock (the
//! engine's own liveness clock aside).
//!
//! Each port behaves as the real transports do where the engine can tell:
//! * `send` copies the payload into the peer's queue and returns
//!   `Sent::Done` ([`Writes::Ring`], shm), or queues it behind the sender's
//!   earlier records until the sender's next poll and returns `Sent::Queued`,
//!   reporting `Delivery::sent` then ([`Writes::Queue`], a TCP connection
//!   that cannot write at once). Either refuses with `Err(AGAIN)` beyond the
//!   pair's window; `room` is what one more record could carry.
//! * `send_ctl` never refuses for room: the record waits (shm backlog, TCP
//!   queue) and leaves in order on the sender's next poll.
//! * `poll` hands records to the engine in per-peer FIFO order, each header
//!   validated with `WireHdr::check` against the receiver's limits (a record
//!   the engine wrote that fails it panics the test; one the test forged
//!   breaks that link, as a transport cuts off a broken peer). A `Stall`
//!   leaves the record in place and stops that peer until the next poll.
//!   [`Payloads::Trickle`] makes a placed payload arrive on the next poll
//!   (TCP reading it as it comes), so a loss can abort it: `placed(Err)`.
//! * `pull` copies from the sender's buffers (CMA; the "remote" addresses are
//!   in this process) or answers `Err(OPNOTSUPP)` ([`Cma::Refused`]); a
//!   dead sender gives `Err(CONNRESET)`, as `process_vm_readv`'s ESRCH.
//!   `push` (an RMA read's target writing into the reader) likewise.
//! * Failures: [`Net::kill`] ends a process (noticed through `check_peer`
//!   and `sender_alive`, as shm notices); [`Net::reset`] breaks a
//!   connection (both ends get `PeerEvent::Failed` at once, as TCP does);
//!   [`Net::restart`] replaces a process by a new one at its address.
//! * `rts_prefix` reads what the peer set with `set_rts_prefix` (shm reads
//!   the peer's segment header).

use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use crate::transport::iov::{IovList, IOV_MAX};
use crate::transport::proto::{compact_len, op, Limits, WireHdr, HDR_LEN};
use crate::transport::{
    Bytes, Delivery, Disposition, Hints, Payload, PayloadIn, PeerEvent, Place, Port, Sent, SingleCopy, PEER_FAILED,
};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

/// How records leave a sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Writes {
    /// shm: in the receiver's ring when `send` returns (`Sent::Done`).
    Ring,
    /// TCP with a connection that cannot write now: queued until the
    /// sender's next poll (`Sent::Queued`, then `Delivery::sent`).
    Queue,
    /// TCP with room in the socket: written at once (`Sent::Done`, in the
    /// receiver's queue but not its ring: `queued_at_peer` is false) while
    /// nothing waits before it and the window allows; queued otherwise.
    Socket,
}

/// Whether the receiver may copy from the sender's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cma {
    /// `pull` copies (shm with cross-memory attach).
    Pull,
    /// `pull` answers `Err(OPNOTSUPP)`: the engine asks for streaming.
    Refused,
}

/// How a placed payload arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Payloads {
    /// In one go (`placed` right after `place`, as shm copies from its ring).
    Whole,
    /// On the receiver's next poll (TCP reading a payload as it arrives):
    /// a connection reset in between aborts it.
    Trickle,
}

/// What real transport a simulated port stands for.
#[derive(Clone, Copy, Debug)]
pub(super) struct SimOpts {
    pub(super) eager_limit: usize,
    /// Largest rendezvous DATA / RMA WRITE chunk sent and accepted
    /// (`Port::chunk_limit_for`, `Limits::max_chunk`).
    pub(super) chunk_limit: usize,
    /// Bytes one direction of a pair holds (shm ring; TCP socket buffers)
    /// before a sender's records wait.
    pub(super) window: usize,
    pub(super) writes: Writes,
    pub(super) cma: Cma,
    pub(super) payloads: Payloads,
    /// `Hints::push_whole`: rendezvous messages up to this size are pushed
    /// whole behind their RTS (shm with large rings); 0: never.
    pub(super) push_whole: usize,
}

impl SimOpts {
    /// Like shm: records in the ring at once, CMA pulls, 16 KiB eager.
    pub(super) fn shm() -> SimOpts {
        SimOpts {
            eager_limit: 16384,
            chunk_limit: 16384,
            window: 256 << 10,
            writes: Writes::Ring,
            cma: Cma::Pull,
            payloads: Payloads::Whole,
            push_whole: 0,
        }
    }

    /// Like TCP whose writes wait for the next pass: no CMA (src_pid 0),
    /// payloads read as they come, 64 KiB eager, chunks up to 1 MiB.
    pub(super) fn tcp() -> SimOpts {
        SimOpts {
            eager_limit: 65536,
            chunk_limit: 1 << 20,
            window: 1 << 20,
            writes: Writes::Queue,
            cma: Cma::Refused,
            payloads: Payloads::Trickle,
            push_whole: 0,
        }
    }
}

/// A record as it travels.
#[derive(Clone)]
struct Rec {
    hdr: WireHdr,
    payload: Vec<u8>,
    /// Written by the test, not by an engine (a hostile peer).
    forged: bool,
    /// Report `Delivery::sent(msg_id)` to the sender when it leaves.
    notify: bool,
}

impl Rec {
    /// Bytes the record occupies (shm: whole 64-byte cells; an eager
    /// record's compact header takes 16 to 40 bytes, not 64).
    fn cost(&self) -> usize {
        let head = if self.hdr.op == op::EAGER {
            compact_len(self.hdr.flags)
        } else {
            HDR_LEN
        };
        (head + self.payload.len()).div_ceil(64) * 64
    }
}

/// Records from one source to one receiver.
struct Link {
    src: Addr,
    recs: VecDeque<Rec>,
    bytes: usize,
    broken: bool,
}

/// A payload being placed (`Payloads::Trickle`).
struct Trickle {
    src: Addr,
    handle: u32,
    dst: IovList,
    take: usize,
    payload: Vec<u8>,
}

struct Node {
    addr: Addr,
    opts: SimOpts,
    pid: i32,
    /// The process exists (liveness checks see it).
    alive: bool,
    closed: bool,
    rts_prefix: usize,
    /// Inbound, by source in order of first contact.
    links: Vec<Link>,
    /// Records waiting to leave (TCP queue, shm control backlog), in order.
    out: VecDeque<(usize, Rec)>,
    /// Peers this node knows failed (sends to them fail).
    fenced: Vec<Addr>,
    events: Vec<PeerEvent>,
    /// `Delivery::sent` reports due at the next poll.
    reports: Vec<(u64, Result<()>)>,
    trickle: Option<Trickle>,
    /// Placements a reset aborted, reported `placed(Err)` at the next poll.
    aborted: Vec<u32>,
    pull_fault: Option<Error>,
    pulls: usize,
    /// `Port::room` calls.
    rooms: usize,
    /// Successful `pull_batch` calls (each job also counts in `pulls`).
    pull_batches: usize,
    /// Successful `push`es (CMA writes into a peer).
    pushes: usize,
    push_batches: usize,
    /// `Hints::watch_consumer` calls.
    watches: usize,
    more_calls: usize,
    sleepers: usize,
    /// Peers this node has sent to (BYE goes to them on close).
    contacted: Vec<usize>,
}

/// One record handed to a port, for tests of the wire format.
#[derive(Clone, Copy, Debug)]
pub(super) struct Logged {
    pub(super) from: Addr,
    pub(super) to: Addr,
    pub(super) hdr: WireHdr,
}

#[derive(Default)]
struct World {
    nodes: Vec<Node>,
    log: Vec<Logged>,
}

impl World {
    fn index(&self, a: &Addr) -> Option<usize> {
        self.nodes.iter().position(|n| n.addr == *a)
    }

    fn link_mut(&mut self, to: usize, src: Addr) -> &mut Link {
        let links = &mut self.nodes[to].links;
        let i = match links.iter().position(|l| l.src == src) {
            Some(i) => i,
            None => {
                links.push(Link {
                    src,
                    recs: VecDeque::new(),
                    bytes: 0,
                    broken: false,
                });
                links.len() - 1
            }
        };
        &mut links[i]
    }

    fn in_flight(&self, from: usize, to: usize) -> usize {
        let src = self.nodes[from].addr;
        self.nodes[to]
            .links
            .iter()
            .find(|l| l.src == src)
            .map_or(0, |l| l.bytes)
    }

    fn waiting(&self, from: usize, to: usize) -> usize {
        self.nodes[from]
            .out
            .iter()
            .filter(|(d, _)| *d == to)
            .map(|(_, r)| r.cost())
            .sum()
    }

    /// Puts a record into `to`'s queue from `from`.
    fn deliver(&mut self, from: usize, to: usize, rec: Rec) {
        let src = self.nodes[from].addr;
        if !self.nodes[from].contacted.contains(&to) {
            self.nodes[from].contacted.push(to);
        }
        if rec.notify {
            self.nodes[from].reports.push((rec.hdr.msg_id, Ok(())));
        }
        if self.nodes[to].closed {
            return;
        }
        let l = self.link_mut(to, src);
        if l.broken {
            return;
        }
        l.bytes += rec.cost();
        l.recs.push_back(rec);
    }

    /// Moves waiting records of `from` out, per destination in order, while
    /// the destination's window has room.
    fn flush(&mut self, from: usize) {
        let window = self.nodes[from].opts.window;
        let mut keep = VecDeque::new();
        let mut blocked: Vec<usize> = Vec::new();
        while let Some((to, rec)) = self.nodes[from].out.pop_front() {
            if blocked.contains(&to) || (self.in_flight(from, to) > 0 && self.in_flight(from, to) + rec.cost() > window)
            {
                blocked.push(to);
                keep.push_back((to, rec));
                continue;
            }
            self.deliver(from, to, rec);
        }
        self.nodes[from].out = keep;
    }
}

/// The network. Cloning shares it.
#[derive(Clone, Default)]
pub(super) struct Net(Arc<Mutex<World>>);

/// One endpoint's attachment to the network.
pub(super) struct SimPort {
    net: Net,
    me: usize,
}

impl Net {
    pub(super) fn new() -> Net {
        Net::default()
    }

    /// A new endpoint's port (address `Addr::Shm(1 + index)`).
    pub(super) fn port(&self, opts: SimOpts) -> SimPort {
        let mut w = self.0.lock();
        let me = w.nodes.len();
        let pid = match opts.writes {
            // shm reports the sender's pid (CMA, liveness); TCP reports 0.
            Writes::Ring => 1000 + me as i32,
            Writes::Queue | Writes::Socket => 0,
        };
        w.nodes.push(Node {
            addr: Addr::Shm(1 + me as u64),
            opts,
            pid,
            alive: true,
            closed: false,
            rts_prefix: 0,
            links: Vec::new(),
            out: VecDeque::new(),
            fenced: Vec::new(),
            events: Vec::new(),
            reports: Vec::new(),
            trickle: None,
            aborted: Vec::new(),
            pull_fault: None,
            pulls: 0,
            rooms: 0,
            pull_batches: 0,
            pushes: 0,
            push_batches: 0,
            watches: 0,
            more_calls: 0,
            sleepers: 0,
            contacted: Vec::new(),
        });
        SimPort { net: self.clone(), me }
    }

    fn with<R>(&self, a: &Addr, f: impl FnOnce(&mut Node) -> R) -> R {
        let mut w = self.0.lock();
        let i = w.index(a).expect("no such endpoint");
        f(&mut w.nodes[i])
    }

    /// The process behind `a` ends: liveness checks notice it, its
    /// published records stay readable (shm rings outlive their writer).
    pub(super) fn kill(&self, a: &Addr) {
        self.with(a, |n| n.alive = false);
    }

    /// The connection between `a` and `b` resets (TCP): both ends fail the
    /// other at their next poll; records in flight either way are lost; a
    /// payload being placed aborts; queued records are dropped unreported
    /// (the failure event ends their operations, as tcp/failure.rs does).
    pub(super) fn reset(&self, a: &Addr, b: &Addr) {
        let mut w = self.0.lock();
        let (ia, ib) = (w.index(a).expect("a"), w.index(b).expect("b"));
        for (me, other) in [(ia, ib), (ib, ia)] {
            let oaddr = w.nodes[other].addr;
            let n = &mut w.nodes[me];
            for l in n.links.iter_mut().filter(|l| l.src == oaddr) {
                l.broken = true;
                l.recs.clear();
                l.bytes = 0;
            }
            if n.trickle.as_ref().is_some_and(|t| t.src == oaddr) {
                let t = n.trickle.take().expect("just seen");
                n.aborted.push(t.handle);
            }
            let mut keep = VecDeque::new();
            for (to, r) in std::mem::take(&mut n.out) {
                if to != other {
                    keep.push_back((to, r));
                }
            }
            n.out = keep;
            if !n.fenced.contains(&oaddr) {
                n.fenced.push(oaddr);
                n.events.push(PeerEvent::Failed(oaddr));
            }
        }
    }

    /// The process behind `a` dies and a new one opens an endpoint at the
    /// same address (`fi_setname` before `fi_enable`), as a restarted peer
    /// does; returns the new endpoint's port. The old endpoint keeps its
    /// port but answers nothing (its node is closed and renamed out of the
    /// way). Every endpoint that knew the old one and had not yet failed it
    /// gets `PeerEvent::Failed(a)` at its next poll (the transport noticing
    /// the old incarnation gone); one that had failed it reaches the new
    /// one again (the address re-inserted). What the old one wrote and was
    /// not consumed stays readable, as a dead sender's records in a ring.
    pub(super) fn restart(&self, a: &Addr, opts: SimOpts) -> SimPort {
        {
            let mut w = self.0.lock();
            let old = w.index(a).expect("no such endpoint");
            let n = &mut w.nodes[old];
            n.alive = false;
            n.closed = true;
            n.addr = Addr::Shm(u64::MAX - old as u64);
            n.out.clear();
            for (i, n) in w.nodes.iter_mut().enumerate() {
                if i == old {
                    continue;
                }
                let knew = n.links.iter().any(|l| l.src == *a) || n.contacted.contains(&old);
                n.contacted.retain(|&c| c != old);
                if let Some(f) = n.fenced.iter().position(|f| f == a) {
                    n.fenced.remove(f);
                } else if knew {
                    n.events.push(PeerEvent::Failed(*a));
                }
                for l in n.links.iter_mut().filter(|l| l.src == *a) {
                    l.broken = false;
                }
            }
        }
        let port = self.port(opts);
        self.0.lock().nodes[port.me].addr = *a;
        port
    }

    /// Puts a record from `from` in `to`'s queue as a hostile or confused
    /// peer would write it (`payload` is set from the bytes).
    pub(super) fn forge(&self, from: &Addr, to: &Addr, hdr: WireHdr, payload: &[u8]) {
        let mut w = self.0.lock();
        let (f, t) = (w.index(from).expect("from"), w.index(to).expect("to"));
        let mut hdr = hdr;
        hdr.payload = payload.len() as u32;
        let rec = Rec {
            hdr,
            payload: payload.to_vec(),
            forged: true,
            notify: false,
        };
        w.deliver(f, t, rec);
    }

    /// Makes `pull`s by `a` fail with `e` (None: work again).
    pub(super) fn pull_fault(&self, a: &Addr, e: Option<Error>) {
        self.with(a, |n| n.pull_fault = e);
    }

    /// Successful pulls by `a` so far.
    pub(super) fn pulls(&self, a: &Addr) -> usize {
        self.with(a, |n| n.pulls)
    }

    /// `Port::room` calls by `a` so far.
    pub(super) fn rooms(&self, a: &Addr) -> usize {
        self.with(a, |n| n.rooms)
    }

    /// Successful batched pulls (`SingleCopy::pull_batch` calls) by `a` so far.
    pub(super) fn pull_batches(&self, a: &Addr) -> usize {
        self.with(a, |n| n.pull_batches)
    }

    /// Successful pushes by `a` so far.
    pub(super) fn pushes(&self, a: &Addr) -> usize {
        self.with(a, |n| n.pushes)
    }

    /// `Hints::watch_consumer` calls by `a` so far.
    pub(super) fn watches(&self, a: &Addr) -> usize {
        self.with(a, |n| n.watches)
    }

    /// Successful batched pushes (`SingleCopy::push_batch` calls) by `a` so far.
    pub(super) fn push_batches(&self, a: &Addr) -> usize {
        self.with(a, |n| n.push_batches)
    }

    /// `Hints::more_coming` calls on `a`'s port.
    pub(super) fn more_calls(&self, a: &Addr) -> usize {
        self.with(a, |n| n.more_calls)
    }

    /// Records waiting for `to` from `from` (not yet consumed).
    pub(super) fn queued(&self, from: &Addr, to: &Addr) -> usize {
        let w = self.0.lock();
        let t = w.index(to).expect("to");
        w.nodes[t]
            .links
            .iter()
            .find(|l| l.src == *from)
            .map_or(0, |l| l.recs.len())
    }

    /// Every record written so far (by the engines and the test), in order.
    pub(super) fn log(&self) -> Vec<Logged> {
        self.0.lock().log.clone()
    }

    pub(super) fn clear_log(&self) {
        self.0.lock().log.clear();
    }

    /// Broken links (records that failed validation), for assertions.
    pub(super) fn broken_links(&self, to: &Addr) -> Vec<Addr> {
        self.with(to, |n| n.links.iter().filter(|l| l.broken).map(|l| l.src).collect())
    }
}

fn limits(o: &SimOpts) -> Limits {
    Limits {
        max_payload: o.eager_limit,
        max_chunk: o.chunk_limit,
        max_iov: IOV_MAX,
    }
}

impl SimPort {
    fn log(w: &mut World, from: usize, to: usize, hdr: &WireHdr) {
        let (from, to) = (w.nodes[from].addr, w.nodes[to].addr);
        w.log.push(Logged { from, to, hdr: *hdr });
    }
}

impl Port for SimPort {
    fn addr(&self) -> Addr {
        self.net.0.lock().nodes[self.me].addr
    }

    fn wait_fd(&self) -> std::os::fd::RawFd {
        -1
    }

    fn set_sleepers(&mut self, n: usize) {
        self.net.0.lock().nodes[self.me].sleepers = n;
    }

    fn has_pending(&self) -> bool {
        let w = self.net.0.lock();
        let n = &w.nodes[self.me];
        !n.out.is_empty()
            || !n.events.is_empty()
            || !n.reports.is_empty()
            || n.trickle.is_some()
            || n.links.iter().any(|l| !l.recs.is_empty())
    }

    fn eager_limit(&self) -> usize {
        self.net.0.lock().nodes[self.me].opts.eager_limit
    }

    fn chunk_limit_for(&self, _peer: &Addr) -> usize {
        self.net.0.lock().nodes[self.me].opts.chunk_limit
    }

    fn send(&mut self, peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, _copy: bool) -> Result<Sent> {
        let mut w = self.net.0.lock();
        let me = self.me;
        let to = w.index(peer).ok_or(Error::ADDRNOTAVAIL)?;
        if w.nodes[me].fenced.contains(peer) {
            return Err(Error::CONNRESET);
        }
        let mut bytes = Vec::with_capacity(payload.len());
        payload.for_each(|c| bytes.extend_from_slice(c));
        let mut h = *hdr;
        h.payload = bytes.len() as u32;
        let mut rec = Rec {
            hdr: h,
            payload: bytes,
            forged: false,
            notify: false,
        };
        let window = w.nodes[me].opts.window;
        match w.nodes[me].opts.writes {
            Writes::Ring => {
                // The backlog leaves first; a record never passes it.
                w.flush(me);
                if w.waiting(me, to) > 0 || w.in_flight(me, to) + rec.cost() > window {
                    return Err(Error::AGAIN);
                }
                Self::log(&mut w, me, to, &h);
                w.deliver(me, to, rec);
                Ok(Sent::Done)
            }
            Writes::Socket if w.waiting(me, to) == 0 && w.in_flight(me, to) + rec.cost() <= window => {
                Self::log(&mut w, me, to, &h);
                w.deliver(me, to, rec);
                Ok(Sent::Done)
            }
            Writes::Queue | Writes::Socket => {
                if w.waiting(me, to) >= window {
                    return Err(Error::AGAIN);
                }
                Self::log(&mut w, me, to, &h);
                rec.notify = true;
                w.nodes[me].out.push_back((to, rec));
                Ok(Sent::Queued)
            }
        }
    }

    fn queued_at_peer(&self, _peer: &Addr) -> bool {
        self.net.0.lock().nodes[self.me].opts.writes == Writes::Ring
    }

    fn send_ctl(&mut self, peer: &Addr, hdr: &WireHdr) -> Result<()> {
        let mut w = self.net.0.lock();
        let me = self.me;
        let Some(to) = w.index(peer) else {
            return Err(Error::CONNRESET);
        };
        if w.nodes[me].fenced.contains(peer) {
            return Err(Error::CONNRESET);
        }
        let mut h = *hdr;
        h.payload = 0;
        Self::log(&mut w, me, to, &h);
        let rec = Rec {
            hdr: h,
            payload: Vec::new(),
            forged: false,
            notify: false,
        };
        let window = w.nodes[me].opts.window;
        if w.nodes[me].opts.writes == Writes::Ring {
            w.flush(me);
            if w.waiting(me, to) == 0 && w.in_flight(me, to) + rec.cost() <= window {
                w.deliver(me, to, rec);
                return Ok(());
            }
        }
        w.nodes[me].out.push_back((to, rec));
        Ok(())
    }

    fn room(&mut self, peer: &Addr) -> usize {
        let mut w = self.net.0.lock();
        w.nodes[self.me].rooms += 1;
        let Some(to) = w.index(peer) else { return 0 };
        let n = &w.nodes[self.me];
        let used = match n.opts.writes {
            Writes::Ring => w.in_flight(self.me, to) + w.waiting(self.me, to),
            Writes::Queue | Writes::Socket => w.waiting(self.me, to),
        };
        n.opts.window.saturating_sub(used).saturating_sub(HDR_LEN)
    }

    /// Whether a record was consumed (a peer moved, as shm's ring reports).
    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        let me = self.me;
        let mut moved = false;
        let mut w = self.net.0.lock();
        w.flush(me);
        let reports = std::mem::take(&mut w.nodes[me].reports);
        for (id, r) in reports {
            d.sent(id, r);
        }
        for h in std::mem::take(&mut w.nodes[me].aborted) {
            d.placed(h, Err(PEER_FAILED));
        }
        if let Some(t) = w.nodes[me].trickle.take() {
            // SAFETY: `dst` is the placement the engine gave for this
            // payload (a test buffer or a pool buffer), valid until `placed`.
            unsafe { t.payload[..].copy_to_iov(0, t.take, &t.dst, 0) };
            d.placed(t.handle, Ok(()));
        }
        let lim = limits(&w.nodes[me].opts);
        let trickle = w.nodes[me].opts.payloads == Payloads::Trickle;
        let pid_of = |w: &World, a: &Addr| w.index(a).map_or(0, |i| w.nodes[i].pid);
        let mut li = 0;
        'links: while li < w.nodes[me].links.len() {
            loop {
                if w.nodes[me].trickle.is_some() {
                    break 'links;
                }
                let l = &w.nodes[me].links[li];
                if l.broken {
                    break;
                }
                let Some(rec) = l.recs.front().cloned() else { break };
                let src = l.src;
                let pid = pid_of(&w, &src);
                if rec.hdr.check(&lim).is_err() {
                    assert!(rec.forged, "an engine wrote an invalid record: {:?}", rec.hdr);
                    let n = &mut w.nodes[me];
                    n.links[li].broken = true;
                    n.links[li].recs.clear();
                    n.events.push(PeerEvent::Failed(src));
                    break;
                }
                let h = rec.hdr;
                let consumed = if op::placed(h.op) && !trickle {
                    // Whole payloads (shm): one step, as shm's ring does.
                    d.deliver(&src, pid, &h, &Bytes(&rec.payload)) == Disposition::Consumed
                } else if op::placed(h.op) {
                    match d.place(&src, pid, &h) {
                        Place::Into { handle, dst, take } => {
                            let take = take.min(rec.payload.len()).min(dst.total());
                            if trickle && !rec.payload.is_empty() {
                                w.nodes[me].trickle = Some(Trickle {
                                    src,
                                    handle,
                                    dst,
                                    take,
                                    payload: rec.payload.clone(),
                                });
                            } else {
                                // SAFETY: as above: the engine's placement.
                                unsafe { rec.payload[..].copy_to_iov(0, take, &dst, 0) };
                                d.placed(handle, Ok(()));
                            }
                            true
                        }
                        Place::Buffer => {
                            d.buffered(&src, pid, &h, rec.payload.clone());
                            true
                        }
                        Place::Discard => true,
                        Place::Stall => false,
                    }
                } else {
                    d.control(&src, pid, &h, &Bytes(&rec.payload)) == Disposition::Consumed
                };
                if !consumed {
                    break;
                }
                let l = &mut w.nodes[me].links[li];
                l.recs.pop_front();
                l.bytes -= rec.cost();
                moved = true;
            }
            li += 1;
        }
        moved
    }

    fn check_peer(&mut self, peer: &Addr) -> bool {
        let mut w = self.net.0.lock();
        let n = &w.nodes[self.me];
        if n.fenced.contains(peer) {
            return false;
        }
        let alive = w.index(peer).is_some_and(|i| w.nodes[i].alive);
        if !alive {
            let n = &mut w.nodes[self.me];
            n.fenced.push(*peer);
            n.events.push(PeerEvent::Failed(*peer));
        }
        alive
    }

    fn sender_alive(&self, _src_pid: i32, peer: &Addr) -> bool {
        let w = self.net.0.lock();
        let broken = w.nodes[self.me].links.iter().any(|l| l.src == *peer && l.broken);
        !broken && w.index(peer).is_some_and(|i| w.nodes[i].alive)
    }

    fn take_events(&mut self) -> Vec<PeerEvent> {
        std::mem::take(&mut self.net.0.lock().nodes[self.me].events)
    }

    fn single_copy(&self) -> Option<&dyn SingleCopy> {
        Some(self)
    }

    fn close(&mut self) {
        let mut w = self.net.0.lock();
        let me = self.me;
        if w.nodes[me].closed {
            return;
        }
        w.nodes[me].closed = true;
        if w.nodes[me].opts.writes == Writes::Ring {
            // shm: BYE into every ring we wrote to.
            for to in w.nodes[me].contacted.clone() {
                let h = WireHdr::new(op::BYE);
                Self::log(&mut w, me, to, &h);
                let rec = Rec {
                    hdr: h,
                    payload: Vec::new(),
                    forged: false,
                    notify: false,
                };
                w.deliver(me, to, rec);
            }
        }
    }

    fn hints(&mut self) -> Option<&mut dyn Hints> {
        Some(self)
    }
}

/// Cross-memory attach within this process (the tests' buffers), or
/// refused (`Cma::Refused`).
impl SingleCopy for SimPort {
    fn pull(&self, src_pid: i32, remote: &[(u64, u64)], dst: &IovList, len: usize) -> Result<usize> {
        let mut w = self.net.0.lock();
        if w.nodes[self.me].opts.cma == Cma::Refused {
            return Err(Error::OPNOTSUPP);
        }
        if let Some(e) = w.nodes[self.me].pull_fault {
            return Err(e);
        }
        if len == 0 {
            return Ok(0);
        }
        let alive = w.nodes.iter().any(|n| n.pid == src_pid && n.alive);
        if !alive {
            return Err(Error::CONNRESET);
        }
        let mut done = 0;
        for &(a, l) in remote {
            if done == len {
                break;
            }
            let n = (l as usize).min(len - done);
            // SAFETY: the "remote" process is this one: `a .. a + n` is a
            // test's send buffer, alive until that send completes (which
            // waits for the ACK this pull precedes).
            let src = unsafe { core::slice::from_raw_parts(a as usize as *const u8, n) };
            // SAFETY: `dst` is the engine's placement for the message.
            done += unsafe { src.copy_to_iov(0, n, dst, done) };
        }
        w.nodes[self.me].pulls += 1;
        Ok(done)
    }

    fn pull_batch(&self, src_pid: i32, jobs: &[crate::transport::PullJob<'_>]) -> Result<()> {
        // All or nothing as one system call would be (a failing job makes
        // the engine repeat each pull alone): the jobs' sources checked
        // first, then each copied as `pull` does.
        if jobs
            .iter()
            .any(|j| j.remote.iter().map(|&(_, l)| l).sum::<u64>() < j.len as u64)
        {
            return Err(Error::IO);
        }
        for j in jobs {
            if self.pull(src_pid, j.remote, j.dst, j.len)? != j.len {
                return Err(Error::IO);
            }
        }
        self.net.0.lock().nodes[self.me].pull_batches += 1;
        Ok(())
    }

    fn push(&self, dst_pid: i32, remote: &[(u64, u64)], src: &IovList, len: usize) -> Result<usize> {
        let mut w = self.net.0.lock();
        if w.nodes[self.me].opts.cma == Cma::Refused {
            return Err(Error::OPNOTSUPP);
        }
        if let Some(e) = w.nodes[self.me].pull_fault {
            return Err(e);
        }
        if len == 0 {
            return Ok(0);
        }
        if !w.nodes.iter().any(|n| n.pid == dst_pid && n.alive) {
            return Err(Error::CONNRESET);
        }
        let mut done = 0;
        for &(a, l) in remote {
            if done == len {
                break;
            }
            let n = (l as usize).min(len - done);
            let dst = IovList::single(a as usize, n);
            src.for_range(done, n, |p, k, off| {
                // SAFETY: the "remote" process is this one: `a .. a + n` is
                // a test's read buffer, alive until that read completes
                // (after the ACK this push precedes); `p .. p + k` is the
                // engine's checked source.
                unsafe { core::slice::from_raw_parts(p as *const u8, k).copy_to_iov(0, k, &dst, off - done) };
            });
            done += n;
        }
        w.nodes[self.me].pushes += 1;
        Ok(done)
    }

    fn push_batch(&self, dst_pid: i32, jobs: &[crate::transport::PushJob<'_>]) -> Result<()> {
        // All or nothing as `pull_batch`: the tables checked first, then
        // each job written as `push` does.
        if jobs
            .iter()
            .any(|j| j.remote.iter().map(|&(_, l)| l).sum::<u64>() < j.len as u64)
        {
            return Err(Error::IO);
        }
        for j in jobs {
            if self.push(dst_pid, j.remote, j.src, j.len)? != j.len {
                return Err(Error::IO);
            }
        }
        self.net.0.lock().nodes[self.me].push_batches += 1;
        Ok(())
    }
}

impl Hints for SimPort {
    fn set_rts_prefix(&mut self, n: usize) {
        let mut w = self.net.0.lock();
        let lim = w.nodes[self.me].opts.eager_limit;
        w.nodes[self.me].rts_prefix = n.min(lim);
    }

    fn more_coming(&mut self) {
        self.net.0.lock().nodes[self.me].more_calls += 1;
    }

    fn rts_prefix(&mut self, peer: &Addr) -> usize {
        let w = self.net.0.lock();
        w.index(peer).map_or(0, |i| w.nodes[i].rts_prefix)
    }

    fn push_whole(&mut self, _peer: &Addr) -> usize {
        self.net.0.lock().nodes[self.me].opts.push_whole
    }

    fn watch_consumer(&mut self, _peer: &Addr) {
        self.net.0.lock().nodes[self.me].watches += 1;
    }
}
