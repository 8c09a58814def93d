//! locksmith-core: the semantics of locksmith's distributed locks over a store trait.
//!
//! Everything that decides whether a lock is correct lives here — owner tokens, the
//! acquire/wait loop, ownership rules, expiry, extend, serialization, validation and
//! error codes. Bindings (the Node addon, the wasm build) convert types and call in.
//! This crate knows nothing of JS and brings no async runtime: clock and sleep are
//! injected through [`Timer`].

mod abort;
mod all;
pub mod contract;
mod error;
#[cfg(not(target_arch = "wasm32"))]
mod file;
mod lifetime;
mod lock;
mod memory;
mod serialized;
mod store;
mod token;
pub mod validate;

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
#[cfg(any(test, feature = "testing"))]
mod fake_timer;

pub use abort::Abort;
pub use error::{LockError, Result};
#[cfg(any(test, feature = "testing"))]
pub use fake_timer::FakeTimer;
#[cfg(not(target_arch = "wasm32"))]
pub use file::{FileStore, DEFAULT_BUSY_TIMEOUT_MS as FILE_BUSY_TIMEOUT_MS};
pub use lifetime::{AutoExtend, HoldEnd};
pub use lock::{default_drift_ms, AcquireOptions, Lock};
#[cfg(not(target_arch = "wasm32"))]
pub use memory::{HoldView, WaitView};
pub use memory::{KeyHolder, MemoryStore};
pub use serialized::{Fields as SerializedFields, SerializedLock};
#[cfg(not(target_arch = "wasm32"))]
pub use store::MonotonicClock;
pub use store::{
    fair_on_unfair_key, not_fair_on_fair_key, AllGrant, BoxFuture, Clock, Grant, HoldCheck, HoldKind,
    LockStore, MaybeSendSync, SyncLockStore, Timer,
};
pub use token::OwnerToken;
