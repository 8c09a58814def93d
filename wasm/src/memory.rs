//! `WasmMemoryStore`: `locksmith_core::MemoryStore` for this isolate.

use std::sync::Arc;

use locksmith_core::{validate, LockStore, MemoryStore, SyncLockStore};
use wasm_bindgen::prelude::*;

use crate::lock::{new_handle, new_lock, or_null, restore_lock, WasmLock};
use crate::timer::timer;
use crate::IntoJs;

#[wasm_bindgen]
pub struct WasmMemoryStore {
    inner: Arc<MemoryStore>,
}

#[wasm_bindgen]
impl WasmMemoryStore {
    #[wasm_bindgen(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        let clock = timer();
        // Waiters poll: a wake-up from a releasing request must not run another request's work.
        Self { inner: Arc::new(MemoryStore::new(clock).without_release_signals()) }
    }

    pub fn lock(&self, key: &str, ttl_ms: f64) -> Result<WasmLock, JsValue> {
        new_lock(self.inner.clone() as Arc<dyn LockStore>, timer(), key, ttl_ms)
    }

    pub fn handle(
        &self,
        key: &str,
        ttl_ms: f64,
        kind: &str,
        limit: Option<f64>,
    ) -> Result<WasmLock, JsValue> {
        new_handle(self.inner.clone() as Arc<dyn LockStore>, timer(), key, ttl_ms, kind, limit)
    }

    pub fn restore(&self, fields: &JsValue) -> Result<WasmLock, JsValue> {
        restore_lock(self.inner.clone() as Arc<dyn LockStore>, timer(), fields)
    }

    // The plain `LockStore` interface, synchronous here; the JS class wraps each in a promise.

    pub fn acquire(&self, key: &str, owner: &str, ttl_ms: f64) -> Result<bool, JsValue> {
        Ok(self.inner.acquire_now(key, owner, validate::js::ttl_ms(ttl_ms).js()?).is_some())
    }

    pub fn release(&self, key: &str, owner: &str) -> bool {
        self.inner.release_now(key, owner)
    }

    pub fn extend(&self, key: &str, owner: &str, ttl_ms: f64) -> Result<bool, JsValue> {
        Ok(self.inner.extend_now(key, owner, validate::js::ttl_ms(ttl_ms).js()?))
    }

    #[wasm_bindgen(js_name = isLocked)]
    pub fn is_locked(&self, key: &str) -> bool {
        self.inner.is_locked_now(key)
    }

    #[wasm_bindgen(js_name = remainingTime)]
    pub fn remaining_time(&self, key: &str) -> JsValue {
        or_null(self.inner.remaining_time_now(key).map(|ms| ms as f64))
    }

    /// The live holder of the plain lock `key` as `[owner, fencingToken, remainingMs,
    /// value]` (`value` `null` when it proclaimed none), or an empty array.
    pub fn holder(&self, key: &str) -> Vec<JsValue> {
        self.inner.holder(key).map_or_else(Vec::new, |h| {
            vec![
                h.owner.into(),
                (h.fencing_token as f64).into(),
                (h.remaining_ms as f64).into(),
                or_null(h.value),
            ]
        })
    }

    /// Keeps `value` with `owner`'s live hold of `key` unless it keeps one with a `seq`
    /// at least this one (a positive safe integer, checked by the JS class).
    pub fn proclaim(&self, key: &str, owner: &str, value: &str, seq: f64) -> bool {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // checked by the caller
        self.inner.proclaim(key, owner, value, seq as u64)
    }

    #[wasm_bindgen(js_name = entryCount)]
    pub fn entry_count(&self) -> u32 {
        u32::try_from(self.inner.entry_count()).unwrap_or(u32::MAX)
    }

    pub fn sweep(&self) {
        self.inner.sweep();
    }

    pub fn clear(&self) {
        self.inner.clear();
    }
}
