//! The one error type of locksmith, with stable codes.

/// Everything that can go wrong in locksmith.
///
/// Each variant has a stable [`code`](LockError::code) that bindings expose as
/// `err.code`; messages start with `locksmith:` and name the value at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// `extend` (or `serialize`) on a lock this handle does not hold: it was never
    /// acquired, was released, or expired and was lost.
    #[error("locksmith: lock {} is not held by this handle ({reason})", crate::validate::quote(key))]
    NotHeld {
        /// The lock key.
        key: String,
        /// Why it is not held.
        reason: &'static str,
    },
    /// An argument failed validation.
    #[error("locksmith: {0}")]
    InvalidArgument(String),
    /// `restore` was given something that is not a serialized lock.
    #[error("locksmith: invalid serialized lock: {0}")]
    InvalidSerializedLock(String),
    /// The store could not be reached or did not answer in time.
    #[error("locksmith: store unavailable: {0}")]
    StoreUnavailable(String),
    /// The store answered with something the `LockStore` contract does not allow.
    #[error("locksmith: store broke its contract: {0}")]
    StoreContractViolation(String),
    /// The store reached and refused the operation (wrong key type, permissions, ...).
    #[error("locksmith: store error: {0}")]
    StoreError(String),
    /// The store was closed; it takes no more operations.
    #[error("locksmith: store is closed")]
    StoreClosed,
    /// The store cannot do what was asked (a semaphore or read-write lock on a store
    /// without them). Nothing was taken.
    #[error("locksmith: {0}")]
    Unsupported(String),
    /// The platform's secure random source is missing or failed, so no owner token
    /// could be minted. Nothing was acquired.
    #[error("locksmith: no secure random source for owner tokens: {0}")]
    NoRandomSource(String),
    /// A waiting acquire was cancelled ([`Abort`](crate::Abort)) before it got the lock.
    /// Nothing is held: an attempt in flight is released again.
    #[error("locksmith: the acquire of {} was aborted", crate::validate::quote(.0))]
    Aborted(String),
}

impl LockError {
    /// The stable machine-readable code of this error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotHeld { .. } => "LOCK_NOT_HELD",
            Self::InvalidArgument(_) => "INVALID_ARGUMENT",
            Self::InvalidSerializedLock(_) => "INVALID_SERIALIZED_LOCK",
            Self::StoreUnavailable(_) => "STORE_UNAVAILABLE",
            Self::StoreContractViolation(_) => "STORE_CONTRACT_VIOLATION",
            Self::StoreError(_) => "STORE_ERROR",
            Self::StoreClosed => "STORE_CLOSED",
            Self::NoRandomSource(_) => "NO_RANDOM_SOURCE",
            Self::Unsupported(_) => "UNSUPPORTED",
            Self::Aborted(_) => "ABORTED",
        }
    }

    /// The key of a [`LockError::NotHeld`], for bindings that expose it.
    #[must_use]
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::NotHeld { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// `Result` with [`LockError`].
pub type Result<T, E = LockError> = std::result::Result<T, E>;
