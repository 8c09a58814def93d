//! `WasmJsStoreBridge`: any JS object with the five async `LockStore` methods, awaited
//! from Rust through its promises. The JS side hands over one dispatch function that
//! always returns a promise; what it resolves to is checked against the store contract
//! in core. A call that throws, rejects, or does not settle within the operation
//! timeout becomes a typed error.

use std::sync::Arc;

use futures_util::future::{select, Either};
use js_sys::{Function, Object, Promise, Reflect};
use locksmith_core::contract::{self, Answer, Call, ForeignLockStore, ForeignStore};
use locksmith_core::{validate, BoxFuture, HoldKind, LockStore, Result, Timer};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::lock::{new_handle, new_lock, restore_lock, WasmLock};
use crate::timer::{timer, WasmVirtualClock};
use crate::IntoJs;

#[allow(clippy::struct_excessive_bools)] // which optional methods the store has: independent flags
struct JsStore {
    dispatch: Function,
    timeout_ms: u64,
    has_is_held_by: bool,
    has_permits: bool,
    /// The store has the optional `onRelease(key, listener, kind)`.
    has_on_release: bool,
    /// The id of the next `onRelease` subscription.
    next_subscription: std::cell::Cell<f64>,
    /// The store answers `hasWaiters` at once (an internal method of the WebAssembly
    /// build's Redis store, not part of the JS store contract).
    has_waiters: bool,
    /// The store has the optional `ownerRemainingTime(key, owner)`.
    has_owner_remaining_time: bool,
    /// The store carries weighted permits (`permitWeights: true`).
    has_permit_weights: bool,
    has_acquire_all: bool,
    /// The store has the optional `acquireFair(...)`.
    has_fair: bool,
    timer: Arc<dyn Timer>,
}

#[wasm_bindgen]
pub struct WasmJsStoreBridge {
    inner: Arc<ForeignLockStore<JsStore>>,
}

#[wasm_bindgen]
impl WasmJsStoreBridge {
    #[wasm_bindgen(constructor)]
    #[allow(clippy::too_many_arguments)] // one flag per optional store method, as the JS side passes them
    pub fn new(
        dispatch: Function,
        operation_timeout_ms: f64,
        has_is_held_by: bool,
        has_permits: bool,
        has_on_release: bool,
        has_waiters: Option<bool>,
        has_owner_remaining_time: Option<bool>,
        has_permit_weights: Option<bool>,
        has_acquire_all: Option<bool>,
        has_fair: Option<bool>,
    ) -> Result<Self, JsValue> {
        let timeout_ms = validate::js::positive_ms("operationTimeoutMs", operation_timeout_ms).js()?;
        Ok(Self {
            inner: Arc::new(ForeignLockStore(JsStore {
                dispatch,
                timeout_ms,
                has_is_held_by,
                has_permits,
                has_on_release,
                next_subscription: std::cell::Cell::new(0.0),
                has_waiters: has_waiters.unwrap_or(false),
                has_owner_remaining_time: has_owner_remaining_time.unwrap_or(false),
                has_permit_weights: has_permit_weights.unwrap_or(false),
                has_acquire_all: has_acquire_all.unwrap_or(false),
                has_fair: has_fair.unwrap_or(false),
                timer: timer(),
            })),
        })
    }

    /// Puts the store's locks (made from now on) and its call timeout on a test kit clock.
    #[wasm_bindgen(js_name = useClock)]
    pub fn use_clock(&mut self, clock: &WasmVirtualClock) {
        if let Some(store) = Arc::get_mut(&mut self.inner) {
            store.0.timer = clock.timer();
        }
    }

    pub fn lock(&self, key: &str, ttl_ms: f64) -> Result<WasmLock, JsValue> {
        new_lock(self.inner.clone() as Arc<dyn LockStore>, self.inner.0.timer.clone(), key, ttl_ms)
    }

    pub fn handle(
        &self,
        key: &str,
        ttl_ms: f64,
        kind: &str,
        limit: Option<f64>,
    ) -> Result<WasmLock, JsValue> {
        new_handle(
            self.inner.clone() as Arc<dyn LockStore>,
            self.inner.0.timer.clone(),
            key,
            ttl_ms,
            kind,
            limit,
        )
    }

    pub fn restore(&self, fields: &JsValue) -> Result<WasmLock, JsValue> {
        restore_lock(self.inner.clone() as Arc<dyn LockStore>, self.inner.0.timer.clone(), fields)
    }
}

fn describe(value: &JsValue) -> Answer {
    if let Some(b) = value.as_bool() {
        Answer::Bool(b)
    } else if let Some(n) = value.as_f64() {
        Answer::Number(n)
    } else if value.is_null() || value.is_undefined() {
        Answer::Nothing
    } else if let Some(s) = value.as_string() {
        Answer::Text(s)
    } else if js_sys::Array::is_array(value) {
        Answer::Other("an array".into())
    } else if let Some(number) =
        Reflect::get(value, &JsValue::from_str("nonFinite")).ok().and_then(|n| n.as_string())
    {
        Answer::Number(contract::non_finite(&number))
    } else if let Some(code) =
        Reflect::get(value, &JsValue::from_str("refused")).ok().and_then(|c| c.as_string())
    {
        let message = Reflect::get(value, &JsValue::from_str("message")).ok().and_then(|m| m.as_string());
        Answer::refusal(&code, message.unwrap_or_default())
    } else {
        Answer::Other("an object".into())
    }
}

fn reason(err: &JsValue) -> String {
    err.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| err.as_string())
        .unwrap_or_else(|| format!("{err:?}"))
}

impl JsStore {
    async fn invoke(
        &self,
        Call { op, key, owner, ttl_ms, kind, permits, waits }: Call<'_>,
    ) -> Result<Answer> {
        let call = Object::new();
        let set = |name: &str, value: &JsValue| {
            let _ = Reflect::set(&call, &JsValue::from_str(name), value);
        };
        set("op", &JsValue::from_str(op));
        set("key", &JsValue::from_str(key));
        if let Some(owner) = owner {
            set("owner", &JsValue::from_str(owner));
        }
        if let Some(ttl) = ttl_ms {
            set("ttlMs", &JsValue::from_f64(ttl as f64));
        }
        if let Some(kind) = kind {
            set("kind", &JsValue::from_str(kind.name()));
            if let Some(limit) = kind.limit() {
                set("limit", &JsValue::from_f64(f64::from(limit)));
            }
        }
        if let Some(permits) = permits {
            set("permits", &JsValue::from_f64(f64::from(permits)));
        }
        if let Some(waits) = waits {
            set("waits", &JsValue::from_bool(waits));
        }
        let returned =
            self.dispatch.call1(&JsValue::NULL, &call).map_err(|e| contract::failed(op, &reason(&e)))?;
        let settled = JsFuture::from(Promise::resolve(&returned));
        match select(settled, self.timer.sleep(self.timeout_ms)).await {
            Either::Left((Ok(value), _)) => Ok(describe(&value)),
            Either::Left((Err(err), _)) => Err(contract::failed(op, &reason(&err))),
            Either::Right(((), _)) => Err(contract::timed_out(op, self.timeout_ms)),
        }
    }
}

#[async_trait::async_trait(?Send)]
impl ForeignStore for JsStore {
    async fn call(&self, call: Call<'_>) -> Result<Answer> {
        self.invoke(call).await
    }

    fn has_is_held_by(&self) -> bool {
        self.has_is_held_by
    }

    fn has_owner_remaining_time(&self) -> bool {
        self.has_owner_remaining_time
    }

    fn has_permits(&self) -> bool {
        self.has_permits
    }

    fn has_permit_weights(&self) -> bool {
        self.has_permit_weights
    }

    fn has_acquire_all(&self) -> bool {
        self.has_acquire_all
    }

    fn has_fair(&self) -> bool {
        self.has_fair
    }

    fn has_local_waiters(&self, key: &str) -> bool {
        if !self.has_waiters {
            return false;
        }
        let call = Object::new();
        let _ = Reflect::set(&call, &JsValue::from_str("op"), &JsValue::from_str("hasWaiters"));
        let _ = Reflect::set(&call, &JsValue::from_str("key"), &JsValue::from_str(key));
        // Answered synchronously: `true` or anything else.
        self.dispatch.call1(&JsValue::NULL, &call).is_ok_and(|answer| answer.as_bool() == Some(true))
    }

    fn release_signal(&self, key: &str, kind: Option<HoldKind>) -> Option<BoxFuture<'static, ()>> {
        if !self.has_on_release {
            return None;
        }
        let id = self.next_subscription.get();
        self.next_subscription.set(id + 1.0);
        let call = subscription_call("onRelease", id);
        let _ = Reflect::set(&call, &JsValue::from_str("key"), &JsValue::from_str(key));
        if let Some(kind) = kind {
            let _ = Reflect::set(&call, &JsValue::from_str("kind"), &JsValue::from_str(kind.name()));
        }
        // The dispatcher answers a promise that resolves when the listener is called.
        let fired = self.dispatch.call1(&JsValue::NULL, &call).ok()?;
        let unsubscribe = Unsubscribe { dispatch: self.dispatch.clone(), id };
        Some(Box::pin(async move {
            let _unsubscribe = unsubscribe;
            let _ = JsFuture::from(Promise::resolve(&fired)).await;
        }))
    }
}

fn subscription_call(op: &str, id: f64) -> Object {
    let call = Object::new();
    let _ = Reflect::set(&call, &JsValue::from_str("op"), &JsValue::from_str(op));
    let _ = Reflect::set(&call, &JsValue::from_str("id"), &JsValue::from_f64(id));
    call
}

/// Ends one `onRelease` subscription when the wait it served is over.
struct Unsubscribe {
    dispatch: Function,
    id: f64,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        let _ = self.dispatch.call1(&JsValue::NULL, &subscription_call("offRelease", self.id));
    }
}
