//! The fabric core: root of every other object, owner of the
//! connection-management progress engine (passive endpoints) and of the
//! `FI_RUSTFAB_*` settings read when it opened. Its C face (`fi/fabric.rs`)
//! also dispatches `fi_trywait` and `fi_wait_open`.

use crate::base::error::{Error, Result};
use crate::core::progress::Engine;
use crate::core::settings::Settings;
use crate::core::users::{HasUsers, Users};
use std::sync::Arc;

/// The only fabric name rustfab answers to (fi_getinfo's `fabric_attr->name`).
pub(crate) const FABRIC_NAME: &str = "rustfab";

/// The libfabric API level rustfab implements (what `fi_prov_ini`
/// announces, and what a fabric whose application version is unknown
/// follows).
pub(crate) const API_VERSION: u32 = crate::abi::v2::API_NEWEST;

pub(crate) struct Fabric {
    users: Users,
    /// Progress for objects that belong to the fabric rather than a domain
    /// (passive endpoints' listeners, connection requests).
    pub(crate) engine: Arc<Engine>,
    /// The `FI_RUSTFAB_*` settings, read when the fabric opened.
    pub(crate) settings: Settings,
}

impl HasUsers for Fabric {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Fabric {
    /// `fi_fabric`: `name` (None = any) must be rustfab's.
    pub(crate) fn open(name: Option<&str>, settings: Settings) -> Result<Arc<Fabric>> {
        if name.is_some_and(|n| !n.eq_ignore_ascii_case(FABRIC_NAME)) {
            return Err(Error::INVAL);
        }
        Ok(Arc::new(Fabric {
            users: Users::default(),
            engine: Engine::new()?,
            settings,
        }))
    }

    /// The API version the application asked for, from the value libfabric
    /// stored in the fabric after `fi_fabric` returned (docs/abi.md §0.9):
    /// 0 (not stored) reads as the current one.
    pub(crate) fn api_version(stored: u32) -> u32 {
        match stored {
            0 => API_VERSION,
            v => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::fi_version;

    #[test]
    fn name_and_api_version() {
        assert!(Fabric::open(None, Settings::default()).is_ok());
        assert!(Fabric::open(Some("RustFab"), Settings::default()).is_ok());
        assert_eq!(Fabric::open(Some("tcp"), Settings::default()).err(), Some(Error::INVAL));
        assert_eq!(Fabric::api_version(0), API_VERSION);
        assert_eq!(Fabric::api_version(fi_version(1, 4)), fi_version(1, 4));
    }
}
