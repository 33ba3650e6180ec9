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
//!
//! The calls' arguments ([`SendOp`], [`RecvOp`], [`BindTarget`], the
//! options) and their flag rules are in `ep/ops.rs`; how an endpoint's
//! configuration, port and engine are made from its info, in `ep/setup.rs`.

mod ops;
mod setup;

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::base::serial::{ModeGuard, ModeMutex};
use crate::core::attr::Info;
use crate::core::domain::Domain;
use crate::core::engine::lanes::Side;
use crate::core::engine::{buffered, Binds, FrozenBinds, Inner, RecvArgs, SendArgs};
use crate::core::progress::Source;
use crate::core::shared_ctx::{EpShared, Member, SharedRx, SharedTx};
use crate::core::users::{HasUsers, Held, Users};
use crate::transport::addr::Addr;
use ops::{rx_flags, tx_flags};
pub(crate) use ops::{BindTarget, Direction, EpOpt, RecvOp, SendMode, SendOp, TagMatch};
use parking_lot::Mutex;
use setup::rdm_port;
pub(crate) use setup::{config_from, rdm_engine, shm_port, INJECT_SIZE};
#[cfg(test)]
use setup::{DEFAULT_RX_SIZE, DEFAULT_TX_SIZE};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// Opens an endpoint's port on a domain at an info's src_addr.
pub(crate) type PortOpener = fn(&Domain, &Info) -> Result<Box<dyn crate::transport::Port>>;

/// What a connection-oriented endpoint adds to the core: checks before
/// posts and hooks at enable, close and after every progress pass.
pub(crate) trait Connection: Send + Sync + Sized + 'static {
    /// Posting a send (`-FI_ENOTCONN` unless connected).
    fn check_send(&self) -> Result<()>;
    // No check on posting a receive: one is accepted at any time, also
    // after the connection ended (core/connected.rs, "Posts").
    /// At `fi_enable`, with the bindings about to be fixed (an error leaves
    /// the endpoint disabled and its bindings pending).
    fn on_enable(&self, ep: &Arc<Endpoint<Self>>, b: &Binds) -> Result<()>;
    /// At close, before the endpoint leaves its engines.
    fn on_close(&self, ep: &Arc<Endpoint<Self>>);
    /// After each progress pass, with the endpoint's lock held.
    fn after_progress(&self, inner: &mut Inner, b: &Binds);
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
    /// Its shared contexts (`core/shared_ctx.rs`): None unless its info
    /// asked for one (`FI_SHARED_CONTEXT`), so that the calls of other
    /// endpoints test only this word.
    pub(crate) shared: Option<Box<EpShared>>,
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
                // The shared contexts' part is out of line, around the one
                // inlined pass.
                let entered = self.shared.as_ref().map(|s| s.enter(&mut g));
                let moved = g.progress_in(b.view());
                if let Some(e) = entered {
                    e.leave(&mut g);
                }
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
            shared: info
                .ep
                .as_ref()
                .filter(|e| e.tx_ctx_cnt == FI_SHARED_CONTEXT || e.rx_ctx_cnt == FI_SHARED_CONTEXT)
                .map(|e| {
                    Box::new(EpShared::new(
                        e.tx_ctx_cnt == FI_SHARED_CONTEXT,
                        e.rx_ctx_cnt == FI_SHARED_CONTEXT,
                    ))
                }),
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

    /// Runs `f` on the engine `g` (this endpoint's, locked) as the
    /// endpoint's own calls do: with its shared receive context's queue in
    /// place, if it has one (`core/shared_ctx.rs`).
    pub(crate) fn run_engine<R>(&self, g: &mut Inner, f: impl FnOnce(&mut Inner) -> R) -> R {
        match &self.shared {
            None => f(g),
            Some(s) => s.run(g, f),
        }
    }

    /// `fi_ep_bind` of a shared receive context (`flags` 0): only on an
    /// endpoint opened with `rx_ctx_cnt` = `FI_SHARED_CONTEXT`, once, before
    /// `fi_enable`; its receives then queue in the context, whose `size` is
    /// the endpoint's receive depth.
    pub(crate) fn bind_srx(self: &Arc<Self>, flags: u64, srx: Arc<SharedRx>) -> Result<()> {
        let _p = self.pending.lock();
        if self.enabled.load(Ordering::Acquire) {
            return Err(Error::OPBADSTATE);
        }
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        let s = self.shared.as_ref().ok_or(Error::INVAL)?;
        let size = srx.attr.size;
        let me: Weak<dyn Member> = Arc::downgrade(self) as Weak<dyn Member>;
        s.bind_rx(srx, &self.domain, me)?;
        self.inner.lock().config_mut().rx_size = size;
        Ok(())
    }

    /// `fi_ep_bind` of a shared transmit context (as [`Endpoint::bind_srx`],
    /// `tx_ctx_cnt`): the context's `size` is the depth of all of its
    /// endpoints together.
    pub(crate) fn bind_stx(&self, flags: u64, stx: Arc<SharedTx>) -> Result<()> {
        let _p = self.pending.lock();
        if self.enabled.load(Ordering::Acquire) {
            return Err(Error::OPBADSTATE);
        }
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        let s = self.shared.as_ref().ok_or(Error::INVAL)?;
        let size = stx.attr.size;
        s.bind_tx(stx, &self.domain)?;
        self.inner.lock().config_mut().tx_size = size;
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
        if let Some(s) = &self.shared {
            let rx_cq = b.rx_cq.as_deref().map_or(0, |c| c as *const _ as usize);
            let av = b.av.as_deref().map_or(0, |a| a as *const _ as usize);
            s.check_enable(rx_cq, av)?;
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
        if let Some(s) = &self.shared {
            s.leave(Arc::as_ptr(self) as *const ());
        }
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
        let mut g = self.inner.lock();
        match &self.shared {
            None => g.cancel(b, context),
            Some(s) => s.run(&mut g, |g| g.cancel(b, context)),
        }
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
    #[inline]
    pub(crate) fn post_send(&self, op: SendOp) -> Result<()> {
        self.post_send_on(op, None)
    }

    /// [`Endpoint::post_send`] on a context of a scalable endpoint (its
    /// bindings and index: core/scalable.rs) or, with None, the endpoint:
    /// the one caller of `send_in`, which is inlined here.
    pub(crate) fn post_send_on(&self, op: SendOp, ctx: Option<(&Side, u8)>) -> Result<()> {
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
        // The one call of `send_in` (inlined here); a shared context's part
        // out of line around it.
        let entered = match &self.shared {
            None => None,
            Some(s) => Some(s.enter_send(&mut g, b)?),
        };
        let cv;
        let r = g.send_in(
            match ctx {
                None => b.view(),
                Some((side, lane)) => {
                    cv = b.view().for_ctx(side, lane, false);
                    &cv
                }
            },
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
        );
        if let Some(e) = entered {
            e.leave(&mut g);
        }
        r
    }

    /// Every receive call (one lock, flags checked first, as sends).
    #[inline]
    pub(crate) fn post_recv(&self, op: RecvOp) -> Result<()> {
        self.post_recv_on(op, None)
    }

    /// [`Endpoint::post_recv`] on a receive context (as `post_send_on`).
    #[inline(always)]
    pub(crate) fn post_recv_on(&self, op: RecvOp, ctx: Option<(&Side, u8)>) -> Result<()> {
        if let Some(s) = &self.shared {
            if let Some(srx) = s.srx.get() {
                // Its receives are the shared context's.
                return srx.post_recv(op);
            }
        }
        let mut g = self.inner.lock();
        self.recv_locked(&mut g, op, ctx)
    }

    /// [`Endpoint::post_recv_on`] with the engine locked (a shared receive
    /// context's post, `Member::post_locked`, too).
    #[inline(always)]
    fn recv_locked(&self, g: &mut Inner, op: RecvOp, ctx: Option<(&Side, u8)>) -> Result<()> {
        let flags = rx_flags(g, &op)?;
        let b = self.bound()?;
        let tag = op.tag.unwrap_or(TagMatch { tag: 0, ignore: 0 });
        let a = RecvArgs {
            src: op.src,
            iov: &op.iov,
            tagged: op.tag.is_some(),
            tag: tag.tag,
            ignore: tag.ignore,
            flags,
            context: op.context,
        };
        // One call of `recv_in` (inlined here), a context's queue put in
        // place around it.
        let cv;
        let (view, prev) = match ctx {
            None => (b.view(), None),
            Some((side, lane)) => {
                cv = b.view().for_ctx(side, lane, true);
                (&cv, Some(g.enter_rx_lane(lane as usize)?))
            }
        };
        let r = g.recv_in(view, a);
        if let Some(p) = prev {
            g.leave_rx_lane(p);
        }
        r
    }
}

impl<L: Connection> Member for Endpoint<L> {
    fn engine(&self) -> Option<(ModeGuard<'_, Inner>, &FrozenBinds)> {
        if self.closed.load(Ordering::Acquire) || self.failed.load(Ordering::Acquire) {
            return None;
        }
        let b = self.bound().ok()?;
        Some((self.inner.lock(), b))
    }
    fn post_locked(&self, g: &mut Inner, op: RecvOp) -> Result<()> {
        self.recv_locked(g, op, None)
    }
}

#[cfg(test)]
mod tests;
