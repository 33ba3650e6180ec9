//! Who uses an object: bindings and child objects hold a [`Held`], so that
//! closing an object still in use returns `-FI_EBUSY` (every object's man
//! page: "If resources are still associated with the ... when attempting to
//! close, the call will return -FI_EBUSY").

use crate::base::error::{Error, Result};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Counts the objects that use (are bound to, or were opened from) an object,
/// so that closing a used object returns `-FI_EBUSY`.
#[derive(Default, Debug)]
pub(crate) struct Users(AtomicUsize);

impl Users {
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
    /// `Err(EBUSY)` while anything still uses the object.
    pub(crate) fn check_idle(&self) -> Result<()> {
        if self.count() == 0 {
            Ok(())
        } else {
            Err(Error::BUSY)
        }
    }
}

/// Objects whose closing depends on their users.
pub(crate) trait HasUsers {
    fn users(&self) -> &Users;
}

/// A parent object of any type, for a child that holds it only to keep it
/// from closing (a counter its domain).
pub(crate) type AnyParent = dyn HasUsers + Send + Sync;

/// A counted reference: holding one keeps the target's close at `-FI_EBUSY`.
pub(crate) struct Held<T: HasUsers + ?Sized>(Arc<T>);

impl<T: HasUsers + ?Sized> Held<T> {
    pub(crate) fn new(t: Arc<T>) -> Held<T> {
        t.users().0.fetch_add(1, Ordering::AcqRel);
        Held(t)
    }
    pub(crate) fn arc(&self) -> &Arc<T> {
        &self.0
    }
}

impl<T: HasUsers + ?Sized> Clone for Held<T> {
    fn clone(&self) -> Self {
        Held::new(self.0.clone())
    }
}

impl<T: HasUsers + ?Sized> Drop for Held<T> {
    fn drop(&mut self) {
        self.0.users().0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<T: HasUsers + ?Sized> core::ops::Deref for Held<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
