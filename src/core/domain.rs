//! The domain: one transport (shm, tcp or auto) inside a fabric. It owns
//! the data progress engine of its endpoints and the memory-registration
//! map, and is the parent of AVs, CQs, counters, poll sets, MRs and
//! endpoints (opened through its C face, `fi/domain.rs`).

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::base::serial::LockMode;
use crate::core::attr::Info;
use crate::core::eq::Eq;
use crate::core::fabric::Fabric;
use crate::core::progress::Engine;
use crate::core::users::{HasUsers, Held, Users};
use parking_lot::Mutex;
use std::sync::Arc;

/// Which of rustfab's transports a domain uses (its `domain_attr->name`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransportKind {
    Shm,
    Tcp,
    /// shm to peers on this host, TCP to the others, behind one address.
    Auto,
}

impl TransportKind {
    pub(crate) fn domain_name(self) -> &'static str {
        match self {
            TransportKind::Shm => "shm",
            TransportKind::Tcp => "tcp",
            TransportKind::Auto => "auto",
        }
    }
    pub(crate) fn from_domain_name(n: &str) -> Option<TransportKind> {
        match n {
            "shm" => Some(TransportKind::Shm),
            "tcp" => Some(TransportKind::Tcp),
            "auto" => Some(TransportKind::Auto),
            _ => None,
        }
    }
}

pub(crate) struct Domain {
    users: Users,
    fabric: Held<Fabric>,
    pub(crate) transport: TransportKind,
    /// The info the domain was opened with (application-owned, so copied).
    pub(crate) info: Info,
    /// `fid_fabric.api_version` of the parent, read when the domain opened.
    pub(crate) api_version: u32,
    pub(crate) engine: Arc<Engine>,
    pub(crate) mrs: Arc<crate::core::mr_map::MrMap>,
    /// EQ bound with `fi_domain_bind` (asynchronous MR/AV events).
    eq: Mutex<Option<(Held<Eq>, u64)>>,
}

impl HasUsers for Domain {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Domain {
    pub(crate) fn fabric(&self) -> &Arc<Fabric> {
        self.fabric.arc()
    }
    pub(crate) fn domain_attr(&self) -> crate::core::attr::DomainAttr {
        self.info.domain.clone().unwrap_or_default()
    }
    /// The effective `mr_mode` (from the info the application passed).
    pub(crate) fn mr_mode(&self) -> i32 {
        self.info.domain.as_ref().map(|d| d.mr_mode).unwrap_or(0)
    }

    /// Whether the domain negotiated `FI_HMEM` (MR `iface` is read only then).
    pub(crate) fn has_hmem(&self) -> bool {
        (self.info.caps | self.domain_attr().caps) & FI_HMEM != 0
    }

    /// `fi_domain`: checks `info` against what rustfab offers. `api_version`
    /// is the parent fabric's (read when the domain opens).
    pub(crate) fn open(fabric: &Arc<Fabric>, info: Info, api_version: u32) -> Result<Arc<Domain>> {
        let name = info.domain.as_ref().and_then(|d| d.name.clone());
        let transport = match name.as_deref() {
            Some(n) => TransportKind::from_domain_name(n).ok_or(Error::INVAL)?,
            None => match info.addr_format {
                FI_SOCKADDR_IN | FI_SOCKADDR_IN6 | FI_SOCKADDR => TransportKind::Tcp,
                _ => TransportKind::Shm,
            },
        };
        if let Some(f) = &info.fabric {
            if f.name
                .as_deref()
                .is_some_and(|n| !n.eq_ignore_ascii_case(crate::core::fabric::FABRIC_NAME))
            {
                return Err(Error::INVAL);
            }
        }
        let d = Arc::new(Domain {
            engine: Engine::with_mode(lock_mode(&info))?,
            users: Users::default(),
            fabric: Held::new(fabric.clone()),
            transport,
            info,
            api_version,
            mrs: Arc::default(),
            eq: Mutex::new(None),
        });
        if d.domain_attr().data_progress == FI_PROGRESS_AUTO {
            d.engine.require_thread();
        }
        Ok(d)
    }

    /// `fi_close` on a domain: -FI_EBUSY while anything opened from it (or
    /// a memory registration) exists; releases the bound EQ.
    pub(crate) fn close(&self) -> Result<()> {
        self.users.check_idle()?;
        if !self.mrs.is_empty() {
            return Err(Error::BUSY);
        }
        self.eq.lock().take();
        Ok(())
    }

    /// `fi_domain_bind`: an EQ for asynchronous events (`FI_REG_MR`: memory
    /// registrations report `FI_MR_COMPLETE` there). One EQ per domain.
    pub(crate) fn bind_eq(&self, eq: Arc<Eq>, flags: u64) -> Result<()> {
        if flags & !FI_REG_MR != 0 {
            return Err(Error::BADFLAGS);
        }
        let mut slot = self.eq.lock();
        if slot.is_some() {
            return Err(Error::BUSY);
        }
        *slot = Some((Held::new(eq), flags));
        Ok(())
    }

    /// The EQ memory registrations report to (bound with `FI_REG_MR`).
    pub(crate) fn reg_mr_eq(&self) -> Option<Arc<Eq>> {
        self.eq
            .lock()
            .as_ref()
            .filter(|(_, flags)| flags & FI_REG_MR != 0)
            .map(|(eq, _)| eq.arc().clone())
    }
}

/// The locking mode of a domain's objects (base/serial.rs): serial when
/// the application promised to serialise every call on the domain
/// (`FI_THREAD_DOMAIN`) and no progress thread runs beside it (manual
/// progress); real locks otherwise. `FI_THREAD_COMPLETION` and
/// `FI_THREAD_ENDPOINT` do not qualify: any CQ read progresses every
/// endpoint of the domain, which those levels let other threads use.
fn lock_mode(info: &Info) -> Arc<LockMode> {
    let serial = info.domain.as_ref().is_some_and(|d| {
        d.threading == FI_THREAD_DOMAIN && d.data_progress != FI_PROGRESS_AUTO && d.control_progress != FI_PROGRESS_AUTO
    });
    crate::base::log::log_info!(
        FI_LOG_DOMAIN,
        "fi_domain: {} locks",
        if serial {
            "serial (FI_THREAD_DOMAIN, manual progress)"
        } else {
            "real"
        }
    );
    if serial {
        // SAFETY: the application serialises every call that reaches the
        // domain's locks (fi_domain(3), FI_THREAD_DOMAIN); every way of
        // reaching them from elsewhere switches the mode first
        // (docs/architecture.md "Locks and threading levels").
        unsafe { LockMode::serial() }
    } else {
        LockMode::locked()
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        if self.domain_attr().data_progress == FI_PROGRESS_AUTO {
            self.engine.release_thread();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::attr::{DomainAttr, FabricAttr};
    use crate::core::settings::Settings;
    use crate::core::wait::Holds;

    fn fabric() -> Arc<Fabric> {
        Fabric::open(None, Settings::default()).unwrap()
    }

    fn named(name: &str) -> Info {
        Info {
            domain: Some(DomainAttr {
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn transport_from_name_or_address_format() {
        let f = fabric();
        let v = crate::core::fabric::API_VERSION;
        assert_eq!(Domain::open(&f, named("tcp"), v).unwrap().transport, TransportKind::Tcp);
        assert_eq!(
            Domain::open(&f, named("auto"), v).unwrap().transport,
            TransportKind::Auto
        );
        assert_eq!(Domain::open(&f, named("verbs"), v).err(), Some(Error::INVAL));
        let sin = Info {
            addr_format: FI_SOCKADDR_IN,
            ..Default::default()
        };
        assert_eq!(Domain::open(&f, sin, v).unwrap().transport, TransportKind::Tcp);
        let d = Domain::open(&f, Info::default(), v).unwrap();
        assert_eq!(d.transport, TransportKind::Shm);
        assert_eq!(f.users().count(), 1, "a domain holds its fabric");
        drop(d);
        let other = Info {
            fabric: Some(FabricAttr {
                name: Some("sockets".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(Domain::open(&f, other, v).err(), Some(Error::INVAL));
    }

    #[test]
    fn eq_binding_and_close() {
        let f = fabric();
        let d = Domain::open(&f, named("shm"), crate::core::fabric::API_VERSION).unwrap();
        let a = crate::core::eq::EqAttr {
            size: 4,
            flags: 0,
            wait_obj: FI_WAIT_NONE,
        };
        let eq = Eq::new(&a, fi_version(1, 17), Holds::none(), None).unwrap();
        assert_eq!(d.bind_eq(eq.clone(), FI_SEND), Err(Error::BADFLAGS));
        assert!(d.reg_mr_eq().is_none());
        d.bind_eq(eq.clone(), FI_REG_MR).unwrap();
        assert_eq!(d.bind_eq(eq.clone(), 0), Err(Error::BUSY));
        assert!(d.reg_mr_eq().is_some());
        assert_eq!(eq.users().count(), 1, "the binding holds the EQ");
        d.close().unwrap();
        assert_eq!(eq.users().count(), 0, "close releases it");
    }
}
