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
    /// The handle holds nothing. `hold_may_remain`: an attempt was on its way, which the
    /// store may still grant; it is released once it settles.
    #[error("locksmith: the acquire of {} was aborted{}", crate::validate::quote(key), if *hold_may_remain { MAY_REMAIN } else { "" })]
    Aborted {
        /// The lock key.
        key: String,
        /// Whether an attempt was still unanswered (see [`LockError::hold_may_remain`]).
        hold_may_remain: bool,
    },
    /// `STORE_UNAVAILABLE` from an acquire whose last attempt got no answer: the store
    /// may still apply it. Its release is sent once the attempt settles.
    #[error("locksmith: store unavailable: {reason}{MAY_REMAIN} (its TTL is {ttl_ms} ms)")]
    Unanswered {
        /// Why the attempt got no answer.
        reason: String,
        /// The lock's TTL: the longest a hold it may have left can last.
        ttl_ms: u64,
    },
}

impl LockError {
    /// The stable machine-readable code of this error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotHeld { .. } => "LOCK_NOT_HELD",
            Self::InvalidArgument(_) => "INVALID_ARGUMENT",
            Self::InvalidSerializedLock(_) => "INVALID_SERIALIZED_LOCK",
            Self::StoreUnavailable(_) | Self::Unanswered { .. } => "STORE_UNAVAILABLE",
            Self::StoreContractViolation(_) => "STORE_CONTRACT_VIOLATION",
            Self::StoreError(_) => "STORE_ERROR",
            Self::StoreClosed => "STORE_CLOSED",
            Self::NoRandomSource(_) => "NO_RANDOM_SOURCE",
            Self::Unsupported(_) => "UNSUPPORTED",
            Self::Aborted { .. } => "ABORTED",
        }
    }

    /// Whether an acquire ended while an attempt of it was unanswered, so that the
    /// store may still grant it: a hold nobody owns may remain until that attempt settles
    /// and its release lands, at worst until its TTL. Bindings expose it as
    /// `err.holdMayRemain` (a `+` after the code in the message they pass).
    #[must_use]
    pub const fn hold_may_remain(&self) -> bool {
        matches!(self, Self::Aborted { hold_may_remain: true, .. } | Self::Unanswered { .. })
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

const MAY_REMAIN: &str =
    "; an attempt was still unanswered, so a hold may remain until it settles and is released, or until its TTL";

/// `Result` with [`LockError`].
pub type Result<T, E = LockError> = std::result::Result<T, E>;
