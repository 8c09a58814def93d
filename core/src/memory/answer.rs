//! The memory store answering the JS store contract's calls one at a time. The test kit's
//! store (`locksmith-js/testing`) is a JS store over these answers, so that the faults it
//! injects sit where a real store's network would: between core and the store.

use super::MemoryStore;
use crate::contract::Answer;
use crate::error::{LockError, Result};
use crate::store::{AllGrant, BoxFuture, Grant, HoldKind, LockStore};

fn granted(grant: Option<Grant>) -> Answer {
    // The memory store gives every grant a token.
    grant.map_or(Answer::Bool(false), |g| Answer::Number(g.fencing_token.unwrap_or(0) as f64))
}

/// The output of one of the memory store's futures, which are ready at once.
fn ready<T>(mut future: BoxFuture<'_, Result<T>>) -> Result<T> {
    match future.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => {
            Err(LockError::StoreError("the memory store's call did not finish at once".into()))
        }
    }
}

fn millis(ms: Option<u64>) -> Answer {
    ms.map_or(Answer::Nothing, |ms| Answer::Number(ms as f64))
}

impl MemoryStore {
    /// Answers the JS store contract's call `op` (`acquire`, `acquirePermit`, …; but
    /// `acquireAll`, see [`answer_all`](Self::answer_all)) as a JS store would: a grant is
    /// its fencing token, or `false`.
    ///
    /// # Errors
    /// `InvalidArgument` for an operation the contract does not have, a permit call
    /// without its kind, or a semaphore limit that differs from the key's holders'.
    pub fn answer(
        &self,
        op: &str,
        key: &str,
        owner: Option<&str>,
        ttl_ms: Option<u64>,
        kind: Option<HoldKind>,
        permits: Option<u32>,
    ) -> Result<Answer> {
        // Through the store's own methods, called once each (the memory store's futures
        // are ready at once): no second copy of them in the WebAssembly module.
        let store: &dyn LockStore = self;
        let (owner, ttl) = (owner.unwrap_or(""), ttl_ms.unwrap_or(0));
        // A refused attempt of a handle that is not fair on a fair key: refused as such (a
        // JS store has no other way to say so).
        let unless_fair = |grant: Option<Grant>, kind: HoldKind| match grant {
            None if store.fair_key(key, kind) => Err(crate::store::not_fair_on_fair_key(key, kind)),
            grant => Ok(granted(grant)),
        };
        Ok(match (op, kind) {
            ("acquire", _) => {
                unless_fair(ready(store.acquire_with_grant(key, owner, ttl))?, HoldKind::Exclusive)?
            }
            // `acquireFair(…, waits)`: `acquireFairOnce` when it does not wait.
            ("acquireFair" | "acquireFairOnce", Some(kind)) => granted(ready(store.acquire_fair(
                key,
                owner,
                ttl,
                kind,
                permits.unwrap_or(1),
                op == "acquireFair",
            ))?),
            ("release", _) => Answer::Bool(ready(store.release(key, owner))?),
            ("extend", _) => Answer::Bool(ready(store.extend(key, owner, ttl))?),
            ("isLocked", _) => Answer::Bool(ready(store.is_locked(key))?),
            ("remainingTime", _) => millis(ready(store.remaining_time(key))?),
            ("isHeldBy", _) => Answer::Bool(ready(store.is_held_by(key, owner))? == Some(true)),
            ("ownerRemainingTime", _) => millis(if ready(store.is_held_by(key, owner))? == Some(true) {
                ready(store.remaining_time(key))?
            } else {
                None
            }),
            ("acquirePermit", Some(kind)) => {
                unless_fair(ready(store.acquire_permits(key, owner, ttl, kind, permits.unwrap_or(1)))?, kind)?
            }
            ("releasePermit", Some(kind)) => Answer::Bool(ready(store.release_permit(key, owner, kind))?),
            ("extendPermit", Some(kind)) => Answer::Bool(ready(store.extend_permit(key, owner, ttl, kind))?),
            ("countPermits", Some(kind)) => Answer::Number(ready(store.permit_count(key, kind))? as f64),
            ("permitRemainingTime", Some(kind)) => {
                millis(ready(store.permit_remaining_time(key, owner, kind))?)
            }
            _ => return Err(LockError::InvalidArgument("the memory store has no such call".into())),
        })
    }

    /// Answers the JS store contract's `acquireAll(keys, owner, ttlMs)`: each key's
    /// fencing token, or `None` when a key is held.
    pub fn answer_all(&self, keys: &[String], owner: &str, ttl_ms: u64) -> Option<Vec<u64>> {
        let now = self.clock.now_ms();
        match self.state().acquire_all(keys, owner, ttl_ms, now) {
            AllGrant::Granted(grants) => Some(grants.iter().map(|g| g.fencing_token.unwrap_or(0)).collect()),
            AllGrant::Busy(_) => None,
        }
    }

    /// Ends every hold of `key` now, of every kind, as a failover that lost them would:
    /// `true` if there was one.
    pub fn end_holds(&self, key: &str) -> bool {
        let mut state = self.state();
        let now = self.clock.now_ms();
        let held = state.is_locked(key, now);
        state.entries.remove(key);
        let live = |holds: Option<super::holds::Holds>| {
            holds.is_some_and(|mut h| {
                h.prune(now);
                h.permits_held() > 0
            })
        };
        let permits = live(state.semaphores.remove(key));
        let shared = live(state.rwlocks.remove(key));
        held || permits || shared
    }
}
