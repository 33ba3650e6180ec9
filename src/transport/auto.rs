//! The auto transport: one endpoint, one address (`fi_rustfab://...`,
//! [`Addr::Auto`]), two ways to reach it. Peers on the same host (same
//! [`crate::transport::addr::host_id`]) are reached over shared memory, everyone else
//! over TCP. This is what lets one fi_getinfo entry offer both
//! `FI_LOCAL_COMM` and `FI_REMOTE_COMM` honestly, so that an MPI job gets
//! shared memory between the ranks of a node and TCP between nodes.
//!
//! Peers are keyed by their *canonical* address: the shm address for a
//! same-host peer, the TCP address otherwise. The endpoint core converts
//! every address it takes from the AV with [`Port::canonical`], and the two
//! inner ports report sources in those forms, so matching, directed
//! receives, acknowledgements and FI_SOURCE all compare like with like (the
//! AV indexes an auto address under both of its components).

use crate::base::error::{Error, Result};
use crate::sys::{self, Epoll};
use crate::transport::addr::Addr;
use crate::transport::proto::WireHdr;
use crate::transport::shm::ShmPort;
use crate::transport::tcp::TcpPort;
use crate::transport::{Delivery, Hints, Payload, PeerEvent, Port, Sent, SingleCopy};
use std::net::SocketAddr;
use std::os::fd::RawFd;

pub(crate) struct AutoPort {
    shm: ShmPort,
    tcp: side::TcpSide,
    host: u64,
    me: Addr,
    /// Readable when either inner port has something (nests both).
    epoll: Epoll,
    /// Progress passes so far, and how many more TCP is polled on every
    /// pass since it last delivered something (see `poll`).
    tick: u32,
    tcp_hot: u32,
    /// A thread sleeps (or is about to) on our wait fd: TCP is polled on
    /// every pass (the pass its socket woke must read it).
    sleeping: bool,
    /// Passes that skipped TCP on `tcp.idle` (the tests' check).
    #[cfg(test)]
    idle_skips: u64,
    /// Peers already named in the info log (`None` unless FI_LOG_LEVEL
    /// asks for info lines for this provider when the port opens, so the
    /// send path pays one branch).
    logged: Option<rustc_hash::FxHashSet<Addr>>,
}

/// Polling TCP costs a system call (epoll_wait); a polling loop that talks
/// to same-host peers over shared memory would pay it on every pass. TCP is
/// therefore polled on every pass only while it is busy or a thread sleeps
/// on our wait fd (the sockets wake it; the pass that follows reads them),
/// on every TCP_IDLE_PERIOD-th pass while it has a connection or a
/// handshake, and on every TCP_LONELY_PERIOD-th pass while it has none
/// (only a new connection can start work there: a polling loop notices it
/// some tens of microseconds later, and the peer's handshake takes round
/// trips anyway; TcpPort::lonely). 4096 passes of a polling loop are 40-100
/// us here: Open MPI's 1 B ping-pong on one host made an `epoll_wait` every
/// ~15 messages with 256 (docs/performance-history.md "yieldback").
const TCP_IDLE_PERIOD: u32 = 16;
const TCP_LONELY_PERIOD: u32 = 4096;
const TCP_HOT_PASSES: u32 = 256;

/// The core's [`Delivery`] as the TCP port gets it: forwards everything and
/// notes whether anything was delivered, which is what keeps TCP polled on
/// every pass while it is busy (`tcp_hot`); `TcpPort::poll` itself says
/// nothing of it (its answer is the CQ's idle rule's).
struct NotingSink<'a> {
    d: &'a mut dyn Delivery,
    seen: bool,
}

impl Delivery for NotingSink<'_> {
    fn place(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr) -> crate::transport::Place {
        self.seen = true;
        self.d.place(src, src_pid, hdr)
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        self.seen = true;
        self.d.placed(handle, result)
    }
    fn buffered(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        self.seen = true;
        self.d.buffered(src, src_pid, hdr, data)
    }
    fn control(
        &mut self,
        src: &Addr,
        src_pid: i32,
        hdr: &WireHdr,
        payload: &dyn crate::transport::PayloadIn,
    ) -> crate::transport::Disposition {
        self.seen = true;
        self.d.control(src, src_pid, hdr, payload)
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        self.seen = true;
        self.d.sent(msg_id, result)
    }
}

/// The TCP side with what a pass may skip on: `idle` says a pass found
/// TCP with nothing to do (not hot, no sleeper, nothing pending, no
/// events) and no call reached it since. Every `&mut` access goes through
/// [`TcpSide::get_mut`], which clears it (the port is private to this
/// module), so a pass skips TCP's tests on that flag exactly when the full
/// tests would skip it too (`TcpPort` has no interior mutability: its
/// `&self` methods change nothing those tests read).
mod side {
    use crate::transport::tcp::TcpPort;

    pub(super) struct TcpSide {
        port: TcpPort,
        pub(super) idle: bool,
    }

    impl TcpSide {
        pub(super) fn new(port: TcpPort) -> TcpSide {
            TcpSide { port, idle: false }
        }

        #[inline(always)]
        pub(super) fn get(&self) -> &TcpPort {
            &self.port
        }

        /// The port, to change: the next pass tests it in full.
        #[inline(always)]
        pub(super) fn get_mut(&mut self) -> &mut TcpPort {
            self.idle = false;
            &mut self.port
        }
    }
}

impl AutoPort {
    pub(crate) fn new(shm: ShmPort, tcp: TcpPort) -> Result<AutoPort> {
        let host = crate::transport::addr::host_id();
        let Addr::Shm(token) = shm.addr() else {
            return Err(Error::INVAL);
        };
        let SocketAddr::V4(inet) = (match Port::addr(&tcp) {
            Addr::Inet(a) => a,
            _ => return Err(Error::INVAL),
        }) else {
            // The auto address carries an IPv4 address (its fixed 58-byte
            // form fits FI_NAME_MAX); IPv6 peers use the tcp domain.
            return Err(Error::ADDRNOTAVAIL);
        };
        let epoll = Epoll::new()?;
        epoll.add(shm.wait_fd(), sys::IN, 0)?;
        epoll.add(Port::wait_fd(&tcp), sys::IN, 1)?;
        Ok(AutoPort {
            shm,
            tcp: side::TcpSide::new(tcp),
            host,
            me: Addr::Auto { host, shm: token, inet },
            epoll,
            tick: 0,
            tcp_hot: 0,
            sleeping: false,
            #[cfg(test)]
            idle_skips: 0,
            logged: crate::base::log::enabled(crate::abi::FI_LOG_INFO, crate::abi::FI_LOG_EP_DATA)
                .map(|_| Default::default()),
        })
    }

    fn via_shm(a: &Addr) -> bool {
        matches!(a, Addr::Shm(_))
    }

    /// The info line of a first send to a peer (FI_LOG_LEVEL=info only).
    /// A pass that skipped TCP on its idle flag: the full tests (but the
    /// period, which it did not reach) would have skipped it too.
    #[cfg(test)]
    fn idle_skip_checked(&mut self) {
        self.idle_skips += 1;
        let tcp = self.tcp.get();
        assert!(
            self.tcp_hot == 0 && !self.sleeping && !Port::has_pending(tcp) && !Port::has_events(tcp),
            "a pass skipped a TCP side with work"
        );
    }

    #[cold]
    fn log_first_send(&mut self, peer: &Addr) {
        let p = self.canonical(peer);
        let me = self.me;
        if let Some(seen) = self.logged.as_mut().filter(|s| s.len() < 4096) {
            if seen.insert(p) {
                let (to, via) = match p {
                    Addr::Shm(t) => (format!("{t:#x}"), "shm"),
                    Addr::Inet(a) => (a.to_string(), "tcp"),
                    Addr::Auto { .. } => (format!("{p:?}"), "?"),
                };
                let here = match me {
                    Addr::Auto { inet, .. } => inet.ip().to_string(),
                    _ => String::new(),
                };
                crate::base::log::log_info!(
                    crate::abi::FI_LOG_EP_DATA,
                    "auto: first send to {to} over {via} (this host: {here})"
                );
            }
        }
    }
}

impl Port for AutoPort {
    fn addr(&self) -> Addr {
        self.me
    }

    fn wait_fd(&self) -> RawFd {
        self.epoll.fd()
    }

    fn set_sleepers(&mut self, n: usize) {
        self.sleeping = n > 0;
        Port::set_sleepers(&mut self.shm, n);
        Port::set_sleepers(self.tcp.get_mut(), n);
    }

    fn has_pending(&self) -> bool {
        Port::has_pending(&self.shm) || Port::has_pending(self.tcp.get())
    }

    fn eager_limit(&self) -> usize {
        Port::eager_limit(&self.shm).min(Port::eager_limit(self.tcp.get()))
    }

    fn eager_limit_for(&self, peer: &Addr) -> usize {
        // A shm address is canonical already (the common case: no copy).
        if matches!(peer, Addr::Shm(_)) || Self::via_shm(&self.canonical(peer)) {
            Port::eager_limit(&self.shm)
        } else {
            Port::eager_limit(self.tcp.get())
        }
    }

    fn chunk_limit_for(&self, peer: &Addr) -> usize {
        if Self::via_shm(&self.canonical(peer)) {
            Port::chunk_limit_for(&self.shm, peer)
        } else {
            Port::chunk_limit_for(self.tcp.get(), peer)
        }
    }

    fn queued_at_peer(&self, peer: &Addr) -> bool {
        let p = self.canonical(peer);
        if Self::via_shm(&p) {
            self.shm.queued_at_peer(&p)
        } else {
            self.tcp.get().queued_at_peer(&p)
        }
    }

    fn canonical(&self, a: &Addr) -> Addr {
        match *a {
            Addr::Auto { host, shm, .. } if host == self.host => Addr::Shm(shm),
            Addr::Auto { inet, .. } => Addr::Inet(SocketAddr::V4(inet)),
            other => other,
        }
    }

    fn send(&mut self, peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, copy: bool) -> Result<Sent> {
        if self.logged.is_some() {
            self.log_first_send(peer);
        }
        // The core hands over canonical addresses (a shm one for a peer on
        // this host): those go straight to their port; `canonical` maps
        // anything else (an auto address) the same way it did before.
        match peer {
            Addr::Shm(_) => self.shm.send(peer, hdr, payload, copy),
            Addr::Inet(_) => self.tcp.get_mut().send(peer, hdr, payload, copy),
            Addr::Auto { .. } => {
                let p = self.canonical(peer);
                if Self::via_shm(&p) {
                    self.shm.send(&p, hdr, payload, copy)
                } else {
                    self.tcp.get_mut().send(&p, hdr, payload, copy)
                }
            }
        }
    }

    fn send_ctl(&mut self, peer: &Addr, hdr: &WireHdr) -> Result<()> {
        let p = self.canonical(peer);
        if Self::via_shm(&p) {
            Port::send_ctl(&mut self.shm, &p, hdr)
        } else {
            Port::send_ctl(self.tcp.get_mut(), &p, hdr)
        }
    }

    fn room(&mut self, peer: &Addr) -> usize {
        let p = self.canonical(peer);
        if Self::via_shm(&p) {
            Port::room(&mut self.shm, &p)
        } else {
            Port::room(self.tcp.get_mut(), &p)
        }
    }

    /// Whether a shm peer moved, or the TCP port (when this pass polled it)
    /// moved bytes lately (`TcpPort::poll`).
    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        let mut moved = Port::poll(&mut self.shm, d);
        self.tick = self.tick.wrapping_add(1);
        // TCP found idle by an earlier pass and reached by no call since
        // (`side::TcpSide`): the tests below would skip it too, but on every
        // TCP_IDLE_PERIOD-th pass (`due`), which takes them.
        if self.tcp.idle && !self.tick.is_multiple_of(TCP_IDLE_PERIOD) {
            #[cfg(test)]
            self.idle_skip_checked();
            return moved;
        }
        let due = self.tick.is_multiple_of(TCP_IDLE_PERIOD)
            && (self.tick.is_multiple_of(TCP_LONELY_PERIOD) || !self.tcp.get().lonely());
        if self.tcp_hot > 0 || self.sleeping || due || Port::has_pending(self.tcp.get()) {
            let mut n = NotingSink { d, seen: false };
            moved |= Port::poll(self.tcp.get_mut(), &mut n);
            if n.seen {
                self.tcp_hot = TCP_HOT_PASSES;
            } else {
                self.tcp_hot = self.tcp_hot.saturating_sub(1);
            }
        }
        self.tcp.idle = self.tcp_hot == 0
            && !self.sleeping
            && !Port::has_pending(self.tcp.get())
            && !Port::has_events(self.tcp.get());
        moved
    }

    fn check_peer(&mut self, peer: &Addr) -> bool {
        let p = self.canonical(peer);
        if Self::via_shm(&p) {
            Port::check_peer(&mut self.shm, &p)
        } else {
            Port::check_peer(self.tcp.get_mut(), &p)
        }
    }

    fn sender_alive(&self, src_pid: i32, peer: &Addr) -> bool {
        let p = self.canonical(peer);
        if Self::via_shm(&p) {
            Port::sender_alive(&self.shm, src_pid, &p)
        } else {
            Port::sender_alive(self.tcp.get(), src_pid, &p)
        }
    }

    fn has_events(&self) -> bool {
        #[cfg(test)]
        assert!(!self.tcp.idle || !Port::has_events(self.tcp.get()));
        Port::has_events(&self.shm) || (!self.tcp.idle && Port::has_events(self.tcp.get()))
    }

    fn take_events(&mut self) -> Vec<PeerEvent> {
        let mut v = Port::take_events(&mut self.shm);
        // Skipped when it would do nothing (TcpPort::events_quiet): on
        // every pass that did not poll TCP and found nothing there.
        if !self.tcp.idle && Port::has_events(self.tcp.get()) {
            v.extend(Port::take_events(self.tcp.get_mut()));
        }
        v
    }

    /// Same-host peers only, through the shm port.
    fn single_copy(&self) -> Option<&dyn SingleCopy> {
        self.shm.single_copy()
    }

    fn close(&mut self) {
        Port::close(&mut self.shm);
        Port::close(self.tcp.get_mut());
    }

    fn hints(&mut self) -> Option<&mut dyn Hints> {
        Some(self)
    }
}

/// The RTS prefix of each inner port.
impl Hints for AutoPort {
    /// Buffered receives: both kinds of peers are told.
    fn set_rts_prefix(&mut self, n: usize) {
        Hints::set_rts_prefix(&mut self.shm, n);
        Hints::set_rts_prefix(self.tcp.get_mut(), n);
    }

    fn rts_prefix(&mut self, peer: &Addr) -> usize {
        let p = self.canonical(peer);
        if Self::via_shm(&p) {
            Hints::rts_prefix(&mut self.shm, &p)
        } else {
            Hints::rts_prefix(self.tcp.get_mut(), &p)
        }
    }

    fn push_whole(&mut self, peer: &Addr) -> usize {
        let p = self.canonical(peer);
        if Self::via_shm(&p) {
            Hints::push_whole(&mut self.shm, &p)
        } else {
            Hints::push_whole(self.tcp.get_mut(), &p)
        }
    }

    fn watch_consumer(&mut self, peer: &Addr) {
        let p = self.canonical(peer);
        if Self::via_shm(&p) {
            Hints::watch_consumer(&mut self.shm, &p)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::proto::{op, Limits};
    use crate::transport::tcp::TcpSettings;
    use crate::transport::{Disposition, Place};
    use std::time::Duration;

    const LIM: Limits = Limits {
        max_payload: 16384,
        max_chunk: 16384,
        max_iov: 8,
    };

    fn port() -> AutoPort {
        let shm = ShmPort::new(crate::transport::addr::shm_token_random(), LIM).unwrap();
        let tcp = TcpPort::new("127.0.0.1:0".parse().unwrap(), LIM, &TcpSettings::default()).unwrap();
        AutoPort::new(shm, tcp).unwrap()
    }

    #[derive(Default)]
    struct Got {
        msgs: Vec<Vec<u8>>,
        sent: usize,
    }

    impl Delivery for Got {
        fn place(&mut self, _src: &Addr, _pid: i32, _hdr: &WireHdr) -> Place {
            Place::Buffer
        }
        fn placed(&mut self, _handle: u32, _result: Result<()>) {}
        fn buffered(&mut self, _src: &Addr, _pid: i32, _hdr: &WireHdr, data: Vec<u8>) {
            self.msgs.push(data);
        }
        fn control(
            &mut self,
            _src: &Addr,
            _pid: i32,
            _hdr: &WireHdr,
            _p: &dyn crate::transport::PayloadIn,
        ) -> Disposition {
            Disposition::Consumed
        }
        fn sent(&mut self, _msg_id: u64, _result: Result<()>) {
            self.sent += 1;
        }
    }

    /// Messages both ways over TCP between two auto ports that had gone
    /// idle: every pass that skips TCP on its idle flag checks that the
    /// full tests would have skipped it (`idle_skip_checked`), and the
    /// messages arrive.
    #[test]
    fn an_idle_tcp_side_is_skipped_only_while_it_has_nothing() {
        let (mut a, mut b) = (port(), port());
        let (mut da, mut db) = (Got::default(), Got::default());
        for _ in 0..64 {
            a.poll(&mut da);
            b.poll(&mut db);
            let _ = (a.take_events(), b.take_events());
        }
        assert!(a.idle_skips > 0 && b.idle_skips > 0, "no pass skipped an idle TCP side");
        let b_inet = match b.addr() {
            Addr::Auto { inet, .. } => Addr::Inet(SocketAddr::V4(inet)),
            _ => unreachable!(),
        };
        let a_inet = match a.addr() {
            Addr::Auto { inet, .. } => Addr::Inet(SocketAddr::V4(inet)),
            _ => unreachable!(),
        };
        let skips = (a.idle_skips, b.idle_skips);
        let mut queued = 0;
        for round in 0..3u8 {
            let mut h = WireHdr::new(op::EAGER);
            h.len = 3;
            h.payload = 3;
            h.msg_id = round as u64;
            let msg = [round; 3];
            // Not copied: a completion comes back through `sent` (TCP has
            // work pending until it does).
            let pending = matches!(a.send(&b_inet, &h, Payload::Bytes(&msg), false).unwrap(), Sent::Queued);
            queued += pending as usize;
            b.send(&a_inet, &h, Payload::Bytes(&msg), true).unwrap();
            let want = round as usize + 1;
            let t0 = std::time::Instant::now();
            while da.msgs.len() < want || db.msgs.len() < want || (pending && da.sent < want) {
                assert!(t0.elapsed() < Duration::from_secs(20), "messages lost");
                a.poll(&mut da);
                b.poll(&mut db);
                let _ = (a.take_events(), b.take_events());
                std::thread::sleep(Duration::from_micros(100));
            }
            assert_eq!(da.msgs[round as usize], msg);
            assert_eq!(db.msgs[round as usize], msg);
            // Idle again between rounds (the hot period over).
            for _ in 0..2 * TCP_HOT_PASSES {
                a.poll(&mut da);
                b.poll(&mut db);
                let _ = (a.take_events(), b.take_events());
            }
        }
        assert!(a.idle_skips > skips.0 && b.idle_skips > skips.1);
        // A sleeper announced: every pass polls TCP from the next one on
        // (set_sleepers reaches TCP, which clears the idle flag).
        for _ in 0..3 {
            if !a.tcp.idle {
                a.poll(&mut da);
                let _ = a.take_events();
            }
        }
        assert!(a.tcp.idle);
        a.set_sleepers(1);
        for _ in 0..TCP_IDLE_PERIOD {
            a.poll(&mut da);
        }
        a.set_sleepers(0);
        assert!(queued > 0, "no send was queued: nothing tested a pending TCP side");
    }

    /// The pass that reads a message from a TCP peer tells the CQ's idle
    /// rule that a peer moved (the TCP port's answer reaches the caller,
    /// not only the shm port's).
    #[test]
    fn a_pass_that_reads_from_a_tcp_peer_reports_movement() {
        let (mut a, mut b) = (port(), port());
        let (mut da, mut db) = (Got::default(), Got::default());
        let b_inet = match b.addr() {
            Addr::Auto { inet, .. } => Addr::Inet(SocketAddr::V4(inet)),
            _ => unreachable!(),
        };
        let mut h = WireHdr::new(op::EAGER);
        h.len = 3;
        h.payload = 3;
        a.send(&b_inet, &h, Payload::Bytes(&[7; 3]), true).unwrap();
        let (t0, mut moved) = (std::time::Instant::now(), false);
        while db.msgs.is_empty() {
            assert!(t0.elapsed() < Duration::from_secs(20), "message lost");
            a.poll(&mut da);
            moved = b.poll(&mut db);
            let _ = (a.take_events(), b.take_events());
        }
        assert!(moved, "the pass that read the message reported no movement");
    }
}
