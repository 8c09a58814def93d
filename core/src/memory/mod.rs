//! `MemoryStore`: locks in a map in this process, with lazy expiry and a sweep.
//!
//! [`state`] holds the map and the operations on it at a given time (which the file
//! store runs on the state it reads from its file), [`holds`] a semaphore's or read-write
//! lock's holders, [`waiters`] this process's waiters, and [`codec`] the file store's
//! form of the state on disk and the views its readers (the CLI) show.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::error::Result;
use crate::store::{AllGrant, BoxFuture, Clock, Grant, HoldKind, LockStore, SyncLockStore};

mod answer;
#[cfg(not(target_arch = "wasm32"))]
mod codec;
mod fair;
mod holds;
mod state;
mod waiters;

#[cfg(not(target_arch = "wasm32"))]
pub(crate) use codec::Sections;
#[cfg(not(target_arch = "wasm32"))]
pub use codec::{HoldView, WaitView};
pub use state::KeyHolder;
pub(crate) use state::State;

/// Locks held in this process's memory.
///
/// Expired holds are dropped when their key is next touched, and a sweep drops the
/// rest as the map grows or time passes, so memory follows the live locks. Each
/// release (or expiry found by a sweep) wakes one waiter of the key, and every grant
/// carries a fencing token from a counter that only grows.
pub struct MemoryStore {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    release_signals: bool,
    /// Set by the first fair attempt: until then no key is fair, and a refused attempt of
    /// a handle that is not fair asks nothing more (`fair_key`).
    fair_used: std::sync::atomic::AtomicBool,
}

impl MemoryStore {
    /// An empty store on `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            state: Mutex::new(State::new()),
            release_signals: true,
            fair_used: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Turns wake-on-release off: waiters poll at their retry delay. For runtimes where
    /// one request must not resume another's work — on workerd, a waiter woken from the
    /// releasing request would run its next steps in that request's context.
    /// The WebAssembly build's store never signals (its code for it is left out).
    #[must_use]
    pub fn without_release_signals(mut self) -> Self {
        self.release_signals = false;
        self
    }

    fn signals_releases(&self) -> bool {
        self.release_signals && cfg!(not(target_arch = "wasm32"))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // No code path panics while holding the lock; recover the map if one ever does.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops every expired hold now. Bindings call this from an idle timer so expired
    /// keys do not wait for the next insert to go.
    pub fn sweep(&self) {
        let now = self.clock.now_ms();
        self.state().sweep(now);
    }

    /// How many keys the map holds, expired ones not yet swept included.
    #[must_use]
    pub fn entry_count(&self) -> usize {
        self.state().entries.len()
    }

    /// Drops every hold.
    pub fn clear(&self) {
        let mut state = self.state();
        state.entries.clear();
        state.semaphores.clear();
        state.rwlocks.clear();
        state.fair.clear();
        state.len_after_sweep = 0;
        state.waiters.wake_every_key(1);
    }

    /// The live holder of the plain lock `key` (an election's leader), or `None`.
    #[must_use]
    pub fn holder(&self, key: &str) -> Option<KeyHolder> {
        let now = self.clock.now_ms();
        self.state().holder(key, now)
    }

    /// Keeps `value` with `owner`'s live hold of `key` unless it keeps one with a `seq`
    /// at least this one: `true` when `owner` holds `key`.
    pub fn proclaim(&self, key: &str, owner: &str, value: &str, seq: u64) -> bool {
        let now = self.clock.now_ms();
        self.state().proclaim(key, owner, value, seq, now)
    }

    /// How many keys have a waiter record, for tests of memory use.
    #[must_use]
    pub fn waiter_key_count(&self) -> usize {
        self.state().waiters.len()
    }
}

impl SyncLockStore for MemoryStore {
    fn acquire_now(&self, key: &str, owner: &str, ttl_ms: u64) -> Option<Grant> {
        let now = self.clock.now_ms();
        self.state().acquire(key, owner, ttl_ms, now)
    }

    fn release_now(&self, key: &str, owner: &str) -> bool {
        let now = self.clock.now_ms();
        self.state().release(key, owner, now)
    }

    fn extend_now(&self, key: &str, owner: &str, ttl_ms: u64) -> bool {
        let now = self.clock.now_ms();
        self.state().extend(key, owner, ttl_ms, now)
    }

    fn is_locked_now(&self, key: &str) -> bool {
        let now = self.clock.now_ms();
        self.state().is_locked(key, now)
    }

    fn remaining_time_now(&self, key: &str) -> Option<u64> {
        let now = self.clock.now_ms();
        self.state().remaining_time(key, now)
    }

    fn is_held_by_now(&self, key: &str, owner: &str) -> bool {
        let now = self.clock.now_ms();
        self.state().is_held_by(key, owner, now)
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
impl LockStore for MemoryStore {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.acquire_now(key, owner, ttl_ms).is_some())
    }

    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        Ok(self.release_now(key, owner))
    }

    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.extend_now(key, owner, ttl_ms))
    }

    async fn is_locked(&self, key: &str) -> Result<bool> {
        Ok(self.is_locked_now(key))
    }

    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.remaining_time_now(key))
    }

    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        Ok(self.acquire_now(key, owner, ttl_ms))
    }

    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        Ok(Some(self.is_held_by_now(key, owner)))
    }

    fn release_signal(&self, key: &str) -> Option<BoxFuture<'static, ()>> {
        if !self.signals_releases() {
            return None;
        }
        let now = self.clock.now_ms();
        Some(self.state().release_signal(key, now))
    }

    fn pass_on_release(&self, key: &str) {
        self.state().waiters.nudge(key, None, 1);
    }

    fn as_sync(&self) -> Option<&dyn SyncLockStore> {
        Some(self)
    }

    fn acquire_all<'a>(
        &'a self,
        keys: &'a [String],
        owner: &'a str,
        ttl_ms: u64,
    ) -> Option<BoxFuture<'a, Result<AllGrant>>> {
        let now = self.clock.now_ms();
        Some(Box::pin(std::future::ready(Ok(self.state().acquire_all(keys, owner, ttl_ms, now)))))
    }

    async fn acquire_permit(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
    ) -> Result<Option<Grant>> {
        self.acquire_permits(key, owner, ttl_ms, kind, 1).await
    }

    async fn acquire_permits(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
    ) -> Result<Option<Grant>> {
        let now = self.clock.now_ms();
        self.state().acquire_permits(key, owner, ttl_ms, kind, permits, now)
    }

    async fn release_permit(&self, key: &str, owner: &str, kind: HoldKind) -> Result<bool> {
        let now = self.clock.now_ms();
        Ok(self.state().release_permit(key, owner, kind, now))
    }

    async fn extend_permit(&self, key: &str, owner: &str, ttl_ms: u64, kind: HoldKind) -> Result<bool> {
        let now = self.clock.now_ms();
        Ok(self.state().extend_permit(key, owner, ttl_ms, kind, now))
    }

    async fn permit_count(&self, key: &str, kind: HoldKind) -> Result<u64> {
        let now = self.clock.now_ms();
        Ok(self.state().permit_count(key, kind, now))
    }

    async fn permit_remaining_time(&self, key: &str, owner: &str, kind: HoldKind) -> Result<Option<u64>> {
        let now = self.clock.now_ms();
        Ok(self.state().permit_remaining_time(key, owner, kind, now))
    }

    async fn acquire_fair(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
        waits: bool,
    ) -> Result<Option<Grant>> {
        // Before the state's lock: whoever then finds this attempt's place or hold sees it.
        self.fair_used.store(true, std::sync::atomic::Ordering::Relaxed);
        let now = self.clock.now_ms();
        self.state().fair_attempt(key, owner, ttl_ms, kind, permits, waits, now)
    }

    fn fair_key(&self, key: &str, kind: HoldKind) -> bool {
        if !self.fair_used.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        let now = self.clock.now_ms();
        self.state().fair_key(key, kind, now)
    }

    fn permit_release_signal(&self, key: &str, kind: HoldKind) -> Option<BoxFuture<'static, ()>> {
        if !self.signals_releases() {
            return None;
        }
        Some(self.state().permit_release_signal(key, kind))
    }
}
