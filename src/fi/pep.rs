//! Passive endpoints (`fi_passive_ep`, `fid_pep`) and connection requests
//! (`FI_CLASS_CONNREQ` handles): the listening side of `FI_EP_MSG`.
//!
//! A [`Pep`] owns a TCP listener (bound at `fi_setname`, `fi_getname` or
//! `fi_listen`, whichever comes first). Accepted sockets must deliver the
//! CONNREQ record of `transport/tcp/cm.rs` within
//! [`HELLO_TIMEOUT`](crate::transport::tcp::HELLO_TIMEOUT), at most
//! [`MAX_HANDSHAKES`] at a time (a silent or hostile client costs one slot
//! for a bounded time; when all are taken, the oldest incomplete one is
//! dropped for the newcomer, so a flood cannot lock real clients out); then an `FI_CONNREQ` event goes to the bound EQ with
//! the client's data and an `fi_info` the application frees: a copy of the
//! info the pep was opened with (it already carries libfabric's
//! `prov_name`, docs/abi.md §1.9), `dest_addr` = the client's address, `src_addr`
//! = ours on that connection, `handle` = a [`ConnReq`].
//!
//! The pep is a source of the fabric's progress engine, which every EQ of
//! the fabric waits on: EQ reads accept and read handshakes, and a thread
//! sleeping in `fi_eq_sread` wakes when a client arrives.
//!
//! Connection requests: `fi_endpoint` with the request's info takes its
//! connection (the server endpoint, then `fi_accept`); `fi_reject` writes
//! REJECT with the application's data and closes it. Either consumes the
//! handle; a second use is `-FI_EINVAL`. The handle's memory outlives its
//! use (error paths commonly call `fi_reject` after a failed accept):
//! consumed handles are freed only after [`RETIRED_MAX`] later ones were
//! consumed. A handle never consumed keeps its connection open until it is
//! (`fi_close` on the handle also consumes it); an unread `FI_CONNREQ`
//! event dropped with its EQ consumes it.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::Info;
use crate::core::eq::Eq;
use crate::core::fabric::Fabric;
use crate::core::progress::{Engine, Source};
use crate::core::users::{HasUsers, Held, Users};
use crate::fi::{self, noops, FiObject, Obj};
use crate::sys::{Epoll, IN};
use crate::transport::addr::Addr;
use crate::transport::proto::{Limits, WireHdr};
use crate::transport::tcp::cm::{self, CmKind, CM_DATA_MAX};
use crate::transport::tcp::framing::{Outcome, Reader, Sink};
use crate::transport::tcp::sys::{self, Io, TimerFd};
use crate::transport::tcp::Fd;
use crate::transport::tcp::{advertised_addr, HELLO_TIMEOUT, KEEPALIVE_IDLE, SNDBUF, USER_TIMEOUT};
use crate::transport::{Disposition, Place};
use core::ffi::{c_int, c_void};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Accepted connections still in their handshake, at most.
pub const MAX_HANDSHAKES: usize = 256;
/// Consumed connection-request handles kept allocated (see the module
/// documentation).
pub const RETIRED_MAX: usize = 256;
/// Listen backlog unless `fi_control(FI_BACKLOG)` says otherwise.
pub const DEFAULT_BACKLOG: i32 = 512;
/// After EMFILE and friends, the listener rests this long.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

const TOKEN_LISTENER: u64 = 0;
const TOKEN_TIMER: u64 = 1;
const FIRST_HANDSHAKE: u64 = 2;

/// A handshake has no data records: nothing reaches a core.
struct NoCore;

impl Sink for NoCore {
    fn place(&mut self, _hdr: &WireHdr) -> Place {
        Place::Discard
    }
    fn placed(&mut self, _handle: u32, _result: Result<()>) {}
    fn buffered(&mut self, _hdr: &WireHdr, _data: Vec<u8>) {}
    fn control(&mut self, _hdr: &WireHdr, _payload: &[u8]) -> Disposition {
        Disposition::Consumed
    }
}

/// Handshake records only (data records fail validation or the
/// not-yet-established rule and end the connection).
const HANDSHAKE_LIMITS: Limits = Limits {
    max_payload: 0,
    max_iov: 0,
};

struct Handshake {
    sock: Option<OwnedFd>,
    reader: Reader,
    deadline: Instant,
    /// A complete CONNREQ's data, waiting for room in the EQ.
    req: Option<Vec<u8>>,
    /// The client's RTS prefix (buffered receives), from its CONNREQ.
    prefix: usize,
}

struct PepState {
    /// Where to bind (fi_getinfo's src_addr); None: any address, any port.
    want: Option<SocketAddr>,
    v6: bool,
    sock: Option<OwnedFd>,
    listening: bool,
    backlog: i32,
    /// `FI_RUSTFAB_IFACE` (the interface a wildcard bind advertises).
    iface: Option<String>,
    eq: Option<Held<Eq>>,
    epoll: Epoll,
    timer: TimerFd,
    timer_at: Option<Instant>,
    shakes: HashMap<u64, Handshake>,
    next_id: u64,
    paused_until: Option<Instant>,
    ready: Vec<(u64, u32)>,
}

/// The passive endpoint core. See the module documentation.
pub struct Pep {
    users: Users,
    _fabric: Held<Fabric>,
    engine: Arc<Engine>,
    /// The application's info, the template of every FI_CONNREQ's info.
    info: Info,
    st: Mutex<PepState>,
    fid: AtomicUsize,
    closed: AtomicBool,
}

impl FiObject for Pep {
    type Header = fid_pep;
    const CLASS: usize = FI_CLASS_PEP;
}

impl HasUsers for Pep {
    fn users(&self) -> &Users {
        &self.users
    }
}

/// A connection request: the accepted connection until it is accepted
/// (taken by `fi_endpoint`) or rejected.
pub struct ConnReq {
    sock: Mutex<Option<OwnedFd>>,
    /// The client's RTS prefix (its CONNREQ's).
    prefix: usize,
}

impl FiObject for ConnReq {
    type Header = fid;
    const CLASS: usize = FI_CLASS_CONNREQ;
}

static CONNREQ_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(connreq_close),
    bind: Some(noops::no_bind),
    control: Some(noops::no_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

/// Consumed handles, oldest first, freed beyond [`RETIRED_MAX`].
static RETIRED: Mutex<VecDeque<usize>> = Mutex::new(VecDeque::new());

fn retire(h: *mut fid) {
    let old = {
        let mut r = RETIRED.lock();
        r.push_back(h as usize);
        if r.len() > RETIRED_MAX {
            r.pop_front()
        } else {
            None
        }
    };
    if let Some(p) = old {
        // SAFETY: `p` was created by `Obj::create` in `emit` and retired
        // exactly once (only the call that took its socket retires it).
        if let Ok(o) = unsafe { Obj::<ConnReq>::from_ptr(p as *const c_void) } {
            // SAFETY: nothing else frees it; the application consumed it
            // RETIRED_MAX handles ago.
            unsafe { Obj::destroy(o) };
        }
    }
}

/// Consumes a connection request: its connection.
///
/// # Safety
/// `h` must be NULL or readable as a `struct fid`.
unsafe fn take_conn(h: *mut fid) -> Result<OwnedFd> {
    // SAFETY: per the contract.
    let o = unsafe { Obj::<ConnReq>::from_ptr(h as *const c_void) }?;
    let s = o.core.sock.lock().take().ok_or(Error::INVAL)?;
    retire(h);
    Ok(s)
}

/// `fi_endpoint` with a connection request's info: the connection and the
/// client's RTS prefix.
///
/// # Safety
/// `h` must be NULL or readable as a `struct fid`.
pub unsafe fn take_connreq(h: *mut fid) -> Result<(OwnedFd, usize)> {
    // SAFETY: per the contract.
    let prefix = unsafe { Obj::<ConnReq>::from_ptr(h as *const c_void) }?.core.prefix;
    // SAFETY: forwarded.
    unsafe { take_conn(h) }.map(|s| (s, prefix))
}

/// An unread `FI_CONNREQ` event is dropped (its EQ closes): the request is
/// consumed (its connection closes; the client sees a refusal).
///
/// # Safety
/// `h` must be NULL or readable as a `struct fid`.
pub unsafe fn discard_connreq(h: *mut fid) {
    // SAFETY: forwarded.
    if !h.is_null() && unsafe { (*h).fclass } == FI_CLASS_CONNREQ {
        // SAFETY: forwarded.
        drop(unsafe { take_conn(h) });
    }
}

unsafe extern "C" fn connreq_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's handle.
    fi::call("connreq close", || unsafe { take_conn(f) }.map(|_| 0).or(Ok(0)))
}

/// `fi_endpoint` with `info->handle` = a passive endpoint: its bound socket
/// becomes the active endpoint's (fi_endpoint(3): "the new endpoint will
/// use the address of the passive endpoint"). Not while it listens.
///
/// # Safety
/// `h` must be NULL or readable as a `struct fid`.
pub unsafe fn take_bound_socket(h: *mut fid) -> Result<OwnedFd> {
    // SAFETY: per the contract.
    let o = unsafe { Obj::<Pep>::from_ptr(h as *const c_void) }?;
    let mut st = o.core.st.lock();
    if st.listening {
        return Err(Error::INVAL);
    }
    st.bind_default()?;
    st.sock.take().ok_or(Error::INVAL)
}

impl PepState {
    fn wildcard(&self) -> SocketAddr {
        if self.v6 {
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
        }
    }

    /// Binds to the wanted address unless bound already.
    fn bind_default(&mut self) -> Result<()> {
        if self.sock.is_none() {
            let a = self.want.unwrap_or_else(|| self.wildcard());
            self.sock = Some(sys::bound_socket(&a)?);
        }
        Ok(())
    }

    fn name(&mut self) -> Result<SocketAddr> {
        self.bind_default()?;
        let fd = self.sock.as_ref().ok_or(Error::INVAL)?.as_raw_fd();
        let bound = sys::local_addr(fd)?;
        // Like an RDM endpoint's name: dialable (a wildcard bind names a
        // reachable interface), with the bound port.
        Ok(advertised_addr(bound, self.iface.as_deref(), &sys::interfaces()))
    }

    fn accept_all(&mut self) {
        let Some(l) = self.sock.as_ref().map(|s| s.as_raw_fd()) else {
            return;
        };
        for _ in 0..64 {
            match sys::accept(l) {
                Ok(Some(sock)) => {
                    if self.shakes.len() >= MAX_HANDSHAKES {
                        // Full: the oldest incomplete handshake makes room
                        // (a client says CONNREQ right after connecting, so
                        // idle or trickling sockets go first, and a flood
                        // of them cannot lock real clients out); with none,
                        // the new one is dropped (the client sees it close).
                        let oldest = self
                            .shakes
                            .iter()
                            .filter(|(_, h)| h.req.is_none())
                            .min_by_key(|(_, h)| h.deadline)
                            .map(|(id, _)| *id);
                        match oldest {
                            Some(id) => self.drop_shake(id),
                            None => continue,
                        }
                    }
                    sys::tune_connection(sock.as_raw_fd(), SNDBUF, KEEPALIVE_IDLE, USER_TIMEOUT);
                    let id = self.next_id;
                    self.next_id += 1;
                    if self.epoll.add(sock.as_raw_fd(), IN, id).is_err() {
                        continue;
                    }
                    self.shakes.insert(
                        id,
                        Handshake {
                            sock: Some(sock),
                            reader: Reader::new(),
                            deadline: Instant::now() + HELLO_TIMEOUT,
                            req: None,
                            prefix: 0,
                        },
                    );
                }
                Ok(None) => return,
                Err(e) => {
                    // Out of descriptors or memory: rest instead of spinning
                    // on a listener that stays readable.
                    crate::base::log::log_warn!(FI_LOG_EP_CTRL, "tcp pep: accept failed: {e}");
                    let _ = self.epoll.modify(l, 0, TOKEN_LISTENER);
                    self.paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                    return;
                }
            }
        }
    }

    fn drop_shake(&mut self, id: u64) {
        if let Some(h) = self.shakes.remove(&id) {
            if let Some(s) = &h.sock {
                self.epoll.delete(s.as_raw_fd());
            }
        }
    }

    /// Reads a handshake; a complete CONNREQ is left in `req`.
    fn read_shake(&mut self, id: u64) {
        let Some(h) = self.shakes.get_mut(&id) else { return };
        let Some(fd) = h.sock.as_ref().map(|s| s.as_raw_fd()) else {
            return;
        };
        let mut scratch = [0u8; 64];
        let out = h
            .reader
            .pump(&mut Fd(fd), &mut NoCore, &HANDSHAKE_LIMITS, false, &mut scratch, 4);
        match out {
            Outcome::Drained | Outcome::Budget => {}
            Outcome::Link(hdr) => {
                let payload = h.reader.link_payload().to_vec();
                match cm::parse(&hdr, &payload) {
                    Ok(CmKind::ConnReq) => {
                        h.req = Some(payload);
                        h.prefix = cm::rts_prefix(&hdr);
                        // Nothing more is read until the application
                        // accepts or rejects.
                        self.epoll.delete(fd);
                    }
                    r => {
                        crate::base::log::log_warn!(FI_LOG_EP_CTRL, "tcp pep: bad connection request: {r:?}");
                        self.drop_shake(id);
                    }
                }
            }
            _ => self.drop_shake(id),
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.shakes
            .values()
            .filter(|h| h.req.is_none())
            .map(|h| h.deadline)
            .chain(self.paused_until)
            .min()
    }

    fn arm_timer(&mut self) {
        let next = self.next_deadline();
        if next != self.timer_at {
            self.timer_at = next;
            self.timer
                .set(next.map(|t| t.saturating_duration_since(Instant::now())));
        }
    }

    fn check_deadlines(&mut self) {
        let now = Instant::now();
        if self.paused_until.is_some_and(|t| t <= now) {
            self.paused_until = None;
            if let Some(l) = self.sock.as_ref().map(|s| s.as_raw_fd()) {
                let _ = self.epoll.modify(l, IN, TOKEN_LISTENER);
            }
        }
        let late: Vec<u64> = self
            .shakes
            .iter()
            .filter(|(_, h)| h.req.is_none() && h.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            self.drop_shake(id);
        }
    }
}

impl Pep {
    fn fid(&self) -> *mut fid {
        self.fid.load(Ordering::Acquire) as *mut fid
    }

    /// Queues FI_CONNREQ for a complete handshake; false if the EQ is full
    /// (the request waits for the next pass).
    fn emit(&self, st: &mut PepState, id: u64) -> bool {
        let Some(eq) = st.eq.as_ref().map(|e| e.arc().clone()) else {
            return false;
        };
        let Some(h) = st.shakes.get_mut(&id) else { return true };
        let (Some(sock), Some(data)) = (h.sock.take(), h.req.clone()) else {
            return true;
        };
        let fd = sock.as_raw_fd();
        let (local, peer) = match (sys::local_addr(fd), sys::peer_addr(fd)) {
            (Ok(l), Ok(p)) => (l, p),
            _ => {
                st.shakes.remove(&id);
                return true; // the client is gone already
            }
        };
        let handle = Obj::create(
            fid {
                fclass: FI_CLASS_CONNREQ,
                context: core::ptr::null_mut(),
                ops: &CONNREQ_FI_OPS,
            },
            Arc::new(ConnReq {
                sock: Mutex::new(Some(sock)),
                prefix: h.prefix,
            }),
        );
        let mut info = self.info.clone();
        info.handle = handle as usize;
        info.addr_format = Addr::Inet(peer).format();
        info.src_addr = Some(Addr::Inet(local).to_bytes());
        info.dest_addr = Some(Addr::Inet(peer).to_bytes());
        if let Some(e) = info.ep.as_mut() {
            e.ep_type = FI_EP_MSG;
        }
        let pushed = info.to_c().and_then(|ci| {
            let e = fi_eq_cm_entry {
                fid: self.fid(),
                info: ci,
            };
            // SAFETY: fi_eq_cm_entry is plain old data.
            let mut bytes = unsafe { crate::transport::addr::as_bytes(&e) }.to_vec();
            bytes.extend_from_slice(&data);
            eq.push_event(FI_CONNREQ, &bytes).inspect_err(|_| {
                // SAFETY: built by to_c just now and not handed out.
                unsafe { crate::fi::attr::free_c_info(ci) };
            })
        });
        if pushed.is_ok() {
            st.shakes.remove(&id);
            return true;
        }
        // Not queued: the connection goes back to the handshake, the
        // handle (never seen by anyone) is freed.
        // SAFETY: `handle` was created above and never handed out.
        if let Ok(o) = unsafe { Obj::<ConnReq>::from_ptr(handle as *const c_void) } {
            let s = o.core.sock.lock().take();
            if let Some(h) = st.shakes.get_mut(&id) {
                h.sock = s;
            }
            // SAFETY: as above.
            unsafe { Obj::destroy(o) };
        }
        false
    }
}

impl Source for Pep {
    fn progress(&self) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let Some(mut st) = self.st.try_lock() else { return };
        if !st.listening {
            return;
        }
        let mut ready = std::mem::take(&mut st.ready);
        let _ = st.epoll.wait(&mut ready, 64, Some(Duration::ZERO));
        let mut timer = false;
        for &(token, _) in &ready {
            match token {
                TOKEN_LISTENER => st.accept_all(),
                TOKEN_TIMER => {
                    st.timer.drain();
                    timer = true;
                }
                id => st.read_shake(id),
            }
        }
        st.ready = ready;
        let complete: Vec<u64> = st
            .shakes
            .iter()
            .filter(|(_, h)| h.req.is_some())
            .map(|(id, _)| *id)
            .collect();
        for id in complete {
            if !self.emit(&mut st, id) {
                break;
            }
        }
        if timer || st.timer_at.is_some_and(|t| t <= Instant::now()) {
            st.timer_at = None;
            st.check_deadlines();
        }
        st.arm_timer();
    }
}

// ---- the C face ----

static PEP_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(pep_close),
    bind: Some(pep_bind),
    control: Some(pep_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static PEP_EP_OPS: fi_ops_ep = fi_ops_ep {
    size: core::mem::size_of::<fi_ops_ep>(),
    cancel: Some(pep_cancel),
    getopt: Some(pep_getopt),
    setopt: Some(pep_setopt),
    tx_ctx: Some(super::ep::ep_tx_ctx),
    rx_ctx: Some(super::ep::ep_rx_ctx),
    rx_size_left: Some(pep_size_left),
    tx_size_left: Some(pep_size_left),
};

static PEP_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: core::mem::size_of::<fi_ops_cm>(),
    setname: Some(pep_setname),
    getname: Some(pep_getname),
    getpeer: Some(super::ep::ep_getpeer),
    connect: Some(super::ep::ep_connect),
    listen: Some(pep_listen),
    accept: Some(super::ep::ep_accept),
    reject: Some(pep_reject),
    shutdown: Some(super::ep::ep_shutdown),
    join: Some(super::ep::ep_join),
};

/// `fi_passive_ep`.
///
/// # Safety
/// `info` must be NULL or a valid `fi_info`.
pub unsafe fn open(f: &Obj<Fabric>, info: *const fi_info, context: *mut c_void) -> Result<*mut fid_pep> {
    // SAFETY: per the contract.
    let info = unsafe { Info::from_c(info) }?;
    let ep_type = info.ep.as_ref().map_or(FI_EP_UNSPEC, |e| e.ep_type);
    if ep_type != FI_EP_MSG && ep_type != FI_EP_UNSPEC {
        return Err(Error::INVAL);
    }
    if let Some(name) = info.domain.as_ref().and_then(|d| d.name.as_deref()) {
        if !name.eq_ignore_ascii_case("tcp") {
            return Err(Error::INVAL);
        }
    }
    let want = match &info.src_addr {
        Some(b) => match Addr::parse(info.addr_format, b) {
            Ok((Addr::Inet(a), _)) => Some(a),
            _ => return Err(Error::INVAL),
        },
        None => None,
    };
    let v6 = want.map_or(info.addr_format == FI_SOCKADDR_IN6, |a| a.is_ipv6());
    let epoll = Epoll::new()?;
    let timer = TimerFd::new()?;
    epoll.add(timer.fd(), IN, TOKEN_TIMER)?;
    let core = Arc::new(Pep {
        users: Users::default(),
        _fabric: Held::new(f.core.clone()),
        engine: f.core.engine.clone(),
        info,
        st: Mutex::new(PepState {
            want,
            v6,
            sock: None,
            listening: false,
            backlog: DEFAULT_BACKLOG,
            iface: f.core.settings.tcp.iface.clone(),
            eq: None,
            epoll,
            timer,
            timer_at: None,
            shakes: HashMap::new(),
            next_id: FIRST_HANDSHAKE,
            paused_until: None,
            ready: Vec::with_capacity(64),
        }),
        fid: AtomicUsize::new(0),
        closed: AtomicBool::new(false),
    });
    let hdr = fid_pep {
        fid: fid {
            fclass: FI_CLASS_PEP,
            context,
            ops: &PEP_FI_OPS,
        },
        ops: &PEP_EP_OPS,
        cm: &PEP_CM_OPS,
    };
    let p = Obj::create(hdr, core.clone());
    core.fid.store(p as usize, Ordering::Release);
    Ok(p)
}

type PepObj = Obj<Pep>;

/// # Safety
/// `p` must be NULL or readable as a `struct fid`.
unsafe fn with_pep<R: fi::FfiRet>(what: &'static str, p: *const c_void, f: impl FnOnce(&PepObj) -> Result<R>) -> R {
    // SAFETY: forwarded.
    unsafe { fi::call_obj::<Pep, R>(what, p, f) }
}

unsafe extern "C" fn pep_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's passive endpoint.
    unsafe {
        with_pep("pep close", f as *const c_void, |o| {
            o.core.users.check_idle()?;
            let p = &o.core;
            p.closed.store(true, Ordering::Release);
            let (listening, wait_fd) = {
                let st = p.st.lock();
                (st.listening, st.epoll.fd())
            };
            if listening {
                p.engine.unwatch_fd(wait_fd);
                let src: Arc<dyn Source> = p.clone();
                p.engine.remove_source(&src);
            }
            {
                let mut st = p.st.lock();
                st.shakes.clear();
                st.sock = None;
                st.eq = None;
                st.listening = false;
            }
            Obj::destroy(o);
            Ok(0)
        })
    }
}

unsafe extern "C" fn pep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: arguments from fi_pep_bind().
    unsafe {
        with_pep("fi_pep_bind", f as *const c_void, |o| {
            if flags != 0 {
                return Err(Error::BADFLAGS);
            }
            if fi::read_in(bfid as *const fid)?.fclass != FI_CLASS_EQ {
                return Err(Error::INVAL);
            }
            let eq = crate::fi::eq::from_fid(bfid)?;
            // The EQ's waits must progress this pep (an EQ of another
            // fabric would not otherwise).
            eq.wait().add_engine(&o.core.engine)?;
            o.core.st.lock().eq = Some(Held::new(eq));
            Ok(0)
        })
    }
}

unsafe extern "C" fn pep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments from fi_control().
    unsafe {
        with_pep("pep control", f as *const c_void, |o| match command {
            FI_BACKLOG => {
                let v = *fi::read_in(arg as *const c_int)?;
                if v <= 0 {
                    return Err(Error::INVAL);
                }
                let mut st = o.core.st.lock();
                st.backlog = v;
                if st.listening {
                    if let Some(s) = &st.sock {
                        sys::start_listening(s.as_raw_fd(), v)?;
                    }
                }
                Ok(0)
            }
            _ => Err(Error::NOSYS),
        })
    }
}

unsafe extern "C" fn pep_cancel(_: *mut fid, _: *mut c_void) -> isize {
    -(FI_ENOSYS as isize)
}

unsafe extern "C" fn pep_size_left(_: *mut fid_ep) -> isize {
    -(FI_ENOSYS as isize)
}

unsafe extern "C" fn pep_getopt(f: *mut fid, level: c_int, name: c_int, val: *mut c_void, len: *mut usize) -> c_int {
    // SAFETY: arguments from fi_getopt().
    unsafe {
        with_pep("fi_getopt", f as *const c_void, |_| {
            if level == FI_OPT_ENDPOINT && name == FI_OPT_CM_DATA_SIZE {
                return match super::connected::cm_data_size_opt(val, len) {
                    0 => Ok(0),
                    r => Err(Error(-r)),
                };
            }
            Err(Error::NOPROTOOPT)
        })
    }
}

unsafe extern "C" fn pep_setopt(_: *mut fid, _: c_int, _: c_int, _: *const c_void, _: usize) -> c_int {
    -FI_ENOPROTOOPT
}

unsafe extern "C" fn pep_setname(f: *mut fid, addr: *mut c_void, addrlen: usize) -> c_int {
    // SAFETY: arguments from fi_setname().
    unsafe {
        with_pep("fi_setname", f as *const c_void, |o| {
            let mut st = o.core.st.lock();
            if st.listening {
                return Err(Error::OPBADSTATE);
            }
            let fmt = match o.core.info.addr_format {
                FI_SOCKADDR_IN | FI_SOCKADDR_IN6 => o.core.info.addr_format,
                _ => FI_SOCKADDR,
            };
            let a = super::connected::read_sockaddr(fmt, addr, Some(addrlen))?;
            if a.is_ipv6() != st.v6 && st.want.is_some() {
                return Err(Error::INVAL);
            }
            let s = sys::bound_socket(&a)?;
            st.v6 = a.is_ipv6();
            st.want = Some(a);
            st.sock = Some(s);
            Ok(0)
        })
    }
}

unsafe extern "C" fn pep_getname(f: *mut fid, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: arguments from fi_getname().
    unsafe {
        with_pep("fi_getname", f as *const c_void, |o| {
            if addrlen.is_null() {
                return Err(Error::INVAL);
            }
            let a = o.core.st.lock().name()?;
            let bytes = Addr::Inet(a).to_bytes();
            let room = *addrlen;
            *addrlen = bytes.len();
            if !addr.is_null() {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, room.min(bytes.len()));
            }
            if room < bytes.len() || addr.is_null() {
                return Err(Error::TOOSMALL);
            }
            Ok(0)
        })
    }
}

unsafe extern "C" fn pep_listen(p: *mut fid_pep) -> c_int {
    // SAFETY: argument from fi_listen().
    unsafe {
        with_pep("fi_listen", p as *const c_void, |o| {
            let pep = &o.core;
            let wait_fd = {
                let mut st = pep.st.lock();
                if st.listening {
                    return Ok(0);
                }
                if st.eq.is_none() {
                    return Err(Error::NOEQ);
                }
                st.bind_default()?;
                let l = st.sock.as_ref().ok_or(Error::INVAL)?.as_raw_fd();
                sys::start_listening(l, st.backlog)?;
                st.epoll.add(l, IN, TOKEN_LISTENER)?;
                st.listening = true;
                st.epoll.fd()
            };
            pep.engine.watch_fd(wait_fd, IN)?;
            pep.engine.add_source(pep.clone());
            Ok(0)
        })
    }
}

unsafe extern "C" fn pep_reject(p: *mut fid_pep, handle: *mut fid, param: *const c_void, paramlen: usize) -> c_int {
    // SAFETY: arguments from fi_reject().
    unsafe {
        with_pep("fi_reject", p as *const c_void, |_| {
            if paramlen > CM_DATA_MAX {
                return Err(Error::INVAL);
            }
            let data = super::connected::cm_data(param, paramlen)?;
            let sock = take_conn(handle)?;
            let (h, payload) = cm::encode(CmKind::Reject, data, 0);
            let v = [
                libc::iovec {
                    iov_base: h.as_ptr() as *mut c_void,
                    iov_len: h.len(),
                },
                libc::iovec {
                    iov_base: payload.as_ptr() as *mut c_void,
                    iov_len: payload.len(),
                },
            ];
            // A fresh connection's send buffer takes the few hundred bytes
            // at once; if it does not, the client sees the connection close
            // (a refusal without data). Then FIN: nothing is left unread,
            // so no reset overtakes the REJECT.
            // SAFETY: the iovecs cover our own buffers.
            let _: Io = sys::send_iov(sock.as_raw_fd(), &v);
            sys::shutdown_write(sock.as_raw_fd());
            Ok(0)
        })
    }
}
