//! `WasmLock`: a `locksmith_core::Lock` for JS. Synchronous `*Now` methods serve the
//! memory store without a promise; they answer `null`/`false` for other stores, and
//! the JS surface takes the async method instead.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use js_sys::Promise;
use locksmith_core::validate::js;
use locksmith_core::{HoldEnd, Lock, LockStore, SerializedFields, SerializedLock, Timer};
use wasm_bindgen::prelude::*;

use crate::IntoJs;

#[wasm_bindgen]
pub struct WasmLock {
    inner: Rc<Lock>,
}

pub fn new_lock(
    store: Arc<dyn LockStore>,
    timer: Arc<dyn Timer>,
    key: &str,
    ttl_ms: f64,
) -> Result<WasmLock, JsValue> {
    Lock::new(key, js::ttl_ms(ttl_ms).js()?, store, timer).js().map(|l| WasmLock { inner: Rc::new(l) })
}

/// A handle of the kind the JS surface names (`"semaphore"` with `limit`, `"read"`, `"write"`).
pub fn new_handle(
    store: Arc<dyn LockStore>,
    timer: Arc<dyn Timer>,
    key: &str,
    ttl_ms: f64,
    kind: &str,
    limit: Option<f64>,
) -> Result<WasmLock, JsValue> {
    let ttl_ms = js::ttl_ms(ttl_ms).js()?;
    let lock = if kind == "multi" {
        // `lockAll()`: the keys, one per line (a key has no control characters).
        Lock::all(lines(key), ttl_ms, store, timer)
    } else {
        Lock::of_kind(key, ttl_ms, js::kind(kind, limit).js()?, store, timer)
    };
    let mut lock = lock.js()?;
    // `election(name)`: `key` was the election's name.
    if kind == "election" {
        lock.for_election().js()?;
    }
    // `{ fair: true }` on a lock or a semaphore.
    if kind.starts_with("fair ") {
        lock.set_fair().js()?;
    }
    Ok(WasmLock { inner: Rc::new(lock) })
}

/// The lines of `text`, split by hand: `str::split` brings a searcher of its own to the
/// module.
fn lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.bytes().position(|b| b == b'\n') {
        lines.push(rest[..at].to_owned());
        rest = &rest[at + 1..];
    }
    lines.push(rest.to_owned());
    lines
}

/// `fields`: a serialized lock's fields as js/api/serialized.mjs read them from the text
/// (strings, numbers, `undefined` when absent, a null entry of `fencingTokens` as NaN).
pub fn restore_lock(
    store: Arc<dyn LockStore>,
    timer: Arc<dyn Timer>,
    fields: &JsValue,
) -> Result<WasmLock, JsValue> {
    let get = |name: &str| {
        js_sys::Reflect::get(fields, &JsValue::from_str(name)).ok().filter(|v| !v.is_undefined())
    };
    let string = |name: &str| get(name).and_then(|v| v.as_string());
    let number = |name: &str| get(name).and_then(|v| v.as_f64());
    let list = |name: &str| get(name).map(|v| js_sys::Array::from(&v));
    let fields = SerializedFields {
        key: string("key"),
        keys: list("keys").map(|keys| keys.iter().map(|k| k.as_string().unwrap_or_default()).collect()),
        ttl_ms: number("ttlMs"),
        owner: string("owner"),
        fencing_token: number("fencingToken"),
        expires_at: number("expiresAt"),
        kind: string("kind"),
        limit: number("limit"),
        fencing_tokens: list("fencingTokens")
            .map(|tokens| tokens.iter().map(|t| t.as_f64().filter(|t| !t.is_nan())).collect()),
    };
    let serialized = SerializedLock::from_fields(fields).js()?;
    Ok(WasmLock { inner: Rc::new(Lock::restore(serialized, store, timer)) })
}

/// One instance of the promise glue for every async method: each future is boxed, so
/// wasm-bindgen's spawning code is not copied once per future type.
fn promise(work: Pin<Box<dyn Future<Output = Result<JsValue, JsValue>>>>) -> Promise {
    wasm_bindgen_futures::future_to_promise(work)
}

fn bool_value(b: bool) -> JsValue {
    JsValue::from_bool(b)
}

/// `null` for `None`, as the native build answers (wasm-bindgen would say `undefined`).
pub fn or_null<T: Into<JsValue>>(value: Option<T>) -> JsValue {
    value.map_or(JsValue::NULL, Into::into)
}

#[wasm_bindgen]
impl WasmLock {
    #[wasm_bindgen(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_owned()
    }

    #[wasm_bindgen(getter, js_name = ttlMs)]
    pub fn ttl_ms(&self) -> f64 {
        self.inner.ttl_ms() as f64
    }

    /// Makes this handle a fresh lock on `key` in the same store (reuse, not allocation).
    pub fn reset(&mut self, key: &str, ttl_ms: f64) -> Result<(), JsValue> {
        let ttl_ms = js::ttl_ms(ttl_ms).js()?;
        // In place when no task still holds the lock (the usual case): no allocation.
        if let Some(lock) = Rc::get_mut(&mut self.inner) {
            return lock.reset(key, ttl_ms).js();
        }
        let (store, timer) = (self.inner.store().clone(), self.inner.timer().clone());
        self.inner = Rc::new(Lock::new(key, ttl_ms, store, timer).js()?);
        Ok(())
    }

    /// Whether this handle has an acquisition it has not released.
    #[wasm_bindgen(getter, js_name = hasOwner)]
    pub fn has_owner(&self) -> bool {
        self.inner.has_owner()
    }

    #[wasm_bindgen(getter, js_name = fencingToken)]
    pub fn fencing_token(&self) -> JsValue {
        or_null(self.inner.fencing_token().map(|t| t as f64))
    }

    /// How many of a semaphore's permits this handle's acquires take (1 to its limit).
    #[wasm_bindgen(js_name = setPermits)]
    pub fn set_permits(&self, permits: f64) -> Result<(), JsValue> {
        // The JS side passes whole numbers of at least 1; anything else is refused as 0.
        let whole = permits.fract() == 0.0 && (1.0..=f64::from(u32::MAX)).contains(&permits);
        self.inner.set_permits(if whole { permits as u32 } else { 0 }).js()
    }

    /// Acquire attempts this handle has sent, in all (wrapping): for the diagnostics
    /// channels, which take the difference across one acquire.
    #[wasm_bindgen(getter)]
    pub fn attempts(&self) -> u32 {
        self.inner.attempts()
    }

    /// One attempt, synchronously: `true`/`false`, or `null` when the store is async.
    #[wasm_bindgen(js_name = tryAcquireNow)]
    pub fn try_acquire_now(
        &self,
        timeout: Option<f64>,
        retry_delay: Option<f64>,
    ) -> Result<JsValue, JsValue> {
        js::acquire_options(timeout, retry_delay, None).js()?;
        self.inner.try_acquire_now().transpose().js().map(or_null)
    }

    /// `tryAcquireNow` without options: the hot path. It returns its value directly (a
    /// `Result` would cost a second call and an allocation on the JS side per acquire):
    /// `true`/`false`, or `null` when the store is async or the attempt failed (no random
    /// source). On `null` the JS surface takes the full path, which reports the error.
    /// (Throwing from here instead would skip the release of wasm-bindgen's borrow of
    /// this handle, and the handle could never be reset again.)
    #[wasm_bindgen(js_name = tryAcquire)]
    pub fn try_acquire(&self) -> JsValue {
        match self.inner.try_acquire_now() {
            Some(Ok(taken)) => JsValue::from_bool(taken),
            None | Some(Err(_)) => JsValue::NULL,
        }
    }

    pub fn acquire(
        &self,
        timeout: Option<f64>,
        retry_delay: Option<f64>,
        after_refused_try: Option<bool>,
    ) -> Promise {
        let lock = self.inner.clone();
        promise(Box::pin(async move {
            let options = js::acquire_options(timeout, retry_delay, after_refused_try).js()?;
            lock.acquire(options).await.js().map(bool_value)
        }))
    }

    /// `acquire` that `abort` can end (an `AbortSignal` in the caller's options).
    #[wasm_bindgen(js_name = acquireAbortable)]
    pub fn acquire_abortable(
        &self,
        timeout: Option<f64>,
        retry_delay: Option<f64>,
        abort: &AbortToken,
        after_refused_try: Option<bool>,
    ) -> Promise {
        let lock = self.inner.clone();
        let abort = abort.inner.clone();
        promise(Box::pin(async move {
            let options = js::acquire_options(timeout, retry_delay, after_refused_try).js()?;
            lock.acquire_abortable(options, &abort).await.js().map(bool_value)
        }))
    }

    #[wasm_bindgen(js_name = releaseNow)]
    pub fn release_now(&self) -> JsValue {
        or_null(self.inner.release_now())
    }

    pub fn release(&self) -> Promise {
        let lock = self.inner.clone();
        promise(Box::pin(async move { lock.release().await.js().map(bool_value) }))
    }

    /// `true` when extended synchronously, `false` when the store is async.
    #[wasm_bindgen(js_name = extendNow)]
    pub fn extend_now(&self, ttl_ms: Option<f64>) -> Result<bool, JsValue> {
        let ttl_ms = ttl_ms.map(js::ttl_ms).transpose().js()?;
        self.inner.extend_now(ttl_ms).transpose().js().map(|done| done.is_some())
    }

    pub fn extend(&self, ttl_ms: Option<f64>) -> Promise {
        let lock = self.inner.clone();
        promise(Box::pin(async move {
            let ttl_ms = ttl_ms.map(js::ttl_ms).transpose().js()?;
            lock.extend(ttl_ms).await.js().map(|()| JsValue::UNDEFINED)
        }))
    }

    #[wasm_bindgen(js_name = isLocked)]
    pub fn is_locked(&self) -> Promise {
        let lock = self.inner.clone();
        promise(Box::pin(async move { lock.is_locked().await.js().map(bool_value) }))
    }

    #[wasm_bindgen(js_name = isExpired)]
    pub fn is_expired(&self) -> Promise {
        let lock = self.inner.clone();
        promise(Box::pin(async move { lock.is_expired().await.js().map(bool_value) }))
    }

    #[wasm_bindgen(js_name = remainingTime)]
    pub fn remaining_time(&self) -> Promise {
        let lock = self.inner.clone();
        promise(Box::pin(async move { Ok(or_null(lock.remaining_time().await.js()?.map(|ms| ms as f64))) }))
    }

    pub fn serialize(&self) -> Result<String, JsValue> {
        self.inner.serialize().js()
    }

    /// `lock`, `semaphore`, `read` or `write`.
    #[wasm_bindgen(getter)]
    pub fn kind(&self) -> String {
        self.inner.kind_name().to_owned()
    }

    /// A lock on several keys: its keys in canonical order, one per line.
    #[wasm_bindgen(getter)]
    pub fn keys(&self) -> String {
        self.inner.keys().join("\n")
    }

    /// A lock on several keys: each key's fencing token in the current hold (NaN where
    /// the store gives none); empty when nothing is held.
    #[wasm_bindgen(getter, js_name = fencingTokens)]
    pub fn fencing_tokens(&self) -> Vec<f64> {
        self.inner.fencing_tokens().into_iter().map(|t| t.map_or(f64::NAN, |t| t as f64)).collect()
    }

    /// A semaphore's limit, else `null`.
    #[wasm_bindgen(getter)]
    pub fn limit(&self) -> JsValue {
        or_null(self.inner.kind().limit().map(f64::from))
    }

    /// How many holds of the key are live now.
    pub fn count(&self) -> Promise {
        let lock = self.inner.clone();
        promise(Box::pin(async move { lock.count().await.js().map(|n| JsValue::from_f64(n as f64)) }))
    }

    /// The number of the current hold, or `null` when nothing is certainly held: none,
    /// or past its deadline (then it is recorded as lost here and then).
    #[wasm_bindgen(getter, js_name = holdGeneration)]
    pub fn hold_generation(&self) -> JsValue {
        or_null(self.inner.live_generation().map(|g| g as f64))
    }

    /// Settles when the current hold ends: `true` when released, rejected when lost.
    pub fn watch(&self) -> Promise {
        let lock = self.inner.clone();
        // The hold current now, not whichever is current when the task first runs.
        let generation = lock.hold_generation_now();
        promise(Box::pin(async move {
            match lock.hold_ended_of(generation).await {
                HoldEnd::Released => Ok(JsValue::TRUE),
                HoldEnd::Lost(err) => Err::<JsValue, _>(err).js(),
            }
        }))
    }

    /// Keeps the current hold extended in the background (the `autoExtend` option).
    #[wasm_bindgen(js_name = autoExtend)]
    pub fn auto_extend(&self, interval_ms: Option<f64>, max_hold_ms: Option<f64>) -> Result<(), JsValue> {
        let plan = js::auto_extend(self.inner.ttl_ms(), interval_ms, max_hold_ms).js()?;
        let lock = self.inner.clone();
        if let Some(generation) = lock.held_generation() {
            lock.timer()
                .clone()
                .spawn(Box::pin(async move { lock.keep_extending_of(generation, plan).await }));
        }
        Ok(())
    }

    /// Stops the current hold's auto-extend (`run()` does when its function settles).
    #[wasm_bindgen(js_name = stopAutoExtend)]
    pub fn stop_auto_extend(&self) {
        self.inner.stop_extending();
    }

    /// Checks an `autoExtend` option without starting anything.
    #[wasm_bindgen(js_name = checkAutoExtend)]
    pub fn check_auto_extend(
        &self,
        interval_ms: Option<f64>,
        max_hold_ms: Option<f64>,
    ) -> Result<(), JsValue> {
        js::auto_extend(self.inner.ttl_ms(), interval_ms, max_hold_ms).js().map(drop)
    }
}

/// The native half of an acquire's `AbortSignal`: the JS side fires it when the signal
/// aborts, and the acquire it was given to stops (see `Lock::acquire_abortable`).
#[wasm_bindgen]
#[derive(Default)]
pub struct AbortToken {
    inner: locksmith_core::Abort,
}

#[wasm_bindgen]
impl AbortToken {
    #[wasm_bindgen(constructor)]
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends the acquire this token was given to; again, nothing.
    pub fn abort(&self) {
        self.inner.abort();
    }
}
