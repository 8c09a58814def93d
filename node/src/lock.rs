//! `NativeLock`: a `locksmith_core::Lock` for JS. Synchronous `*_now` methods serve
//! stores that never wait on I/O (one call, no promise, no thread hop); they answer
//! `null`/`false` for other stores, and the JS surface starts the async operation
//! instead (`*_start`, delivered through `Completions`).

use std::sync::Arc;

use std::future::Future;

use locksmith_core::validate::js;
use locksmith_core::{HoldEnd, Lock, LockStore, SerializedFields, SerializedLock, Timer};
use locksmith_redis::engine::local::Executor;
use napi_derive::napi;

use crate::completion::{Completions, Outcome};
use crate::error::IntoNapi;
use crate::timer::timer;

/// Tasks polled on the JS thread (the Redis engine's locks): no tokio, no thread hop.
pub type LocalTasks = Executor<locksmith_core::Result<Outcome>>;

/// Where a lock's async calls run: on tokio (the default), first on the JS thread and
/// then on tokio (a store whose calls usually finish at once: the lock file), or as
/// local tasks of a store that the JS thread drives.
#[derive(Clone)]
pub struct Runner {
    pub timer: Arc<dyn Timer>,
    pub local: Option<Arc<LocalTasks>>,
    /// Poll each call once on the JS thread; only what is still pending goes to tokio.
    pub inline: bool,
    /// The tasks are counted while awake, in their clock's work (a test kit clock's
    /// locks: `virtual_clock.rs`).
    pub tracked: Option<crate::virtual_clock::WorkCount>,
}

/// What a `*_start` method tells the JS side: the call runs on tokio (its outcome comes
/// through the completion channel), it is queued as a local task (the store has output
/// for the JS side to write), or it finished at once (`Completions::take_inline`).
pub const ON_TOKIO: u32 = 0;
pub const QUEUED: u32 = 1;
pub const SETTLED: u32 = 2;

/// Bits of [`NativeLock::finish_run_now`]'s answer: the release freed the hold; the hold
/// had been lost before it.
pub const RUN_RELEASED: u32 = 1;
pub const RUN_LOST: u32 = 2;

impl Runner {
    pub fn tokio() -> Self {
        Self { timer: timer(), local: None, inline: false, tracked: None }
    }

    /// Calls polled once on the JS thread before they go to tokio.
    pub fn inline() -> Self {
        Self { timer: timer(), local: None, inline: true, tracked: None }
    }

    /// Calls on tokio, timed by a test kit clock and counted while awake.
    pub fn on_clock(timer: Arc<dyn Timer>, work: crate::virtual_clock::WorkCount) -> Self {
        Self { timer, local: None, inline: false, tracked: Some(work) }
    }

    /// Starts `work` under call id `id`; see [`ON_TOKIO`], [`QUEUED`] and [`SETTLED`].
    fn start<F>(&self, done: &Completions, id: u32, work: F) -> u32
    where
        F: Future<Output = locksmith_core::Result<Outcome>> + Send + 'static,
    {
        match &self.local {
            None if self.inline => {
                let mut work = Box::pin(work);
                // Inside the runtime, so a sleep the call starts is tokio's; a waker that
                // does nothing, as the first poll on tokio registers its own.
                let polled = napi::bindgen_prelude::within_runtime_if_available(|| {
                    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.as_mut().poll(&mut cx)))
                });
                match polled {
                    Ok(std::task::Poll::Ready(outcome)) => {
                        done.settle_inline(id, Ok(outcome));
                        SETTLED
                    }
                    Ok(std::task::Poll::Pending) => {
                        done.spawn(id, work, self.tracked.clone());
                        ON_TOKIO
                    }
                    Err(_) => {
                        done.settle_inline(id, Err(()));
                        SETTLED
                    }
                }
            }
            None => {
                done.spawn(id, work, self.tracked.clone());
                ON_TOKIO
            }
            Some(tasks) => {
                if let Some(outcome) = tasks.spawn(id, Box::pin(work)) {
                    done.deliver(id, outcome);
                }
                QUEUED
            }
        }
    }
}

#[napi]
pub struct NativeLock {
    inner: Arc<Lock>,
    runner: Runner,
}

pub fn new_lock(store: Arc<dyn LockStore>, key: &str, ttl_ms: f64) -> napi::Result<NativeLock> {
    new_lock_on(store, Runner::tokio(), key, ttl_ms)
}

pub fn new_lock_on(
    store: Arc<dyn LockStore>,
    runner: Runner,
    key: &str,
    ttl_ms: f64,
) -> napi::Result<NativeLock> {
    Lock::new(key, js::ttl_ms(ttl_ms).napi()?, store, runner.timer.clone())
        .napi()
        .map(|l| NativeLock { inner: Arc::new(l), runner })
}

/// A handle of the kind the JS surface names (`"semaphore"` with `limit`, `"read"`, `"write"`).
pub fn new_handle(
    store: Arc<dyn LockStore>,
    key: &str,
    ttl_ms: f64,
    kind: &str,
    limit: Option<f64>,
) -> napi::Result<NativeLock> {
    new_handle_on(store, Runner::tokio(), key, ttl_ms, kind, limit)
}

/// [`new_handle`] whose calls run on `runner`.
pub fn new_handle_on(
    store: Arc<dyn LockStore>,
    runner: Runner,
    key: &str,
    ttl_ms: f64,
    kind: &str,
    limit: Option<f64>,
) -> napi::Result<NativeLock> {
    let ttl_ms = js::ttl_ms(ttl_ms).napi()?;
    let lock = if kind == "multi" {
        // `lockAll()`: the keys, one per line (a key has no control characters).
        Lock::all(key.split('\n').map(str::to_owned).collect(), ttl_ms, store, runner.timer.clone())
    } else {
        Lock::of_kind(key, ttl_ms, js::kind(kind, limit).napi()?, store, runner.timer.clone())
    };
    let mut lock = lock.napi()?;
    // `election(name)`: `key` was the election's name.
    if kind == "election" {
        lock.for_election().napi()?;
    }
    // `{ fair: true }` on a lock or a semaphore.
    if kind.starts_with("fair ") {
        lock.set_fair().napi()?;
    }
    Ok(NativeLock { inner: Arc::new(lock), runner })
}

/// A serialized lock's fields as js/api/serialized.mjs read them from the text, the
/// argument of every store class's `restore()` (a null entry of `fencing_tokens` is NaN).
#[napi(object)]
#[allow(missing_docs)]
pub struct SerializedArgs {
    pub key: Option<String>,
    pub keys: Option<Vec<String>>,
    pub ttl_ms: Option<f64>,
    pub owner: Option<String>,
    pub fencing_token: Option<f64>,
    pub expires_at: Option<f64>,
    pub kind: Option<String>,
    pub limit: Option<f64>,
    pub fencing_tokens: Option<Vec<f64>>,
}

pub fn restore_lock(store: Arc<dyn LockStore>, fields: SerializedArgs) -> napi::Result<NativeLock> {
    restore_lock_on(store, Runner::tokio(), fields)
}

pub fn restore_lock_on(
    store: Arc<dyn LockStore>,
    runner: Runner,
    f: SerializedArgs,
) -> napi::Result<NativeLock> {
    let fields = SerializedFields {
        key: f.key,
        keys: f.keys,
        ttl_ms: f.ttl_ms,
        owner: f.owner,
        fencing_token: f.fencing_token,
        expires_at: f.expires_at,
        kind: f.kind,
        limit: f.limit,
        fencing_tokens: f.fencing_tokens.map(|t| t.into_iter().map(|t| (!t.is_nan()).then_some(t)).collect()),
    };
    let serialized = SerializedLock::from_fields(fields).napi()?;
    Ok(NativeLock { inner: Arc::new(Lock::restore(serialized, store, runner.timer.clone())), runner })
}

#[napi]
impl NativeLock {
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_owned()
    }

    #[napi(getter)]
    pub fn ttl_ms(&self) -> f64 {
        self.inner.ttl_ms() as f64
    }

    /// Makes this handle a fresh lock on `key` in the same store, so a handle can be
    /// reused instead of allocated (creating a native object is the expensive part).
    #[napi]
    pub fn reset(&mut self, key: String, ttl_ms: f64) -> napi::Result<()> {
        let ttl_ms = js::ttl_ms(ttl_ms).napi()?;
        // In place when no task still holds the lock (the usual case): no allocation.
        if let Some(lock) = Arc::get_mut(&mut self.inner) {
            return lock.reset(&key, ttl_ms).napi();
        }
        let store = self.inner.store().clone();
        self.inner = Arc::new(Lock::new(&key, ttl_ms, store, self.runner.timer.clone()).napi()?);
        Ok(())
    }

    /// Whether this handle has an acquisition it has not released.
    #[napi(getter)]
    pub fn has_owner(&self) -> bool {
        self.inner.has_owner()
    }

    #[napi(getter)]
    pub fn fencing_token(&self) -> Option<f64> {
        self.inner.fencing_token().map(|t| t as f64)
    }

    /// How many of a semaphore's permits this handle's acquires take (1 to its limit).
    #[napi]
    pub fn set_permits(&self, permits: f64) -> napi::Result<()> {
        let permits = js::permits(permits).napi()?;
        self.inner.set_permits(permits).napi()
    }

    /// Acquire attempts this handle has sent, in all (wrapping): for the diagnostics
    /// channels, which take the difference across one acquire.
    #[napi(getter)]
    pub fn attempts(&self) -> u32 {
        self.inner.attempts()
    }

    /// One attempt, synchronously: `true`/`false`, or `null` when the store is async.
    /// Validates the options either way.
    #[napi]
    pub fn try_acquire_now(
        &self,
        timeout: Option<f64>,
        retry_delay: Option<f64>,
    ) -> napi::Result<Option<bool>> {
        js::acquire_options(timeout, retry_delay, None).napi()?;
        self.inner.try_acquire_now().transpose().napi()
    }

    /// [`try_acquire_now`](Self::try_acquire_now) without options: the hot path.
    #[napi]
    pub fn try_acquire(&self) -> napi::Result<Option<bool>> {
        self.inner.try_acquire_now().transpose().napi()
    }

    /// `true`/`false`, or `null` when the store is async.
    #[napi]
    pub fn release_now(&self) -> Option<bool> {
        self.inner.release_now()
    }

    /// `run()`'s end on a store that never waits, in one call: its release, and whether
    /// the hold was lost before the function settled (it has an owner but is no longer
    /// certainly held: [`hold_generation`](Self::hold_generation) read just before would
    /// be `null`; the loss is recorded as that getter records it). [`RUN_RELEASED`]
    /// and/or [`RUN_LOST`]; `null` when the store is async (nothing done).
    #[napi]
    pub fn finish_run_now(&self) -> Option<u32> {
        let (released, lost) = self.inner.release_checked_now()?;
        Some(if released { RUN_RELEASED } else { 0 } | if lost { RUN_LOST } else { 0 })
    }

    /// `true` when extended synchronously, `false` when the store is async.
    #[napi]
    pub fn extend_now(&self, ttl_ms: Option<f64>) -> napi::Result<bool> {
        let ttl_ms = ttl_ms.map(js::ttl_ms).transpose().napi()?;
        self.inner.extend_now(ttl_ms).transpose().napi().map(|done| done.is_some())
    }

    // The same async operations, delivered through `Completions` (see completion.rs), or
    // run as local tasks of a store the JS thread drives: each returns `true` then.

    #[napi]
    pub fn acquire_start(
        &self,
        done: &Completions,
        id: u32,
        timeout: Option<f64>,
        retry_delay: Option<f64>,
        after_refused_try: Option<bool>,
    ) -> napi::Result<u32> {
        let options = js::acquire_options(timeout, retry_delay, after_refused_try).napi()?;
        let lock = self.inner.clone();
        Ok(self.runner.start(done, id, async move { lock.acquire(options).await.map(Outcome::Flag) }))
    }

    /// `acquire_start` that `abort` can end (an `AbortSignal` in the caller's options).
    #[napi]
    pub fn acquire_abortable_start(
        &self,
        done: &Completions,
        id: u32,
        timeout: Option<f64>,
        retry_delay: Option<f64>,
        abort: &AbortToken,
        after_refused_try: Option<bool>,
    ) -> napi::Result<u32> {
        let options = js::acquire_options(timeout, retry_delay, after_refused_try).napi()?;
        let lock = self.inner.clone();
        let abort = abort.inner.clone();
        Ok(self
            .runner
            .start(done, id, async move { lock.acquire_abortable(options, &abort).await.map(Outcome::Flag) }))
    }

    #[napi]
    pub fn release_start(&self, done: &Completions, id: u32) -> u32 {
        let lock = self.inner.clone();
        self.runner.start(done, id, async move { lock.release().await.map(Outcome::Flag) })
    }

    #[napi]
    pub fn extend_start(&self, done: &Completions, id: u32, ttl_ms: Option<f64>) -> napi::Result<u32> {
        let ttl_ms = ttl_ms.map(js::ttl_ms).transpose().napi()?;
        let lock = self.inner.clone();
        Ok(self.runner.start(done, id, async move { lock.extend(ttl_ms).await.map(|()| Outcome::Nothing) }))
    }

    #[napi]
    pub fn count_start(&self, done: &Completions, id: u32) -> u32 {
        let lock = self.inner.clone();
        self.runner.start(
            done,
            id,
            async move { lock.count().await.map(|n| Outcome::Number(Some(n as f64))) },
        )
    }

    #[napi]
    pub fn is_locked_start(&self, done: &Completions, id: u32) -> u32 {
        let lock = self.inner.clone();
        self.runner.start(done, id, async move { lock.is_locked().await.map(Outcome::Flag) })
    }

    #[napi]
    pub fn is_expired_start(&self, done: &Completions, id: u32) -> u32 {
        let lock = self.inner.clone();
        self.runner.start(done, id, async move { lock.is_expired().await.map(Outcome::Flag) })
    }

    #[napi]
    pub fn remaining_time_start(&self, done: &Completions, id: u32) -> u32 {
        let lock = self.inner.clone();
        self.runner.start(done, id, async move {
            lock.remaining_time().await.map(|ms| Outcome::Number(ms.map(|ms| ms as f64)))
        })
    }

    /// `lock`, `semaphore`, `read`, `write` or `multi`.
    #[napi(getter)]
    pub fn kind(&self) -> &'static str {
        self.inner.kind_name()
    }

    /// A lock on several keys: its keys in canonical order, one per line.
    #[napi(getter)]
    pub fn keys(&self) -> String {
        self.inner.keys().join("\n")
    }

    /// A lock on several keys: each key's fencing token in the current hold (NaN where
    /// the store gives none); empty when nothing is held.
    #[napi(getter)]
    pub fn fencing_tokens(&self) -> Vec<f64> {
        self.inner.fencing_tokens().into_iter().map(|t| t.map_or(f64::NAN, |t| t as f64)).collect()
    }

    /// A semaphore's limit, else `null`.
    #[napi(getter)]
    pub fn limit(&self) -> Option<u32> {
        self.inner.kind().limit()
    }

    /// The number of the current hold, or `null` when nothing is certainly held: none,
    /// or past its deadline (then it is recorded as lost here and then).
    #[napi(getter)]
    pub fn hold_generation(&self) -> Option<f64> {
        self.inner.live_generation().map(|g| g as f64)
    }

    /// Settles when the current hold ends: `true` when released, an error when lost.
    #[napi]
    pub fn watch_start(&self, done: &Completions, id: u32) -> u32 {
        let lock = self.inner.clone();
        // The hold current now, not whichever is current when the task first runs.
        let generation = lock.hold_generation_now();
        self.runner.start(done, id, async move {
            match lock.hold_ended_of(generation).await {
                HoldEnd::Released => Ok(Outcome::Flag(true)),
                HoldEnd::Lost(err) => Err(err),
            }
        })
    }

    /// Keeps the current hold extended in the background (the `autoExtend` option);
    /// settles when it stops (released, lost, or at its cap).
    #[napi]
    pub fn auto_extend_start(
        &self,
        done: &Completions,
        id: u32,
        interval_ms: Option<f64>,
        max_hold_ms: Option<f64>,
    ) -> napi::Result<u32> {
        let plan = js::auto_extend(self.inner.ttl_ms(), interval_ms, max_hold_ms).napi()?;
        let lock = self.inner.clone();
        let generation = lock.held_generation();
        Ok(self.runner.start(done, id, async move {
            if let Some(generation) = generation {
                lock.keep_extending_of(generation, plan).await;
            }
            Ok(Outcome::Nothing)
        }))
    }

    /// Stops the current hold's auto-extend (`run()` does when its function settles).
    #[napi]
    pub fn stop_auto_extend(&self) {
        self.inner.stop_extending();
    }

    /// Checks an `autoExtend` option without starting anything.
    #[napi]
    pub fn check_auto_extend(&self, interval_ms: Option<f64>, max_hold_ms: Option<f64>) -> napi::Result<()> {
        js::auto_extend(self.inner.ttl_ms(), interval_ms, max_hold_ms).napi().map(drop)
    }

    #[napi]
    pub fn serialize(&self) -> napi::Result<String> {
        self.inner.serialize().napi()
    }
}

/// The native half of an acquire's `AbortSignal`: the JS side fires it when the signal
/// aborts, and the acquire it was given to stops (see `Lock::acquire_abortable`).
#[napi]
pub struct AbortToken {
    inner: locksmith_core::Abort,
}

#[napi]
impl AbortToken {
    #[napi(constructor)]
    #[must_use]
    pub fn new() -> Self {
        Self { inner: locksmith_core::Abort::new() }
    }

    /// Ends the acquire this token was given to; again, nothing.
    #[napi]
    pub fn abort(&self) {
        self.inner.abort();
    }
}

impl Default for AbortToken {
    fn default() -> Self {
        Self::new()
    }
}
