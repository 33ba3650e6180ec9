//! The endpoint core: what an `fid_ep` is besides its operation tables.
//!
//! An [`Endpoint`] owns the engine of one endpoint ([`Inner`]: matching,
//! protocols, completions) behind one lock, the bindings collected before
//! `fi_enable` and fixed by it, and its registration with the domain's
//! progress engine. Its C face (`fi/ep.rs`) turns each libfabric call into
//! one of the methods here: binds ([`Endpoint::bind`]), enable with its
//! checks and CQ reservations ([`Endpoint::enable`]), the data calls
//! ([`Endpoint::post_send`] / [`Endpoint::post_recv`], described by
//! [`SendOp`] / [`RecvOp`]), options, cancel, queue room and close.
//!
//! A connection-oriented (`FI_EP_MSG`) endpoint adds its connection state,
//! a [`Connection`]; the type parameter `L` is that state's type (the C
//! face's `MsgLink`), so that its owner reaches its own fields while this
//! core only calls the hooks of the trait.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::base::serial::ModeMutex;
use crate::core::attr::Info;
use crate::core::av::Av;
use crate::core::cntr::Cntr;
use crate::core::cq::Cq;
use crate::core::domain::{Domain, TransportKind};
use crate::core::engine::matching::{IovList, IOV_MAX};
use crate::core::engine::{buffered, Binds, EpConfig, FrozenBinds, Inner, RecvArgs, SendArgs};
use crate::core::eq::Eq;
use crate::core::progress::Source;
use crate::core::settings::Settings;
use crate::core::users::{HasUsers, Held, Users};
use crate::transport::addr::Addr;
use crate::transport::proto::Limits;
use parking_lot::Mutex;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Defaults when the application's info leaves a size at 0.
pub(crate) const DEFAULT_TX_SIZE: usize = 1024;
pub(crate) const DEFAULT_RX_SIZE: usize = 1024;
/// `tx_attr->inject_size` rustfab offers (fi_getinfo) and applies when the
/// info leaves it at 0.
pub(crate) const INJECT_SIZE: usize = 4096;
pub(crate) const DEFAULT_MAX_MSG_SIZE: usize = 1 << 30;

/// Capabilities of an RDM endpoint whose info names none.
const RDM_CAPS: u64 = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_MULTI_RECV | FI_SOURCE | FI_DIRECTED_RECV;

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

/// What a connection-oriented endpoint adds to the core: checks before
/// posts and hooks at enable, close and after every progress pass.
pub(crate) trait Connection: Send + Sync + Sized + 'static {
    /// Posting a send (`-FI_ENOTCONN` unless connected).
    fn check_send(&self) -> Result<()>;
    /// Posting a receive.
    fn check_recv(&self) -> Result<()>;
    /// At `fi_enable`, with the bindings about to be fixed (an error leaves
    /// the endpoint disabled and its bindings pending).
    fn on_enable(&self, ep: &Arc<Endpoint<Self>>, b: &Binds) -> Result<()>;
    /// At close, before the endpoint leaves its engines.
    fn on_close(&self, ep: &Arc<Endpoint<Self>>);
    /// After each progress pass, with the endpoint's lock held.
    fn after_progress(&self, inner: &mut Inner, b: &Binds);
}

/// The endpoint settings `info` asks for (queue sizes and limits default
/// when 0; `FI_VARIABLE_MSG` lifts `max_msg_size`, fi_msg(3): "Variable
/// messages are not subject to max message length restrictions"), with
/// `default_caps` when it names none. Transport choices (`cma`,
/// `fixed_peer`) are the caller's to adjust.
pub(crate) fn config_from(info: &Info, default_caps: u64, settings: &Settings) -> EpConfig {
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
        inject_size: nz(tx.inject_size, INJECT_SIZE),
        max_msg_size: if caps & FI_VARIABLE_MSG != 0 {
            usize::MAX
        } else {
            nz(epa.max_msg_size, DEFAULT_MAX_MSG_SIZE)
        },
        min_multi_recv: 64,
        unexp_budget: settings.unexp_budget,
        cma: settings.shm_cma,
        pull_batch_bytes: settings.shm_pull_batch,
        split_min: settings.shm_split_min,
        split_lone_min: settings.shm_split_lone_min,
        stream_lone_max: if settings.shm_ring_cells >= crate::core::settings::STREAM_RING_MIN {
            settings.shm_stream_lone_max
        } else {
            0
        },
        close_wait: settings.shm_close_wait,
        fixed_peer: None,
        msg_prefix: crate::core::prefix::msg_prefix(info).unwrap_or(0),
        dgram: false,
    }
}

fn shm_limits() -> Limits {
    Limits {
        max_payload: crate::transport::shm::EAGER_MAX,
        max_chunk: crate::transport::shm::EAGER_MAX,
        max_iov: IOV_MAX,
    }
}

/// Eager records are at most the TCP eager limit; larger messages go by
/// rendezvous (no cross-memory attach over TCP), their DATA chunks (and
/// RMA chunks) up to the TCP chunk limit.
fn tcp_limits() -> Limits {
    Limits {
        max_payload: crate::transport::tcp::EAGER_MAX,
        max_chunk: crate::transport::tcp::CHUNK_MAX,
        max_iov: IOV_MAX,
    }
}

/// The shm port of an shm endpoint: named by fi_getinfo's src_addr (token 0
/// is its wildcard: pick a fresh one).
pub(crate) fn shm_port(info: &Info, settings: &Settings) -> Result<crate::transport::shm::ShmPort> {
    let token = match &info.src_addr {
        Some(b) => match Addr::parse(FI_ADDR_STR, b) {
            Ok((Addr::Shm(0), _)) => crate::transport::addr::shm_token_random(),
            Ok((Addr::Shm(t), _)) => t,
            _ => return Err(Error::INVAL),
        },
        None => crate::transport::addr::shm_token_random(),
    };
    let budget = &settings.tcp.budget;
    crate::transport::shm::ShmPort::with_ring_cells(token, shm_limits(), settings.shm_ring_cells)
        .map(|p| p.with_budget(budget.per_peer, budget.timeout))
}

/// The TCP port of a tcp endpoint: listens on fi_getinfo's src_addr (a
/// wildcard IP or port 0 means "choose"), else any IPv4 (IPv6 for
/// FI_SOCKADDR_IN6).
fn tcp_port(info: &Info, tcp: &crate::transport::tcp::TcpSettings) -> Result<crate::transport::tcp::TcpPort> {
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

/// The TCP settings of an endpoint: the environment's, with the
/// authentication key the application gives (`ep_attr->auth_key`, else
/// the domain's `domain_attr->auth_key`) in place of
/// `FI_RUSTFAB_AUTH_KEY`'s.
fn tcp_settings(
    domain: &Domain,
    info: &Info,
    env: &crate::transport::tcp::TcpSettings,
) -> crate::transport::tcp::TcpSettings {
    let nonempty = |k: &Option<Vec<u8>>| k.as_ref().filter(|k| !k.is_empty()).cloned();
    let given = info
        .ep
        .as_ref()
        .and_then(|e| nonempty(&e.auth_key))
        .or_else(|| info.domain.as_ref().and_then(|d| nonempty(&d.auth_key)))
        .or_else(|| domain.info.domain.as_ref().and_then(|d| nonempty(&d.auth_key)));
    let mut t = env.clone();
    if let Some(k) = given {
        t.auth_key = Some(crate::transport::tcp::AuthKey(k));
    }
    t
}

/// The engine of a reliable-datagram (`FI_EP_RDM`, or unspecified)
/// endpoint on `domain`'s transport, its port named by `info`'s src_addr.
pub(crate) fn rdm_engine(domain: &Domain, info: &Info) -> Result<Inner> {
    let ep_type = info.ep.as_ref().map(|e| e.ep_type).unwrap_or(FI_EP_RDM);
    if ep_type != FI_EP_RDM && ep_type != FI_EP_UNSPEC {
        return Err(Error::INVAL);
    }
    let settings = &domain.fabric().settings;
    let mut cfg = config_from(info, RDM_CAPS, settings);
    if domain.transport == TransportKind::Tcp {
        // No cross-memory attach over TCP: large messages are streamed.
        cfg.cma = false;
    }
    Ok(Inner::new(rdm_port(domain, info)?, cfg))
}

/// The port of an RDM endpoint on `domain`'s transport at `info`'s
/// src_addr: exactly there (an address that cannot be taken is an error,
/// never another address); a wildcard (token 0, port 0) means "choose".
fn rdm_port(domain: &Domain, info: &Info) -> Result<Box<dyn crate::transport::Port>> {
    let settings = &domain.fabric().settings;
    let tcp = tcp_settings(domain, info, &settings.tcp);
    let port: Box<dyn crate::transport::Port> = match domain.transport {
        TransportKind::Shm => Box::new(shm_port(info, settings)?),
        TransportKind::Tcp => Box::new(tcp_port(info, &tcp)?),
        TransportKind::Auto => {
            let (shm_src, tcp_src) = match &info.src_addr {
                Some(b) => match Addr::parse(FI_ADDR_STR, b) {
                    Ok((Addr::Auto { shm, inet, .. }, _)) => (shm, std::net::SocketAddr::V4(inet)),
                    _ => return Err(Error::INVAL),
                },
                None => (0, "0.0.0.0:0".parse().map_err(|_| Error::INVAL)?),
            };
            let shm = crate::transport::shm::ShmPort::with_ring_cells(
                if shm_src == 0 {
                    crate::transport::addr::shm_token_random()
                } else {
                    shm_src
                },
                shm_limits(),
                settings.shm_ring_cells,
            )?
            .with_budget(settings.tcp.budget.per_peer, settings.tcp.budget.timeout);
            let tcp = crate::transport::tcp::TcpPort::new(tcp_src, tcp_limits(), &tcp)?;
            Box::new(crate::transport::auto::AutoPort::new(shm, tcp)?)
        }
    };
    Ok(port)
}

/// Opens an endpoint's port on a domain at an info's src_addr.
pub(crate) type PortOpener = fn(&Domain, &Info) -> Result<Box<dyn crate::transport::Port>>;

/// An object `fi_ep_bind` attaches to an endpoint.
pub(crate) enum BindTarget {
    Av(Arc<Av>),
    Cq(Arc<Cq>),
    Cntr(Arc<Cntr>),
    Eq(Arc<Eq>),
}

/// Which operational flags `fi_control(FI_GETOPSFLAG/FI_SETOPSFLAG)` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Transmit,
    Receive,
}

impl Direction {
    /// The direction the `FI_TRANSMIT`/`FI_RECV` bit of `flags` names
    /// (exactly one of them, else -FI_EINVAL).
    pub(crate) fn of_flags(flags: u64) -> Result<Direction> {
        match (flags & FI_TRANSMIT != 0, flags & FI_RECV != 0) {
            (true, false) => Ok(Direction::Transmit),
            (false, true) => Ok(Direction::Receive),
            _ => Err(Error::INVAL),
        }
    }
}

/// The endpoint options (`fi_getopt`/`fi_setopt`, level
/// `FI_OPT_ENDPOINT`) every endpoint has; each is a `size_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EpOpt {
    MinMultiRecv,
    /// `FI_OPT_BUFFERED_LIMIT` (endpoints with buffered receives only).
    BufferedLimit,
    /// `FI_OPT_BUFFERED_MIN` (endpoints with buffered receives only).
    BufferedMin,
}

impl EpOpt {
    /// The option `name` denotes; -FI_ENOPROTOOPT for others.
    pub(crate) fn from_name(name: i32) -> Result<EpOpt> {
        match name {
            FI_OPT_MIN_MULTI_RECV => Ok(EpOpt::MinMultiRecv),
            FI_OPT_BUFFERED_LIMIT => Ok(EpOpt::BufferedLimit),
            FI_OPT_BUFFERED_MIN => Ok(EpOpt::BufferedMin),
            _ => Err(Error::NOPROTOOPT),
        }
    }

    fn buffered_name(self) -> Option<i32> {
        match self {
            EpOpt::MinMultiRecv => None,
            EpOpt::BufferedLimit => Some(FI_OPT_BUFFERED_LIMIT),
            EpOpt::BufferedMin => Some(FI_OPT_BUFFERED_MIN),
        }
    }
}

/// How a send call asks for its buffer to be treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendMode {
    /// `fi_send` and friends: the buffer is the application's until the
    /// completion.
    Post,
    /// `fi_inject`/`fi_injectdata`: the buffer is reusable on return and
    /// no completion is generated.
    Inject,
}

/// A send as the C calls describe it.
pub(crate) struct SendOp {
    pub(crate) iov: IovList,
    pub(crate) dest: fi_addr_t,
    /// `Some(tag)` for the tagged calls.
    pub(crate) tag: Option<u64>,
    /// Remote CQ data (`fi_senddata`, `FI_REMOTE_CQ_DATA` on `fi_sendmsg`).
    pub(crate) data: Option<u64>,
    /// The flags of `fi_sendmsg`; `None`: the endpoint's default operation
    /// flags.
    pub(crate) flags: Option<u64>,
    pub(crate) context: usize,
    pub(crate) mode: SendMode,
}

impl SendOp {
    /// A send call with the endpoint's default flags.
    pub(crate) fn post(iov: IovList, dest: fi_addr_t, context: usize) -> SendOp {
        SendOp {
            iov,
            dest,
            tag: None,
            data: None,
            flags: None,
            context,
            mode: SendMode::Post,
        }
    }

    /// `fi_inject` and friends (no context: no completion).
    pub(crate) fn inject(iov: IovList, dest: fi_addr_t) -> SendOp {
        SendOp {
            mode: SendMode::Inject,
            ..SendOp::post(iov, dest, 0)
        }
    }

    /// The tagged form of the call.
    pub(crate) fn tagged(self, tag: u64) -> SendOp {
        SendOp { tag: Some(tag), ..self }
    }

    /// With remote CQ data (`fi_senddata` and friends).
    pub(crate) fn with_data(self, data: u64) -> SendOp {
        SendOp {
            data: Some(data),
            ..self
        }
    }
}

/// What a tagged receive matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TagMatch {
    pub(crate) tag: u64,
    pub(crate) ignore: u64,
}

/// A receive as the C calls describe it.
pub(crate) struct RecvOp {
    pub(crate) iov: IovList,
    pub(crate) src: fi_addr_t,
    /// `Some` for the tagged calls.
    pub(crate) tag: Option<TagMatch>,
    /// The flags of `fi_recvmsg`; `None`: the endpoint's default operation
    /// flags.
    pub(crate) flags: Option<u64>,
    pub(crate) context: usize,
}

impl RecvOp {
    /// A receive call with the endpoint's default flags.
    pub(crate) fn new(iov: IovList, src: fi_addr_t, context: usize) -> RecvOp {
        RecvOp {
            iov,
            src,
            tag: None,
            flags: None,
            context,
        }
    }

    /// The tagged form of the call.
    pub(crate) fn tagged(self, tag: u64, ignore: u64) -> RecvOp {
        RecvOp {
            tag: Some(TagMatch { tag, ignore }),
            ..self
        }
    }
}

/// The endpoint core. See the module documentation.
pub(crate) struct Endpoint<L> {
    users: Users,
    domain: Held<Domain>,
    /// Our address (changes only by `fi_setname` before `fi_enable`).
    addr: Mutex<Addr>,
    /// Bindings collected before `fi_enable`; moved to `bound` by it.
    pending: Mutex<Binds>,
    bound: OnceLock<FrozenBinds>,
    pub(crate) enabled: AtomicBool,
    closed: AtomicBool,
    /// The progress thread caught a panic in this endpoint's progress: its
    /// state may be half updated, every later call fails (`-FI_EOTHER`).
    failed: AtomicBool,
    pub(crate) inner: ModeMutex<Inner>,
    /// Wait fd registered with the domain's engine (its port's).
    wait_fd: core::sync::atomic::AtomicI32,
    /// Connection state of a connection-oriented (`FI_EP_MSG`) endpoint.
    pub(crate) msg: Option<Arc<L>>,
    /// RMA operations this endpoint started, reported when it closes.
    pub(crate) rma_tally: RmaTally,
}

/// The RMA operations an endpoint started (`fi_write*`, `fi_read*`
/// accepted), written to the log at `FI_LOG_LEVEL=info` when it closes: how
/// a test sees that an application (Open MPI's btl ofi under MPI one-sided
/// communication, c-tests/mpi/onesided.sh) really moved its data through
/// rustfab's RMA.
#[derive(Default)]
pub(crate) struct RmaTally {
    pub(crate) writes: AtomicU64,
    pub(crate) reads: AtomicU64,
}

impl RmaTally {
    /// The close-time report, if the endpoint started any RMA.
    fn report(&self) -> Option<String> {
        let w = self.writes.load(Ordering::Relaxed);
        let r = self.reads.load(Ordering::Relaxed);
        (w + r > 0).then(|| format!("endpoint closed: RMA operations started: {w} writes, {r} reads"))
    }
}

impl<L: Connection> HasUsers for Endpoint<L> {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl<L: Connection> Endpoint<L> {
    /// Whether the progress thread failed this endpoint (see [`Source::fail_after_panic`]).
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}

impl<L: Connection> Source for Endpoint<L> {
    fn progress(&self) -> bool {
        if let Some(b) = self.bound.get() {
            if !self.closed.load(Ordering::Acquire) && !self.failed.load(Ordering::Acquire) {
                let mut g = self.inner.lock();
                let moved = g.progress_in(b.view());
                if let Some(m) = &self.msg {
                    m.after_progress(&mut g, b);
                }
                return moved;
            }
        }
        false
    }
    fn set_sleepers(&self, n: usize) {
        self.inner.lock().set_sleepers(n);
    }
    fn fail_after_panic(&self) {
        self.failed.store(true, Ordering::Release);
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

/// The effective flags of a send: `explicit` ones are checked, and without
/// an explicit completion level the endpoint's default applies.
fn tx_flags(defaults: u64, explicit: Option<u64>) -> Result<u64> {
    match explicit {
        None => Ok(defaults),
        Some(f) => {
            if f & !SEND_FLAGS != 0 {
                return Err(Error::BADFLAGS);
            }
            Ok(if f & COMPLETION_LEVELS == 0 {
                f | (defaults & COMPLETION_LEVELS)
            } else {
                f
            })
        }
    }
}

/// The effective flags of a receive.
fn rx_flags(inner: &mut Inner, op: &RecvOp) -> Result<u64> {
    match op.flags {
        None => Ok(inner.config().rx_op_flags),
        Some(f) => {
            let valid = if op.tag.is_some() {
                TAGGED_RECV_FLAGS
            } else if f & (FI_CLAIM | FI_DISCARD) != 0 && inner.buffered_opts().is_some() {
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

impl<L: Connection> Endpoint<L> {
    /// An endpoint around `inner` for either endpoint type: buffered
    /// receives when the info asks for them (or for `FI_VARIABLE_MSG`), the
    /// core registered with the domain's progress engine.
    pub(crate) fn new(
        domain: &Arc<Domain>,
        info: &Info,
        mut inner: Inner,
        addr: Addr,
        msg: Option<Arc<L>>,
    ) -> Result<Arc<Self>> {
        if buffered::requested(info) || inner.config().caps & FI_VARIABLE_MSG != 0 {
            inner.enable_buffered(domain.fabric().settings.buffered_pool);
        }
        // RMA targets check every access against the domain's regions.
        inner.set_mr_map(domain.mrs.clone());
        let wait_fd = inner.wait_fd();
        let engine = &domain.engine;
        if msg.is_some() {
            // A connection is driven from the fabric's EQ too (its
            // events, `fi_shutdown`), outside the domain's serialisation.
            engine.mode().lock_for_good();
        }
        let ep = Arc::new(Endpoint {
            users: Users::default(),
            domain: Held::new(domain.clone()),
            addr: Mutex::new(addr),
            pending: Mutex::new(Binds::default()),
            bound: OnceLock::new(),
            enabled: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            inner: ModeMutex::new(inner, engine.mode().clone()),
            wait_fd: core::sync::atomic::AtomicI32::new(wait_fd),
            msg,
            rma_tally: RmaTally::default(),
        });
        engine.watch_fd(wait_fd, crate::sys::IN)?;
        engine.add_source(ep.clone());
        Ok(ep)
    }

    /// Our address (`fi_getname`).
    pub(crate) fn addr(&self) -> Addr {
        *self.addr.lock()
    }

    /// The descriptor the domain's engine watches for us.
    pub(crate) fn wait_fd(&self) -> RawFd {
        self.wait_fd.load(Ordering::Acquire)
    }

    /// `fi_setname` of an RDM endpoint: moves it to the address `bytes`
    /// (of the endpoint's address format) before `fi_enable`; the address is
    /// taken exactly or the call fails (`-FI_EADDRINUSE` when another
    /// endpoint holds it, `-FI_EINVAL` for an address of another kind) and
    /// the endpoint stays where it was. After `fi_enable`: `-FI_EOPBADSTATE`.
    pub(crate) fn set_name(&self, bytes: &[u8]) -> Result<()> {
        self.set_name_with(bytes, rdm_port)
    }

    /// [`Endpoint::set_name`] with the new port opened by `open` (a
    /// datagram endpoint's is `core/dgram.rs`'s).
    pub(crate) fn set_name_with(&self, bytes: &[u8], open: PortOpener) -> Result<()> {
        if self.msg.is_some() {
            return Err(Error::INVAL);
        }
        let _g = self.pending.lock();
        if self.enabled.load(Ordering::Acquire) {
            return Err(Error::OPBADSTATE);
        }
        let cur = self.addr();
        let (want, _) = Addr::parse(cur.format(), bytes)?;
        if core::mem::discriminant(&want) != core::mem::discriminant(&cur) {
            return Err(Error::INVAL);
        }
        let info = Info {
            addr_format: cur.format(),
            src_addr: Some(want.to_bytes()),
            ..Info::default()
        };
        let domain: &Domain = &self.domain;
        let port = open(domain, &info)?;
        let (addr, fd) = (port.addr(), port.wait_fd());
        let engine = &domain.engine;
        engine.watch_fd(fd, crate::sys::IN)?;
        engine.unwatch_fd(self.wait_fd());
        self.inner.lock().replace_port(port);
        self.wait_fd.store(fd, Ordering::Release);
        *self.addr.lock() = addr;
        Ok(())
    }

    /// The bindings of an enabled endpoint (`-FI_EOPBADSTATE` before
    /// `fi_enable`).
    pub(crate) fn bound(&self) -> Result<&FrozenBinds> {
        if !self.enabled.load(Ordering::Acquire) {
            return Err(Error::OPBADSTATE);
        }
        self.bound.get().ok_or(Error::OPBADSTATE)
    }

    /// `fi_ep_bind`. `target` finds the object (the C face reads its class
    /// and recovers its core), after the enabled check.
    pub(crate) fn bind(&self, flags: u64, target: impl FnOnce() -> Result<BindTarget>) -> Result<()> {
        if self.enabled.load(Ordering::Acquire) {
            return Err(Error::OPBADSTATE);
        }
        let target = target()?;
        let mut b = self.pending.lock();
        match target {
            BindTarget::Av(av) => {
                if flags != 0 {
                    return Err(Error::BADFLAGS);
                }
                if b.av.is_some() {
                    return Err(Error::INVAL);
                }
                b.av = Some(Held::new(av));
            }
            BindTarget::Cq(cq) => {
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 {
                    return Err(Error::BADFLAGS);
                }
                if flags & (FI_TRANSMIT | FI_RECV) == 0 {
                    return Err(Error::INVAL);
                }
                let sel = flags & FI_SELECTIVE_COMPLETION != 0;
                let ours = self.domain.engine.mode();
                if !Arc::ptr_eq(cq.lock_mode(), ours) {
                    // A CQ of another domain: its queue is pushed from this
                    // domain's calls and read from its own domain's, two
                    // serialisations (base/serial.rs).
                    cq.lock_mode().lock_for_good();
                    ours.lock_for_good();
                }
                if (flags & FI_TRANSMIT != 0 && b.tx_cq.is_some()) || (flags & FI_RECV != 0 && b.rx_cq.is_some()) {
                    return Err(Error::INVAL);
                }
                if flags & FI_TRANSMIT != 0 {
                    b.tx_cq = Some(Held::new(cq.clone()));
                    b.tx_selective = sel;
                }
                if flags & FI_RECV != 0 {
                    b.rx_cq = Some(Held::new(cq));
                    b.rx_selective = sel;
                }
            }
            BindTarget::Cntr(c) => {
                let valid = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
                if flags & !valid != 0 {
                    return Err(Error::BADFLAGS);
                }
                if flags == 0 {
                    return Err(Error::INVAL);
                }
                if flags & FI_SEND != 0 {
                    b.send_cntr = Some(Held::new(c.clone()));
                }
                if flags & FI_RECV != 0 {
                    b.recv_cntr = Some(Held::new(c.clone()));
                }
                // RMA events (core/engine/rma.rs): initiated reads and
                // writes, and this endpoint as their target.
                let r = &mut b.rma;
                let rma = [
                    (FI_READ, &mut r.read),
                    (FI_WRITE, &mut r.write),
                    (FI_REMOTE_READ, &mut r.remote_read),
                    (FI_REMOTE_WRITE, &mut r.remote_write),
                ];
                for (bit, slot) in rma {
                    if flags & bit != 0 {
                        *slot = Some(Held::new(c.clone()));
                    }
                }
            }
            BindTarget::Eq(eq) => b.eq = Some(Held::new(eq)),
        }
        Ok(())
    }

    /// `fi_enable`: checks the bindings (an AV for RDM endpoints, what the
    /// connection needs for MSG ones, a receive CQ for buffered receives),
    /// reserves room in the bound CQs for every operation the endpoint may
    /// have outstanding (core/cq.rs: capacity and overrun), and fixes the
    /// bindings. On any error nothing is reserved and the bindings stay
    /// pending. Enabling an enabled endpoint does nothing.
    pub(crate) fn enable(self: &Arc<Self>) -> Result<()> {
        if self.enabled.load(Ordering::Acquire) {
            return Ok(());
        }
        let b = std::mem::take(&mut *self.pending.lock());
        match self.enable_with(&b) {
            Ok(()) => {
                let _ = self.bound.set(FrozenBinds::new(b));
                self.enabled.store(true, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                *self.pending.lock() = b;
                Err(e)
            }
        }
    }

    /// The checks and reservations of [`Endpoint::enable`] for bindings `b`
    /// (all or nothing).
    fn enable_with(self: &Arc<Self>, b: &Binds) -> Result<()> {
        match &self.msg {
            Some(m) => m.on_enable(self, b)?,
            None if b.av.is_none() => return Err(Error::NOAV),
            None => {}
        }
        if b.rx_cq.is_none() && self.inner.lock().buffered_opts().is_some() {
            // Buffered messages are announced on the receive CQ.
            return Err(Error::NOCQ);
        }
        let (tx_size, rx_size) = {
            let g = self.inner.lock();
            (g.config().tx_size, g.config().rx_size)
        };
        if let Some(c) = &b.tx_cq {
            c.reserve_capacity(tx_size)?;
        }
        if let Some(c) = &b.rx_cq {
            if let Err(e) = c.reserve_capacity(rx_size) {
                if let Some(t) = &b.tx_cq {
                    t.release_capacity(tx_size);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// `fi_close`: -FI_EBUSY while in use; otherwise the endpoint stops
    /// progressing (its connection first), leaves the domain's engine,
    /// gives back its CQ reservations and closes its engine.
    pub(crate) fn close(self: &Arc<Self>) -> Result<()> {
        self.users.check_idle()?;
        self.closed.store(true, Ordering::Release);
        if let Some(m) = &self.msg {
            m.on_close(self);
        }
        let engine = &self.domain.engine;
        engine.unwatch_fd(self.wait_fd());
        let src: Arc<dyn Source> = self.clone();
        engine.remove_source(&src);
        let mut g = self.inner.lock();
        if let Some(b) = self.bound.get() {
            let cfg = g.config();
            if let Some(c) = &b.tx_cq {
                c.release_capacity(cfg.tx_size);
            }
            if let Some(c) = &b.rx_cq {
                c.release_capacity(cfg.rx_size);
            }
        }
        g.close();
        if let Some(r) = self.rma_tally.report() {
            crate::base::log::log_info!(FI_LOG_EP_DATA, "{r}");
        }
        Ok(())
    }

    /// `fi_control(FI_GETOPSFLAG)` for one direction.
    pub(crate) fn ops_flags(&self, dir: Direction) -> u64 {
        let g = self.inner.lock();
        match dir {
            Direction::Transmit => g.config().tx_op_flags,
            Direction::Receive => g.config().rx_op_flags,
        }
    }

    /// `fi_control(FI_SETOPSFLAG)` for one direction.
    pub(crate) fn set_ops_flags(&self, dir: Direction, flags: u64) {
        let mut g = self.inner.lock();
        let cfg = g.config_mut();
        match dir {
            Direction::Transmit => cfg.tx_op_flags = flags,
            Direction::Receive => cfg.rx_op_flags = flags,
        }
    }

    /// `fi_getopt`.
    pub(crate) fn getopt(&self, opt: EpOpt) -> Result<usize> {
        let mut g = self.inner.lock();
        match opt.buffered_name() {
            None => Ok(g.config().min_multi_recv),
            Some(name) => buffered::getopt(&mut g, name),
        }
    }

    /// `fi_setopt`. The buffered-receive options "must be made prior to
    /// enabling the endpoint" (-FI_EOPBADSTATE after).
    pub(crate) fn setopt(&self, opt: EpOpt, value: usize) -> Result<()> {
        match opt.buffered_name() {
            None => {
                self.inner.lock().config_mut().min_multi_recv = value;
                Ok(())
            }
            Some(name) => {
                if self.enabled.load(Ordering::Acquire) {
                    return Err(Error::OPBADSTATE);
                }
                buffered::setopt(&mut self.inner.lock(), name, value)
            }
        }
    }

    /// `fi_cancel` of the operation posted with `context`.
    pub(crate) fn cancel(&self, context: usize) -> Result<()> {
        let b = self.bound()?;
        self.inner.lock().cancel(b, context)
    }

    /// `fi_rx_size_left`: receives that can still be posted.
    pub(crate) fn rx_size_left(&self) -> Result<usize> {
        self.bound()?;
        let g = self.inner.lock();
        Ok(g.config().rx_size.saturating_sub(g.rx_posted()))
    }

    /// `fi_tx_size_left`: sends that can still be posted.
    pub(crate) fn tx_size_left(&self) -> Result<usize> {
        self.bound()?;
        let g = self.inner.lock();
        Ok(g.config().tx_size.saturating_sub(g.tx_outstanding()))
    }

    /// Every send call. One lock for the flag defaults, the fence check and
    /// the post; flags are checked before the endpoint's state.
    pub(crate) fn post_send(&self, op: SendOp) -> Result<()> {
        let mut g = self.inner.lock();
        let mut flags = tx_flags(g.config().tx_op_flags, op.flags)?;
        if op.data.is_some() {
            flags |= FI_REMOTE_CQ_DATA;
        }
        if flags & FI_FENCE != 0 && g.tx_outstanding() > 0 {
            // Fence: do not start before every earlier operation completed.
            return Err(Error::AGAIN);
        }
        let b = self.bound()?;
        if let Some(m) = &self.msg {
            m.check_send()?;
        }
        g.send_in(
            b.view(),
            SendArgs {
                dest: op.dest,
                iov: &op.iov,
                tagged: op.tag.is_some(),
                tag: op.tag.unwrap_or(0),
                data: op.data.unwrap_or(0),
                flags,
                context: op.context,
                inject_call: op.mode == SendMode::Inject,
            },
        )
    }

    /// Every receive call (one lock, flags checked first, as sends).
    pub(crate) fn post_recv(&self, op: RecvOp) -> Result<()> {
        let mut g = self.inner.lock();
        let flags = rx_flags(&mut g, &op)?;
        let b = self.bound()?;
        if let Some(m) = &self.msg {
            m.check_recv()?;
        }
        let tag = op.tag.unwrap_or(TagMatch { tag: 0, ignore: 0 });
        g.recv_in(
            b.view(),
            RecvArgs {
                src: op.src,
                iov: &op.iov,
                tagged: op.tag.is_some(),
                tag: tag.tag,
                ignore: tag.ignore,
                flags,
                context: op.context,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::attr::{DomainAttr, RxAttr};
    use crate::core::av::AvAttr;
    use crate::core::cq::CqEntry;
    use crate::core::fabric::{Fabric, API_VERSION};
    use crate::core::wait::Holds;
    use std::time::{Duration, Instant};

    /// RDM endpoints have no connection; this type only fills `L`.
    struct Unconnected;
    impl Connection for Unconnected {
        fn check_send(&self) -> Result<()> {
            unreachable!()
        }
        fn check_recv(&self) -> Result<()> {
            unreachable!()
        }
        fn on_enable(&self, _: &Arc<Endpoint<Self>>, _: &Binds) -> Result<()> {
            unreachable!()
        }
        fn on_close(&self, _: &Arc<Endpoint<Self>>) {
            unreachable!()
        }
        fn after_progress(&self, _: &mut Inner, _: &Binds) {
            unreachable!()
        }
    }
    type Ep = Endpoint<Unconnected>;

    fn domain() -> Arc<Domain> {
        let f = Fabric::open(None, Settings::default()).unwrap();
        let info = Info {
            domain: Some(DomainAttr {
                name: Some("shm".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        Domain::open(&f, info, API_VERSION).unwrap()
    }

    fn ep_with(d: &Arc<Domain>, info: &Info) -> Arc<Ep> {
        let inner = rdm_engine(d, info).unwrap();
        let addr = inner.addr();
        Ep::new(d, info, inner, addr, None).unwrap()
    }

    fn ep(d: &Arc<Domain>) -> Arc<Ep> {
        ep_with(d, &Info::default())
    }

    fn cq(d: &Arc<Domain>, size: usize) -> Arc<Cq> {
        let a = crate::core::cq::CqAttr {
            size,
            flags: 0,
            format: FI_CQ_FORMAT_TAGGED,
            wait_obj: FI_WAIT_NONE,
            wait_cond: FI_CQ_COND_NONE,
        };
        let holds = Holds {
            parent: Some(Held::new(d.clone())),
            set: None,
        };
        let cq = Cq::new(&a, API_VERSION, holds, 0).unwrap();
        cq.wait().add_engine(&d.engine).unwrap();
        cq
    }

    fn av(d: &Arc<Domain>) -> Arc<Av> {
        Av::open(d, &AvAttr::default()).unwrap()
    }

    fn bind_cq(e: &Ep, c: &Arc<Cq>, flags: u64) -> Result<()> {
        e.bind(flags, || Ok(BindTarget::Cq(c.clone())))
    }

    fn bind_av(e: &Ep, a: &Arc<Av>) -> Result<()> {
        e.bind(0, || Ok(BindTarget::Av(a.clone())))
    }

    fn domain_at(threading: u32, progress: u32) -> Arc<Domain> {
        let f = Fabric::open(None, Settings::default()).unwrap();
        let info = Info {
            domain: Some(DomainAttr {
                name: Some("shm".into()),
                threading,
                control_progress: progress,
                data_progress: progress,
                ..Default::default()
            }),
            ..Default::default()
        };
        Domain::open(&f, info, API_VERSION).unwrap()
    }

    fn serial_domain() -> Arc<Domain> {
        domain_at(FI_THREAD_DOMAIN, FI_PROGRESS_MANUAL)
    }

    fn serial(d: &Domain) -> bool {
        d.engine.mode().is_serial()
    }

    fn cq_waiting(d: &Arc<Domain>, wait_obj: u32, set: Option<Arc<crate::core::wait::WaitSet>>) -> Arc<Cq> {
        let a = crate::core::cq::CqAttr {
            size: 16,
            flags: 0,
            format: FI_CQ_FORMAT_TAGGED,
            wait_obj,
            wait_cond: FI_CQ_COND_NONE,
        };
        let holds = Holds {
            parent: Some(Held::new(d.clone())),
            set: set.map(Held::new),
        };
        let cq = Cq::new(&a, API_VERSION, holds, 0).unwrap();
        cq.wait().add_engine(&d.engine).unwrap();
        cq
    }

    /// base/serial.rs: plain-store locks only where the application
    /// serialises every call on the domain and no progress thread runs.
    #[test]
    fn serial_locks_only_at_thread_domain_with_manual_progress() {
        for p in [FI_PROGRESS_MANUAL, FI_PROGRESS_UNSPEC] {
            let d = domain_at(FI_THREAD_DOMAIN, p);
            assert!(serial(&d), "FI_THREAD_DOMAIN, progress {p}");
            let (e, q) = (ep(&d), cq(&d, 16));
            assert!(
                e.inner.is_serial() && q.lock_mode().is_serial(),
                "the domain's objects follow it"
            );
        }
        let others = [
            FI_THREAD_UNSPEC,
            FI_THREAD_SAFE,
            FI_THREAD_FID,
            FI_THREAD_COMPLETION,
            FI_THREAD_ENDPOINT,
        ];
        for t in others {
            assert!(!serial(&domain_at(t, FI_PROGRESS_MANUAL)), "threading {t}");
        }
        assert!(
            !serial(&domain_at(FI_THREAD_DOMAIN, FI_PROGRESS_AUTO)),
            "a progress thread runs"
        );
    }

    /// Every way another thread can reach a serial domain's locks makes
    /// them real for good first (base/serial.rs, docs/architecture.md
    /// "Locks and threading levels"); what stays inside the domain does not.
    #[test]
    fn what_reaches_a_serial_domain_from_elsewhere_makes_its_locks_real() {
        // Inside one domain: stays serial.
        let d = serial_domain();
        let (e, q) = (ep(&d), cq(&d, 16));
        bind_cq(&e, &q, FI_TRANSMIT | FI_RECV).unwrap();
        let own = crate::core::poll::PollSet::open(&d, 0).unwrap();
        own.add_cq(&q);
        assert!(serial(&d));

        // A CQ of another domain: pushed from one serialisation, read
        // from the other.
        let (d1, d2) = (serial_domain(), serial_domain());
        let (e1, q2) = (ep(&d1), cq(&d2, 16));
        bind_cq(&e1, &q2, FI_RECV).unwrap();
        assert!(!serial(&d1) && !serial(&d2), "cross-domain CQ");
        assert!(!e1.inner.is_serial() && !q2.lock_mode().is_serial());

        // A progress thread (a FI_WAIT_MUTEX_COND CQ).
        let d3 = serial_domain();
        let _q3 = cq_waiting(&d3, FI_WAIT_MUTEX_COND, None);
        assert!(!serial(&d3), "progress thread");

        // A wait set member: fi_wait progresses from any thread.
        let d4 = serial_domain();
        let ws = crate::core::wait::WaitSet::open(d4.fabric(), FI_WAIT_UNSPEC, 0).unwrap();
        let _q4 = cq_waiting(&d4, FI_WAIT_SET, Some(ws));
        assert!(!serial(&d4), "wait set");

        // A poll set of another domain: its member's domain only.
        let (d5, d6) = (serial_domain(), serial_domain());
        let ps = crate::core::poll::PollSet::open(&d6, 0).unwrap();
        ps.add_cq(&cq(&d5, 16));
        assert!(!serial(&d5) && serial(&d6), "poll set of another domain");

        // A connection-oriented endpoint: driven from the fabric's EQ too.
        let d7 = serial_domain();
        let inner = rdm_engine(&d7, &Info::default()).unwrap();
        let addr = inner.addr();
        let _m = Ep::new(&d7, &Info::default(), inner, addr, Some(Arc::new(Unconnected))).unwrap();
        assert!(!serial(&d7), "MSG endpoint");
    }

    /// fi_enable: an AV is required; a failed enable keeps the bindings
    /// pending; an enabled endpoint takes no more bindings; the CQ keeps
    /// room for both queues until the endpoint closes.
    #[test]
    fn enable_checks_reserves_and_close_releases() {
        let d = domain();
        let (e, q, a) = (ep(&d), cq(&d, 16), av(&d));
        bind_cq(&e, &q, FI_TRANSMIT | FI_RECV).unwrap();
        assert_eq!(e.enable(), Err(Error::NOAV));
        assert_eq!(bind_cq(&e, &q, FI_RECV), Err(Error::INVAL), "the CQ is still bound");
        bind_av(&e, &a).unwrap();
        assert_eq!(q.capacity(), 16);
        e.enable().unwrap();
        assert_eq!(e.enable(), Ok(()), "enabling twice does nothing");
        assert_eq!(q.capacity(), DEFAULT_TX_SIZE + DEFAULT_RX_SIZE);
        assert_eq!(bind_av(&e, &a), Err(Error::OPBADSTATE));
        assert_eq!((q.users().count(), a.users().count()), (2, 1));
        assert_eq!(e.tx_size_left(), Ok(DEFAULT_TX_SIZE));
        assert_eq!(e.rx_size_left(), Ok(DEFAULT_RX_SIZE));
        e.close().unwrap();
        assert_eq!(q.capacity(), 16);
        drop(e);
        assert_eq!((q.users().count(), a.users().count()), (0, 0));
    }

    /// A receive CQ that cannot reserve its endpoint's queue depth fails
    /// the enable, and the transmit CQ's reservation is given back.
    #[test]
    fn a_failed_reservation_is_rolled_back() {
        let d = domain();
        let info = Info {
            rx: Some(RxAttr {
                size: 1 << 60,
                ..Default::default()
            }),
            ..Default::default()
        };
        let (e, tx, rx, a) = (ep_with(&d, &info), cq(&d, 8), cq(&d, 8), av(&d));
        bind_cq(&e, &tx, FI_TRANSMIT).unwrap();
        bind_cq(&e, &rx, FI_RECV).unwrap();
        bind_av(&e, &a).unwrap();
        assert_eq!(e.enable(), Err(Error::NOMEM));
        assert_eq!((tx.capacity(), rx.capacity()), (8, 8));
        assert!(!e.enabled.load(Ordering::Acquire));
        assert_eq!(bind_av(&e, &a), Err(Error::INVAL), "bindings stay pending");
        e.close().unwrap();
    }

    #[test]
    fn bind_flags_per_class() {
        let d = domain();
        let (e, q, a) = (ep(&d), cq(&d, 8), av(&d));
        assert_eq!(bind_cq(&e, &q, 0), Err(Error::INVAL));
        assert_eq!(bind_cq(&e, &q, FI_TRANSMIT | FI_MULTI_RECV), Err(Error::BADFLAGS));
        assert_eq!(e.bind(FI_SEND, || Ok(BindTarget::Av(a.clone()))), Err(Error::BADFLAGS));
        let c = Cntr::new(
            &crate::core::cntr::CntrAttr {
                events: FI_CNTR_EVENTS_COMP,
                wait_obj: FI_WAIT_NONE,
                flags: 0,
            },
            Holds::none(),
            0,
        )
        .unwrap();
        assert_eq!(e.bind(0, || Ok(BindTarget::Cntr(c.clone()))), Err(Error::INVAL));
        assert_eq!(
            e.bind(FI_SEND | FI_RECV | FI_REMOTE_WRITE, || Ok(BindTarget::Cntr(c.clone()))),
            Ok(())
        );
        assert_eq!(c.users().count(), 3, "send, receive and remote write");
        assert_eq!(
            e.bind(0, || Err(Error::INVAL)),
            Err(Error::INVAL),
            "the target's own error"
        );
        bind_cq(&e, &q, FI_TRANSMIT | FI_SELECTIVE_COMPLETION).unwrap();
        assert_eq!(bind_cq(&e, &q, FI_TRANSMIT), Err(Error::INVAL), "one transmit CQ");
        bind_cq(&e, &q, FI_RECV).unwrap();
        e.close().unwrap();
    }

    #[test]
    fn options_and_operation_flags() {
        let d = domain();
        let e = ep(&d);
        assert_eq!(EpOpt::from_name(12345), Err(Error::NOPROTOOPT));
        let multi = EpOpt::from_name(FI_OPT_MIN_MULTI_RECV).unwrap();
        assert_eq!(e.getopt(multi), Ok(64));
        e.setopt(multi, 4096).unwrap();
        assert_eq!(e.getopt(multi), Ok(4096));
        let limit = EpOpt::from_name(FI_OPT_BUFFERED_LIMIT).unwrap();
        assert_eq!(e.getopt(limit), Err(Error::NOPROTOOPT), "no buffered receives here");
        assert_eq!(Direction::of_flags(FI_TRANSMIT | FI_RECV), Err(Error::INVAL));
        assert_eq!(Direction::of_flags(0), Err(Error::INVAL));
        let tx = Direction::of_flags(FI_TRANSMIT).unwrap();
        e.set_ops_flags(tx, FI_DELIVERY_COMPLETE);
        assert_eq!(e.ops_flags(tx), FI_DELIVERY_COMPLETE);
        assert_eq!(e.ops_flags(Direction::Receive), 0);
        e.close().unwrap();
    }

    /// Buffered receives need a receive CQ, and their options are fixed at
    /// enable.
    #[test]
    fn buffered_receive_rules() {
        let d = domain();
        let info = Info {
            mode: FI_BUFFERED_RECV,
            ..Default::default()
        };
        let (e, q, a) = (ep_with(&d, &info), cq(&d, 8), av(&d));
        bind_av(&e, &a).unwrap();
        bind_cq(&e, &q, FI_TRANSMIT).unwrap();
        assert_eq!(e.enable(), Err(Error::NOCQ));
        assert_eq!(q.capacity(), 8, "nothing reserved");
        let min = EpOpt::from_name(FI_OPT_BUFFERED_MIN).unwrap();
        let v = e.getopt(min).unwrap();
        e.setopt(min, v).unwrap();
        bind_cq(&e, &q, FI_RECV).unwrap();
        e.enable().unwrap();
        assert_eq!(e.setopt(min, v), Err(Error::OPBADSTATE));
        e.close().unwrap();
    }

    /// Flags are checked before the endpoint's state, then nothing is
    /// posted before fi_enable.
    #[test]
    fn posts_before_enable() {
        let d = domain();
        let e = ep(&d);
        let bad = SendOp {
            flags: Some(FI_PEEK),
            ..SendOp::post(IovList::new(), 0, 1)
        };
        assert_eq!(e.post_send(bad), Err(Error::BADFLAGS));
        assert_eq!(e.post_send(SendOp::post(IovList::new(), 0, 1)), Err(Error::OPBADSTATE));
        let bad = RecvOp {
            flags: Some(FI_CLAIM),
            ..RecvOp::new(IovList::new(), FI_ADDR_UNSPEC, 1)
        };
        assert_eq!(
            e.post_recv(bad),
            Err(Error::BADFLAGS),
            "FI_CLAIM needs buffered receives"
        );
        assert_eq!(
            e.post_recv(RecvOp::new(IovList::new(), FI_ADDR_UNSPEC, 1)),
            Err(Error::OPBADSTATE)
        );
        assert_eq!(e.cancel(1), Err(Error::OPBADSTATE));
        assert_eq!(e.tx_size_left(), Err(Error::OPBADSTATE));
        e.close().unwrap();
    }

    #[test]
    fn send_flags_take_the_default_completion_level() {
        assert_eq!(
            tx_flags(FI_DELIVERY_COMPLETE | FI_COMPLETION, None),
            Ok(FI_DELIVERY_COMPLETE | FI_COMPLETION)
        );
        assert_eq!(
            tx_flags(FI_DELIVERY_COMPLETE, Some(FI_MORE)),
            Ok(FI_MORE | FI_DELIVERY_COMPLETE)
        );
        assert_eq!(
            tx_flags(FI_DELIVERY_COMPLETE, Some(FI_INJECT_COMPLETE)),
            Ok(FI_INJECT_COMPLETE)
        );
        assert_eq!(tx_flags(0, Some(FI_CLAIM)), Err(Error::BADFLAGS));
    }

    /// Reads one completion, progressing the domain through the CQ (a
    /// hang guard, not a timing assertion).
    fn next(q: &Cq) -> CqEntry {
        let start = Instant::now();
        loop {
            let mut got = None;
            match q.read(1, |_, e| got = Some(*e)) {
                Ok(1) => return got.unwrap(),
                Err(Error::AGAIN) => {}
                r => panic!("cq read: {r:?}"),
            }
            assert!(start.elapsed() < Duration::from_secs(30), "no completion");
            std::thread::yield_now();
        }
    }

    /// Two enabled endpoints of one shm domain, each with its own CQ (both
    /// directions) and the shared AV; `dest`: the receiver's address.
    struct Pair {
        tx: Arc<Ep>,
        rx: Arc<Ep>,
        tq: Arc<Cq>,
        rq: Arc<Cq>,
        dest: u64,
        _held: (Arc<Domain>, Arc<Av>),
    }

    fn pair() -> Pair {
        let d = domain();
        let (tx, rx) = (ep(&d), ep(&d));
        let (tq, rq, a) = (cq(&d, 8), cq(&d, 8), av(&d));
        for (e, q) in [(&tx, &tq), (&rx, &rq)] {
            bind_av(e, &a).unwrap();
            bind_cq(e, q, FI_TRANSMIT | FI_RECV).unwrap();
            e.enable().unwrap();
        }
        let dest = a.insert(vec![Ok(rx.addr())], None).unwrap()[0].unwrap();
        Pair {
            tx,
            rx,
            tq,
            rq,
            dest,
            _held: (d, a),
        }
    }

    /// Two endpoints of one shm domain, through the core only: a tagged
    /// message and a message with CQ data arrive whole, with their
    /// completions.
    #[test]
    fn loopback_messages_through_the_core() {
        let Pair {
            tx, rx, tq, rq, dest, ..
        } = pair();
        let mut buf = [0u8; 16];
        let iov = IovList::single(buf.as_mut_ptr() as usize, buf.len());
        rx.post_recv(RecvOp::new(iov, FI_ADDR_UNSPEC, 7).tagged(0x50, 0x0f))
            .unwrap();
        let msg = b"hello, core";
        let iov = IovList::single(msg.as_ptr() as usize, msg.len());
        tx.post_send(SendOp::post(iov, dest, 9).tagged(0x5a)).unwrap();
        let r = next(&rq);
        assert_eq!((r.op_context as usize, r.len, r.tag), (7, msg.len(), 0x5a));
        assert_eq!(r.flags & (FI_RECV | FI_TAGGED), FI_RECV | FI_TAGGED);
        assert_eq!(&buf[..msg.len()], msg);
        let s = next(&tq);
        assert_eq!((s.op_context as usize, s.flags & FI_SEND), (9, FI_SEND));
        // Untagged, with remote CQ data, injected (no send completion).
        let mut buf2 = [0u8; 4];
        let iov = IovList::single(buf2.as_mut_ptr() as usize, buf2.len());
        rx.post_recv(RecvOp::new(iov, FI_ADDR_UNSPEC, 8)).unwrap();
        let iov = IovList::single(b"data".as_ptr() as usize, 4);
        tx.post_send(SendOp::inject(iov, dest).with_data(0xd00d)).unwrap();
        let r = next(&rq);
        assert_eq!((r.op_context as usize, r.data), (8, 0xd00d));
        assert_eq!(r.flags & FI_REMOTE_CQ_DATA, FI_REMOTE_CQ_DATA);
        assert_eq!(&buf2, b"data");
        assert_eq!(tq.read(1, |_, _| ()), Err(Error::AGAIN));
        tx.close().unwrap();
        rx.close().unwrap();
    }

    /// An enabled endpoint's sends reuse their last AV lookup only while
    /// the AV removed nothing: its bound view, built once at `fi_enable`,
    /// reads the AV's removal count itself (not a copy taken then), so a
    /// send after `fi_av_remove` of its destination fails with -FI_EINVAL,
    /// and the address inserted again is reached under its new index.
    #[test]
    fn sends_after_fi_av_remove_see_the_removal() {
        let Pair {
            tx,
            rx,
            rq,
            dest,
            _held,
            ..
        } = pair();
        let a = &_held.1;
        let mut bufs = [[0u8; 4]; 3];
        for (i, b) in bufs.iter_mut().enumerate() {
            let iov = IovList::single(b.as_mut_ptr() as usize, b.len());
            rx.post_recv(RecvOp::new(iov, FI_ADDR_UNSPEC, i)).unwrap();
        }
        let inject = |to: u64, data: u64| {
            let iov = IovList::single(b"data".as_ptr() as usize, 4);
            tx.post_send(SendOp::inject(iov, to).with_data(data))
        };
        // Twice: the second send takes the cached lookup.
        inject(dest, 1).unwrap();
        inject(dest, 2).unwrap();
        assert_eq!(next(&rq).data, 1);
        assert_eq!(next(&rq).data, 2);
        a.state.remove(&[dest]).unwrap();
        assert_eq!(inject(dest, 3), Err(Error::INVAL), "sent to a removed entry");
        let again = a.insert(vec![Ok(rx.addr())], None).unwrap()[0].unwrap();
        assert_ne!(again, dest);
        inject(again, 4).unwrap();
        assert_eq!(next(&rq).data, 4);
        assert_eq!(inject(dest, 5), Err(Error::INVAL), "still removed");
        tx.close().unwrap();
        rx.close().unwrap();
    }

    /// A read that comes right after a read whose pass delivered (an
    /// application draining the CQ until -FI_EAGAIN, as Open MPI's mtl ofi
    /// does) skips its pass, once; a receive posted in between, a zero-count
    /// read and the read after a skip all progress.
    #[test]
    fn only_a_drain_right_after_a_delivery_skips_its_pass() {
        let Pair { tx, rx, rq, dest, .. } = pair();
        let mut bufs = [[0u8; 4]; 4];
        let recv = |i: usize, b: &mut [u8; 4]| {
            let iov = IovList::single(b.as_mut_ptr() as usize, b.len());
            rx.post_recv(RecvOp::new(iov, FI_ADDR_UNSPEC, i)).unwrap();
        };
        let inject = |data: u64| {
            let iov = IovList::single(b"data".as_ptr() as usize, 4);
            tx.post_send(SendOp::inject(iov, dest).with_data(data)).unwrap();
        };
        let [b1, b2, b3, b4] = &mut bufs;
        recv(1, b1);
        recv(2, b2);
        inject(1);
        assert_eq!(next(&rq).data, 1);
        inject(2);
        // Drained right after a delivering pass, nothing posted since: no pass.
        assert_eq!(rq.read(1, |_, _| ()), Err(Error::AGAIN));
        // The read after a skip progresses (one pass delivers a loopback
        // message).
        let mut got = None;
        assert_eq!(rq.read(1, |_, e| got = Some(*e)), Ok(1));
        assert_eq!(got.unwrap().data, 2);
        // A receive posted in between (a slot claimed here): the read
        // progresses.
        recv(3, b3);
        recv(4, b4);
        inject(3);
        assert_eq!(rq.read(1, |_, e| got = Some(*e)), Ok(1));
        assert_eq!(got.unwrap().data, 3);
        // A zero-count read progresses (util's poll and fabtests use it to
        // drive progress), even right after a delivering pass.
        inject(4);
        assert_eq!(rq.read(0, |_, _| ()), Ok(0));
        assert_eq!(rq.read(1, |_, e| got = Some(*e)), Ok(1));
        assert_eq!(got.unwrap().data, 4);
        tx.close().unwrap();
        rx.close().unwrap();
    }

    /// The RMA tally (reported at close) counts the operations an endpoint
    /// accepted, by direction, and nothing refused at the call.
    #[test]
    fn rma_tally_counts_accepted_operations() {
        use crate::core::cq::CqErrRead;
        use crate::core::engine::{RmaIovList, RmaKind};
        use crate::core::rma::RmaOp;
        const EINVAL_CODE: i32 = Error::INVAL.0;
        let d = domain();
        let info = Info {
            caps: FI_MSG | crate::core::rma::RMA_CAPS,
            ..Default::default()
        };
        let (e, q, a) = (ep_with(&d, &info), cq(&d, 8), av(&d));
        let mut buf = [0u8; 8];
        let op = |kind, buf: &mut [u8; 8], dest| RmaOp {
            kind,
            local: IovList::single(buf.as_mut_ptr() as usize, buf.len()),
            remote: RmaIovList::single(0, 8, 0x5eed),
            dest,
            data: None,
            flags: Some(FI_DELIVERY_COMPLETE), // the refusals reach the initiator (docs/rma.md)
            context: 1,
            inject: false,
        };
        assert_eq!(e.post_rma(op(RmaKind::Write, &mut buf, 0)), Err(Error::OPBADSTATE));
        assert_eq!(e.rma_tally.report(), None, "nothing accepted, nothing reported");
        bind_av(&e, &a).unwrap();
        bind_cq(&e, &q, FI_TRANSMIT | FI_RECV).unwrap();
        e.enable().unwrap();
        let me = a.insert(vec![Ok(e.addr())], None).unwrap()[0].unwrap();
        // Accepted (the unknown key fails later, in a completion).
        e.post_rma(op(RmaKind::Write, &mut buf, me)).unwrap();
        e.post_rma(op(RmaKind::Write, &mut buf, me)).unwrap();
        e.post_rma(op(RmaKind::Read, &mut buf, me)).unwrap();
        let bad = RmaOp {
            flags: Some(FI_TAGGED),
            ..op(RmaKind::Read, &mut buf, me)
        };
        assert_eq!(e.post_rma(bad), Err(Error::BADFLAGS));
        assert_eq!(
            e.rma_tally.report().as_deref(),
            Some("endpoint closed: RMA operations started: 2 writes, 1 reads")
        );
        // The three end in error completions (no region has that key).
        let (start, mut errs) = (Instant::now(), 0);
        while errs < 3 {
            match q.read_err(|r| matches!(r, CqErrRead::Entry(x) if x.err == EINVAL_CODE)) {
                Ok(true) => errs += 1,
                Ok(false) => panic!("unexpected error entry"),
                Err(_) => {
                    let _ = q.read(1, |_, _| ());
                }
            }
            assert!(start.elapsed() < Duration::from_secs(30), "no completion");
            std::thread::yield_now();
        }
        e.close().unwrap();
    }
}
