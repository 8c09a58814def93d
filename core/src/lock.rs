//! `Lock`: one key, its TTL, and the owner token while held.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use event_listener::Event;
use futures_util::future::{select, Either};

use crate::error::{LockError, Result};
use crate::lifetime::HoldEnd;
use crate::serialized::SerializedLock;
use crate::store::{AllGrant, BoxFuture, Grant, HoldKind, LockStore, SyncLockStore, Timer};
use crate::token::OwnerToken;
use crate::validate;

/// How long to wait for a held lock, and how often to try again meanwhile.
///
/// ```
/// use locksmith_core::AcquireOptions;
/// let wait = AcquireOptions::default().with_timeout_ms(5_000).with_retry_delay_ms(100);
/// assert_eq!((wait.timeout_ms, wait.retry_delay_ms), (5_000, 100));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AcquireOptions {
    /// Milliseconds to wait in all; 0 means one attempt.
    pub timeout_ms: u64,
    /// Milliseconds between attempts (a store that signals releases wakes earlier).
    pub retry_delay_ms: u64,
    /// The caller's own attempt ([`Lock::try_acquire_now`]) was refused just before this
    /// wait: it starts with its pause (or the store's release signal), not with a second
    /// attempt at once, which would meet the same holder.
    pub after_refused_try: bool,
}

impl Default for AcquireOptions {
    fn default() -> Self {
        Self { timeout_ms: 0, retry_delay_ms: validate::DEFAULT_RETRY_DELAY_MS, after_refused_try: false }
    }
}

impl AcquireOptions {
    /// Wait up to `timeout_ms` in all (0: one attempt, the default).
    #[must_use]
    pub const fn with_timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    /// Try again every `retry_delay_ms` while waiting (default 50; at least 1).
    #[must_use]
    pub const fn with_retry_delay_ms(mut self, retry_delay_ms: u64) -> Self {
        self.retry_delay_ms = retry_delay_ms;
        self
    }

    /// Say that [`Lock::try_acquire_now`] was refused just before (see
    /// [`after_refused_try`](Self::after_refused_try)).
    #[must_use]
    pub const fn with_after_refused_try(mut self, refused: bool) -> Self {
        self.after_refused_try = refused;
        self
    }
}

/// A wait's place in the store (see [`Lock::keeps_a_place`]) while the wait runs: given
/// up in the background if the wait's future is dropped before it ended by itself (a
/// caller's own timeout around `acquire`), else a refused waiter would keep it for a TTL.
struct PlaceGuard<'a> {
    lock: &'a Lock,
    /// The owner of the latest attempt that may have left a place; `None` once settled.
    owner: Option<OwnerToken>,
    /// The handle's hold generation when the wait began: where the place cannot be given
    /// up in the background, it is recorded on the handle only if nothing took the handle
    /// meanwhile (see `Lock::abandon_attempt`), never over a hold another call was granted.
    generation: u64,
}

impl PlaceGuard<'_> {
    /// The wait ended by itself (granted, or its place already given up): `value`.
    fn done<T>(&mut self, value: T) -> T {
        self.owner = None;
        value
    }
}

impl Drop for PlaceGuard<'_> {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            self.lock.abandon_attempt(owner, self.generation);
        }
    }
}

/// The longest pause between two attempts of a wait while the store is out of reach.
const OUTAGE_BACKOFF_MAX_MS: u64 = 1_000;

/// What this handle knows of its own hold.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Hold {
    /// The token of the current (or lost) acquisition; `None` before the first acquire
    /// and after a release.
    pub(crate) owner: Option<OwnerToken>,
    pub(crate) fencing_token: Option<u64>,
    /// The hold's local deadline, on the injected clock: the send time of the request
    /// that set its expiry (the acquire, or the last successful extend) + TTL − the
    /// drift allowance, or a due check's send time + its answer − the drift allowance.
    /// Nothing else moves it later. Used when the store cannot say who holds a key.
    pub(crate) expires_by_ms: u64,
    /// Extends sent on this hold, counted: each has its number, from 1.
    pub(crate) extends_sent: u64,
    /// The extend whose answer last set `expires_by_ms` (see [`Lock::finish_extend`]):
    /// its send time, the TTL counted from it, and how many extends had been sent when
    /// its answer came (0 until an extend succeeds).
    pub(crate) set_sent_ms: u64,
    pub(crate) set_ttl_ms: u64,
    pub(crate) set_answered_after: u64,
    /// Extends sent and not answered yet, and the shortest TTL among those sent while any
    /// was unanswered: one of them may land after any answer or look that sets the
    /// deadline, and then the key expires that TTL after it landed, so until all are
    /// answered the deadline counts no more than that TTL from what set it.
    /// (0: none; a TTL is never 0.)
    pub(crate) extends_unanswered: u32,
    pub(crate) unanswered_ttl_cap: u64,
    /// The same for extends that failed (they may have been applied, and may still land):
    /// for the rest of the hold.
    pub(crate) failed_ttl_cap: u64,
    /// Counts this handle's acquisitions: each hold has its own number, so whoever
    /// watches a hold can tell it from a later one.
    pub(crate) generation: u64,
    /// Releases of this hold on their way to the store (see [`Lock::found_gone`]).
    pub(crate) releasing: u32,
    /// While releases were on their way: one answered false (`refused`), or a due check
    /// or an extend found a key gone (`gone`). Applied when the last one is done.
    pub(crate) refused: bool,
    pub(crate) gone: bool,
}

impl Hold {
    /// The longest TTL an extend that may still land allows (see `unanswered_ttl_cap`).
    pub(crate) fn ttl_cap(&self) -> u64 {
        none_is_max(self.unanswered_ttl_cap).min(none_is_max(self.failed_ttl_cap))
    }
}

const fn none_is_max(cap: u64) -> u64 {
    if cap == 0 {
        u64::MAX
    } else {
        cap
    }
}

/// `cap` (0: none) lowered to `ttl_ms`.
fn lower(cap: u64, ttl_ms: u64) -> u64 {
    none_is_max(cap).min(ttl_ms)
}

/// A release of hold `generation` of `owner` on its way, from before it is sent until
/// its answer (`answer`) is applied; dropped without one (the store failed, or the
/// future was given up), it only stops counting. What the last release of a hold to be
/// done finds ends the hold, in one step with the count, so that no due check or extend
/// on another thread sees the hold neither released nor being released.
struct Releasing<'a> {
    lock: &'a Lock,
    owner: OwnerToken,
    generation: u64,
    answer: Option<bool>,
}

impl<'a> Releasing<'a> {
    /// Counts a release of the current hold; `None` when nothing is held.
    fn start(lock: &'a Lock) -> Option<Self> {
        let mut hold = lock.hold();
        let owner = hold.owner?;
        hold.releasing += 1;
        Some(Self { lock, owner, generation: hold.generation, answer: None })
    }
}

impl Drop for Releasing<'_> {
    fn drop(&mut self) {
        let lock = self.lock;
        // `None`: nothing to do yet; `Some(None)`: released; `Some(Some(gone))`: lost,
        // `gone` when a key was found gone (then the others are given back).
        let end = {
            let mut hold = lock.hold();
            // (Each acquisition has its own owner token: a hold taken since has another.)
            if hold.owner != Some(self.owner) {
                return; // released by another call, or replaced
            }
            hold.releasing -= 1;
            hold.refused |= self.answer == Some(false);
            if self.answer == Some(true) {
                hold.owner = None;
                hold.fencing_token = None;
                Some(None)
            } else if hold.releasing > 0 || !(hold.refused || hold.gone) {
                None
            } else {
                let gone = !std::mem::take(&mut hold.refused);
                hold.gone = false;
                Some(Some(gone))
            }
        };
        match end {
            None => {}
            Some(None) => lock.end_hold(self.generation, HoldEnd::Released),
            Some(Some(gone)) => {
                let why =
                    if gone { "the store no longer has it" } else { "it expired, or someone else took it" };
                lock.end_hold(self.generation, HoldEnd::Lost(lock.not_held(why)));
                if gone {
                    lock.give_up_keys(self.owner);
                }
            }
        }
    }
}

/// A lock on one key.
///
/// * A lock always expires: every hold has a TTL.
/// * Every acquisition mints a fresh 128-bit owner token, and only that token can
///   release or extend the hold.
/// * Not re-entrant: `acquire` on a handle that still holds its key returns `false`
///   at once (without waiting, since it would wait for itself) and leaves the hold as
///   it is. Once the hold was released or lost, `acquire` takes the key afresh.
/// * `release` of a lock that was lost is a harmless `false`; `extend` of a lock that
///   was lost or never taken fails with `LOCK_NOT_HELD`.
///
/// # Cancellation
/// Every method is safe to cancel (to drop its future before it completes):
/// * `acquire`: a hold that the store granted to an attempt whose answer never arrived
///   is released in the background through [`Timer::spawn`]; where the runtime cannot
///   spawn, the handle remembers the attempt's token, so a later `release` frees it.
///   Either way nothing stays held past its TTL unknown to the handle.
/// * `release` and `extend`: the hold stays recorded on the handle until the store
///   confirmed the release, so a cancelled `release` can simply be called again.
pub struct Lock {
    pub(crate) key: String,
    pub(crate) ttl_ms: u64,
    pub(crate) kind: HoldKind,
    pub(crate) store: Arc<dyn LockStore>,
    pub(crate) timer: Arc<dyn Timer>,
    pub(crate) hold: Mutex<Hold>,
    /// How the latest hold that ended did, by generation (see `lifetime.rs`).
    pub(crate) ending: Mutex<Option<(u64, HoldEnd)>>,
    /// Notified whenever the hold changes: taken, extended, released or lost.
    pub(crate) changes: Event,
    /// The error of auto-extend's latest failed extend of a hold, by generation, while
    /// it retries: what the hold is lost to if it runs out meanwhile.
    pub(crate) extend_failure: Mutex<Option<(u64, LockError)>>,
    /// The generation whose auto-extend was stopped ([`Lock::stop_extending`]).
    pub(crate) extend_stopped: std::sync::atomic::AtomicU64,
    /// The drift allowance set for this handle, if any (see [`Lock::drift_ms`]).
    pub(crate) drift_override: Option<u64>,
    /// Acquire attempts this handle has sent to its store (see [`Lock::attempts`]).
    pub(crate) attempts: std::sync::atomic::AtomicU32,
    /// How many of a semaphore's permits this handle's acquires take (see [`Lock::set_permits`]).
    pub(crate) permits: std::sync::atomic::AtomicU32,
    /// The keys of a lock on several keys ([`Lock::all`]), in canonical order; empty for
    /// a handle on one key.
    pub(crate) keys: Vec<String>,
    /// A lock on several keys: each key's fencing token in the current hold, and the
    /// index of the key its latest refused attempt found held (what its wait listens on).
    pub(crate) all: Mutex<(Vec<Option<u64>>, Option<usize>)>,
    /// A fair handle ([`Lock::set_fair`]): its waits take places in the key's queue.
    pub(crate) fair: bool,
}

/// The default drift allowance for a TTL: 1 % of it + 2 ms, and always less than it.
#[must_use]
pub fn default_drift_ms(ttl_ms: u64) -> u64 {
    (ttl_ms / 100 + 2).min(ttl_ms.saturating_sub(1))
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock").field("key", &self.key).field("ttl_ms", &self.ttl_ms).finish_non_exhaustive()
    }
}

impl Lock {
    /// A lock on `key` held for `ttl_ms` milliseconds once acquired. Both are validated:
    /// see [`validate::key`] and [`validate::ttl_ms`].
    pub fn new(key: &str, ttl_ms: u64, store: Arc<dyn LockStore>, timer: Arc<dyn Timer>) -> Result<Self> {
        validate::key(key)?;
        let ttl_ms = validate::ttl_ms(ttl_ms)?;
        Ok(Self::with_hold(key.to_owned(), ttl_ms, HoldKind::Exclusive, store, timer, Hold::default()))
    }

    /// Moves this handle to the key of the election named by its key: the lock an
    /// election campaigns for. The key is [`validate::ELECTION_KEY_PREFIX`] and the name,
    /// apart from every lock key; the name may be that prefix's length shorter than a
    /// key. Its fencing token is the leader's term. For a plain lock not yet held.
    ///
    /// # Errors
    /// `InvalidArgument` for a name longer than that.
    pub fn for_election(&mut self) -> Result<()> {
        if self.key.len() > validate::MAX_KEY_BYTES - validate::ELECTION_KEY_PREFIX.len() {
            return Err(LockError::InvalidArgument(
                "an election's name is at most 1014 bytes of UTF-8".into(),
            ));
        }
        self.key.insert_str(0, validate::ELECTION_KEY_PREFIX);
        Ok(())
    }

    /// Makes this handle fair: its acquires are granted in the order the store queued
    /// them, first come first served across processes, and a semaphore's later, smaller
    /// request never overtakes an earlier, larger one. A waiting acquire keeps its place
    /// in the key's queue with each attempt (a place lasts the TTL, so a waiter that
    /// stops asking loses it; the pause between attempts is at most a third of the TTL),
    /// and gives it up when it ends. Fairness belongs to the key: a handle that differs
    /// from the key's holders or waiters is refused with `INVALID_ARGUMENT`. For locks
    /// and semaphores on one key; read-write locks are phase-fair already.
    ///
    /// # Errors
    /// `InvalidArgument` for a read-write lock or a lock on several keys.
    pub fn set_fair(&mut self) -> Result<()> {
        if !self.keys.is_empty() {
            return Err(LockError::InvalidArgument(
                "a lock on several keys cannot be fair: queues over several keys can deadlock or starve"
                    .into(),
            ));
        }
        if !matches!(self.kind, HoldKind::Exclusive | HoldKind::Permit { .. }) {
            return Err(LockError::InvalidArgument(
                "`fair` is for locks and semaphores: read-write locks are phase-fair already".into(),
            ));
        }
        self.fair = true;
        Ok(())
    }

    /// Whether this handle is fair ([`Lock::set_fair`]).
    #[must_use]
    pub const fn is_fair(&self) -> bool {
        self.fair
    }

    /// A handle of `kind` on `key`: a semaphore permit (`limit` at least 1), a read or a
    /// write lock, or a plain lock. All of a lock's methods work the same on each.
    pub fn of_kind(
        key: &str,
        ttl_ms: u64,
        kind: HoldKind,
        store: Arc<dyn LockStore>,
        timer: Arc<dyn Timer>,
    ) -> Result<Self> {
        validate::key(key)?;
        let ttl_ms = validate::ttl_ms(ttl_ms)?;
        validate::kind(kind)?;
        Ok(Self::with_hold(key.to_owned(), ttl_ms, kind, store, timer, Hold::default()))
    }

    /// A lock on every one of `keys` at once, all or nothing: an attempt takes each key
    /// or none, and a waiting acquire holds nothing while it waits. The keys are taken in
    /// one canonical (sorted) order, so two such locks over overlapping keys never
    /// deadlock. 1 to [`validate::MAX_KEYS_PER_LOCK`] distinct keys.
    pub fn all(
        keys: Vec<String>,
        ttl_ms: u64,
        store: Arc<dyn LockStore>,
        timer: Arc<dyn Timer>,
    ) -> Result<Self> {
        let keys = validate::keys(keys)?;
        let ttl_ms = validate::ttl_ms(ttl_ms)?;
        let mut lock =
            Self::with_hold(keys.join(", "), ttl_ms, HoldKind::Exclusive, store, timer, Hold::default());
        lock.keys = keys;
        Ok(lock)
    }

    /// What this handle holds: a lock, a semaphore permit, a read or a write lock.
    #[must_use]
    pub fn kind(&self) -> HoldKind {
        self.kind
    }

    /// The name the JS surface gives this handle's kind: `lock`, `semaphore`, `read`,
    /// `write`, `fair lock`, `fair semaphore`, or `multi` for a lock on several keys.
    #[must_use]
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            _ if !self.keys.is_empty() => "multi",
            HoldKind::Exclusive if self.fair => "fair lock",
            HoldKind::Permit { .. } if self.fair => "fair semaphore",
            kind => kind.name(),
        }
    }

    /// The keys of a lock on several keys, in canonical order; empty for one key.
    #[must_use]
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// A lock on several keys: each key's fencing token in the current hold (in the
    /// order of [`keys`](Self::keys)), when held and the store gives them.
    #[must_use]
    pub fn fencing_tokens(&self) -> Vec<Option<u64>> {
        if self.hold().owner.is_none() {
            return Vec::new();
        }
        let tokens = self.all_state().0.clone();
        // One per key, whatever the hold's history (none known: `None` each).
        if tokens.len() == self.keys.len() {
            tokens
        } else {
            vec![None; self.keys.len()]
        }
    }

    fn all_state(&self) -> MutexGuard<'_, (Vec<Option<u64>>, Option<usize>)> {
        self.all.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Rebuilds a held lock from [`serialized`](Self::serialized) (the text of
    /// [`serialize`](Self::serialize), read back with [`SerializedLock::from_fields`]),
    /// owner token and all, so this process can release or extend the same hold.
    ///
    /// The hold's expiry travels as wall-clock time; a string from before it did (no
    /// `expiresAt`) is taken to have its full TTL left from now.
    #[must_use]
    pub fn restore(s: SerializedLock, store: Arc<dyn LockStore>, timer: Arc<dyn Timer>) -> Self {
        let left_ms = match (s.expires_at_unix_ms, timer.unix_time_ms()) {
            // An extend may have pushed the hold past the lock's TTL: bound it by the
            // longest TTL there is, not this lock's.
            (Some(at), Some(now)) => at.saturating_sub(now).min(validate::MAX_TTL_MS),
            _ => s.ttl_ms,
        };
        // Counted down from `expiresAt` less the drift allowance, as any hold is.
        let hold = Hold {
            owner: Some(s.owner),
            fencing_token: s.fencing_token,
            expires_by_ms: timer.now_ms().saturating_add(left_ms.saturating_sub(default_drift_ms(s.ttl_ms))),
            generation: 1,
            ..Hold::default()
        };
        let mut lock = Self::with_hold(s.key, s.ttl_ms, s.kind, store, timer, hold);
        lock.fair = s.fair;
        if !s.keys.is_empty() {
            lock.key = s.keys.join(", ");
            lock.keys = s.keys;
            *lock.all.get_mut().unwrap_or_else(PoisonError::into_inner) = (s.fencing_tokens, None);
        }
        lock
    }

    fn with_hold(
        key: String,
        ttl_ms: u64,
        kind: HoldKind,
        store: Arc<dyn LockStore>,
        timer: Arc<dyn Timer>,
        hold: Hold,
    ) -> Self {
        Self {
            key,
            ttl_ms,
            kind,
            store,
            timer,
            hold: Mutex::new(hold),
            ending: Mutex::new(None),
            changes: Event::new(),
            extend_failure: Mutex::new(None),
            extend_stopped: std::sync::atomic::AtomicU64::new(0),
            drift_override: None,
            attempts: std::sync::atomic::AtomicU32::new(0),
            permits: std::sync::atomic::AtomicU32::new(1),
            keys: Vec::new(),
            all: Mutex::new((Vec::new(), None)),
            fair: false,
        }
    }

    /// The drift allowance for a hold of `ttl_ms`: how much earlier than the store this
    /// handle counts the hold as over, to cover clock rate differences between this
    /// host and the store. 1 % of the TTL + 2 ms unless set ([`Lock::set_drift_ms`]).
    #[must_use]
    pub fn drift_ms(&self, ttl_ms: u64) -> u64 {
        self.drift_override.map_or_else(|| default_drift_ms(ttl_ms), |d| d.min(ttl_ms.saturating_sub(1)))
    }

    /// Sets the drift allowance (`None`: the default). It must be less than the TTL.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when `drift_ms` is not less than the lock's TTL.
    pub fn set_drift_ms(&mut self, drift_ms: Option<u64>) -> Result<()> {
        if let Some(d) = drift_ms {
            if d >= self.ttl_ms {
                return Err(crate::error::LockError::InvalidArgument(format!(
                    "the drift allowance ({d} ms) must be less than the TTL ({} ms)",
                    self.ttl_ms
                )));
            }
        }
        self.drift_override = drift_ms;
        Ok(())
    }

    /// The local deadline a request sent at `sent_ms` sets for a hold of `ttl_ms`.
    pub(crate) fn deadline_from(&self, sent_ms: u64, ttl_ms: u64) -> u64 {
        sent_ms.saturating_add(ttl_ms.saturating_sub(self.drift_ms(ttl_ms)))
    }

    /// Whether hold `generation` ended as lost: then nothing on it succeeds any more.
    pub(crate) fn lost(&self, generation: u64) -> bool {
        let ending = self.ending.lock().unwrap_or_else(PoisonError::into_inner);
        matches!(ending.as_ref(), Some((g, HoldEnd::Lost(_))) if *g == generation)
    }

    /// Makes this handle a fresh lock on `key` for `ttl_ms`, in the same store, as if by
    /// [`Lock::new`]: no hold, no history. Nothing else can refer to the handle (it is
    /// borrowed mutably), so its allocations are reused rather than made again. On a
    /// validation error the handle is left as it was.
    pub fn reset(&mut self, key: &str, ttl_ms: u64) -> Result<()> {
        validate::key(key)?;
        let ttl_ms = validate::ttl_ms(ttl_ms)?;
        self.key.clear();
        self.key.push_str(key);
        self.ttl_ms = ttl_ms;
        self.kind = HoldKind::Exclusive;
        *self.hold.get_mut().unwrap_or_else(PoisonError::into_inner) = Hold::default();
        *self.ending.get_mut().unwrap_or_else(PoisonError::into_inner) = None;
        *self.extend_failure.get_mut().unwrap_or_else(PoisonError::into_inner) = None;
        *self.extend_stopped.get_mut() = 0;
        *self.permits.get_mut() = 1;
        self.keys.clear();
        *self.all.get_mut().unwrap_or_else(PoisonError::into_inner) = (Vec::new(), None);
        Ok(())
    }

    /// How many permits this semaphore handle's acquires take: 1 (the default) up to the
    /// semaphore's limit. A holder of n permits counts n toward the limit; `extend` and
    /// `release` act on the hold as taken. Any other kind of handle takes only 1.
    pub fn set_permits(&self, permits: u32) -> Result<()> {
        if !self.keys.is_empty() && permits != 1 {
            return Err(LockError::InvalidArgument(
                "permits is a semaphore's option; a lockAll() handle takes each of its keys once".into(),
            ));
        }
        let permits = validate::permits(self.kind, permits)?;
        self.permits.store(permits, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// How many permits this handle's acquires take (see [`set_permits`](Self::set_permits)).
    #[must_use]
    pub fn permits(&self) -> u32 {
        self.permits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The TTL each acquisition holds the key for, and `extend()`'s default.
    #[must_use]
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// The store this lock lives in.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn LockStore> {
        &self.store
    }

    /// The timer the lock sleeps on.
    #[must_use]
    pub fn timer(&self) -> &Arc<dyn Timer> {
        &self.timer
    }

    /// Whether this handle has an acquisition it has not released: held now, or lost to
    /// expiry without a release since. A handle without one carries no state beyond its
    /// key and TTL.
    #[must_use]
    pub fn has_owner(&self) -> bool {
        self.hold().owner.is_some()
    }

    /// The fencing token of the current hold, when held and the store gives one.
    #[must_use]
    pub fn fencing_token(&self) -> Option<u64> {
        let hold = self.hold();
        hold.owner.and(hold.fencing_token)
    }

    /// The store's synchronous face, for plain locks on stores that have one.
    pub(crate) fn sync_store(&self) -> Option<&dyn SyncLockStore> {
        if self.kind == HoldKind::Exclusive && self.keys.is_empty() {
            self.store.as_sync()
        } else {
            None
        }
    }

    fn store_release_signal(&self) -> Option<BoxFuture<'static, ()>> {
        if !self.keys.is_empty() {
            // The key the latest attempt found held; none before the first attempt.
            let held = self.all_state().1?;
            return self.store.release_signal(self.keys.get(held)?);
        }
        match self.kind {
            // A fair waiter listens even while the key is free: someone before it may
            // be about to take it (`release_signal` would answer at once, every time).
            HoldKind::Exclusive if !self.fair => self.store.release_signal(&self.key),
            kind => self.store.permit_release_signal(&self.key, kind),
        }
    }

    async fn store_release(&self, owner: OwnerToken) -> Result<bool> {
        release_in(&*self.store, &self.key, &self.keys, owner, self.kind, self.fair).await
    }

    async fn store_extend(&self, owner: OwnerToken, ttl_ms: u64) -> Result<bool> {
        if !self.keys.is_empty() {
            return crate::all::extend(&*self.store, &self.keys, owner.as_str(), ttl_ms).await;
        }
        match self.kind {
            HoldKind::Exclusive if self.fair => {
                self.store.extend_fair(&self.key, owner.as_str(), ttl_ms).await
            }
            HoldKind::Exclusive => self.store.extend(&self.key, owner.as_str(), ttl_ms).await,
            kind => self.store.extend_permit(&self.key, owner.as_str(), ttl_ms, kind).await,
        }
    }

    /// Whether `owner` holds this handle's key now, when the store can tell.
    pub(crate) async fn store_held_by(&self, owner: OwnerToken) -> Result<Option<bool>> {
        if !self.keys.is_empty() {
            return crate::all::held_by(&*self.store, &self.keys, owner.as_str()).await;
        }
        match self.kind {
            HoldKind::Exclusive => self.store.is_held_by(&self.key, owner.as_str()).await,
            kind => {
                Ok(Some(self.store.permit_remaining_time(&self.key, owner.as_str(), kind).await?.is_some()))
            }
        }
    }

    /// How long `owner`'s hold has left: the key's hold for a plain lock, `owner`'s own
    /// hold for the other kinds.
    pub(crate) async fn store_time_left(&self, owner: Option<OwnerToken>) -> Result<Option<u64>> {
        if !self.keys.is_empty() {
            return crate::all::soonest(&*self.store, &self.keys).await;
        }
        match (self.kind, owner) {
            (HoldKind::Exclusive, _) => self.store.remaining_time(&self.key).await,
            (kind, Some(owner)) => self.store.permit_remaining_time(&self.key, owner.as_str(), kind).await,
            (_, None) => Ok(None),
        }
    }

    pub(crate) fn hold(&self) -> MutexGuard<'_, Hold> {
        self.hold.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records how hold `generation` ended and tells its watchers; the first word on
    /// a hold's end stands.
    pub(crate) fn end_hold(&self, generation: u64, end: HoldEnd) {
        {
            let mut ending = self.ending.lock().unwrap_or_else(PoisonError::into_inner);
            if ending.as_ref().is_none_or(|(g, _)| *g != generation) {
                *ending = Some((generation, end));
            }
        }
        self.changes.notify(usize::MAX);
    }

    pub(crate) fn not_held(&self, reason: &'static str) -> LockError {
        LockError::NotHeld { key: self.key.clone(), reason }
    }

    fn record_grant(&self, owner: OwnerToken, grant: Grant, started_ms: u64) {
        let ended = {
            let mut hold = self.hold();
            let previous = *hold;
            *hold = Hold {
                owner: Some(owner),
                fencing_token: grant.fencing_token,
                expires_by_ms: self.deadline_from(started_ms, self.ttl_ms),
                generation: previous.generation + 1,
                ..Hold::default()
            };
            previous.owner.is_some().then_some(previous.generation)
        };
        match ended {
            // A lost hold is replaced by a new one: it ended, lost.
            Some(generation) => {
                self.end_hold(generation, HoldEnd::Lost(self.not_held("it expired and was lost")));
            }
            None => {
                self.changes.notify(usize::MAX);
            }
        }
    }

    /// Takes the lock, waiting up to `options.timeout_ms`. `true` if taken.
    ///
    /// The last attempt happens at the deadline. If the store fails mid-attempt the
    /// attempt's token is released again (best effort) before the error is returned,
    /// so a failed call never leaves a hold behind.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<bool> {
        self.acquire_until(options, None).await
    }

    /// [`acquire`](Self::acquire) that `abort` can end: once it fires, the wait stops
    /// with [`LockError::Aborted`] and nothing is held — an attempt in flight is released
    /// again (as a cancelled acquire's is), and a read or write lock's place in the
    /// queue is given up. Already fired, it takes nothing. An acquire that got the lock
    /// before the abort returns `true`: the caller decides what a late abort means.
    pub async fn acquire_abortable(&self, options: AcquireOptions, abort: &crate::Abort) -> Result<bool> {
        if abort.is_aborted() {
            validate::retry_delay_ms(options.retry_delay_ms)?;
            return Err(LockError::Aborted { key: self.key.clone(), hold_may_remain: false });
        }
        self.acquire_until(options, Some(abort)).await
    }

    async fn acquire_until(&self, options: AcquireOptions, abort: Option<&crate::Abort>) -> Result<bool> {
        validate::retry_delay_ms(options.retry_delay_ms)?;
        // While the store is out of reach, a wait retries at its retry delay, doubling up
        // to OUTAGE_BACKOFF_MAX_MS, with a last attempt at its deadline; it then fails with
        // the last error. Only `STORE_UNAVAILABLE` is ridden out: a configuration or
        // contract error fails at once, as does any error of an acquire that does not wait.
        let mut outage: Option<crate::error::LockError> = None;
        // Whether this handle's last hold is known to be over. When that cannot be told
        // now, a wait rides it out as it rides out a failed attempt, asking again at each
        // retry and sending no attempt until it knows: a new grant beside a hold still in
        // place would count twice against a semaphore's limit and leave the old one to
        // nobody (and a lock does not wait for itself).
        let mut checked = match self.last_hold(options.timeout_ms > 0, &mut outage).await? {
            Some(held) if held => return Ok(false),
            answer => answer.is_some(),
        };
        let mut first = true;
        // One token per attempt whose calls are all answered: an attempt refused in an
        // answer keeps its token (a read-write claim keeps its place with it), but after
        // an attempt whose answer did not come, which the store may still apply, the next
        // attempt has a fresh one. So a late grant is only ever its own attempt's, and
        // that attempt's clean-up frees it whenever it lands.
        let mut owner = OwnerToken::generate()?;
        // This call's permits, fixed now: another call on the handle may set others.
        let permits = self.permits();
        let deadline = self.timer.now_ms().saturating_add(options.timeout_ms);
        let mut queue_first = self.queues_first(options);
        // What an attempt left in the store (a fair waiter's place, a read-write claim),
        // given up in the background if this future is dropped before the wait ends.
        let mut place = PlaceGuard { lock: self, owner: None, generation: self.hold().generation };
        // The release signal lives until it fires, across the retries a timer starts, so
        // a waiter keeps its place among the store's listeners (a release wakes the
        // longest waiting) and no release between two attempts is missed.
        let mut signal: Option<BoxFuture<'static, ()>> = None;
        // A fair waiter asks at least three times per TTL, which its place lasts.
        let retry_delay_ms = if self.fair {
            options.retry_delay_ms.min((self.ttl_ms / 3).max(1))
        } else {
            options.retry_delay_ms
        };
        let mut backoff = retry_delay_ms;
        // Whether the latest wake-up was a release signal's (a store wakes few waiters).
        let mut woken = false;
        loop {
            // An abort that came with a wake-up (both ready in one turn) sends no attempt,
            // and passes the wake-up on to the next waiter, who would otherwise sleep on.
            if abort.is_some_and(crate::Abort::is_aborted) {
                if std::mem::take(&mut woken) {
                    self.store.pass_on_release(&self.key);
                }
                return Err(place.done(self.aborted(owner, false)));
            }
            woken = false;
            if !checked && !std::mem::take(&mut first) {
                match self.last_hold(true, &mut outage).await? {
                    Some(held) if held => return Ok(false),
                    Some(_) => checked = true,
                    None => backoff = outage_backoff(backoff, retry_delay_ms),
                }
            }
            // A lock on several keys listens once an attempt has said which key is held.
            if signal.is_none() && options.timeout_ms > 0 && self.keys.is_empty() {
                signal = self.store_release_signal();
            }
            let queued = std::mem::take(&mut queue_first);
            if !queued && checked {
                place.owner = self.keeps_a_place().then_some(owner);
                let Some(answer) = self.attempt(owner, permits, options.timeout_ms > 0, abort).await else {
                    return Err(place.done(self.aborted(owner, true)));
                };
                match answer {
                    Ok(true) => return place.done(Ok(true)),
                    Ok(false) => {
                        self.check_fairness()?;
                        outage = None;
                        backoff = retry_delay_ms;
                        if !self.keys.is_empty() && options.timeout_ms > 0 {
                            // Listens on the key found held: registered after the attempt,
                            // so a release in between costs at most the retry delay.
                            signal = self.store_release_signal();
                        }
                    }
                    Err(err) if options.timeout_ms > 0 && err.code() == "STORE_UNAVAILABLE" => {
                        if outage.is_some() {
                            backoff = outage_backoff(backoff, retry_delay_ms);
                        }
                        outage = Some(err);
                        // The attempt's clean-up has its token (finish_attempt).
                        place.owner = None;
                        owner = OwnerToken::generate()?;
                    }
                    Err(err) => return Err(place.done(err)),
                }
            }
            let now = self.timer.now_ms();
            if now >= deadline {
                if queued {
                    continue; // the attempt at the deadline
                }
                self.give_up_place(owner, outage.is_some()).await;
                return place.done(outage.map_or(Ok(false), Err));
            }
            let sleep = self.timer.sleep(backoff.min(deadline - now));
            let aborted = async {
                match abort {
                    Some(abort) => abort.aborted().await,
                    None => std::future::pending().await,
                }
            };
            // No release signal comes from a store out of reach: then sleep the backoff.
            let wait = async {
                if let Some(released) = signal.as_mut().filter(|_| outage.is_none()) {
                    let fired = matches!(select(released, sleep).await, Either::Left(_));
                    if fired {
                        signal = None; // fired: the next wait listens afresh
                    }
                    fired
                } else {
                    sleep.await;
                    false
                }
            };
            match select(std::pin::pin!(wait), std::pin::pin!(aborted)).await {
                Either::Left((fired, _)) => woken = fired,
                Either::Right(_) => return Err(place.done(self.aborted(owner, false))),
            }
        }
    }

    /// Gives up the claim a refused writer leaves, so readers get in again, and a refused
    /// reader's place in the next readers' turn: before answering, unless the store is
    /// `out_of_reach` (then in the background).
    async fn give_up_place(&self, owner: OwnerToken, out_of_reach: bool) {
        if self.keeps_a_place() {
            if out_of_reach {
                let generation = self.hold().generation;
                self.abandon_attempt(owner, generation);
            } else {
                let _ = self.store_release(owner).await;
            }
        }
    }

    /// Whether a wait holds its first attempt back (it still tries at each retry and at
    /// its deadline): behind this process's waiters on the key (see
    /// `LockStore::has_local_waiters`), and right after a refused `try_acquire_now` (its
    /// attempt was that one). A fair handle never holds its first attempt back behind
    /// waiters: that attempt takes its place in the store's queue, which orders them all.
    fn queues_first(&self, options: AcquireOptions) -> bool {
        options.timeout_ms > 0
            && !self.fair
            && (options.after_refused_try
                || (self.kind == HoldKind::Exclusive
                    && self.keys.is_empty()
                    && self.store.has_local_waiters(&self.key)))
    }

    /// Whether a refused attempt leaves something in the store until it is given up: a
    /// fair waiter's place, a writer's claim, a reader's place in the next readers' turn.
    fn keeps_a_place(&self) -> bool {
        self.fair || matches!(self.kind, HoldKind::Write | HoldKind::Read)
    }

    /// After an attempt of a handle that is not fair was refused: an error if the key is
    /// fair (fair waiters queue for it or a fair handle holds it), which such a handle
    /// would otherwise wait on for as long as fair waiters keep coming.
    fn check_fairness(&self) -> Result<()> {
        if let Some(key) = self.keys.iter().find(|key| self.store.fair_key(key, HoldKind::Exclusive)) {
            return Err(LockError::InvalidArgument(format!(
                "lock {} is fair (fair handles hold it or wait for it); a lock on several keys is not: lockAll() cannot take it",
                validate::quote(key)
            )));
        }
        if self.fair || !self.keys.is_empty() || !self.store.fair_key(&self.key, self.kind) {
            return Ok(());
        }
        Err(crate::store::not_fair_on_fair_key(&self.key, self.kind))
    }

    /// Whether this handle's last hold is still in place (`Some`), or `None` with `outage`
    /// set when the store cannot tell now and the acquire `waits` (it asks again later).
    async fn last_hold(&self, waits: bool, outage: &mut Option<LockError>) -> Result<Option<bool>> {
        match self.still_holds().await {
            Ok(held) => Ok(Some(held)),
            Err(err @ LockError::StoreUnavailable(_)) if waits => {
                *outage = Some(err);
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    /// An aborted wait's error, after giving up what the wait leaves in the store: a
    /// refused writer's claim, a reader's place in the next readers' turn (released in
    /// the background, as a cancelled attempt's grant is). `in_flight`: an attempt was
    /// on its way, and is cleaned up once it settles; until then a hold may remain.
    fn aborted(&self, owner: OwnerToken, in_flight: bool) -> LockError {
        if !in_flight && self.keeps_a_place() {
            let generation = self.hold().generation;
            self.abandon_attempt(owner, generation);
        }
        LockError::Aborted { key: self.key.clone(), hold_may_remain: in_flight }
    }

    /// How many acquire attempts this handle has sent to its store, in all (wrapping at
    /// `u32::MAX`): the difference across one `acquire` is how many that call made.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count_attempt(&self) {
        self.attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// One attempt. `abort` cuts it short: then (`None`) the attempt goes on in the
    /// background and is cleaned up once it settles, and the wait answers at once.
    async fn attempt(
        &self,
        owner: OwnerToken,
        permits: u32,
        waits: bool,
        abort: Option<&crate::Abort>,
    ) -> Option<Result<bool>> {
        self.count_attempt();
        let started = self.timer.now_ms();
        // Armed until the store's answer is in hand: if this future is dropped while
        // the store may have granted the key, the guard frees it.
        let in_flight = InFlightAttempt { lock: self, owner, generation: self.hold().generation };
        let mut call = self.acquire_call(owner, permits, waits);
        let aborted = async {
            match abort {
                Some(abort) => abort.aborted().await,
                None => std::future::pending().await,
            }
        };
        let answer = match select(call.as_mut(), std::pin::pin!(aborted)).await {
            Either::Left((answer, _)) => Some(answer),
            Either::Right(((), _)) => None,
        };
        std::mem::forget(in_flight);
        let Some(answer) = answer else {
            self.clean_up_after(owner, call);
            return None;
        };
        Some(self.finish_attempt(owner, answer, started))
    }

    /// One acquire call for `owner` that owns what it needs, so that an abort can leave
    /// it to finish in the background (see [`clean_up_after`](Self::clean_up_after)).
    /// `waits`: the acquire waits (a fair attempt then keeps its place in the queue).
    fn acquire_call(
        &self,
        owner: OwnerToken,
        permits: u32,
        waits: bool,
    ) -> BoxFuture<'static, Result<AcquireAnswer>> {
        let (store, key, keys, ttl_ms, kind, fair) =
            (self.store.clone(), self.key.clone(), self.keys.clone(), self.ttl_ms, self.kind, self.fair);
        Box::pin(async move {
            let owner = owner.as_str();
            if !keys.is_empty() {
                return crate::all::acquire(&*store, &keys, owner, ttl_ms).await.map(AcquireAnswer::All);
            }
            if fair {
                return store
                    .acquire_fair(&key, owner, ttl_ms, kind, permits, waits)
                    .await
                    .map(AcquireAnswer::One);
            }
            match kind {
                HoldKind::Exclusive => store.acquire_with_grant(&key, owner, ttl_ms).await,
                kind @ HoldKind::Permit { .. } => {
                    store.acquire_permits(&key, owner, ttl_ms, kind, permits).await
                }
                kind => store.acquire_permit(&key, owner, ttl_ms, kind).await,
            }
            .map(AcquireAnswer::One)
        })
    }

    /// Applies an attempt's answer: a grant becomes the hold. An error (the store may
    /// have taken the key before failing to answer) has the attempt's token released
    /// in the background, so an unreachable store holds up no answer, and an error
    /// without an answer says that a hold may remain until then.
    fn finish_attempt(&self, owner: OwnerToken, answer: Result<AcquireAnswer>, started: u64) -> Result<bool> {
        let grant = match answer {
            Ok(AcquireAnswer::One(grant)) => grant,
            Ok(AcquireAnswer::All(AllGrant::Granted(grants))) => {
                self.all_state().0 = grants.iter().map(|g| g.fencing_token).collect();
                Some(Grant::default())
            }
            Ok(AcquireAnswer::All(AllGrant::Busy(held))) => {
                self.all_state().1 = held;
                None
            }
            Err(err) => {
                // Released in the background (a store out of reach would hold the answer up).
                let generation = self.hold().generation;
                self.abandon_attempt(owner, generation);
                return Err(match err {
                    LockError::StoreUnavailable(reason) => {
                        LockError::Unanswered { reason, ttl_ms: self.ttl_ms }
                    }
                    err => err,
                });
            }
        };
        Ok(grant.is_some_and(|grant| {
            self.record_grant(owner, grant, started);
            true
        }))
    }

    /// `owner`'s release as a clean-up, owning what it needs: tried at once and again
    /// while the store does not answer, backing off up to a second, at most
    /// `CLEAN_UP_TRIES` times and for at most the lock's TTL (after which nothing it
    /// could free is left), so an outage is not met with a growing crowd of clean-ups.
    fn release_call(&self, owner: OwnerToken) -> impl std::future::Future<Output = ()> + 'static {
        let (timer, ttl_ms) = (self.timer.clone(), self.ttl_ms);
        let (store, key, keys, kind, fair) =
            (self.store.clone(), self.key.clone(), self.keys.clone(), self.kind, self.fair);
        async move {
            let give_up_at = timer.now_ms().saturating_add(ttl_ms);
            let (mut pause, mut tries) = (CLEAN_UP_RETRY_MS, 1);
            while release_in(&*store, &key, &keys, owner, kind, fair).await.is_err()
                && tries < CLEAN_UP_TRIES
                && timer.now_ms() < give_up_at
            {
                timer.sleep(pause).await;
                pause = pause.saturating_mul(2).min(OUTAGE_BACKOFF_MAX_MS);
                tries += 1;
            }
        }
    }

    /// Leaves `call`, an attempt of `owner` whose wait was aborted, to finish in the
    /// background, then releases whatever it may have taken (a grant, or an error that
    /// may hide one; a refused reader's or writer's place in the queue too). Where the
    /// runtime cannot spawn, the handle keeps the token, so `release()` frees it.
    fn clean_up_after(&self, owner: OwnerToken, call: BoxFuture<'static, Result<AcquireAnswer>>) {
        let release = self.release_call(owner);
        let queued = self.keeps_a_place();
        let settle = Box::pin(async move {
            let answer = call.await;
            let refused =
                matches!(answer, Ok(AcquireAnswer::One(None) | AcquireAnswer::All(AllGrant::Busy(_))));
            if queued || !refused {
                release.await;
            }
        });
        if !self.timer.spawn(settle) {
            let generation = self.hold().generation;
            self.abandon_attempt(owner, generation);
        }
    }

    /// A lock on several keys found one of them gone (not `owner`'s): the hold is lost for
    /// whoever has its token, so the keys it still has are given back in the background
    /// rather than kept from everyone until their TTL. A lock on one key keeps nothing.
    pub(crate) fn give_up_keys(&self, owner: OwnerToken) {
        if self.keys.is_empty() {
            return;
        }
        let (store, keys) = (self.store.clone(), self.keys.clone());
        let _ = self.timer.spawn(Box::pin(async move {
            let _ = crate::all::release(&*store, &keys, owner.as_str()).await;
        }));
    }

    /// Frees what an attempt cancelled mid-flight may hold (see [`InFlightAttempt`]).
    fn abandon_attempt(&self, owner: OwnerToken, started_generation: u64) {
        if !self.timer.spawn(Box::pin(self.release_call(owner))) {
            // No way to run the release now: keep the token, so `release()` frees it.
            // Only if no other call on this handle took the key meanwhile; the attempt
            // ran because any earlier hold was gone. Unconfirmed, it counts as expired.
            let mut hold = self.hold();
            if hold.generation == started_generation {
                *hold = Hold {
                    owner: Some(owner),
                    fencing_token: None,
                    expires_by_ms: self.timer.now_ms(),
                    generation: hold.generation + 1,
                    ..Hold::default()
                };
            }
        }
    }

    /// Whether this handle's current hold is still in place, per the store when it can
    /// tell, else per the local expiry estimate.
    async fn still_holds(&self) -> Result<bool> {
        let hold = *self.hold();
        let Some(owner) = hold.owner else {
            return Ok(false);
        };
        if self.lost(hold.generation) {
            return Ok(false); // lost is final, whatever the store says now
        }
        Ok(match self.store_held_by(owner).await? {
            Some(answer) => answer,
            None if self.timer.now_ms() >= hold.expires_by_ms => false,
            // Several keys: by the local deadline alone.
            None => !self.keys.is_empty() || self.store.is_locked(&self.key).await?,
        })
    }

    /// One attempt without a promise or a thread hop, for stores that are synchronous.
    /// `None` when the store is not (then call [`acquire`](Self::acquire)).
    pub fn try_acquire_now(&self) -> Option<Result<bool>> {
        if self.fair {
            return None;
        }
        let store = self.sync_store()?;
        if let Some(owner) = self.hold().owner {
            if store.is_held_by_now(&self.key, owner.as_str()) {
                return Some(Ok(false));
            }
        }
        let owner = match OwnerToken::generate() {
            Ok(owner) => owner,
            Err(err) => return Some(Err(err)),
        };
        self.count_attempt();
        Some(Ok(match store.acquire_now(&self.key, owner.as_str(), self.ttl_ms) {
            Some(grant) => {
                // A synchronous store always knows who holds a key, so the local expiry
                // estimate is never consulted: spare the clock read.
                self.record_grant(owner, grant, u64::MAX);
                true
            }
            None => match self.check_fairness() {
                Ok(()) => false,
                Err(err) => return Some(Err(err)),
            },
        }))
    }

    /// Frees the lock if this handle holds it. `false` if it was not held (never
    /// taken, already released, or lost to expiry — then someone else's hold is left
    /// alone, and the handle still reports itself expired).
    pub async fn release(&self) -> Result<bool> {
        let Some(mut on_its_way) = Releasing::start(self) else {
            return Ok(false);
        };
        // A hold being released is not extended any more, whatever the release's answer:
        // one that fails leaves the hold to run out at its TTL (or to a later release),
        // not to auto-extend, which kept it alive with nobody wanting it.
        self.extend_stopped.store(on_its_way.generation, std::sync::atomic::Ordering::SeqCst);
        let released = self.store_release(on_its_way.owner).await?;
        // Applied as it is dropped: released, or (if no other release of the hold says
        // otherwise) lost now, without waiting for the deadline.
        on_its_way.answer = Some(released);
        Ok(released)
    }

    /// Hold `generation` of `owner` was found gone by a due check or an extend: it is
    /// lost, and a lock on several keys gives back the keys it still has. Not while a
    /// release of it is on its way: the store may be answering after that release freed
    /// a key, and a give-back racing the release's own would make the release answer
    /// false. The release's answer says how the hold ended; if none comes (it failed),
    /// the hold is lost then. `false` when it is left to the release.
    pub(crate) fn found_gone(&self, generation: u64, owner: OwnerToken, reason: LockError) -> bool {
        {
            let mut hold = self.hold();
            if hold.generation != generation || hold.owner != Some(owner) {
                return false; // released, or replaced
            }
            if hold.releasing > 0 {
                hold.gone = true;
                return false;
            }
        }
        self.end_hold(generation, HoldEnd::Lost(reason));
        self.give_up_keys(owner);
        true
    }

    /// [`release`](Self::release) for synchronous stores; `None` when the store is not.
    pub fn release_now(&self) -> Option<bool> {
        let store = self.sync_store()?;
        let Some(mut on_its_way) = Releasing::start(self) else {
            return Some(false);
        };
        let released = store.release_now(&self.key, on_its_way.owner.as_str());
        on_its_way.answer = Some(released);
        Some(released)
    }

    /// [`release_now`](Self::release_now) that also says whether the hold had been lost
    /// before it, as [`live_generation`](Self::live_generation) asked just before would
    /// (its end recorded, or no longer held), and records such a loss as that does. A
    /// synchronous store knows exactly: a release it accepts proves the hold was live,
    /// so the store is asked once. `(released, lost)`; `None` when the store is not
    /// synchronous. `run()`'s end in one call.
    pub fn release_checked_now(&self) -> Option<(bool, bool)> {
        let store = self.sync_store()?;
        let Some(mut on_its_way) = Releasing::start(self) else {
            return Some((false, false));
        };
        let generation = on_its_way.generation;
        let ended = self.has_ended(generation);
        let released = store.release_now(&self.key, on_its_way.owner.as_str());
        if !released && !ended {
            // Past its deadline: the loss live_generation would have recorded, before the
            // release's own word on it (the first word on a hold's end stands).
            self.end_past_deadline(generation);
        }
        on_its_way.answer = Some(released);
        Some((released, ended || !released))
    }

    /// Pushes the expiry to `ttl_ms` (default: the lock's TTL) from now.
    ///
    /// # Errors
    /// `LOCK_NOT_HELD` when the lock was never acquired, was released, or was lost.
    pub async fn extend(&self, ttl_ms: Option<u64>) -> Result<()> {
        let ttl_ms = ttl_ms.map_or(Ok(self.ttl_ms), validate::ttl_ms)?;
        let owner = self.owner_for_extend()?;
        // Past its local deadline the hold is over by this handle's reckoning, whether or
        // not anything watched it: an extend then could only revive a key that someone
        // else may hold already. (A synchronous store knows exactly; it is asked.)
        if self.live_generation().is_none() {
            return Err(self.not_held("its TTL passed without an extend"));
        }
        let started = self.timer.now_ms();
        // From its send on, the extend may take effect, answered or not: a shorter TTL
        // than the hold has left brings its deadline forward now, whatever the answer.
        let deadline = self.deadline_from(started, ttl_ms);
        let number = {
            let mut hold = self.hold();
            if hold.owner == Some(owner) && deadline < hold.expires_by_ms {
                hold.expires_by_ms = deadline;
            }
            hold.extends_sent += 1;
            hold.extends_unanswered += 1;
            hold.unanswered_ttl_cap = lower(hold.unanswered_ttl_cap, ttl_ms);
            hold.extends_sent
        };
        let extended = self.store_extend(owner, ttl_ms).await;
        {
            let mut hold = self.hold();
            if hold.owner == Some(owner) {
                if extended.is_err() {
                    // It may have been applied, and may still land: for good.
                    hold.failed_ttl_cap = lower(hold.failed_ttl_cap, ttl_ms);
                }
                hold.extends_unanswered = hold.extends_unanswered.saturating_sub(1);
                if hold.extends_unanswered == 0 {
                    // Every extend is answered: those that succeeded are counted by their
                    // answers (finish_extend's overlap rule), those that failed above.
                    hold.unanswered_ttl_cap = 0;
                }
            }
        }
        self.finish_extend(owner, extended?, (number, started), ttl_ms)
    }

    /// [`extend`](Self::extend) for synchronous stores; `None` when the store is not.
    pub fn extend_now(&self, ttl_ms: Option<u64>) -> Option<Result<()>> {
        let store = self.sync_store()?;
        Some((|| {
            let ttl_ms = ttl_ms.map_or(Ok(self.ttl_ms), validate::ttl_ms)?;
            let owner = self.owner_for_extend()?;
            let started = self.timer.now_ms();
            let number = {
                let mut hold = self.hold();
                hold.extends_sent += 1;
                hold.extends_sent
            };
            let extended = store.extend_now(&self.key, owner.as_str(), ttl_ms);
            self.finish_extend(owner, extended, (number, started), ttl_ms)
        })())
    }

    fn owner_for_extend(&self) -> Result<OwnerToken> {
        let hold = *self.hold();
        let owner = hold.owner.ok_or_else(|| self.not_held("it was never acquired, or was released"))?;
        if self.lost(hold.generation) {
            return Err(self.not_held("it was lost (its signal says why)"));
        }
        Ok(owner)
    }

    /// Applies an extend's answer; `sent` is its number and send time.
    fn finish_extend(&self, owner: OwnerToken, extended: bool, sent: (u64, u64), ttl_ms: u64) -> Result<()> {
        let (number, started) = sent;
        let hold = {
            let mut hold = self.hold();
            if hold.owner == Some(owner) && self.lost(hold.generation) {
                // Lost while the extend was on its way: lost stays lost.
                return Err(self.not_held("it was lost (its signal says why)"));
            }
            if extended && hold.owner == Some(owner) {
                // Every request that succeeded was applied, and the one applied last set
                // the expiry: it was applied after every other one was sent, but which
                // one it was is known only when their times do not overlap. An extend
                // answered after a later-sent one was (concurrent extends: auto-extend
                // and a caller's own) counts from that later send; two whose times
                // overlap count the shorter TTL. (Each counted from its own send, so an
                // earlier-sent extend answered last moved the deadline back: the hold
                // ended early.)
                let (sent, ttl) = if hold.set_answered_after >= number {
                    (started.max(hold.set_sent_ms), ttl_ms.min(hold.set_ttl_ms))
                } else {
                    (started, ttl_ms)
                };
                // A shorter extend unanswered or failed may land after this one.
                let ttl = ttl.min(hold.ttl_cap());
                hold.expires_by_ms = self.deadline_from(sent, ttl);
                hold.set_sent_ms = sent;
                hold.set_ttl_ms = ttl;
                hold.set_answered_after = hold.extends_sent;
            }
            *hold
        };
        if !extended {
            let err = self.not_held("it expired, or someone else took it");
            // (found_gone leaves a hold that is no longer this owner's alone.)
            self.found_gone(hold.generation, owner, err.clone());
            return Err(err);
        }
        self.changes.notify(usize::MAX);
        Ok(())
    }

    /// Whether anyone holds the key (not necessarily this handle); for the other kinds,
    /// whether any hold of the key is live.
    pub async fn is_locked(&self) -> Result<bool> {
        if !self.keys.is_empty() {
            return Ok(crate::all::held_count(&*self.store, &self.keys).await? > 0);
        }
        match self.kind {
            HoldKind::Exclusive => self.store.is_locked(&self.key).await,
            kind => Ok(self.store.permit_count(&self.key, kind).await? > 0),
        }
    }

    /// How many holds of the key are live now: semaphore permits, or readers (a writer
    /// counts one). For a plain lock, 0 or 1.
    pub async fn count(&self) -> Result<u64> {
        if !self.keys.is_empty() {
            // How many of the keys anyone holds.
            return crate::all::held_count(&*self.store, &self.keys).await;
        }
        match self.kind {
            HoldKind::Exclusive => Ok(u64::from(self.store.is_locked(&self.key).await?)),
            kind => self.store.permit_count(&self.key, kind).await,
        }
    }

    /// Whether this handle held the key and no longer does — expired, or now held by
    /// someone else. `false` before the first acquire and after a release.
    pub async fn is_expired(&self) -> Result<bool> {
        if self.hold().owner.is_none() {
            return Ok(false);
        }
        Ok(!self.still_holds().await?)
    }

    /// Milliseconds until the key's hold expires (whoever holds it), or `None` when free.
    /// For the other kinds: until this handle's own hold expires, `None` when it has none.
    pub async fn remaining_time(&self) -> Result<Option<u64>> {
        let owner = self.hold().owner;
        self.store_time_left(owner).await
    }

    /// The key, TTL, owner token, fencing token and expiry as a string that
    /// [`restore`](Self::restore) accepts in any runtime (once read back with
    /// [`SerializedLock::from_fields`]). The string is a bearer secret: it can release
    /// and extend this hold.
    ///
    /// # Errors
    /// `LOCK_NOT_HELD` when this handle holds nothing to hand over.
    pub fn serialize(&self) -> Result<String> {
        self.serialized().map(|s| s.to_json())
    }

    /// What [`serialize`](Self::serialize) writes, as a value.
    ///
    /// # Errors
    /// `LOCK_NOT_HELD` when this handle holds nothing to hand over.
    pub fn serialized(&self) -> Result<SerializedLock> {
        let hold = *self.hold();
        let owner = hold.owner.ok_or_else(|| self.not_held("there is no hold to serialize"))?;
        Ok(SerializedLock {
            key: self.key.clone(),
            ttl_ms: self.ttl_ms,
            owner,
            fencing_token: hold.fencing_token,
            expires_at_unix_ms: self.expires_at_unix_ms(&hold, owner),
            kind: self.kind,
            fair: self.fair,
            keys: self.keys.clone(),
            fencing_tokens: if self.keys.is_empty() { Vec::new() } else { self.fencing_tokens() },
        })
    }

    /// When the hold expires at the latest, in wall-clock time, if the runtime has a
    /// wall clock.
    fn expires_at_unix_ms(&self, hold: &Hold, owner: OwnerToken) -> Option<u64> {
        let unix_now = self.timer.unix_time_ms()?;
        let left_ms = match self.sync_store() {
            // A synchronous store knows exactly (and its grants skip the local estimate).
            Some(store) => remaining_if_held(store, &self.key, owner),
            // The store's expiry is the local deadline + the drift allowance.
            None => hold
                .expires_by_ms
                .saturating_add(self.drift_ms(self.ttl_ms))
                .saturating_sub(self.timer.now_ms()),
        };
        Some(unix_now.saturating_add(left_ms))
    }
}

/// Gives back `owner`'s hold of `key` of `kind` in `store`.
async fn release_in(
    store: &dyn LockStore,
    key: &str,
    keys: &[String],
    owner: OwnerToken,
    kind: HoldKind,
    fair: bool,
) -> Result<bool> {
    if !keys.is_empty() {
        return crate::all::release(store, keys, owner.as_str()).await;
    }
    match kind {
        HoldKind::Exclusive if fair => store.release_fair(key, owner.as_str()).await,
        HoldKind::Exclusive => store.release(key, owner.as_str()).await,
        kind => store.release_permit(key, owner.as_str(), kind).await,
    }
}

fn remaining_if_held(store: &dyn SyncLockStore, key: &str, owner: OwnerToken) -> u64 {
    if store.is_held_by_now(key, owner.as_str()) {
        store.remaining_time_now(key).unwrap_or(0)
    } else {
        0
    }
}

/// A wait's next pause while the store is out of reach: doubled, up to
/// `OUTAGE_BACKOFF_MAX_MS` (or the retry delay, if longer).
fn outage_backoff(backoff: u64, retry_delay_ms: u64) -> u64 {
    backoff.saturating_mul(2).min(OUTAGE_BACKOFF_MAX_MS.max(retry_delay_ms))
}

/// The first pause before a clean-up release is tried again.
const CLEAN_UP_RETRY_MS: u64 = 50;
/// How many times a clean-up release is tried, at most (pauses of 50 ms doubling to 1 s
/// between them: about 4.5 s of an outage).
const CLEAN_UP_TRIES: u32 = 8;

/// An acquire's answer: for one key, the grant if any; for several, all or none.
enum AcquireAnswer {
    One(Option<Grant>),
    All(AllGrant),
}

/// An acquire attempt whose answer has not arrived. Dropping it (the caller cancelled
/// the `acquire` future) gives up the hold the store may have granted; completing the
/// attempt forgets the guard instead.
struct InFlightAttempt<'a> {
    lock: &'a Lock,
    owner: OwnerToken,
    /// The handle's hold generation when the attempt started.
    generation: u64,
}

impl Drop for InFlightAttempt<'_> {
    fn drop(&mut self) {
        self.lock.abandon_attempt(self.owner, self.generation);
    }
}
