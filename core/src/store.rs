//! The store seam: what a backend must do for locks to be correct, and the runtime seam
//! (clock and sleep) that bindings inject.

use std::future::Future;
use std::pin::Pin;

use crate::error::Result;

/// `Send + Sync` off wasm32, nothing on it: the same traits serve tokio and the JS event loop.
#[cfg(not(target_arch = "wasm32"))]
pub trait MaybeSendSync: Send + Sync {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Send + Sync + ?Sized> MaybeSendSync for T {}
/// `Send + Sync` off wasm32, nothing on it: the same traits serve tokio and the JS event loop.
#[cfg(target_arch = "wasm32")]
pub trait MaybeSendSync {}
#[cfg(target_arch = "wasm32")]
impl<T: ?Sized> MaybeSendSync for T {}

/// A boxed future, `Send` off wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// A boxed future, `Send` off wasm32.
#[cfg(target_arch = "wasm32")]
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// What a successful acquire hands back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Grant {
    /// A number that only grows per key, if the store keeps one. A resource that
    /// remembers the largest token it has seen can refuse writes from a stale holder.
    pub fencing_token: Option<u64>,
}

impl Grant {
    /// A grant carrying `fencing_token`.
    #[must_use]
    pub const fn with_fencing_token(fencing_token: u64) -> Self {
        Self { fencing_token: Some(fencing_token) }
    }
}

/// What an all-or-nothing acquire of several keys ([`LockStore::acquire_all`]) answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllGrant {
    /// Every key is taken for the owner: one grant per key, in the keys' order.
    Granted(Vec<Grant>),
    /// None is: the index of a key found held (what a waiter listens on), when the
    /// store can tell.
    Busy(Option<usize>),
}

/// What a lock handle holds: the whole key, or one of several holds a key admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HoldKind {
    /// A lock: one holder at a time.
    Exclusive,
    /// A semaphore permit: at most `limit` holders of the key at a time.
    Permit {
        /// How many holders the key admits.
        limit: u32,
    },
    /// A read lock: shared with other readers, never with a writer.
    Read,
    /// A write lock: alone. A waiting writer keeps new readers out, so a stream of
    /// readers cannot starve it.
    Write,
}

impl HoldKind {
    /// The name the JS surface uses: `lock`, `semaphore`, `read` or `write`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Exclusive => "lock",
            Self::Permit { .. } => "semaphore",
            Self::Read => "read",
            Self::Write => "write",
        }
    }

    /// A semaphore's limit.
    #[must_use]
    pub const fn limit(self) -> Option<u32> {
        match self {
            Self::Permit { limit } => Some(limit),
            _ => None,
        }
    }
}

/// What a store says, in one question, of one owner's hold: the due check of a hold
/// whose local deadline is near asks it, so that the answer is about this owner's hold
/// alone, never "is it mine?" and then "how long does the key have?" (between those two
/// the hold can change hands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldCheck {
    /// `owner` holds the key, for this many more milliseconds (on the store's clock).
    Held {
        /// Milliseconds left.
        remaining_ms: u64,
    },
    /// `owner` does not hold the key.
    NotHeld,
    /// The store cannot answer in one question (the default): a hold then counts as
    /// lost at its local deadline unless an extend succeeded.
    CannotTell,
}

fn no_permits() -> crate::error::LockError {
    crate::error::LockError::Unsupported(
        "this store has no semaphores or read-write locks (it does not implement the permit methods)".into(),
    )
}

/// A fair handle's acquire on a store without fair queues.
pub(crate) fn no_fairness() -> crate::error::LockError {
    crate::error::LockError::Unsupported(
        "this store has no fair queues (`fair: true`); the stores with them: memory, file, etcd, Durable Objects, Redis, TestStore and stores with acquireFair".into(),
    )
}

/// A handle that is not fair, refused on a key fair handles hold or wait for.
#[must_use]
pub fn not_fair_on_fair_key(key: &str, kind: HoldKind) -> crate::error::LockError {
    crate::error::LockError::InvalidArgument(format!(
        "{} {} is fair (fair handles hold it or wait for it); this handle is not: every handle of a key must agree on `fair`",
        kind.name(),
        crate::validate::quote(key)
    ))
}

/// A fair handle, refused on a key that a handle that is not fair holds.
#[must_use]
pub fn fair_on_unfair_key(key: &str, kind: HoldKind) -> crate::error::LockError {
    crate::error::LockError::InvalidArgument(format!(
        "{} {} is held by a handle that is not fair; this handle is fair: every handle of a key must agree on `fair`",
        kind.name(),
        crate::validate::quote(key)
    ))
}

/// A semaphore hold of more than one permit on a store that counts one per holder.
pub(crate) fn no_permit_weights() -> crate::error::LockError {
    crate::error::LockError::Unsupported(
        "this store takes one permit per semaphore hold: holding more at once (permits > 1) needs a store that carries weights".into(),
    )
}

/// A backend that holds locks.
///
/// The five required methods are the documented interface. `acquire` must be atomic
/// (set-if-absent) and `release`/`extend` must act only when `owner` matches: a store
/// that cannot do both is not a lock. A key's hold ends by itself after its TTL.
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
pub trait LockStore: MaybeSendSync {
    /// Takes `key` for `owner` for `ttl_ms` if nobody holds it. `true` if taken.
    ///
    /// Core never asks with an owner that holds the key already (owner tokens are fresh
    /// per acquire); a store may answer that either way. The Redis stores answer it as
    /// taken, with the TTL counted again: that is one call a client sent twice.
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool>;

    /// Frees `key` if `owner` holds it. `true` if it did.
    async fn release(&self, key: &str, owner: &str) -> Result<bool>;

    /// Sets the expiry of `key` to `ttl_ms` from now if `owner` holds it. `true` if it did.
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool>;

    /// Whether anyone holds `key`.
    async fn is_locked(&self, key: &str) -> Result<bool>;

    /// Milliseconds until `key`'s hold expires, or `None` when nobody holds it.
    async fn remaining_time(&self, key: &str) -> Result<Option<u64>>;

    /// [`acquire`](LockStore::acquire), with the fencing token of the new hold for
    /// stores that keep one. `None` when the key is held.
    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        Ok(self.acquire(key, owner, ttl_ms).await?.then_some(Grant::default()))
    }

    /// Whether `owner` holds `key` right now: `Some(answer)`, or `None` when the store
    /// cannot tell. Stores that can answer make `is_expired` exact.
    async fn is_held_by(&self, _key: &str, _owner: &str) -> Result<Option<bool>> {
        Ok(None)
    }

    /// How long `owner`'s own hold of `key` has left, in one question to the store (one
    /// script, statement or RPC): [`HoldCheck::CannotTell`] by default. A hold's due
    /// check uses it (see `lifetime.rs`).
    async fn owner_remaining_time(&self, _key: &str, _owner: &str) -> Result<HoldCheck> {
        Ok(HoldCheck::CannotTell)
    }

    /// A future that completes when `key` may have been released, registered before
    /// the acquire attempt it follows so no release is missed. `None` (the default)
    /// means the store cannot tell, and waiters sleep the retry delay between attempts.
    fn release_signal(&self, _key: &str) -> Option<BoxFuture<'static, ()>> {
        None
    }

    /// A waiter woken by [`release_signal`](LockStore::release_signal) gives its wake-up
    /// back unused (its wait was aborted): wake another waiter of `key` in its place, for
    /// a store that wakes only some. Nothing by default.
    fn pass_on_release(&self, _key: &str) {}

    /// Whether locks of this process already wait on [`release_signal`](LockStore::release_signal)
    /// for `key`. An acquire that may wait then queues behind them rather than trying
    /// first: a release wakes the longest waiter, so waiters get in in arrival order and
    /// a release costs one attempt, not a race between a woken waiter and a newcomer
    /// (typically the holder that just released, coming back). `false` (the default)
    /// when the store cannot tell: every acquire tries at once.
    fn has_local_waiters(&self, _key: &str) -> bool {
        false
    }

    /// Takes every one of `keys` for `owner` for `ttl_ms` in one step, or none of them,
    /// for a store that can (one script, one transaction, one lock over its state).
    /// `keys` are distinct and in canonical (sorted) order.
    ///
    /// `None` (the default): a lock on several keys takes them one at a time in that
    /// order and, at the first that is held or fails, gives back what it took.
    fn acquire_all<'a>(
        &'a self,
        _keys: &'a [String],
        _owner: &'a str,
        _ttl_ms: u64,
    ) -> Option<BoxFuture<'a, Result<AllGrant>>> {
        None
    }

    /// Takes one of the holds that `key` admits for `owner` (a semaphore permit, a read
    /// or a write lock; see [`HoldKind`]), for `ttl_ms`. `None` when the key admits no
    /// more. Semaphores and read-write locks live apart from plain locks and from each
    /// other: `key` names a different thing for each. A refused writer marks the key as
    /// wanted by a writer until it gets in, gives up ([`release_permit`](LockStore::release_permit)) or its TTL passes.
    ///
    /// The default, for stores without them: `UNSUPPORTED`.
    async fn acquire_permit(
        &self,
        _key: &str,
        _owner: &str,
        _ttl_ms: u64,
        _kind: HoldKind,
    ) -> Result<Option<Grant>> {
        Err(no_permits())
    }

    /// A fair handle's attempt on `key` (`kind`: a plain lock, or a semaphore with
    /// `permits`): `owner` takes its place at the end of the key's queue, or renews it
    /// (a place lasts `ttl_ms` from its latest attempt), and is granted the key when it
    /// is first in the queue and the key has room; granted, it leaves the queue. One that
    /// does not `wait` keeps no place. `release`/`release_permit` of an owner that holds
    /// nothing gives up its place. A key held by handles that are not fair answers
    /// `INVALID_ARGUMENT`, and such handles are refused while the key is fair (see
    /// [`fair_key`](LockStore::fair_key)).
    ///
    /// The default, for stores without fair queues: `UNSUPPORTED`.
    async fn acquire_fair(
        &self,
        _key: &str,
        _owner: &str,
        _ttl_ms: u64,
        _kind: HoldKind,
        _permits: u32,
        _waits: bool,
    ) -> Result<Option<Grant>> {
        Err(no_fairness())
    }

    /// A fair lock's release (`fair: true`): as [`release`](LockStore::release), and an
    /// owner that holds nothing gives up its place in the queue. For a store whose fair
    /// locks are kept otherwise than its plain ones (the Redis stores); by default,
    /// `release`, for stores that tell fair holds and places apart themselves.
    fn release_fair<'a>(&'a self, key: &'a str, owner: &'a str) -> BoxFuture<'a, Result<bool>> {
        self.release(key, owner)
    }

    /// A fair lock's extend: as [`extend`](LockStore::extend); by default, `extend`.
    fn extend_fair<'a>(&'a self, key: &'a str, owner: &'a str, ttl_ms: u64) -> BoxFuture<'a, Result<bool>> {
        self.extend(key, owner, ttl_ms)
    }

    /// Whether `key` (of `kind`) is fair now: fair handles hold it or queue for it. A
    /// handle that is not fair asks after a refused attempt, to be told why it cannot
    /// get in. The default, for stores without fair queues: `false`.
    fn fair_key(&self, _key: &str, _kind: HoldKind) -> bool {
        false
    }

    /// [`acquire_permit`](LockStore::acquire_permit) of `permits` of a semaphore's
    /// permits at once: the holder counts `permits` toward the limit, and
    /// [`permit_count`](LockStore::permit_count) sums what the holders have. `permits` is
    /// at least 1 and at most the limit (the lock checks it).
    ///
    /// The default, for stores that do not carry weights: one permit as
    /// `acquire_permit`, `UNSUPPORTED` for more.
    async fn acquire_permits(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
    ) -> Result<Option<Grant>> {
        if permits == 1 {
            self.acquire_permit(key, owner, ttl_ms, kind).await
        } else {
            Err(no_permit_weights())
        }
    }

    /// Gives back `owner`'s hold of `key` (and a waiting writer's claim). `true` if it held one.
    async fn release_permit(&self, _key: &str, _owner: &str, _kind: HoldKind) -> Result<bool> {
        Err(no_permits())
    }

    /// Sets the expiry of `owner`'s hold of `key` to `ttl_ms` from now. `true` if it held one.
    async fn extend_permit(&self, _key: &str, _owner: &str, _ttl_ms: u64, _kind: HoldKind) -> Result<bool> {
        Err(no_permits())
    }

    /// How many holds of `key` are live now; for a semaphore, the permits they hold.
    async fn permit_count(&self, _key: &str, _kind: HoldKind) -> Result<u64> {
        Err(no_permits())
    }

    /// Milliseconds until `owner`'s hold of `key` expires, or `None` when it has none.
    async fn permit_remaining_time(&self, _key: &str, _owner: &str, _kind: HoldKind) -> Result<Option<u64>> {
        Err(no_permits())
    }

    /// [`release_signal`](LockStore::release_signal) for the holds of `key` of `kind`;
    /// `Exclusive` for a fair lock's waiters: the next release or change in its queue,
    /// not ready at once while the key is free.
    fn permit_release_signal(&self, _key: &str, _kind: HoldKind) -> Option<BoxFuture<'static, ()>> {
        None
    }

    /// The same store with synchronous operations, for stores that never wait on I/O.
    /// Bindings use it to take an uncontended lock without a promise or a thread hop.
    fn as_sync(&self) -> Option<&dyn SyncLockStore> {
        None
    }
}

/// A store whose operations complete immediately (in-process memory).
pub trait SyncLockStore: MaybeSendSync {
    /// See [`LockStore::acquire_with_grant`].
    fn acquire_now(&self, key: &str, owner: &str, ttl_ms: u64) -> Option<Grant>;
    /// See [`LockStore::release`].
    fn release_now(&self, key: &str, owner: &str) -> bool;
    /// See [`LockStore::extend`].
    fn extend_now(&self, key: &str, owner: &str, ttl_ms: u64) -> bool;
    /// See [`LockStore::is_locked`].
    fn is_locked_now(&self, key: &str) -> bool;
    /// See [`LockStore::remaining_time`].
    fn remaining_time_now(&self, key: &str) -> Option<u64>;
    /// See [`LockStore::is_held_by`]; a memory store always knows.
    fn is_held_by_now(&self, key: &str, owner: &str) -> bool;
}

/// A monotonic clock in milliseconds (the origin is arbitrary). Injected, so tests run
/// on a fake one.
pub trait Clock: MaybeSendSync {
    /// Milliseconds now.
    fn now_ms(&self) -> u64;

    /// Wall-clock time in milliseconds since the Unix epoch, when the runtime has one.
    /// Only the serialized form of a lock uses it, to say when the hold expires in
    /// terms another process can read.
    fn unix_time_ms(&self) -> Option<u64> {
        None
    }
}

/// The runtime seam: a clock, a sleep and a way to run clean-up in the background.
pub trait Timer: Clock {
    /// A future that completes after `ms` milliseconds.
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()>;

    /// [`sleep`](Timer::sleep) for background work (auto-extend, watching a hold's
    /// expiry) that must not keep the host process alive on its own: in Node, an
    /// unref'd timer.
    fn sleep_in_background(&self, ms: u64) -> BoxFuture<'static, ()> {
        self.sleep(ms)
    }

    /// Runs `task` to completion in the background, detached from its caller. `false`
    /// when the runtime cannot (then the caller does without). A lock uses it to
    /// release a hold whose acquire was cancelled after the store granted it.
    fn spawn(&self, task: BoxFuture<'static, ()>) -> bool {
        drop(task);
        false
    }
}

/// A monotonic clock from `std::time::Instant`; sleeping needs a runtime, so bindings
/// pair it with their own. Not available on wasm32, where `Instant` does not work.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: std::time::Instant,
}

#[cfg(not(target_arch = "wasm32"))]
impl MonotonicClock {
    /// A clock whose zero is now.
    #[must_use]
    pub fn new() -> Self {
        Self { origin: std::time::Instant::now() }
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    fn unix_time_ms(&self) -> Option<u64> {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?;
        u64::try_from(since.as_millis()).ok()
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}
