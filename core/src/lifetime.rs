//! A hold's lifetime: noticing how it ends, and keeping it alive while work runs.
//!
//! Both are futures on [`Lock`] that a binding runs in the background: `hold_ended`
//! feeds the JS `lock.signal`, `keep_extending` is the `autoExtend` option. Neither
//! outlives the hold it watches.

use futures_util::future::{select, Either};

use crate::error::LockError;
use crate::lock::{Hold, Lock};
use crate::store::{HoldCheck, HoldKind};
use crate::token::OwnerToken;

/// How a hold ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldEnd {
    /// This handle released it.
    Released,
    /// It was lost: its TTL passed without an extend, an extend found the key free or
    /// someone else's, or the store could not be reached before the hold expired. The
    /// error says which (`LOCK_NOT_HELD`, `STORE_UNAVAILABLE`, ...).
    Lost(LockError),
}

/// How [`Lock::keep_extending`] keeps a hold alive.
///
/// ```
/// use locksmith_core::AutoExtend;
/// let plan = AutoExtend::for_ttl_ms(30_000).with_max_hold_ms(600_000);
/// assert_eq!((plan.interval_ms, plan.max_hold_ms), (10_000, Some(600_000)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AutoExtend {
    /// Milliseconds between extends; each extends by the lock's TTL.
    pub interval_ms: u64,
    /// Stop extending once the hold has lasted this long; it then expires at its TTL.
    pub max_hold_ms: Option<u64>,
}

impl AutoExtend {
    /// Extend every third of `ttl_ms`, with no cap.
    #[must_use]
    pub const fn for_ttl_ms(ttl_ms: u64) -> Self {
        let third = ttl_ms / 3;
        Self { interval_ms: if third == 0 { 1 } else { third }, max_hold_ms: None }
    }

    /// Extend every `interval_ms` instead.
    #[must_use]
    pub const fn with_interval_ms(mut self, interval_ms: u64) -> Self {
        self.interval_ms = interval_ms;
        self
    }

    /// Stop extending after `max_hold_ms` of hold.
    #[must_use]
    pub const fn with_max_hold_ms(mut self, max_hold_ms: u64) -> Self {
        self.max_hold_ms = Some(max_hold_ms);
        self
    }
}

/// How long before a hold's local deadline an asynchronous store is asked, once, whether
/// the hold was extended elsewhere (by a restored copy in another process); at most
/// this, and at most a quarter of the TTL.
const DUE_CHECK_MS: u64 = 100;

impl Lock {
    /// The number of the hold this handle has now, if any; each acquisition has its own.
    #[must_use]
    pub fn held_generation(&self) -> Option<u64> {
        let hold = self.hold();
        hold.owner.map(|_| hold.generation)
    }

    /// The generation of the current hold, or of the last one if none is held: what a
    /// watch started now is about.
    #[must_use]
    pub fn hold_generation_now(&self) -> u64 {
        self.hold().generation
    }

    fn ending_of(&self, generation: u64) -> Option<HoldEnd> {
        let ending = self.ending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ending.as_ref().filter(|(g, _)| *g == generation).map(|(_, end)| end.clone())
    }

    /// Whether the end of hold `generation` is recorded.
    pub(crate) fn has_ended(&self, generation: u64) -> bool {
        self.ending_of(generation).is_some()
    }

    /// Records hold `generation` as lost past its deadline, to what
    /// [`live_generation`](Self::live_generation) gives.
    pub(crate) fn end_past_deadline(&self, generation: u64) {
        let reason =
            self.failure_of(generation).unwrap_or_else(|| self.not_held("its TTL passed without an extend"));
        self.end_hold(generation, HoldEnd::Lost(reason));
    }

    fn failure_of(&self, generation: u64) -> Option<LockError> {
        let failure = self.extend_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        failure.as_ref().filter(|(g, _)| *g == generation).map(|(_, err)| err.clone())
    }

    fn set_failure(&self, failure: Option<(u64, LockError)>) {
        *self.extend_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = failure;
    }

    /// Milliseconds until the hold is due to expire, as far as this handle knows; 0
    /// once it is past due (or, for a store that knows exactly, no longer held).
    fn time_left(&self, hold: &Hold, owner: OwnerToken) -> u64 {
        match self.sync_store() {
            Some(store) if store.is_held_by_now(&self.key, owner.as_str()) => {
                store.remaining_time_now(&self.key).unwrap_or(0)
            }
            Some(_) => 0,
            None => hold.expires_by_ms.saturating_sub(self.timer.now_ms()),
        }
    }

    /// The one question a due check asks: how long this owner's own hold has left.
    pub(crate) async fn check_hold(&self, owner: OwnerToken) -> Result<HoldCheck, LockError> {
        if !self.keys.is_empty() {
            return crate::all::check(&*self.store, &self.keys, owner.as_str()).await;
        }
        match self.kind {
            HoldKind::Exclusive => self.store.owner_remaining_time(&self.key, owner.as_str()).await,
            kind => Ok(match self.store.permit_remaining_time(&self.key, owner.as_str(), kind).await? {
                Some(remaining_ms) if remaining_ms > 0 => HoldCheck::Held { remaining_ms },
                _ => HoldCheck::NotHeld,
            }),
        }
    }

    /// Whether the hold this handle has now is certainly live by its own reckoning:
    /// held, not lost, and before its local deadline (for a store that knows exactly,
    /// held there). Past its deadline with no extend on its way, the hold is recorded as
    /// lost here and then. Bindings ask this when `lock.signal` is read, so a signal read
    /// after the deadline is already aborted.
    pub fn live_generation(&self) -> Option<u64> {
        let hold = *self.hold();
        let owner = hold.owner?;
        if self.ending_of(hold.generation).is_some() {
            return None;
        }
        if self.time_left(&hold, owner) > 0 {
            return Some(hold.generation);
        }
        self.end_past_deadline(hold.generation);
        None
    }

    /// Completes when the hold this handle has now ends, and says how: released by
    /// this handle, or lost (TTL passed, an extend failed, the store was out of reach
    /// until the hold expired). With nothing held, completes at once as lost.
    ///
    /// It sleeps until the hold is due to expire and wakes early on any change to the
    /// hold, so it costs one timer, never a poll of the store before the hold is due.
    pub async fn hold_ended(&self) -> HoldEnd {
        let generation = self.hold().generation;
        self.hold_ended_of(generation).await
    }

    /// [`hold_ended`](Self::hold_ended) for hold `generation` (from
    /// [`held_generation`](Self::held_generation), read when the caller asked): a
    /// binding that runs this later must not watch a hold taken meanwhile.
    pub async fn hold_ended_of(&self, generation: u64) -> HoldEnd {
        let hold = *self.hold();
        let owner = match hold.owner {
            Some(owner) if hold.generation == generation => owner,
            _ => {
                return self
                    .ending_of(generation)
                    .unwrap_or_else(|| HoldEnd::Lost(self.not_held("nothing is held")));
            }
        };
        // The deadline a due check was made for (one check per deadline), and the
        // error of a check that failed (what the hold is lost to, if nothing else is).
        let mut checked: Option<u64> = None;
        let mut check_failed: Option<LockError> = None;
        let asynchronous = self.sync_store().is_none();
        let margin = (self.ttl_ms / 4).clamp(1, DUE_CHECK_MS);
        loop {
            let changed = self.changes.listen();
            if let Some(end) = self.ending_of(generation) {
                return end;
            }
            let hold = *self.hold();
            if hold.generation != generation || hold.owner != Some(owner) {
                return self.ending_of(generation).unwrap_or(HoldEnd::Released);
            }
            let left = self.time_left(&hold, owner);
            let now = self.timer.now_ms();
            let due_check = asynchronous && checked != Some(hold.expires_by_ms);
            let wait =
                if left == 0 {
                    // Out of time: only a request that succeeded moves the deadline (an
                    // extend still unanswered proves nothing, and lost is final). Lost to
                    // whatever kept auto-extend from extending, if anything did, else to the
                    // failed due check, else to the TTL.
                    let reason = self
                        .failure_of(generation)
                        .or_else(|| check_failed.take())
                        .unwrap_or_else(|| self.not_held("its TTL passed without an extend"));
                    self.end_hold(generation, HoldEnd::Lost(reason));
                    continue;
                } else if due_check && left > margin {
                    left - margin
                } else if due_check {
                    // Shortly before the deadline, one question to the store: was the hold
                    // extended elsewhere (a restored copy)? The answer counts from the
                    // question's send time, never from the reply's arrival.
                    checked = Some(hold.expires_by_ms);
                    // The extends of this hold sent so far, and the shortest TTL of those
                    // that may still land: one sent while the question is on its way may
                    // land after the store answered it.
                    let (extends_before, cap_before) = (hold.extends_sent, hold.ttl_cap());
                    let answer =
                        match select(Box::pin(self.check_hold(owner)), self.timer.sleep_in_background(left))
                            .await
                        {
                            Either::Left((answer, _)) => answer,
                            Either::Right(_) => Err(LockError::StoreUnavailable(
                                "the store did not confirm the hold before its deadline".into(),
                            )),
                        };
                    match answer {
                        Ok(HoldCheck::Held { remaining_ms }) => {
                            // The drift allowance covers the time trusted: the TTL, or what
                            // the store says is left when that is more (after a long extend).
                            let drift = self.drift_ms(remaining_ms.max(self.ttl_ms));
                            let mut hold = self.hold();
                            // A shorter extend unanswered or failed may land after this look,
                            // and one sent meanwhile may have landed after it: its own answer
                            // sets the deadline then, not this look.
                            let remaining_ms = if hold.extends_sent == extends_before {
                                remaining_ms.min(cap_before).min(hold.ttl_cap())
                            } else {
                                // Asked again, if the deadline leaves time: an extend that
                                // then fails must not end a hold the store still keeps.
                                checked = None;
                                0
                            };
                            let later = now.saturating_add(remaining_ms.saturating_sub(drift));
                            if hold.generation == generation && later > hold.expires_by_ms {
                                hold.expires_by_ms = later;
                                // Moved by no more than the request's own transit (the store set
                                // the expiry a little after we sent it): this deadline has been
                                // checked. Only one far off, extended elsewhere, gets its own.
                                if later.saturating_sub(self.timer.now_ms()) <= margin {
                                    checked = Some(later);
                                }
                            }
                        }
                        Ok(HoldCheck::NotHeld) => {
                            let reason = self
                                .failure_of(generation)
                                .unwrap_or_else(|| self.not_held("the store no longer has it"));
                            if !self.found_gone(generation, owner, reason.clone()) {
                                // A release is on its way: it ends the hold (lost then, if
                                // it fails). Kept for the deadline should it never finish.
                                check_failed = Some(reason);
                            }
                        }
                        Ok(_) => {}
                        Err(err) => check_failed = Some(err),
                    }
                    continue;
                } else {
                    left
                };
            drop(select(changed, self.timer.sleep_in_background(wait)).await);
        }
    }

    /// Extends the hold this handle has now every `plan.interval_ms` by the lock's TTL,
    /// until it is released or lost, or `plan.max_hold_ms` have passed since the call
    /// (then the hold expires at its TTL). A failed extend that is not a loss (the store
    /// is unreachable, say) is retried until the hold would expire; then the hold is
    /// lost with that error.
    pub async fn keep_extending(&self, plan: AutoExtend) {
        if let Some(generation) = self.held_generation() {
            self.keep_extending_of(generation, plan).await;
        }
    }

    /// Ends auto-extend of the current hold now (`run()` does when its function
    /// settles, whether or not the release that follows succeeds). The hold then runs
    /// out at its TTL unless released.
    pub fn stop_extending(&self) {
        let generation = self.hold().generation;
        self.extend_stopped.store(generation, std::sync::atomic::Ordering::SeqCst);
        self.changes.notify(usize::MAX);
    }

    /// [`keep_extending`](Self::keep_extending) for hold `generation` (read when the
    /// caller asked): it never adopts a hold taken after that.
    pub async fn keep_extending_of(&self, generation: u64, plan: AutoExtend) {
        let interval = plan.interval_ms.max(1);
        let retry_every = (interval / 4).clamp(10, 1_000);
        let stop_at = plan.max_hold_ms.map(|ms| self.timer.now_ms().saturating_add(ms));
        let current = |lock: &Self| {
            lock.held_generation() == Some(generation)
                && lock.ending_of(generation).is_none()
                && lock.extend_stopped.load(std::sync::atomic::Ordering::SeqCst) != generation
        };
        loop {
            let changed = self.changes.listen();
            if !current(self) {
                return;
            }
            let now = self.timer.now_ms();
            let wait = match stop_at {
                Some(stop) if now >= stop => return,
                Some(stop) => interval.min(stop - now),
                None => interval,
            };
            if let Either::Left(_) = select(changed, self.timer.sleep_in_background(wait)).await {
                continue; // the hold changed: look again
            }
            if stop_at.is_some_and(|stop| self.timer.now_ms() >= stop) {
                return;
            }
            loop {
                if !current(self) {
                    return;
                }
                match self.extend(None).await {
                    Ok(()) => {
                        self.set_failure(None);
                        break;
                    }
                    // `extend` recorded the loss, or the hold was released meanwhile.
                    Err(LockError::NotHeld { .. }) => return,
                    Err(err) => {
                        self.set_failure(Some((generation, err.clone())));
                        let hold = *self.hold();
                        let Some(owner) = hold.owner.filter(|_| hold.generation == generation) else {
                            return;
                        };
                        let left = self.time_left(&hold, owner);
                        if left == 0 {
                            self.end_hold(generation, HoldEnd::Lost(err));
                            return;
                        }
                        let changed = self.changes.listen();
                        drop(select(changed, self.timer.sleep_in_background(retry_every.min(left))).await);
                    }
                }
            }
        }
    }
}
