//! Checks on what a store written in another language answered. Bindings turn the
//! foreign value into an [`Answer`]; the rules of what is acceptable live here.

use crate::error::{LockError, Result};
use crate::store::{BoxFuture, Grant, HoldCheck, HoldKind, LockStore, MaybeSendSync};

/// A value a foreign store resolved to, as far as the contract cares.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// `true` / `false`.
    Bool(bool),
    /// A number.
    Number(f64),
    /// `null` or `undefined`.
    Nothing,
    /// A string (what the bridge makes of `acquireAll`'s tokens).
    Text(String),
    /// Anything else, described for the error message (`object`, ...).
    Other(String),
    /// The store refused the request itself with an `INVALID_ARGUMENT` error (a
    /// semaphore's limit that differs from its holders', say): its message.
    Refused(String),
    /// The store rejected the call because it was closed (`STORE_CLOSED`): final, so a
    /// waiting acquire stops at once rather than riding it out as an outage.
    Closed,
    /// The store was reached and refused the operation (`STORE_ERROR`: a missing
    /// privilege, a key of the wrong type): its message. Not an outage, so a waiting
    /// acquire does not retry it.
    Failed(String),
    /// The store does not do what was asked (`UNSUPPORTED`: a fair handle on a store
    /// without fair queues): its message. Final, as a refusal is.
    Unsupported(String),
}

impl Answer {
    /// A store's refusal by its error code, as the bridge sends it (`{ refused: code,
    /// message }`): `INVALID_ARGUMENT`, `STORE_CLOSED`, `STORE_ERROR` or `UNSUPPORTED`;
    /// another code is no refusal the contract knows.
    #[must_use]
    pub fn refusal(code: &str, message: String) -> Self {
        match code {
            "INVALID_ARGUMENT" => Self::Refused(message),
            "STORE_CLOSED" => Self::Closed,
            "STORE_ERROR" => Self::Failed(message),
            "UNSUPPORTED" => Self::Unsupported(message),
            _ => Self::Other("an object".into()),
        }
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bool(b) => write!(f, "{b}"),
            Self::Number(n) => f.write_str(&crate::validate::show(*n)),
            Self::Text(text) => write!(f, "string {}", crate::validate::quote(text)),
            Self::Nothing => f.write_str("null/undefined"),
            Self::Other(what) | Self::Refused(what) | Self::Failed(what) | Self::Unsupported(what) => {
                f.write_str(what)
            }
            Self::Closed => f.write_str("a closed store's refusal"),
        }
    }
}

/// `acquire`, `release`, `extend` and `isLocked` must resolve to a boolean.
pub fn expect_bool(op: &str, answer: &Answer) -> Result<bool> {
    match answer {
        Answer::Bool(b) => Ok(*b),
        other => Err(LockError::StoreContractViolation(format!(
            "store.{op}() resolved to {other}; it must resolve to a boolean"
        ))),
    }
}

/// A number without a JSON form, as bindings carry it: `"Infinity"`, `"-Infinity"`, or
/// `NaN` for anything else.
#[must_use]
pub fn non_finite(name: &str) -> f64 {
    match name {
        "Infinity" => f64::INFINITY,
        "-Infinity" => f64::NEG_INFINITY,
        _ => f64::NAN,
    }
}

/// The largest fencing token a JS number carries exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `acquire` and `acquirePermit` resolve to `false` (not taken), `true` (taken) or a
/// positive safe integer: taken, with that fencing token.
pub fn expect_grant(op: &str, answer: &Answer) -> Result<Option<Grant>> {
    match answer {
        Answer::Bool(taken) => Ok(taken.then(Grant::default)),
        Answer::Number(n) if *n >= 1.0 && *n <= MAX_SAFE_INTEGER && n.fract() == 0.0 => {
            Ok(Some(Grant::with_fencing_token(*n as u64)))
        }
        other => Err(LockError::StoreContractViolation(format!(
            "store.{op}() resolved to {other}; it must resolve to a boolean, or a fencing token (a positive safe integer) when it took the key"
        ))),
    }
}

/// `remainingTime` must resolve to `null` (nobody holds the key) or milliseconds >= 0.
pub fn expect_remaining_time(answer: &Answer) -> Result<Option<u64>> {
    expect_millis("remainingTime", answer)
}

/// `op` (`remainingTime`, `permitRemainingTime`, `ownerRemainingTime`) must resolve to
/// `null` or milliseconds >= 0.
fn expect_millis(op: &str, answer: &Answer) -> Result<Option<u64>> {
    match answer {
        Answer::Nothing => Ok(None),
        Answer::Number(ms) if ms.is_finite() && *ms >= 0.0 => Ok(Some(ms.ceil() as u64)),
        other => Err(LockError::StoreContractViolation(format!(
            "store.{op}() resolved to {other}; it must resolve to null or a number of milliseconds >= 0"
        ))),
    }
}

/// A store call that threw or rejected.
#[must_use]
pub fn failed(op: &str, reason: &str) -> LockError {
    LockError::StoreUnavailable(format!("store.{op}() failed: {reason}"))
}

/// A store call that did not settle in time.
#[must_use]
pub fn timed_out(op: &str, timeout_ms: u64) -> LockError {
    LockError::StoreUnavailable(format!("store.{op}() did not settle within {timeout_ms} ms"))
}

/// One call of a store's method, as [`ForeignStore::call`] makes it.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The method: `acquire`, `release`, `extend`, `isLocked`, `remainingTime`,
    /// `isHeldBy`, `ownerRemainingTime`, `acquireAll`, or one of the permit methods
    /// (`acquirePermit`, `releasePermit`, `extendPermit`, `countPermits`,
    /// `permitRemainingTime`).
    pub op: &'static str,
    /// The key; for `acquireAll`, the keys one per line.
    pub key: &'a str,
    /// The caller's owner token, for the methods that act on one hold.
    pub owner: Option<&'a str>,
    /// The hold's TTL, for the methods that grant or extend one.
    pub ttl_ms: Option<u64>,
    /// The permit methods' hold kind (`"semaphore"` with its `limit`, `"read"`, `"write"`).
    pub kind: Option<HoldKind>,
    /// How many permits `acquirePermit` takes, when more than one (only on a store with
    /// [`has_permit_weights`](ForeignStore::has_permit_weights)); `acquireFair`'s, always.
    pub permits: Option<u32>,
    /// `acquireFair`: whether the caller waits (then a refused attempt keeps its place).
    pub waits: Option<bool>,
}

impl<'a> Call<'a> {
    fn new(op: &'static str, key: &'a str, owner: Option<&'a str>, ttl_ms: Option<u64>) -> Self {
        Self { op, key, owner, ttl_ms, kind: None, permits: None, waits: None }
    }

    fn of_kind(self, kind: HoldKind) -> Self {
        Self { kind: Some(kind), ..self }
    }
}

/// A store written in another language, reached through one call per operation.
/// Bindings implement this; [`ForeignLockStore`] turns it into a [`LockStore`], checking
/// every answer against the contract.
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
pub trait ForeignStore: MaybeSendSync {
    /// Calls the store's method and describes what it answered. A call that throws,
    /// rejects or does not settle in time is an error (see [`failed`], [`timed_out`]).
    async fn call(&self, call: Call<'_>) -> Result<Answer>;

    /// Whether the store has the optional `isHeldBy(key, owner)`.
    fn has_is_held_by(&self) -> bool;

    /// Whether the store has the optional `ownerRemainingTime(key, owner)`: how long
    /// `owner`'s own hold has left (`null` when `owner` does not hold the key), in one
    /// question. `false` by default.
    fn has_owner_remaining_time(&self) -> bool {
        false
    }

    /// Whether the store has the optional permit methods.
    fn has_permits(&self) -> bool;

    /// Whether the store carries weighted permits (`permitWeights: true`): its
    /// `acquirePermit` takes a sixth argument, how many permits ([`Call::permits`]), and
    /// its `countPermits` sums them. `false` by default.
    fn has_permit_weights(&self) -> bool {
        false
    }

    /// The store's optional `onRelease(key, listener, kind)`, as a future that completes
    /// when the listener is called; dropping it unsubscribes. `kind` is `None` for a
    /// plain lock. `None` (the default) when the store has no `onRelease`.
    fn release_signal(&self, _key: &str, _kind: Option<HoldKind>) -> Option<BoxFuture<'static, ()>> {
        None
    }

    /// Whether the store has the optional `acquireAll(keys, owner, ttlMs)`: every key or
    /// none in one step. `false` by default. It is called as `acquireAll` through
    /// [`call`](Self::call), with the keys one per line as the key; the bridge answers an
    /// array as one string, `tokens ` and its entries space-separated (`-` for `null`,
    /// `?` for anything that is not a number), and a string as `text ` and the string.
    fn has_acquire_all(&self) -> bool {
        false
    }

    /// Whether the store has the optional `acquireFair(key, owner, ttlMs, kind, limit,
    /// permits, waits)`: fair locks and semaphores (see [`LockStore::acquire_fair`]; its
    /// `release`/`releasePermit` of an owner that holds nothing gives up its place, and
    /// it refuses a handle that is not fair on a fair key, and the other way round, with
    /// an `INVALID_ARGUMENT` error). `false` by default.
    fn has_fair(&self) -> bool {
        false
    }

    /// [`LockStore::has_local_waiters`], for a store that can tell at once (the
    /// WebAssembly build's own Redis store); `false` by default.
    fn has_local_waiters(&self, _key: &str) -> bool {
        false
    }
}

/// `acquireAll` resolves to `false` or the index of a key it found held (no key taken:
/// a wait listens on that key), or `true` or one fencing token (a positive safe integer,
/// or `null`) per key (every key taken). (`null`, for "not these keys in one step", is
/// the caller's to handle.)
pub fn expect_all(answer: &Answer, keys: usize) -> Result<crate::store::AllGrant> {
    // The bridge passes an array as `tokens ` and its entries, a string as `text ` and it.
    let array = match answer {
        Answer::Text(text) => text.strip_prefix("tokens "),
        _ => None,
    };
    let mut grants = Vec::with_capacity(keys);
    match (answer, array) {
        (Answer::Bool(false), _) => return Ok(crate::store::AllGrant::Busy(None)),
        (Answer::Number(at), _) if at.fract() == 0.0 && *at >= 0.0 && *at < keys as f64 => {
            return Ok(crate::store::AllGrant::Busy(Some(*at as usize)));
        }
        (Answer::Bool(true), _) => grants.resize(keys, Grant::default()),
        (_, Some(list)) => {
            for token in list.split_ascii_whitespace() {
                // Digits only, read by hand (`parse` takes a `+` too, and brings more code
                // to the WebAssembly module).
                let digits = token.bytes().try_fold(0u64, |n, b| {
                    b.is_ascii_digit().then_some(())?;
                    n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
                });
                grants.push(match digits {
                    _ if token == "-" => Grant::default(),
                    Some(t) if t >= 1 && t as f64 <= MAX_SAFE_INTEGER => Grant::with_fencing_token(t),
                    // Not a token: the count below no longer matches.
                    _ => break,
                });
            }
            if list.split_ascii_whitespace().count() != keys {
                grants.clear();
            }
        }
        _ => {}
    }
    if grants.len() == keys {
        return Ok(crate::store::AllGrant::Granted(grants));
    }
    let what = match (answer, array) {
        (_, Some(list)) => {
            let mut what = String::from("an array [");
            for (i, token) in list.split_ascii_whitespace().enumerate() {
                if i > 0 {
                    what.push_str(", ");
                }
                what.push_str(if token == "-" { "null" } else { token });
            }
            what.push(']');
            what
        }
        (Answer::Text(text), None) => {
            format!("string {}", crate::validate::quote(text.strip_prefix("text ").unwrap_or(text)))
        }
        _ => answer.to_string(),
    };
    Err(LockError::StoreContractViolation(format!(
        "store.acquireAll() resolved to {what}; it must resolve to false or the index of a key it found held (no key taken), or true or an array of {keys} fencing tokens (positive safe integers or null) when it took every key"
    )))
}

/// `countPermits` must resolve to a whole number >= 0.
pub fn expect_count(answer: &Answer) -> Result<u64> {
    match answer {
        Answer::Number(n) if n.is_finite() && *n >= 0.0 && n.fract() == 0.0 => Ok(*n as u64),
        other => Err(LockError::StoreContractViolation(format!(
            "store.countPermits() resolved to {other}; it must resolve to a whole number >= 0"
        ))),
    }
}

/// A store's refusal as the error it is; any other answer as it came.
fn refusal(answer: Answer) -> Result<Answer> {
    match answer {
        Answer::Refused(message) => {
            let message = message.strip_prefix("locksmith: ").unwrap_or(&message).to_owned();
            Err(LockError::InvalidArgument(message))
        }
        Answer::Closed => Err(LockError::StoreClosed),
        Answer::Unsupported(message) => {
            let message = message.strip_prefix("locksmith: ").unwrap_or(&message).to_owned();
            Err(LockError::Unsupported(message))
        }
        Answer::Failed(message) => {
            let message = message.strip_prefix("locksmith: ").unwrap_or(&message);
            let message = message.strip_prefix("store error: ").unwrap_or(message).to_owned();
            Err(LockError::StoreError(message))
        }
        other => Ok(other),
    }
}

/// A [`ForeignStore`] as a [`LockStore`].
pub struct ForeignLockStore<F>(pub F);

#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
impl<F: ForeignStore> LockStore for ForeignLockStore<F> {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.acquire_with_grant(key, owner, ttl_ms).await?.is_some())
    }

    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        expect_grant("acquire", &self.ask(Call::new("acquire", key, Some(owner), Some(ttl_ms))).await?)
    }

    fn release_signal(&self, key: &str) -> Option<BoxFuture<'static, ()>> {
        self.0.release_signal(key, None)
    }

    fn acquire_all<'a>(
        &'a self,
        keys: &'a [String],
        owner: &'a str,
        ttl_ms: u64,
    ) -> Option<BoxFuture<'a, Result<crate::store::AllGrant>>> {
        if !self.0.has_acquire_all() {
            return None;
        }
        Some(Box::pin(async move {
            let answer =
                self.ask(Call::new("acquireAll", &keys.join("\n"), Some(owner), Some(ttl_ms))).await?;
            if answer == Answer::Nothing {
                // Not these keys in one step (a Redis Cluster across slots): one at a time.
                return crate::all::in_order(self, keys, owner, ttl_ms).await;
            }
            expect_all(&answer, keys.len())
        }))
    }

    fn has_local_waiters(&self, key: &str) -> bool {
        self.0.has_local_waiters(key)
    }

    fn permit_release_signal(&self, key: &str, kind: HoldKind) -> Option<BoxFuture<'static, ()>> {
        // A fair lock's waiters: the plain lock's releases.
        if kind == HoldKind::Exclusive {
            return self.0.release_signal(key, None);
        }
        if self.0.has_permits() {
            self.0.release_signal(key, Some(kind))
        } else {
            None
        }
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
        if !self.0.has_fair() {
            return Err(crate::store::no_fairness());
        }
        // A fair semaphore's hold is released, extended and counted by the permit methods.
        if kind != HoldKind::Exclusive {
            self.permits()?;
            if permits > 1 && !self.0.has_permit_weights() {
                return Err(crate::store::no_permit_weights());
            }
        }
        let call = Call {
            permits: Some(permits),
            waits: Some(waits),
            ..Call::new("acquireFair", key, Some(owner), Some(ttl_ms)).of_kind(kind)
        };
        expect_grant("acquireFair", &self.ask(call).await?)
    }

    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        expect_bool("release", &self.ask(Call::new("release", key, Some(owner), None)).await?)
    }

    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        expect_bool("extend", &self.ask(Call::new("extend", key, Some(owner), Some(ttl_ms))).await?)
    }

    /// `release` with the kind `lock`: the bridge calls the store's optional
    /// `releaseFair(key, owner)` where it has one, else its `release`.
    fn release_fair<'a>(&'a self, key: &'a str, owner: &'a str) -> BoxFuture<'a, Result<bool>> {
        let call = Call::new("release", key, Some(owner), None).of_kind(HoldKind::Exclusive);
        Box::pin(async move { expect_bool("release", &self.ask(call).await?) })
    }

    /// `extend` with the kind `lock`: the store's optional `extendFair(key, owner, ttlMs)`, else `extend`.
    fn extend_fair<'a>(&'a self, key: &'a str, owner: &'a str, ttl_ms: u64) -> BoxFuture<'a, Result<bool>> {
        let call = Call::new("extend", key, Some(owner), Some(ttl_ms)).of_kind(HoldKind::Exclusive);
        Box::pin(async move { expect_bool("extend", &self.ask(call).await?) })
    }

    async fn is_locked(&self, key: &str) -> Result<bool> {
        expect_bool("isLocked", &self.ask(Call::new("isLocked", key, None, None)).await?)
    }

    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        expect_remaining_time(&self.ask(Call::new("remainingTime", key, None, None)).await?)
    }

    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        if !self.0.has_is_held_by() {
            return Ok(None);
        }
        expect_bool("isHeldBy", &self.ask(Call::new("isHeldBy", key, Some(owner), None)).await?).map(Some)
    }

    async fn owner_remaining_time(&self, key: &str, owner: &str) -> Result<HoldCheck> {
        if !self.0.has_owner_remaining_time() {
            return Ok(HoldCheck::CannotTell);
        }
        let answer = self.ask(Call::new("ownerRemainingTime", key, Some(owner), None)).await?;
        Ok(match expect_millis("ownerRemainingTime", &answer)? {
            Some(remaining_ms) if remaining_ms > 0 => HoldCheck::Held { remaining_ms },
            _ => HoldCheck::NotHeld,
        })
    }

    async fn acquire_permit(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
    ) -> Result<Option<Grant>> {
        self.permits()?;
        let answer =
            self.ask(Call::new("acquirePermit", key, Some(owner), Some(ttl_ms)).of_kind(kind)).await?;
        expect_grant("acquirePermit", &answer)
    }

    async fn acquire_permits(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
    ) -> Result<Option<Grant>> {
        if permits == 1 {
            return self.acquire_permit(key, owner, ttl_ms, kind).await;
        }
        self.permits()?;
        if !self.0.has_permit_weights() {
            return Err(crate::store::no_permit_weights());
        }
        let call = Call {
            permits: Some(permits),
            ..Call::new("acquirePermit", key, Some(owner), Some(ttl_ms)).of_kind(kind)
        };
        expect_grant("acquirePermit", &self.ask(call).await?)
    }

    async fn release_permit(&self, key: &str, owner: &str, kind: HoldKind) -> Result<bool> {
        self.permits()?;
        expect_bool(
            "releasePermit",
            &self.ask(Call::new("releasePermit", key, Some(owner), None).of_kind(kind)).await?,
        )
    }

    async fn extend_permit(&self, key: &str, owner: &str, ttl_ms: u64, kind: HoldKind) -> Result<bool> {
        self.permits()?;
        let answer =
            self.ask(Call::new("extendPermit", key, Some(owner), Some(ttl_ms)).of_kind(kind)).await?;
        expect_bool("extendPermit", &answer)
    }

    async fn permit_count(&self, key: &str, kind: HoldKind) -> Result<u64> {
        self.permits()?;
        expect_count(&self.ask(Call::new("countPermits", key, None, None).of_kind(kind)).await?)
    }

    async fn permit_remaining_time(&self, key: &str, owner: &str, kind: HoldKind) -> Result<Option<u64>> {
        self.permits()?;
        let answer = self.ask(Call::new("permitRemainingTime", key, Some(owner), None).of_kind(kind)).await?;
        expect_millis("permitRemainingTime", &answer)
    }
}

impl<F: ForeignStore> ForeignLockStore<F> {
    async fn ask(&self, call: Call<'_>) -> Result<Answer> {
        refusal(self.0.call(call).await?)
    }

    fn permits(&self) -> Result<()> {
        if self.0.has_permits() {
            Ok(())
        } else {
            Err(LockError::Unsupported(
                "this store has no semaphores or read-write locks: it lacks acquirePermit, releasePermit, extendPermit, countPermits and permitRemainingTime".into(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        assert!(expect_bool("acquire", &Answer::Bool(true)).unwrap());
        let err = expect_bool("acquire", &Answer::Other("string \"yes\"".into())).unwrap_err();
        assert_eq!(err.code(), "STORE_CONTRACT_VIOLATION");
        assert!(err.to_string().contains("store.acquire() resolved to string \"yes\""), "{err}");
        assert_eq!(expect_remaining_time(&Answer::Nothing).unwrap(), None);
        assert_eq!(expect_remaining_time(&Answer::Number(10.2)).unwrap(), Some(11));
        for bad in [Answer::Number(-1.0), Answer::Number(f64::NAN), Answer::Bool(true)] {
            assert_eq!(expect_remaining_time(&bad).unwrap_err().code(), "STORE_CONTRACT_VIOLATION");
        }
        assert_eq!(timed_out("release", 5).code(), "STORE_UNAVAILABLE");
    }

    #[test]
    fn grants() {
        assert_eq!(expect_grant("acquire", &Answer::Bool(false)).unwrap(), None);
        assert_eq!(expect_grant("acquire", &Answer::Bool(true)).unwrap(), Some(Grant::default()));
        assert_eq!(
            expect_grant("acquire", &Answer::Number(7.0)).unwrap(),
            Some(Grant::with_fencing_token(7))
        );
        assert_eq!(
            expect_grant("acquire", &Answer::Number(MAX_SAFE_INTEGER)).unwrap(),
            Some(Grant::with_fencing_token(9_007_199_254_740_991))
        );
        for bad in [
            Answer::Number(0.0),
            Answer::Number(-3.0),
            Answer::Number(1.5),
            Answer::Number(f64::NAN),
            Answer::Number(MAX_SAFE_INTEGER + 2.0),
            Answer::Nothing,
        ] {
            let err = expect_grant("acquirePermit", &bad).unwrap_err();
            assert_eq!(err.code(), "STORE_CONTRACT_VIOLATION", "{bad}");
            assert!(err.to_string().contains("store.acquirePermit() resolved to"), "{err}");
        }
    }
}
