//! The listening side of connected endpoints: a passive endpoint's
//! [`PassiveListener`] and the connection requests it reads.

use super::cm::{self, CmKind};
use super::{ConnRequest, MAX_REQUESTS, TOKEN_TIMER};
use crate::base::error::Result;
use crate::sys::{Epoll, IN};
use crate::transport::tcp::conn::{Alarm, Phase};
use crate::transport::tcp::framing::{Body, OutRecord};
use crate::transport::tcp::listener::{Handshake, Listener, ListenerOptions};
use crate::transport::tcp::trace;
use crate::transport::tcp::HELLO_TIMEOUT;
use std::net::SocketAddr;
use std::os::fd::{OwnedFd, RawFd};
use std::time::{Duration, Instant};

impl ConnRequest {
    /// A handshake's first record, if it is a valid CONNREQ (anything else
    /// closes the connection).
    fn from_handshake(h: Handshake) -> Option<ConnRequest> {
        let Handshake { conn, hdr, payload } = h;
        match cm::parse(&hdr, &payload) {
            Ok(CmKind::ConnReq) => {}
            r => {
                crate::base::log::log_warn!(crate::abi::FI_LOG_EP_CTRL, "tcp pep: bad connection request: {r:?}");
                return None;
            }
        }
        // No addresses: the client is gone already.
        let (local, peer) = (conn.local_addr().ok()?, conn.peer_addr().ok()?);
        trace::conn_event(format_args!("tcp pep: connection request from {peer} to {local}"));
        Some(ConnRequest {
            conn: Box::new(conn),
            data: payload,
            rts_prefix: cm::rts_prefix(&hdr),
            offer: cm::shm_offer(&hdr).map(Box::new),
            local,
            peer,
        })
    }

    /// The client's connection data.
    pub(crate) fn data(&self) -> &[u8] {
        &self.data
    }

    /// Our address on the connection.
    pub(crate) fn local(&self) -> SocketAddr {
        self.local
    }

    /// The client's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// `fi_reject`: REJECT with `data` (the caller checked its length),
    /// then FIN and close. A fresh connection's send buffer takes the few
    /// hundred bytes at once; if it does not, the client sees the connection
    /// close (a refusal without data). Nothing is left unread, so no reset
    /// overtakes the REJECT.
    pub(crate) fn reject(self, data: &[u8]) {
        let mut conn = self.conn;
        let (h, p) = cm::encode(CmKind::Reject, data, 0, None);
        conn.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
        conn.set_phase(Phase::Closing);
        conn.flush(&mut Vec::new());
        conn.shutdown_write();
    }
}

/// The listening side of connected endpoints (a passive endpoint's
/// listener): connection requests in arrival order. Its epoll set holds the
/// listening socket, the handshakes and the deadline timer.
pub(crate) struct PassiveListener {
    listener: Listener,
    epoll: Epoll,
    alarm: Alarm,
    ready: Vec<(u64, u32)>,
    /// A request its owner could not take (its EQ was full), first in line.
    held: Option<ConnRequest>,
}

impl PassiveListener {
    /// Listens on `sock` (bound) with `backlog`.
    pub(crate) fn on(sock: OwnedFd, backlog: i32) -> Result<PassiveListener> {
        let opts = ListenerOptions {
            max_handshakes: MAX_REQUESTS,
            timeout: HELLO_TIMEOUT,
        };
        let listener = Listener::on(sock, backlog, opts)?;
        let epoll = Epoll::new()?;
        let alarm = Alarm::new()?;
        listener.watch(&epoll)?;
        epoll.add(alarm.fd(), IN, TOKEN_TIMER)?;
        Ok(PassiveListener {
            listener,
            epoll,
            alarm,
            ready: Vec::with_capacity(64),
            held: None,
        })
    }

    pub(crate) fn local_addr(&self) -> Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Readable when [`PassiveListener::poll`] has something to do.
    pub(crate) fn wait_fd(&self) -> RawFd {
        self.epoll.fd()
    }

    pub(crate) fn set_backlog(&self, backlog: i32) -> Result<()> {
        self.listener.set_backlog(backlog)
    }

    /// Accepts, reads handshakes, enforces their deadlines: one
    /// zero-timeout `epoll_wait`.
    pub(crate) fn poll(&mut self) {
        let mut ready = std::mem::take(&mut self.ready);
        let _ = self.epoll.wait(&mut ready, 64, Some(Duration::ZERO));
        for &(token, _) in &ready {
            match token {
                TOKEN_TIMER => self.alarm.fired(),
                t => self.listener.event(&self.epoll, t),
            }
        }
        self.ready = ready;
        if self.alarm.due() {
            self.listener.check_deadlines(&self.epoll, Instant::now());
        }
        self.alarm.arm(self.listener.next_deadline());
    }

    /// The oldest connection request read (invalid ones are dropped).
    pub(crate) fn next(&mut self) -> Option<ConnRequest> {
        if let Some(r) = self.held.take() {
            return Some(r);
        }
        while let Some(h) = self.listener.next() {
            if let Some(r) = ConnRequest::from_handshake(h) {
                return Some(r);
            }
        }
        None
    }

    /// Gives back the request [`PassiveListener::next`] returned: its owner
    /// cannot take it now; it comes first next time.
    pub(crate) fn put_back(&mut self, r: ConnRequest) {
        self.held = Some(r);
    }
}
