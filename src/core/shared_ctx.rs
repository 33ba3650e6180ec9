//! Shared contexts (fi_endpoint(3), "Shared Contexts"; docs/shared_ctx.md):
//! a shared transmit context ([`SharedTx`], `fi_stx_context`) and a shared
//! receive context ([`SharedRx`], `fi_srx_context`), bound with
//! `fi_ep_bind` to endpoints opened with `tx_ctx_cnt`/`rx_ctx_cnt` =
//! `FI_SHARED_CONTEXT`.
//!
//! A shared receive context owns one queue of posted receives. Each
//! endpoint bound to it keeps its own port, address, unexpected messages and
//! in-flight receives; for every call into its engine that may match a
//! message (a progress pass, a post, a cancel) the endpoint takes the
//! context's lock after its own and puts the context's queue in place of
//! its engine's posted queue ([`SharedRx::around`]). So a message arriving
//! at any of the endpoints is matched against the context's receives in
//! posting order, completes to the CQ and counter that endpoint bound for
//! receives, and names its sender (`FI_SOURCE`) as on any endpoint. A
//! receive posted on the context first looks for a matching unexpected
//! message in each bound endpoint, in binding order (messages to one
//! endpoint in their arrival order; messages to different endpoints carry no
//! order between them), with every member's lock held, then the context's:
//! no message can slip in between the look and the queueing.
//!
//! Lock order: endpoints (a post on the context takes all of its members',
//! in binding order), then the context. A pass of one endpoint holds only
//! its own lock when it takes the context's, so the two never wait on each
//! other in a loop.
//!
//! A shared transmit context gives its endpoints one depth: a send on any
//! of them is refused with `-FI_EAGAIN` when together they have the
//! context's `size` operations outstanding. Each endpoint publishes its
//! count of outstanding operations ([`TxSlot`]) after every post and pass;
//! a send sums the slots (another endpoint's figure may be one pass old: too
//! high, never too low, so the depth is never exceeded).

use crate::base::error::{Error, Result};
use crate::base::serial::{ModeGuard, ModeMutex};
use crate::core::attr::{RxAttr, TxAttr};
use crate::core::domain::Domain;
use crate::core::engine::matching::Matching;
use crate::core::engine::srx::posted_queue;
use crate::core::engine::{FrozenBinds, Inner};
use crate::core::ep::{RecvOp, TagMatch};
use crate::core::users::{HasUsers, Held, Users};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

/// Queue depth of a shared context whose attributes leave `size` 0.
pub(crate) const DEFAULT_SHARED_SIZE: usize = 1024;

/// An endpoint as a shared receive context sees it (implemented by
/// `core/ep.rs`'s endpoint).
pub(crate) trait Member: Send + Sync {
    /// The endpoint's engine, locked, with its bindings; None before
    /// `fi_enable` and after close.
    fn engine(&self) -> Option<(ModeGuard<'_, Inner>, &FrozenBinds)>;
    /// Posts `op` on the engine `g` (locked by [`Member::engine`]), whose
    /// posted queue is the context's for the call.
    fn post_locked(&self, g: &mut Inner, op: RecvOp) -> Result<()>;
}

/// A shared receive context (`FI_CLASS_SRX_CTX`).
pub(crate) struct SharedRx {
    users: Users,
    _domain: Held<Domain>,
    pub(crate) attr: RxAttr,
    /// The posted receives; in an endpoint's engine during a call of that
    /// endpoint (`around`).
    q: ModeMutex<Matching>,
    /// The bound endpoints, in binding order.
    members: Mutex<Vec<Weak<dyn Member>>>,
    /// The receive CQ and AV (addresses, 0 for none) every enabled member
    /// binds: the first one's.
    binds: Mutex<Option<(usize, usize)>>,
}

impl HasUsers for SharedRx {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl SharedRx {
    /// `fi_srx_context` with `attr` (None: the domain's defaults). The
    /// context takes the attributes it is given within rustfab's limits;
    /// `size` 0 is [`DEFAULT_SHARED_SIZE`].
    pub(crate) fn open(domain: &Arc<Domain>, attr: Option<&RxAttr>) -> Result<Arc<SharedRx>> {
        let mut a = attr.cloned().unwrap_or_default();
        if a.size == 0 {
            a.size = DEFAULT_SHARED_SIZE;
        }
        if a.total_buffered_recv != 0 {
            // Buffered receives are an endpoint's own (FI_BUFFERED_RECV).
            return Err(Error::INVAL);
        }
        Ok(Arc::new(SharedRx {
            users: Users::default(),
            _domain: Held::new(domain.clone()),
            attr: a,
            q: ModeMutex::new(posted_queue(), domain.engine.mode().clone()),
            members: Mutex::new(Vec::new()),
            binds: Mutex::new(None),
        }))
    }

    /// Whether this context belongs to `domain`.
    pub(crate) fn of_domain(&self, domain: &Domain) -> bool {
        std::ptr::eq(&*self._domain as *const Domain, domain)
    }

    /// At a member's `fi_enable`: its receive CQ and AV (addresses, 0 for
    /// none) must be those of the members enabled before it
    /// (`-FI_EINVAL`): a receive holds its completion's slot in the CQ it
    /// was posted through, whichever member it completes on, and
    /// connectionless endpoints sharing a receive context share one AV
    /// (fi_endpoint(3)).
    pub(crate) fn check_binds(&self, rx_cq: usize, av: usize) -> Result<()> {
        let mut g = self.binds.lock();
        match *g {
            None => {
                *g = Some((rx_cq, av));
                Ok(())
            }
            Some(x) if x == (rx_cq, av) => Ok(()),
            Some(_) => Err(Error::INVAL),
        }
    }

    /// An endpoint bound to the context (`fi_ep_bind`).
    pub(crate) fn join(&self, m: Weak<dyn Member>) {
        self.members.lock().push(m);
    }

    /// An endpoint closing leaves the context (and ones gone already).
    pub(crate) fn leave(&self, m: *const ()) {
        self.members
            .lock()
            .retain(|w| w.strong_count() > 0 && w.as_ptr() as *const () != m);
    }

    /// Runs `f` on an endpoint's engine `g` (locked by the caller) with the
    /// context's posted receives in place of the engine's.
    #[inline]
    pub(crate) fn around<R>(&self, g: &mut Inner, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut q = self.q.lock();
        g.swap_posted(&mut q);
        let r = f(g);
        g.swap_posted(&mut q);
        r
    }

    fn live_members(&self) -> Vec<Arc<dyn Member>> {
        self.members.lock().iter().filter_map(Weak::upgrade).collect()
    }

    /// `fi_recv` and the other receive calls on the context: placed by the
    /// first bound endpoint (in binding order) holding an unexpected
    /// message it matches, else queued for any of them. With no enabled
    /// endpoint bound: `-FI_EOPBADSTATE`.
    pub(crate) fn post_recv(&self, op: RecvOp) -> Result<()> {
        let members = self.live_members();
        let mut locked = Vec::with_capacity(members.len());
        for (i, m) in members.iter().enumerate() {
            if let Some((g, b)) = m.engine() {
                locked.push((i, g, b));
            }
        }
        if locked.is_empty() {
            return Err(Error::OPBADSTATE);
        }
        let tag = op.tag.unwrap_or(TagMatch { tag: 0, ignore: 0 });
        let pick = locked
            .iter()
            .position(|(_, g, b)| g.unexpected_would_match(b.view(), op.src, op.tag.is_some(), tag.tag, tag.ignore))
            .unwrap_or(0);
        let (i, g, _) = &mut locked[pick];
        let member = &members[*i];
        self.around(g, |g| member.post_locked(g, op))
    }

    /// `fi_cancel` on the context: the receive posted with `context`
    /// completes with `FI_ECANCELED` on the CQ of the first enabled bound
    /// endpoint (`-FI_ENOENT` when none is queued).
    pub(crate) fn cancel(&self, context: usize) -> Result<()> {
        let members = self.live_members();
        for m in &members {
            if let Some((mut g, b)) = m.engine() {
                return self.around(&mut g, |g| g.cancel(b, context));
            }
        }
        // No engine to complete it on: take it out silently if queued.
        self.q.lock().cancel(context).map(|_| ()).ok_or(Error::NOENT)
    }

    /// `fi_rx_size_left` on the context.
    pub(crate) fn size_left(&self) -> usize {
        self.attr.size.saturating_sub(self.q.lock().posted_count())
    }

    /// `fi_close`: `-FI_EBUSY` while an endpoint is bound; receives still
    /// queued are dropped (no endpoint is left to complete them).
    pub(crate) fn close(&self) -> Result<()> {
        self.users.check_idle()?;
        drop(self.q.lock().drain_posted());
        Ok(())
    }
}

/// A shared transmit context (`FI_CLASS_STX_CTX`).
pub(crate) struct SharedTx {
    users: Users,
    _domain: Held<Domain>,
    pub(crate) attr: TxAttr,
    /// Each bound endpoint's outstanding operations.
    slots: Mutex<Vec<Arc<AtomicUsize>>>,
}

impl HasUsers for SharedTx {
    fn users(&self) -> &Users {
        &self.users
    }
}

/// A bound endpoint's place in its transmit context: where it publishes
/// its outstanding operations.
pub(crate) struct TxSlot {
    pub(crate) stx: Arc<SharedTx>,
    mine: Arc<AtomicUsize>,
}

impl SharedTx {
    /// `fi_stx_context` with `attr` (None: the defaults; `size` 0 is
    /// [`DEFAULT_SHARED_SIZE`]).
    pub(crate) fn open(domain: &Arc<Domain>, attr: Option<&TxAttr>) -> Result<Arc<SharedTx>> {
        let mut a = attr.cloned().unwrap_or_default();
        if a.size == 0 {
            a.size = DEFAULT_SHARED_SIZE;
        }
        Ok(Arc::new(SharedTx {
            users: Users::default(),
            _domain: Held::new(domain.clone()),
            attr: a,
            slots: Mutex::new(Vec::new()),
        }))
    }

    /// Whether this context belongs to `domain`.
    pub(crate) fn of_domain(&self, domain: &Domain) -> bool {
        std::ptr::eq(&*self._domain as *const Domain, domain)
    }

    /// An endpoint bound to the context gets its slot.
    pub(crate) fn join(self: &Arc<Self>) -> TxSlot {
        let mine = Arc::new(AtomicUsize::new(0));
        self.slots.lock().push(mine.clone());
        TxSlot {
            stx: self.clone(),
            mine,
        }
    }

    /// `fi_close`: `-FI_EBUSY` while an endpoint is bound.
    pub(crate) fn close(&self) -> Result<()> {
        self.users.check_idle()
    }
}

impl TxSlot {
    /// Whether the context has room for one more operation of this
    /// endpoint (whose own count, `own`, is current).
    pub(crate) fn has_room(&self, own: usize) -> bool {
        let others: usize = self
            .stx
            .slots
            .lock()
            .iter()
            .filter(|s| !Arc::ptr_eq(s, &self.mine))
            .map(|s| s.load(Ordering::Acquire))
            .sum();
        others + own < self.stx.attr.size
    }

    /// Publishes this endpoint's outstanding operations.
    #[inline]
    pub(crate) fn publish(&self, n: usize) {
        self.mine.store(n, Ordering::Release);
    }

    /// The endpoint closed: its slot leaves the context.
    pub(crate) fn leave(&self) {
        self.stx.slots.lock().retain(|s| !Arc::ptr_eq(s, &self.mine));
    }
}

/// One call into a member's engine, entered ([`EpShared::enter`]).
pub(crate) struct Entered<'a> {
    s: &'a EpShared,
    /// The receive context's queue, locked; its posted receives are in the
    /// engine meanwhile.
    q: Option<ModeGuard<'a, Matching>>,
}

impl Entered<'_> {
    /// Takes the receive context's queue back from the engine `g` (the one
    /// `enter` was given) and tells the transmit context the endpoint's
    /// outstanding operations.
    #[cold]
    #[inline(never)]
    pub(crate) fn leave(mut self, g: &mut Inner) {
        if let Some(q) = self.q.as_mut() {
            g.swap_posted(q);
        }
        if let Some(t) = self.s.stx.get() {
            t.publish(g.tx_outstanding());
        }
    }
}

/// The counted references an endpoint holds on its contexts.
type Holds = (Option<Held<SharedRx>>, Option<Held<SharedTx>>);

/// What an endpoint opened with `FI_SHARED_CONTEXT` keeps of its shared
/// contexts (`core/ep.rs` holds one only then: other endpoints' calls do
/// not look here).
#[derive(Default)]
pub(crate) struct EpShared {
    /// `tx_ctx_cnt` / `rx_ctx_cnt` of its info were `FI_SHARED_CONTEXT`.
    pub(crate) want_tx: bool,
    pub(crate) want_rx: bool,
    pub(crate) srx: std::sync::OnceLock<Arc<SharedRx>>,
    pub(crate) stx: std::sync::OnceLock<TxSlot>,
    /// The bindings' counts (`-FI_EBUSY` on the contexts' close), given
    /// back when the endpoint closes.
    held: Mutex<Holds>,
}

impl EpShared {
    pub(crate) fn new(want_tx: bool, want_rx: bool) -> EpShared {
        EpShared {
            want_tx,
            want_rx,
            ..EpShared::default()
        }
    }

    /// `fi_ep_bind` of a receive context (before `fi_enable`, checked by
    /// the caller): `-FI_EINVAL` unless the endpoint asked for one, for a
    /// second one, or for one of another domain.
    pub(crate) fn bind_rx(&self, srx: Arc<SharedRx>, domain: &Domain, me: Weak<dyn Member>) -> Result<()> {
        if !self.want_rx || !srx.of_domain(domain) {
            return Err(Error::INVAL);
        }
        let mut h = self.held.lock();
        self.srx.set(srx.clone()).map_err(|_| Error::INVAL)?;
        srx.join(me);
        h.0 = Some(Held::new(srx));
        Ok(())
    }

    /// `fi_ep_bind` of a transmit context (as [`EpShared::bind_rx`]).
    pub(crate) fn bind_tx(&self, stx: Arc<SharedTx>, domain: &Domain) -> Result<()> {
        if !self.want_tx || !stx.of_domain(domain) {
            return Err(Error::INVAL);
        }
        let mut h = self.held.lock();
        if self.stx.get().is_some() {
            return Err(Error::INVAL);
        }
        let _ = self.stx.set(stx.join());
        h.1 = Some(Held::new(stx));
        Ok(())
    }

    /// At `fi_enable`: an endpoint that asked for a shared context must
    /// have one bound (fi_endpoint(3): "the shared contexts must be bound
    /// to the endpoint"; `-FI_ENOCQ`'s sibling for contexts is
    /// `-FI_EINVAL`), and the receive context's members agree on their
    /// receive CQ and AV.
    pub(crate) fn check_enable(&self, rx_cq: usize, av: usize) -> Result<()> {
        if (self.want_tx && self.stx.get().is_none()) || (self.want_rx && self.srx.get().is_none()) {
            return Err(Error::INVAL);
        }
        match self.srx.get() {
            Some(s) => s.check_binds(rx_cq, av),
            None => Ok(()),
        }
    }

    /// Runs `f` on the endpoint's engine `g` (locked): with the receive
    /// context's queue in place, and the transmit context told the
    /// endpoint's outstanding operations after it.
    pub(crate) fn run<R>(&self, g: &mut Inner, f: impl FnOnce(&mut Inner) -> R) -> R {
        let e = self.enter(g);
        let r = f(g);
        e.leave(g);
        r
    }

    /// The first half of [`EpShared::run`], for a caller that keeps its
    /// one call into the engine in line: the receive context's queue put
    /// in the engine `g` (its lock held until [`Entered::leave`], which
    /// must follow on every path).
    #[cold]
    #[inline(never)]
    pub(crate) fn enter(&self, g: &mut Inner) -> Entered<'_> {
        let q = self.srx.get().map(|s| {
            let mut q = s.q.lock();
            g.swap_posted(&mut q);
            q
        });
        Entered { s: self, q }
    }

    /// [`EpShared::enter`] for a send, RMA or atomic call: `-FI_EAGAIN`
    /// (nothing entered) when the transmit context has no room, after one
    /// progress pass of the endpoint (`b`: its bindings).
    #[cold]
    #[inline(never)]
    pub(crate) fn enter_send(&self, g: &mut Inner, b: &FrozenBinds) -> Result<Entered<'_>> {
        if let Some(t) = self.stx.get() {
            if !t.has_room(g.tx_outstanding()) {
                self.run(g, |g| g.progress(b));
                if !t.has_room(g.tx_outstanding()) {
                    return Err(Error::AGAIN);
                }
            }
        }
        Ok(self.enter(g))
    }

    /// The endpoint closes: it leaves its contexts, which it no longer
    /// keeps from closing.
    pub(crate) fn leave(&self, me: *const ()) {
        if let Some(s) = self.srx.get() {
            s.leave(me);
        }
        if let Some(t) = self.stx.get() {
            t.leave();
        }
        *self.held.lock() = (None, None);
    }
}
