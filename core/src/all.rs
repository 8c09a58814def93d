//! A lock on several keys ([`Lock::all`](crate::Lock::all)) over any store: each
//! operation on all the keys, once, over `&dyn LockStore` (one copy of each, whatever
//! the store). Only the acquire can be the store's own ([`LockStore::acquire_all`]).

use std::task::Poll;

use crate::error::Result;
use crate::store::{AllGrant, BoxFuture, HoldCheck, LockStore};

/// Takes every one of `keys` (distinct, in canonical order: see
/// [`validate::keys`](crate::validate::keys)) for `owner`, or none: in one step where
/// the store can ([`LockStore::acquire_all`]), else one at a time in
/// order, giving back what the attempt took at the first key that is held
/// or fails — the failed one too, as it may have been taken before the answer was lost.
pub(crate) fn acquire<'a>(
    store: &'a dyn LockStore,
    keys: &'a [String],
    owner: &'a str,
    ttl_ms: u64,
) -> BoxFuture<'a, Result<AllGrant>> {
    store.acquire_all(keys, owner, ttl_ms).unwrap_or_else(|| in_order(store, keys, owner, ttl_ms))
}

/// Takes the keys one at a time in their order; at the first that is held or fails,
/// gives back what the attempt took (the failed one too: it may have been taken before
/// its answer was lost).
pub(crate) fn in_order<'a>(
    store: &'a dyn LockStore,
    keys: &'a [String],
    owner: &'a str,
    ttl_ms: u64,
) -> BoxFuture<'a, Result<AllGrant>> {
    Box::pin(async move {
        let mut grants = Vec::with_capacity(keys.len());
        for (at, key) in keys.iter().enumerate() {
            let answer = store.acquire_with_grant(key, owner, ttl_ms).await;
            if let Ok(Some(grant)) = answer {
                grants.push(grant);
                continue;
            }
            let taken = if answer.is_err() { at + 1 } else { at };
            let given_back = release(store, &keys[..taken], owner).await;
            answer?;
            given_back?;
            return Ok(AllGrant::Busy(Some(at)));
        }
        Ok(AllGrant::Granted(grants))
    })
}

/// Frees each key `owner` holds, all at once (a networked store sends them together).
/// `true` if it held every one; an error (the first) only after trying them all.
pub(crate) fn release<'a>(
    store: &'a dyn LockStore,
    keys: &'a [String],
    owner: &'a str,
) -> BoxFuture<'a, Result<bool>> {
    Box::pin(every(keys.iter().map(|key| Some(store.release(key, owner))).collect()))
}

/// Extends every key, all at once; `false` if `owner` does not hold one of them (the
/// hold is lost).
pub(crate) fn extend<'a>(
    store: &'a dyn LockStore,
    keys: &'a [String],
    owner: &'a str,
    ttl_ms: u64,
) -> BoxFuture<'a, Result<bool>> {
    Box::pin(every(keys.iter().map(|key| Some(store.extend(key, owner, ttl_ms))).collect()))
}

/// Runs `calls` side by side: whether every one answered `true`, or the first error
/// once all are done. (A join of its own: far less code in the WebAssembly build than
/// `futures_util`'s.)
async fn every(mut calls: Vec<Option<BoxFuture<'_, Result<bool>>>>) -> Result<bool> {
    let mut outcome = Ok(true);
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for slot in &mut calls {
            let Some(call) = slot else { continue };
            match call.as_mut().poll(cx) {
                Poll::Ready(answer) => {
                    *slot = None;
                    match (answer, &mut outcome) {
                        (Ok(answer), Ok(all)) => *all &= answer,
                        (Err(err), Ok(_)) => outcome = Err(err),
                        _ => {}
                    }
                }
                Poll::Pending => pending = true,
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outcome
}

/// The due check of a hold of several keys: held while `owner` holds every one, for
/// the least time any has left; not held as soon as one is not.
pub(crate) fn check<'a>(
    store: &'a dyn LockStore,
    keys: &'a [String],
    owner: &'a str,
) -> BoxFuture<'a, Result<HoldCheck>> {
    Box::pin(async move {
        let mut least = u64::MAX;
        let mut unknown = false;
        for key in keys {
            match store.owner_remaining_time(key, owner).await? {
                HoldCheck::Held { remaining_ms } => least = least.min(remaining_ms),
                HoldCheck::NotHeld => return Ok(HoldCheck::NotHeld),
                HoldCheck::CannotTell => unknown = true,
            }
        }
        Ok(if unknown { HoldCheck::CannotTell } else { HoldCheck::Held { remaining_ms: least } })
    })
}

/// Whether `owner` holds every key: `None` when the store cannot tell of one.
pub(crate) fn held_by<'a>(
    store: &'a dyn LockStore,
    keys: &'a [String],
    owner: &'a str,
) -> BoxFuture<'a, Result<Option<bool>>> {
    Box::pin(async move {
        let mut answer = Some(true);
        for key in keys {
            match store.is_held_by(key, owner).await? {
                Some(true) => {}
                Some(false) => return Ok(Some(false)),
                None => answer = None,
            }
        }
        Ok(answer)
    })
}

/// How many of the keys anyone holds.
pub(crate) fn held_count<'a>(store: &'a dyn LockStore, keys: &'a [String]) -> BoxFuture<'a, Result<u64>> {
    Box::pin(async move {
        let mut held = 0;
        for key in keys {
            held += u64::from(store.is_locked(key).await?);
        }
        Ok(held)
    })
}

/// The soonest expiry among the keys that are held; `None` when none is.
pub(crate) fn soonest<'a>(
    store: &'a dyn LockStore,
    keys: &'a [String],
) -> BoxFuture<'a, Result<Option<u64>>> {
    Box::pin(async move {
        let mut soonest: Option<u64> = None;
        for key in keys {
            if let Some(left) = store.remaining_time(key).await? {
                soonest = Some(soonest.map_or(left, |s| s.min(left)));
            }
        }
        Ok(soonest)
    })
}
