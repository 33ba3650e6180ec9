//! Scalable endpoints (fi_endpoint(3), `fi_scalable_ep`): one endpoint,
//! one address, with up to `flag::LANES` transmit and as many receive
//! contexts, each with its own CQ and counter; a receive context also
//! has its own queue of posted receives and unexpected messages. A peer
//! names receive context `k` with `fi_rx_addr(fi_addr, k, rx_ctx_bits)`:
//! the sender's engine puts `k` in the record's header (`flag::LANE`) and
//! the receiver matches the message against context `k`'s queue
//! (docs/protocol.md, "Receive contexts").
//!
//! The endpoint is an RDM [`Endpoint`] whose engine has lanes
//! (`core/engine/lanes.rs`); a context ([`Context`]) holds the endpoint
//! and posts through it with its own bindings
//! ([`Endpoint::post_send_on`]/[`Endpoint::post_recv_on`]). The endpoint
//! itself carries no data operations and binds only an AV.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::{Info, RxAttr, TxAttr};
use crate::core::cntr::Cntr;
use crate::core::cq::Cq;
use crate::core::domain::Domain;
use crate::core::engine::lanes::Side;
use crate::core::ep::{rdm_engine, BindTarget, Connection, Endpoint, RecvOp, SendOp};
use crate::core::users::{HasUsers, Held, Users};
use crate::transport::proto::flag;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Contexts of each kind a scalable endpoint may have (`max_ep_tx_ctx`,
/// `max_ep_rx_ctx`): as many as a record's header can name.
pub(crate) const MAX_CTX: usize = flag::LANES;

/// The number of contexts `ep_attr` asks for: 0 means 1; more than
/// [`MAX_CTX`] (or `FI_SHARED_CONTEXT`) is `-FI_EINVAL`.
fn ctx_count(n: usize) -> Result<usize> {
    match n {
        0 => Ok(1),
        n if n <= MAX_CTX => Ok(n),
        _ => Err(Error::INVAL),
    }
}

/// A scalable endpoint: the RDM endpoint that owns the port and the
/// engine, and which of its contexts are open.
pub(crate) struct Scalable<L> {
    users: Users,
    pub(crate) ep: Arc<Endpoint<L>>,
    domain: Arc<Domain>,
    /// What every context is given (its attributes, as `fi_tx_context`
    /// and `fi_rx_context` report them back): the endpoint's.
    pub(crate) tx_attr: TxAttr,
    pub(crate) rx_attr: RxAttr,
    /// Open transmit and receive contexts, by index.
    open: Mutex<(Vec<bool>, Vec<bool>)>,
}

impl<L: Connection> HasUsers for Scalable<L> {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl<L: Connection> Scalable<L> {
    /// `fi_scalable_ep`: `info->ep_attr` gives the number of transmit and
    /// receive contexts (RDM endpoints only).
    pub(crate) fn open(domain: &Arc<Domain>, info: &Info) -> Result<Arc<Self>> {
        let (tx, rx) = match &info.ep {
            Some(e) => (ctx_count(e.tx_ctx_cnt)?, ctx_count(e.rx_ctx_cnt)?),
            None => (1, 1),
        };
        // The contexts' tables neither step over a message prefix nor
        // report buffered receives: an endpoint asking for either is not
        // offered.
        if crate::core::prefix::msg_prefix(info)? != 0
            || crate::core::engine::buffered::requested(info)
            || info.caps & FI_VARIABLE_MSG != 0
        {
            return Err(Error::NOSYS);
        }
        let mut inner = rdm_engine(domain, info)?;
        inner.enable_lanes(tx, rx)?;
        let addr = inner.addr();
        let cfg = inner.config();
        let tx_attr = TxAttr {
            op_flags: cfg.tx_op_flags,
            inject_size: cfg.inject_size,
            size: cfg.tx_size,
            ..info.tx.clone().unwrap_or_default()
        };
        let rx_attr = RxAttr {
            op_flags: cfg.rx_op_flags,
            size: cfg.rx_size,
            ..info.rx.clone().unwrap_or_default()
        };
        let ep = Endpoint::new(domain, info, inner, addr, None)?;
        Ok(Arc::new(Scalable {
            users: Users::default(),
            ep,
            domain: domain.clone(),
            tx_attr,
            rx_attr,
            open: Mutex::new((vec![false; tx], vec![false; rx])),
        }))
    }

    /// `fi_scalable_ep_bind`: an address vector (flags 0), nothing else.
    pub(crate) fn bind(&self, flags: u64, target: impl FnOnce() -> Result<BindTarget>) -> Result<()> {
        let t = target()?;
        if !matches!(t, BindTarget::Av(_)) {
            return Err(Error::INVAL);
        }
        self.ep.bind(flags, || Ok(t))
    }

    /// `fi_tx_context` (`rx` false) / `fi_rx_context`: context `index`,
    /// which must exist (`-FI_EINVAL`) and not be open already
    /// (`-FI_EBUSY`).
    pub(crate) fn context(self: &Arc<Self>, rx: bool, index: i32) -> Result<Arc<Context<L>>> {
        let i = usize::try_from(index).map_err(|_| Error::INVAL)?;
        {
            let mut open = self.open.lock();
            let slots = if rx { &mut open.1 } else { &mut open.0 };
            let slot = slots.get_mut(i).ok_or(Error::INVAL)?;
            if *slot {
                return Err(Error::BUSY);
            }
            *slot = true;
        }
        Ok(Arc::new(Context {
            users: Users::default(),
            sep: Held::new(self.clone()),
            rx,
            index: i,
            pending: Mutex::new(Pending::default()),
            side: OnceLock::new(),
            enabled: AtomicBool::new(false),
        }))
    }

    /// `fi_close`: -FI_EBUSY while a context is open.
    pub(crate) fn close(&self) -> Result<()> {
        self.users.check_idle()?;
        self.ep.close()
    }
}

#[derive(Default)]
struct Pending {
    cq: Option<(Arc<Cq>, bool)>,
    cntr: Option<Arc<Cntr>>,
}

/// A transmit or receive context of a scalable endpoint.
pub(crate) struct Context<L: Connection> {
    users: Users,
    sep: Held<Scalable<L>>,
    pub(crate) rx: bool,
    index: usize,
    pending: Mutex<Pending>,
    /// The bindings fixed by `fi_enable` (the engine has its own copy,
    /// for completions made in any pass).
    side: OnceLock<Side>,
    enabled: AtomicBool,
}

impl<L: Connection> HasUsers for Context<L> {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl<L: Connection> Context<L> {
    fn ep(&self) -> &Endpoint<L> {
        &self.sep.ep
    }

    /// `fi_ep_bind` on a context: a CQ (`FI_TRANSMIT` on a transmit
    /// context, `FI_RECV` on a receive context, `FI_SELECTIVE_COMPLETION`)
    /// or a counter (`FI_SEND` / `FI_RECV` likewise), once each, before
    /// `fi_enable`.
    pub(crate) fn bind(&self, flags: u64, target: impl FnOnce() -> Result<BindTarget>) -> Result<()> {
        if self.enabled.load(Ordering::Acquire) {
            return Err(Error::OPBADSTATE);
        }
        let dir = if self.rx { FI_RECV } else { FI_TRANSMIT };
        let mut p = self.pending.lock();
        match target()? {
            BindTarget::Cq(cq) => {
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 {
                    return Err(Error::BADFLAGS);
                }
                if flags & (FI_TRANSMIT | FI_RECV) != dir || p.cq.is_some() {
                    return Err(Error::INVAL);
                }
                let ours = self.sep.domain.engine.mode();
                if !Arc::ptr_eq(cq.lock_mode(), ours) {
                    // A CQ of another domain: pushed from this domain's
                    // calls, read from its own (base/serial.rs).
                    cq.lock_mode().lock_for_good();
                    ours.lock_for_good();
                }
                p.cq = Some((cq, flags & FI_SELECTIVE_COMPLETION != 0));
            }
            BindTarget::Cntr(c) => {
                let valid = FI_SEND | FI_RECV;
                if flags & !valid != 0 {
                    return Err(Error::BADFLAGS);
                }
                if flags & valid != dir || p.cntr.is_some() {
                    return Err(Error::INVAL);
                }
                p.cntr = Some(c);
            }
            _ => return Err(Error::INVAL),
        }
        Ok(())
    }

    /// The queue depth a context's CQ is reserved for.
    fn depth(&self) -> usize {
        let g = self.ep().inner.lock();
        if self.rx {
            g.config().rx_size
        } else {
            g.config().tx_size
        }
    }

    /// `fi_enable`: reserves room in the bound CQ for every operation the
    /// context may have outstanding and hands its bindings to the engine.
    pub(crate) fn enable(&self) -> Result<()> {
        if self.enabled.load(Ordering::Acquire) {
            return Ok(());
        }
        let p = std::mem::take(&mut *self.pending.lock());
        let depth = self.depth();
        if let Some((cq, _)) = &p.cq {
            if let Err(e) = cq.reserve_capacity(depth) {
                *self.pending.lock() = p;
                return Err(e);
            }
        }
        let side = || Side {
            cq: p.cq.as_ref().map(|(c, _)| Held::new(c.clone())),
            selective: p.cq.as_ref().is_some_and(|(_, s)| *s),
            cntr: p.cntr.as_ref().map(|c| Held::new(c.clone())),
        };
        self.ep().inner.lock().set_side(self.rx, self.index, Some(side()))?;
        let _ = self.side.set(side());
        self.enabled.store(true, Ordering::Release);
        Ok(())
    }

    fn side(&self) -> Result<(&Side, u8)> {
        match self.side.get() {
            Some(s) if self.enabled.load(Ordering::Acquire) => Ok((s, self.index as u8)),
            _ => Err(Error::OPBADSTATE),
        }
    }

    /// A send on a transmit context (`-FI_EOPBADSTATE` before `fi_enable`
    /// of the context or of the endpoint).
    pub(crate) fn post_send(&self, op: SendOp) -> Result<()> {
        if self.rx {
            return Err(Error::NOSYS);
        }
        self.ep().post_send_on(op, Some(self.side()?))
    }

    /// A receive on a receive context (as `post_send`).
    pub(crate) fn post_recv(&self, op: RecvOp) -> Result<()> {
        if !self.rx {
            return Err(Error::NOSYS);
        }
        self.ep().post_recv_on(op, Some(self.side()?))
    }

    /// `fi_cancel` of a receive posted on this context.
    pub(crate) fn cancel(&self, context: usize) -> Result<()> {
        let (side, lane) = self.side()?;
        if !self.rx {
            return Err(Error::NOENT);
        }
        let b = self.ep().bound()?;
        let cv = b.view().for_ctx(side, lane, true);
        self.ep()
            .inner
            .lock()
            .with_rx_lane(lane as usize, |g| g.cancel(cv, context))?
    }

    /// `fi_close`: the engine forgets the context's bindings (completions
    /// of its operations still outstanding are dropped), its CQ gives back
    /// the room reserved, and its index is free again.
    pub(crate) fn close(&self) -> Result<()> {
        self.users.check_idle()?;
        if self.enabled.load(Ordering::Acquire) {
            let old = self.ep().inner.lock().set_side(self.rx, self.index, None)?;
            drop(old);
            if let Some(cq) = self.side.get().and_then(|s| s.cq.as_deref()) {
                cq.release_capacity(self.depth());
            }
        }
        let mut open = self.sep.open.lock();
        let slots = if self.rx { &mut open.1 } else { &mut open.0 };
        slots[self.index] = false;
        Ok(())
    }
}
