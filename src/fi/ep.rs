//! Endpoints: the C object (`fid_ep`) with all of its operation tables, and
//! the translation of each libfabric call into the endpoint core
//! ([`rdm::Inner`]). Matching is in [`matching`], protocols in [`rdm`].

use super::connected as msg;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::domain::{Domain, TransportKind};
use crate::core::engine::matching::{IovList, IOV_MAX};
use crate::core::engine::{self as rdm, buffered, Binds, EpConfig, RecvArgs, SendArgs};
use crate::core::progress::Source;
use crate::core::users::{HasUsers, Held, Users};
use crate::fi::{self, noops, FiObject, Obj};
use crate::transport::addr::Addr;
use core::ffi::{c_int, c_void};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Defaults when the application's info leaves a size at 0.
pub const DEFAULT_TX_SIZE: usize = 1024;
pub const DEFAULT_RX_SIZE: usize = 1024;
pub const DEFAULT_INJECT_SIZE: usize = crate::provider::getinfo::INJECT_SIZE;
pub const DEFAULT_MAX_MSG_SIZE: usize = 1 << 30;

pub struct Ep {
    users: Users,
    domain: Held<Domain>,
    pub addr: Addr,
    /// Bindings collected before `fi_enable`; moved to `bound` by it.
    pending: Mutex<Binds>,
    bound: OnceLock<Binds>,
    pub(super) enabled: AtomicBool,
    closed: AtomicBool,
    pub(super) inner: Mutex<rdm::Inner>,
    /// Wait fd registered with the domain's engine.
    pub(super) wait_fd: std::os::fd::RawFd,
    /// Connection state of a connection-oriented (`FI_EP_MSG`) endpoint.
    pub(super) msg: Option<Arc<msg::ConnectedLink>>,
}

impl FiObject for Ep {
    type Header = fid_ep;
    const CLASS: usize = FI_CLASS_EP;
}

impl HasUsers for Ep {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Source for Ep {
    fn progress(&self) {
        if let Some(b) = self.bound.get() {
            if !self.closed.load(Ordering::Acquire) {
                let mut g = self.inner.lock();
                g.progress(b);
                if let Some(m) = &self.msg {
                    m.after_progress(&mut g, b);
                }
            }
        }
    }
    fn set_sleepers(&self, n: usize) {
        self.inner.lock().set_sleepers(n);
    }
    fn has_pending(&self) -> bool {
        match self.inner.try_lock() {
            Some(g) => g.has_pending(),
            None => true,
        }
    }
    fn wants_timer(&self) -> bool {
        self.inner.try_lock().is_none_or(|g| g.waits_on_peers())
    }
}

impl Ep {
    pub(super) fn bound(&self) -> Result<&Binds> {
        if !self.enabled.load(Ordering::Acquire) {
            return Err(Error::OPBADSTATE);
        }
        self.bound.get().ok_or(Error::OPBADSTATE)
    }

    pub fn send(&self, a: SendArgs) -> Result<()> {
        let b = self.bound()?;
        let mut g = self.inner.lock();
        if let Some(m) = &self.msg {
            m.check_send()?;
        }
        g.send(b, a)
    }

    pub fn recv(&self, a: RecvArgs) -> Result<()> {
        let b = self.bound()?;
        let mut g = self.inner.lock();
        if let Some(m) = &self.msg {
            m.check_recv()?;
        }
        g.recv(b, a)
    }
}

fn shm_limits() -> crate::transport::proto::Limits {
    crate::transport::proto::Limits {
        max_payload: crate::transport::shm::EAGER_MAX,
        max_iov: IOV_MAX,
    }
}

/// Eager records and DATA chunks are at most the TCP eager limit; larger
/// messages go by rendezvous (no cross-memory attach over TCP).
fn tcp_limits() -> crate::transport::proto::Limits {
    crate::transport::proto::Limits {
        max_payload: crate::transport::tcp::EAGER_MAX,
        max_iov: IOV_MAX,
    }
}

/// The shm port of an shm endpoint: named by fi_getinfo's src_addr (token 0
/// is its wildcard: pick a fresh one).
fn shm_port(info: &crate::core::attr::Info) -> Result<crate::transport::shm::ShmPort> {
    let token = match &info.src_addr {
        Some(b) => match Addr::parse(FI_ADDR_STR, b) {
            Ok((Addr::Shm(0), _)) => crate::transport::addr::shm_token_random(),
            Ok((Addr::Shm(t), _)) => t,
            _ => return Err(Error::INVAL),
        },
        None => crate::transport::addr::shm_token_random(),
    };
    crate::transport::shm::ShmPort::new(token, shm_limits())
}

/// The TCP port of a tcp endpoint: listens on fi_getinfo's src_addr (a
/// wildcard IP or port 0 means "choose"), else any IPv4 (IPv6 for
/// FI_SOCKADDR_IN6).
fn tcp_port(
    info: &crate::core::attr::Info,
    tcp: &crate::transport::tcp::TcpSettings,
) -> Result<crate::transport::tcp::TcpPort> {
    let src = match &info.src_addr {
        Some(b) => match Addr::parse(info.addr_format, b) {
            Ok((Addr::Inet(a), _)) => a,
            _ => return Err(Error::INVAL),
        },
        None if info.addr_format == FI_SOCKADDR_IN6 => "[::]:0".parse().map_err(|_| Error::INVAL)?,
        None => "0.0.0.0:0".parse().map_err(|_| Error::INVAL)?,
    };
    crate::transport::tcp::TcpPort::new(src, tcp_limits(), tcp)
}

/// `fi_endpoint`.
///
/// # Safety
/// `info` must be NULL or a valid `fi_info`.
pub unsafe fn open(d: &Obj<Domain>, info: *const fi_info, context: *mut c_void) -> Result<*mut fid_ep> {
    // SAFETY: per the contract.
    let info = unsafe { crate::core::attr::Info::from_c(info) }?;
    let ep_type = info.ep.as_ref().map(|e| e.ep_type).unwrap_or(FI_EP_RDM);
    if ep_type == FI_EP_MSG {
        return msg::open(d, &info, context);
    }
    if ep_type != FI_EP_RDM && ep_type != FI_EP_UNSPEC {
        return Err(Error::INVAL);
    }
    let settings = &d.core.fabric().settings;
    let mut cfg = config_from(
        &info,
        FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_MULTI_RECV | FI_SOURCE | FI_DIRECTED_RECV,
        settings,
    );
    let port: Box<dyn crate::transport::Port> = match d.core.transport {
        TransportKind::Shm => Box::new(shm_port(&info)?),
        TransportKind::Tcp => {
            // No cross-memory attach over TCP: large messages are streamed.
            cfg.cma = false;
            Box::new(tcp_port(&info, &settings.tcp)?)
        }
        TransportKind::Auto => {
            let (shm_src, tcp_src) = match &info.src_addr {
                Some(b) => match Addr::parse(FI_ADDR_STR, b) {
                    Ok((Addr::Auto { shm, inet, .. }, _)) => (shm, std::net::SocketAddr::V4(inet)),
                    _ => return Err(Error::INVAL),
                },
                None => (0, "0.0.0.0:0".parse().map_err(|_| Error::INVAL)?),
            };
            let shm = crate::transport::shm::ShmPort::new(
                if shm_src == 0 {
                    crate::transport::addr::shm_token_random()
                } else {
                    shm_src
                },
                shm_limits(),
            )?;
            let tcp = crate::transport::tcp::TcpPort::new(tcp_src, tcp_limits(), &settings.tcp)?;
            Box::new(crate::transport::auto::AutoPort::new(shm, tcp)?)
        }
    };
    let inner = rdm::Inner::new(port, cfg);
    let addr = inner.addr();
    create(d, &info, inner, addr, None, context, &EP_OPS, &EP_CM_OPS)
}

/// The endpoint settings `info` asks for (queue sizes and limits default
/// when 0; `FI_VARIABLE_MSG` lifts `max_msg_size`, fi_msg(3): "Variable
/// messages are not subject to max message length restrictions"), with
/// `default_caps` when it names none. Transport choices (`cma`,
/// `fixed_peer`) are the caller's to adjust.
pub(super) fn config_from(
    info: &crate::core::attr::Info,
    default_caps: u64,
    settings: &crate::core::settings::Settings,
) -> EpConfig {
    let tx = info.tx.clone().unwrap_or_default();
    let rx = info.rx.clone().unwrap_or_default();
    let epa = info.ep.clone().unwrap_or_default();
    let nz = |v: usize, d: usize| if v == 0 { d } else { v };
    let caps = if info.caps == 0 { default_caps } else { info.caps };
    EpConfig {
        caps,
        tx_op_flags: tx.op_flags,
        rx_op_flags: rx.op_flags,
        tx_size: nz(tx.size, DEFAULT_TX_SIZE),
        rx_size: nz(rx.size, DEFAULT_RX_SIZE),
        inject_size: nz(tx.inject_size, DEFAULT_INJECT_SIZE),
        max_msg_size: if caps & FI_VARIABLE_MSG != 0 {
            usize::MAX
        } else {
            nz(epa.max_msg_size, DEFAULT_MAX_MSG_SIZE)
        },
        min_multi_recv: 64,
        unexp_budget: settings.unexp_budget,
        cma: settings.shm_cma,
        fixed_peer: None,
    }
}

/// Opens the endpoint object around `inner` for either endpoint type:
/// buffered receives when the info asks for them (or for
/// `FI_VARIABLE_MSG`), the core registered with the domain's progress
/// engine, a fid with the type's endpoint and CM operations.
#[allow(clippy::too_many_arguments)]
pub(super) fn create(
    d: &Obj<Domain>,
    info: &crate::core::attr::Info,
    mut inner: rdm::Inner,
    addr: Addr,
    msg: Option<Arc<msg::ConnectedLink>>,
    context: *mut c_void,
    ops: &'static fi_ops_ep,
    cm: &'static fi_ops_cm,
) -> Result<*mut fid_ep> {
    if buffered::requested(info) || inner.config().caps & FI_VARIABLE_MSG != 0 {
        inner.enable_buffered(d.core.fabric().settings.buffered_pool);
    }
    let wait_fd = inner.wait_fd();
    let core = Arc::new(Ep {
        users: Users::default(),
        domain: Held::new(d.core.clone()),
        addr,
        pending: Mutex::new(Binds::default()),
        bound: OnceLock::new(),
        enabled: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        inner: Mutex::new(inner),
        wait_fd,
        msg,
    });
    let engine = &d.core.engine;
    engine.watch_fd(wait_fd, crate::sys::IN)?;
    engine.add_source(core.clone());
    let hdr = fid_ep {
        fid: fid {
            fclass: FI_CLASS_EP,
            context,
            ops: &EP_FI_OPS,
        },
        ops,
        cm,
        msg: &EP_MSG_OPS,
        rma: &stubs::RMA_OPS,
        tagged: &EP_TAGGED_OPS,
        atomic: &stubs::ATOMIC_OPS,
        collective: &stubs::COLLECTIVE_OPS,
    };
    let ep = Obj::create(hdr, core.clone());
    core.inner.lock().set_ep_fid(ep as usize);
    Ok(ep)
}

static EP_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(ep_close),
    bind: Some(ep_bind),
    control: Some(ep_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static EP_OPS: fi_ops_ep = fi_ops_ep {
    size: core::mem::size_of::<fi_ops_ep>(),
    cancel: Some(ep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(ep_tx_ctx),
    rx_ctx: Some(ep_rx_ctx),
    rx_size_left: Some(ep_rx_size_left),
    tx_size_left: Some(ep_tx_size_left),
};

static EP_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: core::mem::size_of::<fi_ops_cm>(),
    setname: Some(ep_setname),
    getname: Some(ep_getname),
    getpeer: Some(ep_getpeer),
    connect: Some(ep_connect),
    listen: Some(ep_listen),
    accept: Some(ep_accept),
    reject: Some(ep_reject),
    shutdown: Some(ep_shutdown),
    join: Some(ep_join),
};

static EP_MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: core::mem::size_of::<fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(msg_senddata),
    injectdata: Some(msg_injectdata),
};

static EP_TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: core::mem::size_of::<fi_ops_tagged>(),
    recv: Some(tag_recv),
    recvv: Some(tag_recvv),
    recvmsg: Some(tag_recvmsg),
    send: Some(tag_send),
    sendv: Some(tag_sendv),
    sendmsg: Some(tag_sendmsg),
    inject: Some(tag_inject),
    senddata: Some(tag_senddata),
    injectdata: Some(tag_injectdata),
};

pub(super) type EpObj = Obj<Ep>;

/// Runs `f` on the endpoint behind a C pointer.
///
/// # Safety
/// `p` must be NULL or readable as a `struct fid`.
unsafe fn with_ep<R: fi::FfiRet>(what: &'static str, p: *const c_void, f: impl FnOnce(&EpObj) -> Result<R>) -> R {
    // SAFETY: forwarded.
    unsafe { fi::call_obj::<Ep, R>(what, p, f) }
}

unsafe extern "C" fn ep_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's endpoint fid.
    unsafe {
        with_ep("ep close", f as *const c_void, |o| {
            o.core.users.check_idle()?;
            let ep = &o.core;
            ep.closed.store(true, Ordering::Release);
            if let Some(m) = &ep.msg {
                m.on_close(ep);
            }
            let engine = &ep.domain.engine;
            engine.unwatch_fd(ep.wait_fd);
            let src: Arc<dyn Source> = o.core.clone();
            engine.remove_source(&src);
            {
                let mut g = ep.inner.lock();
                if let Some(b) = ep.bound.get() {
                    let cfg = g.config();
                    if let Some(c) = &b.tx_cq {
                        c.release_capacity(cfg.tx_size);
                    }
                    if let Some(c) = &b.rx_cq {
                        c.release_capacity(cfg.rx_size);
                    }
                }
                g.close();
            }
            Obj::destroy(o);
            Ok(0)
        })
    }
}

unsafe extern "C" fn ep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: arguments from fi_ep_bind().
    unsafe {
        with_ep("fi_ep_bind", f as *const c_void, |o| {
            if o.core.enabled.load(Ordering::Acquire) {
                return Err(Error::OPBADSTATE);
            }
            let class = fi::read_in(bfid as *const fid)?.fclass;
            let mut b = o.core.pending.lock();
            match class {
                FI_CLASS_AV => {
                    if flags != 0 {
                        return Err(Error::BADFLAGS);
                    }
                    let av = Obj::<crate::core::av::Av>::from_ptr(bfid as *const c_void)?;
                    if b.av.is_some() {
                        return Err(Error::INVAL);
                    }
                    b.av = Some(Held::new(av.core.clone()));
                }
                FI_CLASS_CQ => {
                    if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 {
                        return Err(Error::BADFLAGS);
                    }
                    if flags & (FI_TRANSMIT | FI_RECV) == 0 {
                        return Err(Error::INVAL);
                    }
                    let cq = Obj::<crate::core::cq::Cq>::from_ptr(bfid as *const c_void)?;
                    let sel = flags & FI_SELECTIVE_COMPLETION != 0;
                    if (flags & FI_TRANSMIT != 0 && b.tx_cq.is_some()) || (flags & FI_RECV != 0 && b.rx_cq.is_some()) {
                        return Err(Error::INVAL);
                    }
                    if flags & FI_TRANSMIT != 0 {
                        b.tx_cq = Some(Held::new(cq.core.clone()));
                        b.tx_selective = sel;
                    }
                    if flags & FI_RECV != 0 {
                        b.rx_cq = Some(Held::new(cq.core.clone()));
                        b.rx_selective = sel;
                    }
                }
                FI_CLASS_CNTR => {
                    let valid = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
                    if flags & !valid != 0 {
                        return Err(Error::BADFLAGS);
                    }
                    if flags == 0 {
                        return Err(Error::INVAL);
                    }
                    let c = Obj::<crate::core::cntr::Cntr>::from_ptr(bfid as *const c_void)?;
                    if flags & FI_SEND != 0 {
                        b.send_cntr = Some(Held::new(c.core.clone()));
                    }
                    if flags & FI_RECV != 0 {
                        b.recv_cntr = Some(Held::new(c.core.clone()));
                    }
                    // FI_READ/FI_WRITE/FI_REMOTE_*: accepted; rustfab offers no
                    // RMA, so those counters never move.
                }
                FI_CLASS_EQ => {
                    let eq = crate::core::eq::from_fid(bfid)?;
                    b.eq = Some(Held::new(eq));
                }
                _ => return Err(Error::INVAL),
            }
            Ok(0)
        })
    }
}

pub(super) unsafe extern "C" fn ep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments from fi_control()/fi_enable().
    unsafe {
        with_ep("ep control", f as *const c_void, |o| {
            let ep = &o.core;
            match command {
                FI_ENABLE => {
                    if ep.enabled.load(Ordering::Acquire) {
                        return Ok(0);
                    }
                    let b = std::mem::take(&mut *ep.pending.lock());
                    let needs = match &ep.msg {
                        Some(m) => m.on_enable(ep, &b),
                        None if b.av.is_none() => Err(Error::NOAV),
                        None => Ok(()),
                    };
                    if let Err(e) = needs {
                        *ep.pending.lock() = b;
                        return Err(e);
                    }
                    if b.rx_cq.is_none() && ep.inner.lock().buffered_opts().is_some() {
                        // Buffered messages are announced on the receive CQ.
                        *ep.pending.lock() = b;
                        return Err(Error::NOCQ);
                    }
                    let (tx_size, rx_size) = {
                        let g = ep.inner.lock();
                        (g.config().tx_size, g.config().rx_size)
                    };
                    // A CQ keeps room for every operation its endpoints may
                    // have outstanding (cq.rs: capacity and overrun).
                    let reserved = b
                        .tx_cq
                        .as_ref()
                        .map(|c| c.reserve_capacity(tx_size))
                        .transpose()
                        .and_then(|_| {
                            b.rx_cq
                                .as_ref()
                                .map(|c| c.reserve_capacity(rx_size))
                                .transpose()
                                .inspect_err(|_| {
                                    if let Some(c) = &b.tx_cq {
                                        c.release_capacity(tx_size);
                                    }
                                })
                        });
                    if let Err(e) = reserved {
                        *ep.pending.lock() = b;
                        return Err(e);
                    }
                    let _ = ep.bound.set(b);
                    ep.enabled.store(true, Ordering::Release);
                    Ok(0)
                }
                FI_GETOPSFLAG | FI_SETOPSFLAG => {
                    if arg.is_null() {
                        return Err(Error::INVAL);
                    }
                    let flags = arg as *mut u64;
                    let v = *flags;
                    let mut g = ep.inner.lock();
                    let cfg = g.config_mut();
                    let (tx, rx) = (v & FI_TRANSMIT != 0, v & FI_RECV != 0);
                    if tx == rx {
                        return Err(Error::INVAL);
                    }
                    let slot = if tx { &mut cfg.tx_op_flags } else { &mut cfg.rx_op_flags };
                    if command == FI_GETOPSFLAG {
                        *flags = *slot;
                    } else {
                        *slot = v & !(FI_TRANSMIT | FI_RECV);
                    }
                    Ok(0)
                }
                _ => Err(Error::NOSYS),
            }
        })
    }
}

pub(super) unsafe extern "C" fn ep_cancel(f: *mut fid, context: *mut c_void) -> isize {
    // SAFETY: arguments from fi_cancel().
    unsafe {
        with_ep("fi_cancel", f as *const c_void, |o| {
            let b = o.core.bound()?;
            o.core.inner.lock().cancel(b, context as usize)?;
            Ok(0)
        })
    }
}

pub(super) unsafe extern "C" fn ep_getopt(
    f: *mut fid,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut usize,
) -> c_int {
    // SAFETY: arguments from fi_getopt().
    unsafe {
        with_ep("fi_getopt", f as *const c_void, |o| {
            if level != FI_OPT_ENDPOINT {
                return Err(Error::NOPROTOOPT);
            }
            if val.is_null() || len.is_null() {
                return Err(Error::INVAL);
            }
            match name {
                FI_OPT_MIN_MULTI_RECV => {
                    if *len < core::mem::size_of::<usize>() {
                        *len = core::mem::size_of::<usize>();
                        return Err(Error::TOOSMALL);
                    }
                    *(val as *mut usize) = o.core.inner.lock().config().min_multi_recv;
                    *len = core::mem::size_of::<usize>();
                    Ok(0)
                }
                FI_OPT_BUFFERED_LIMIT | FI_OPT_BUFFERED_MIN => {
                    if *len < core::mem::size_of::<usize>() {
                        *len = core::mem::size_of::<usize>();
                        return Err(Error::TOOSMALL);
                    }
                    *(val as *mut usize) = buffered::getopt(&mut o.core.inner.lock(), name)?;
                    *len = core::mem::size_of::<usize>();
                    Ok(0)
                }
                _ => Err(Error::NOPROTOOPT),
            }
        })
    }
}

pub(super) unsafe extern "C" fn ep_setopt(
    f: *mut fid,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: arguments from fi_setopt().
    unsafe {
        with_ep("fi_setopt", f as *const c_void, |o| {
            if level != FI_OPT_ENDPOINT {
                return Err(Error::NOPROTOOPT);
            }
            if val.is_null() {
                return Err(Error::INVAL);
            }
            match name {
                FI_OPT_MIN_MULTI_RECV => {
                    if len != core::mem::size_of::<usize>() {
                        return Err(Error::INVAL);
                    }
                    let v = *(val as *const usize);
                    o.core.inner.lock().config_mut().min_multi_recv = v;
                    Ok(0)
                }
                FI_OPT_BUFFERED_LIMIT | FI_OPT_BUFFERED_MIN => {
                    if len != core::mem::size_of::<usize>() {
                        return Err(Error::INVAL);
                    }
                    // "Any adjustments must be made prior to enabling the endpoint."
                    if o.core.enabled.load(Ordering::Acquire) {
                        return Err(Error::OPBADSTATE);
                    }
                    let v = *(val as *const usize);
                    buffered::setopt(&mut o.core.inner.lock(), name, v)?;
                    Ok(0)
                }
                _ => Err(Error::NOPROTOOPT),
            }
        })
    }
}

/// Scalable-endpoint contexts are not offered (max_ep_tx/rx_ctx = 1).
pub(super) unsafe extern "C" fn ep_tx_ctx(
    _: *mut fid_ep,
    _: c_int,
    _: *mut fi_tx_attr,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

pub(super) unsafe extern "C" fn ep_rx_ctx(
    _: *mut fid_ep,
    _: c_int,
    _: *mut fi_rx_attr,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

pub(super) unsafe extern "C" fn ep_rx_size_left(e: *mut fid_ep) -> isize {
    // SAFETY: argument from fi_rx_size_left().
    unsafe {
        with_ep("fi_rx_size_left", e as *const c_void, |o| {
            o.core.bound()?;
            let g = o.core.inner.lock();
            Ok(g.config().rx_size.saturating_sub(g.rx_posted()) as isize)
        })
    }
}

pub(super) unsafe extern "C" fn ep_tx_size_left(e: *mut fid_ep) -> isize {
    // SAFETY: argument from fi_tx_size_left().
    unsafe {
        with_ep("fi_tx_size_left", e as *const c_void, |o| {
            o.core.bound()?;
            let g = o.core.inner.lock();
            Ok(g.config().tx_size.saturating_sub(g.tx_outstanding()) as isize)
        })
    }
}

/// fi_cm(3) getname: copy up to `*addrlen`, always report the real size,
/// -FI_ETOOSMALL when it did not fit.
unsafe extern "C" fn ep_getname(f: *mut fid, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: arguments from fi_getname().
    unsafe {
        with_ep("fi_getname", f as *const c_void, |o| {
            if addrlen.is_null() {
                return Err(Error::INVAL);
            }
            let bytes = o.core.addr.to_bytes();
            let room = *addrlen;
            *addrlen = bytes.len();
            if room < bytes.len() || addr.is_null() {
                if !addr.is_null() {
                    core::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, room);
                }
                return Err(Error::TOOSMALL);
            }
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len());
            Ok(0)
        })
    }
}

/// RDM endpoints take their address from fi_getinfo/fi_endpoint.
unsafe extern "C" fn ep_setname(_: *mut fid, _: *mut c_void, _: usize) -> c_int {
    -FI_ENOSYS
}

/// Connection management applies to FI_EP_MSG endpoints only.
pub(super) unsafe extern "C" fn ep_getpeer(_: *mut fid_ep, _: *mut c_void, _: *mut usize) -> c_int {
    -FI_ENOSYS
}
pub(super) unsafe extern "C" fn ep_connect(_: *mut fid_ep, _: *const c_void, _: *const c_void, _: usize) -> c_int {
    -FI_ENOSYS
}
pub(super) unsafe extern "C" fn ep_listen(_: *mut fid_pep) -> c_int {
    -FI_ENOSYS
}
pub(super) unsafe extern "C" fn ep_accept(_: *mut fid_ep, _: *const c_void, _: usize) -> c_int {
    -FI_ENOSYS
}
pub(super) unsafe extern "C" fn ep_reject(_: *mut fid_pep, _: *mut fid, _: *const c_void, _: usize) -> c_int {
    -FI_ENOSYS
}
pub(super) unsafe extern "C" fn ep_shutdown(_: *mut fid_ep, _: u64) -> c_int {
    -FI_ENOSYS
}
/// Multicast is not offered.
pub(super) unsafe extern "C" fn ep_join(
    _: *mut fid_ep,
    _: *const c_void,
    _: u64,
    _: *mut *mut fid_mc,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

// ------------------------------------------------------------------ data ops

/// Builds an IovList from a C iovec array, enforcing `iov_limit`.
///
/// # Safety
/// `iov` must be NULL or point to `count` iovecs.
unsafe fn iov_from_c(iov: *const libc::iovec, count: usize) -> Result<IovList> {
    if count > IOV_MAX {
        return Err(Error::INVAL);
    }
    // SAFETY: per the contract.
    let v = unsafe { fi::slice_in(iov, count) }?;
    let mut l = IovList::new();
    for io in v {
        if io.iov_base.is_null() && io.iov_len > 0 {
            return Err(Error::INVAL);
        }
        l.push(io.iov_base as usize, io.iov_len);
    }
    Ok(l)
}

/// The buffers of a `fi_recvmsg`/`fi_trecvmsg`: none with FI_DISCARD
/// (fi_msg(3): "the receive input buffer(s) and length parameters are
/// ignored").
///
/// # Safety
/// As [`iov_from_c`] when `flags` has no FI_DISCARD.
unsafe fn recv_iov(iov: *const libc::iovec, count: usize, flags: u64) -> Result<IovList> {
    if flags & FI_DISCARD != 0 {
        return Ok(IovList::new());
    }
    // SAFETY: forwarded contract.
    unsafe { iov_from_c(iov, count) }
}

fn iov_single(buf: *const c_void, len: usize) -> Result<IovList> {
    if buf.is_null() && len > 0 {
        return Err(Error::INVAL);
    }
    Ok(IovList::single(buf as usize, len))
}

const COMPLETION_LEVELS: u64 = FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE;
const SEND_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_REMOTE_CQ_DATA
    | FI_MORE
    | FI_FENCE
    | COMPLETION_LEVELS
    | FI_TRANSMIT
    | FI_MSG
    | FI_TAGGED
    | FI_COMMIT_COMPLETE;
const RECV_FLAGS: u64 = FI_COMPLETION | FI_MULTI_RECV | FI_MORE | FI_RECV | FI_MSG | FI_TAGGED | FI_REMOTE_CQ_DATA;
const TAGGED_RECV_FLAGS: u64 = RECV_FLAGS | FI_PEEK | FI_CLAIM | FI_DISCARD;

fn tx_flags(o: &EpObj, explicit: Option<u64>) -> Result<u64> {
    let defaults = o.core.inner.lock().config().tx_op_flags;
    match explicit {
        None => Ok(defaults),
        Some(f) => {
            if f & !SEND_FLAGS != 0 {
                return Err(Error::BADFLAGS);
            }
            // Without an explicit completion level, the endpoint's default applies.
            Ok(if f & COMPLETION_LEVELS == 0 {
                f | (defaults & COMPLETION_LEVELS)
            } else {
                f
            })
        }
    }
}

fn rx_flags(o: &EpObj, explicit: Option<u64>, tagged: bool) -> Result<u64> {
    match explicit {
        None => Ok(o.core.inner.lock().config().rx_op_flags),
        Some(f) => {
            let valid = if tagged {
                TAGGED_RECV_FLAGS
            } else if f & (FI_CLAIM | FI_DISCARD) != 0 && o.core.inner.lock().buffered_opts().is_some() {
                // fi_msg(3): FI_CLAIM/FI_DISCARD apply to endpoints with
                // FI_BUFFERED_RECV.
                RECV_FLAGS | FI_CLAIM | FI_DISCARD
            } else {
                RECV_FLAGS
            };
            if f & !valid != 0 {
                return Err(Error::BADFLAGS);
            }
            Ok(f)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn do_send(
    o: &EpObj,
    iov: IovList,
    dest: fi_addr_t,
    tagged: bool,
    tag: u64,
    data: Option<u64>,
    flags: Option<u64>,
    context: *mut c_void,
    inject_call: bool,
) -> Result<isize> {
    let mut flags = tx_flags(o, flags)?;
    if let Some(_d) = data {
        flags |= FI_REMOTE_CQ_DATA;
    }
    if flags & FI_FENCE != 0 && o.core.inner.lock().tx_outstanding() > 0 {
        // Fence: do not start before every earlier operation completed.
        return Err(Error::AGAIN);
    }
    o.core.send(SendArgs {
        dest,
        iov,
        tagged,
        tag,
        data: data.unwrap_or(0),
        flags,
        context: context as usize,
        inject_call,
    })?;
    Ok(0)
}

#[allow(clippy::too_many_arguments)]
fn do_recv(
    o: &EpObj,
    iov: IovList,
    src: fi_addr_t,
    tagged: bool,
    tag: u64,
    ignore: u64,
    flags: Option<u64>,
    context: *mut c_void,
) -> Result<isize> {
    let flags = rx_flags(o, flags, tagged)?;
    o.core.recv(RecvArgs {
        src,
        iov,
        tagged,
        tag,
        ignore,
        flags,
        context: context as usize,
    })?;
    Ok(0)
}

unsafe extern "C" fn msg_recv(
    e: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_recv().
    unsafe {
        with_ep("fi_recv", e as *const c_void, |o| {
            do_recv(o, iov_single(buf, len)?, src, false, 0, 0, None, ctx)
        })
    }
}

unsafe extern "C" fn msg_recvv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_recvv().
    unsafe {
        with_ep("fi_recvv", e as *const c_void, |o| {
            do_recv(o, iov_from_c(iov, count)?, src, false, 0, 0, None, ctx)
        })
    }
}

unsafe extern "C" fn msg_recvmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    // SAFETY: arguments from fi_recvmsg().
    unsafe {
        with_ep("fi_recvmsg", e as *const c_void, |o| {
            let m = fi::read_in(msg)?;
            do_recv(
                o,
                recv_iov(m.msg_iov, m.iov_count, flags)?,
                m.addr,
                false,
                0,
                0,
                Some(flags),
                m.context,
            )
        })
    }
}

unsafe extern "C" fn msg_send(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_send().
    unsafe {
        with_ep("fi_send", e as *const c_void, |o| {
            do_send(o, iov_single(buf, len)?, dest, false, 0, None, None, ctx, false)
        })
    }
}

unsafe extern "C" fn msg_sendv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_sendv().
    unsafe {
        with_ep("fi_sendv", e as *const c_void, |o| {
            do_send(o, iov_from_c(iov, count)?, dest, false, 0, None, None, ctx, false)
        })
    }
}

unsafe extern "C" fn msg_sendmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    // SAFETY: arguments from fi_sendmsg().
    unsafe {
        with_ep("fi_sendmsg", e as *const c_void, |o| {
            let m = fi::read_in(msg)?;
            let data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data);
            do_send(
                o,
                iov_from_c(m.msg_iov, m.iov_count)?,
                m.addr,
                false,
                0,
                data,
                Some(flags),
                m.context,
                false,
            )
        })
    }
}

unsafe extern "C" fn msg_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t) -> isize {
    // SAFETY: arguments from fi_inject().
    unsafe {
        with_ep("fi_inject", e as *const c_void, |o| {
            do_send(
                o,
                iov_single(buf, len)?,
                dest,
                false,
                0,
                None,
                None,
                core::ptr::null_mut(),
                true,
            )
        })
    }
}

unsafe extern "C" fn msg_senddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_senddata().
    unsafe {
        with_ep("fi_senddata", e as *const c_void, |o| {
            do_send(o, iov_single(buf, len)?, dest, false, 0, Some(data), None, ctx, false)
        })
    }
}

unsafe extern "C" fn msg_injectdata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
) -> isize {
    // SAFETY: arguments from fi_injectdata().
    unsafe {
        with_ep("fi_injectdata", e as *const c_void, |o| {
            do_send(
                o,
                iov_single(buf, len)?,
                dest,
                false,
                0,
                Some(data),
                None,
                core::ptr::null_mut(),
                true,
            )
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_recv(
    e: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_trecv().
    unsafe {
        with_ep("fi_trecv", e as *const c_void, |o| {
            do_recv(o, iov_single(buf, len)?, src, true, tag, ignore, None, ctx)
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_recvv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_trecvv().
    unsafe {
        with_ep("fi_trecvv", e as *const c_void, |o| {
            do_recv(o, iov_from_c(iov, count)?, src, true, tag, ignore, None, ctx)
        })
    }
}

unsafe extern "C" fn tag_recvmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: arguments from fi_trecvmsg().
    unsafe {
        with_ep("fi_trecvmsg", e as *const c_void, |o| {
            let m = fi::read_in(msg)?;
            do_recv(
                o,
                recv_iov(m.msg_iov, m.iov_count, flags)?,
                m.addr,
                true,
                m.tag,
                m.ignore,
                Some(flags),
                m.context,
            )
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_send(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_tsend().
    unsafe {
        with_ep("fi_tsend", e as *const c_void, |o| {
            do_send(o, iov_single(buf, len)?, dest, true, tag, None, None, ctx, false)
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_sendv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_tsendv().
    unsafe {
        with_ep("fi_tsendv", e as *const c_void, |o| {
            do_send(o, iov_from_c(iov, count)?, dest, true, tag, None, None, ctx, false)
        })
    }
}

unsafe extern "C" fn tag_sendmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: arguments from fi_tsendmsg().
    unsafe {
        with_ep("fi_tsendmsg", e as *const c_void, |o| {
            let m = fi::read_in(msg)?;
            let data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data);
            do_send(
                o,
                iov_from_c(m.msg_iov, m.iov_count)?,
                m.addr,
                true,
                m.tag,
                data,
                Some(flags),
                m.context,
                false,
            )
        })
    }
}

unsafe extern "C" fn tag_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t, tag: u64) -> isize {
    // SAFETY: arguments from fi_tinject().
    unsafe {
        with_ep("fi_tinject", e as *const c_void, |o| {
            do_send(
                o,
                iov_single(buf, len)?,
                dest,
                true,
                tag,
                None,
                None,
                core::ptr::null_mut(),
                true,
            )
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_senddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_tsenddata().
    unsafe {
        with_ep("fi_tsenddata", e as *const c_void, |o| {
            do_send(o, iov_single(buf, len)?, dest, true, tag, Some(data), None, ctx, false)
        })
    }
}

unsafe extern "C" fn tag_injectdata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
) -> isize {
    // SAFETY: arguments from fi_tinjectdata().
    unsafe {
        with_ep("fi_tinjectdata", e as *const c_void, |o| {
            do_send(
                o,
                iov_single(buf, len)?,
                dest,
                true,
                tag,
                Some(data),
                None,
                core::ptr::null_mut(),
                true,
            )
        })
    }
}

/// Operation tables for capabilities rustfab does not offer (RMA, atomics,
/// collectives): every slot returns -FI_ENOSYS, as libfabric's own
/// `fi_no_*` stubs do. fi_getinfo never advertises these capabilities.
mod stubs {
    use crate::abi::*;
    use core::ffi::{c_int, c_void};
    type Ep = *mut fid_ep;
    type D = *mut *mut c_void;
    type V = *mut c_void;
    type C = *const c_void;
    const NOSYS: isize = -(FI_ENOSYS as isize);

    unsafe extern "C" fn rma_rw(_: Ep, _: V, _: usize, _: V, _: fi_addr_t, _: u64, _: u64, _: V) -> isize {
        NOSYS
    }
    unsafe extern "C" fn rma_w(_: Ep, _: C, _: usize, _: V, _: fi_addr_t, _: u64, _: u64, _: V) -> isize {
        NOSYS
    }
    unsafe extern "C" fn rma_v(
        _: Ep,
        _: *const libc::iovec,
        _: D,
        _: usize,
        _: fi_addr_t,
        _: u64,
        _: u64,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn rma_msg(_: Ep, _: *const fi_msg_rma, _: u64) -> isize {
        NOSYS
    }
    unsafe extern "C" fn rma_inject(_: Ep, _: C, _: usize, _: fi_addr_t, _: u64, _: u64) -> isize {
        NOSYS
    }
    unsafe extern "C" fn rma_writedata(
        _: Ep,
        _: C,
        _: usize,
        _: V,
        _: u64,
        _: fi_addr_t,
        _: u64,
        _: u64,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn rma_injectdata(_: Ep, _: C, _: usize, _: u64, _: fi_addr_t, _: u64, _: u64) -> isize {
        NOSYS
    }
    pub static RMA_OPS: fi_ops_rma = fi_ops_rma {
        size: core::mem::size_of::<fi_ops_rma>(),
        read: Some(rma_rw),
        readv: Some(rma_v),
        readmsg: Some(rma_msg),
        write: Some(rma_w),
        writev: Some(rma_v),
        writemsg: Some(rma_msg),
        inject: Some(rma_inject),
        writedata: Some(rma_writedata),
        injectdata: Some(rma_injectdata),
    };

    unsafe extern "C" fn at_write(
        _: Ep,
        _: C,
        _: usize,
        _: V,
        _: fi_addr_t,
        _: u64,
        _: u64,
        _: u32,
        _: u32,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn at_writev(
        _: Ep,
        _: *const fi_ioc,
        _: D,
        _: usize,
        _: fi_addr_t,
        _: u64,
        _: u64,
        _: u32,
        _: u32,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn at_writemsg(_: Ep, _: *const fi_msg_atomic, _: u64) -> isize {
        NOSYS
    }
    unsafe extern "C" fn at_inject(_: Ep, _: C, _: usize, _: fi_addr_t, _: u64, _: u64, _: u32, _: u32) -> isize {
        NOSYS
    }
    unsafe extern "C" fn at_rw(
        _: Ep,
        _: C,
        _: usize,
        _: V,
        _: V,
        _: V,
        _: fi_addr_t,
        _: u64,
        _: u64,
        _: u32,
        _: u32,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn at_rwv(
        _: Ep,
        _: *const fi_ioc,
        _: D,
        _: usize,
        _: *mut fi_ioc,
        _: D,
        _: usize,
        _: fi_addr_t,
        _: u64,
        _: u64,
        _: u32,
        _: u32,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn at_rwmsg(_: Ep, _: *const fi_msg_atomic, _: *mut fi_ioc, _: D, _: usize, _: u64) -> isize {
        NOSYS
    }
    unsafe extern "C" fn at_cw(
        _: Ep,
        _: C,
        _: usize,
        _: V,
        _: C,
        _: V,
        _: V,
        _: V,
        _: fi_addr_t,
        _: u64,
        _: u64,
        _: u32,
        _: u32,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn at_cwv(
        _: Ep,
        _: *const fi_ioc,
        _: D,
        _: usize,
        _: *const fi_ioc,
        _: D,
        _: usize,
        _: *mut fi_ioc,
        _: D,
        _: usize,
        _: fi_addr_t,
        _: u64,
        _: u64,
        _: u32,
        _: u32,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn at_cwmsg(
        _: Ep,
        _: *const fi_msg_atomic,
        _: *const fi_ioc,
        _: D,
        _: usize,
        _: *mut fi_ioc,
        _: D,
        _: usize,
        _: u64,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn at_valid(_: Ep, _: u32, _: u32, _: *mut usize) -> c_int {
        -FI_ENOSYS
    }
    pub static ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
        size: core::mem::size_of::<fi_ops_atomic>(),
        write: Some(at_write),
        writev: Some(at_writev),
        writemsg: Some(at_writemsg),
        inject: Some(at_inject),
        readwrite: Some(at_rw),
        readwritev: Some(at_rwv),
        readwritemsg: Some(at_rwmsg),
        compwrite: Some(at_cw),
        compwritev: Some(at_cwv),
        compwritemsg: Some(at_cwmsg),
        writevalid: Some(at_valid),
        readwritevalid: Some(at_valid),
        compwritevalid: Some(at_valid),
    };

    unsafe extern "C" fn co_barrier(_: Ep, _: fi_addr_t, _: V) -> isize {
        NOSYS
    }
    unsafe extern "C" fn co_bcast(
        _: Ep,
        _: V,
        _: usize,
        _: V,
        _: fi_addr_t,
        _: fi_addr_t,
        _: u32,
        _: u64,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn co_a2a(_: Ep, _: C, _: usize, _: V, _: V, _: V, _: fi_addr_t, _: u32, _: u64, _: V) -> isize {
        NOSYS
    }
    unsafe extern "C" fn co_allreduce(
        _: Ep,
        _: C,
        _: usize,
        _: V,
        _: V,
        _: V,
        _: fi_addr_t,
        _: u32,
        _: u32,
        _: u64,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn co_reduce(
        _: Ep,
        _: C,
        _: usize,
        _: V,
        _: V,
        _: V,
        _: fi_addr_t,
        _: fi_addr_t,
        _: u32,
        _: u32,
        _: u64,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn co_scatter(
        _: Ep,
        _: C,
        _: usize,
        _: V,
        _: V,
        _: V,
        _: fi_addr_t,
        _: fi_addr_t,
        _: u32,
        _: u64,
        _: V,
    ) -> isize {
        NOSYS
    }
    unsafe extern "C" fn co_msg(_: Ep, _: C, _: *mut fi_ioc, _: D, _: usize, _: u64) -> isize {
        NOSYS
    }
    unsafe extern "C" fn co_barrier2(_: Ep, _: fi_addr_t, _: u64, _: V) -> isize {
        NOSYS
    }
    pub static COLLECTIVE_OPS: fi_ops_collective = fi_ops_collective {
        size: core::mem::size_of::<fi_ops_collective>(),
        barrier: Some(co_barrier),
        broadcast: Some(co_bcast),
        alltoall: Some(co_a2a),
        allreduce: Some(co_allreduce),
        allgather: Some(co_a2a),
        reduce_scatter: Some(co_allreduce),
        reduce: Some(co_reduce),
        scatter: Some(co_scatter),
        gather: Some(co_scatter),
        msg: Some(co_msg),
        barrier2: Some(co_barrier2),
    };
}
