//! `NativeMemoryStore`: `locksmith_core::MemoryStore` for JS, per instance or shared by
//! name across the worker threads of the process. A background thread sweeps expired
//! keys out of every live store once a second.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use locksmith_core::{LockStore, MemoryStore, SyncLockStore};
use napi_derive::napi;

use crate::error::IntoNapi;
use crate::lock::{new_handle, new_lock, restore_lock, NativeLock, SerializedArgs};
use crate::timer::timer;
use crate::virtual_clock::VirtualClock;
use locksmith_core::contract::Answer;

#[napi]
pub struct NativeMemoryStore {
    inner: Arc<MemoryStore>,
}

fn registry() -> &'static Mutex<Vec<Weak<MemoryStore>>> {
    static LIVE: OnceLock<Mutex<Vec<Weak<MemoryStore>>>> = OnceLock::new();
    LIVE.get_or_init(|| {
        std::thread::Builder::new()
            .name("locksmith-sweep".into())
            .spawn(|| loop {
                std::thread::sleep(Duration::from_secs(1));
                let live: Vec<Arc<MemoryStore>> = {
                    let mut stores = registry().lock().unwrap_or_else(PoisonError::into_inner);
                    stores.retain(|s| s.strong_count() > 0);
                    stores.iter().filter_map(Weak::upgrade).collect()
                };
                for store in live {
                    store.sweep();
                }
            })
            .ok();
        Mutex::new(Vec::new())
    })
}

fn new_store() -> Arc<MemoryStore> {
    let store = Arc::new(MemoryStore::new(timer()));
    registry().lock().unwrap_or_else(PoisonError::into_inner).push(Arc::downgrade(&store));
    store
}

fn check_ttl(ttl_ms: f64) -> napi::Result<u64> {
    locksmith_core::validate::js::ttl_ms(ttl_ms).napi()
}

/// A plain lock's live holder, as the store contract's `holder(key)` answers it.
#[napi(object)]
pub struct StoreHolder {
    pub owner: String,
    pub fencing_token: f64,
    pub remaining_ms: f64,
    pub value: Option<String>,
}

impl From<locksmith_core::KeyHolder> for StoreHolder {
    fn from(h: locksmith_core::KeyHolder) -> Self {
        Self {
            owner: h.owner,
            fencing_token: h.fencing_token as f64,
            remaining_ms: h.remaining_ms as f64,
            value: h.value,
        }
    }
}

/// A proclaim's sequence number: a positive safe integer (the JS side checks it first).
pub(crate) fn check_seq(seq: f64) -> napi::Result<u64> {
    if seq.fract() == 0.0 && (1.0..=9_007_199_254_740_991.0).contains(&seq) {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // checked just above
        Ok(seq as u64)
    } else {
        Err(crate::error::to_napi(&locksmith_core::LockError::InvalidArgument(format!(
            "seq must be a positive safe integer; got {seq}"
        ))))
    }
}

#[napi]
impl NativeMemoryStore {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self { inner: new_store() }
    }

    /// The process-wide store called `name`: every worker thread that asks for the
    /// same name gets the same locks.
    #[napi(factory)]
    pub fn shared(name: String) -> Self {
        static SHARED: OnceLock<Mutex<HashMap<String, Arc<MemoryStore>>>> = OnceLock::new();
        let mut named = SHARED.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
        Self { inner: named.entry(name).or_insert_with(new_store).clone() }
    }

    #[napi]
    pub fn lock(&self, key: String, ttl_ms: f64) -> napi::Result<NativeLock> {
        new_lock(self.inner.clone() as Arc<dyn LockStore>, &key, ttl_ms)
    }

    #[napi]
    pub fn handle(
        &self,
        key: String,
        ttl_ms: f64,
        kind: String,
        limit: Option<f64>,
    ) -> napi::Result<NativeLock> {
        new_handle(self.inner.clone() as Arc<dyn LockStore>, &key, ttl_ms, &kind, limit)
    }

    #[napi]
    pub fn restore(&self, fields: SerializedArgs) -> napi::Result<NativeLock> {
        restore_lock(self.inner.clone() as Arc<dyn LockStore>, fields)
    }

    // The plain `LockStore` interface, synchronous here; the JS class wraps each in a promise.

    #[napi]
    pub fn acquire(&self, key: String, owner: String, ttl_ms: f64) -> napi::Result<bool> {
        Ok(self.inner.acquire_now(&key, &owner, check_ttl(ttl_ms)?).is_some())
    }

    #[napi]
    pub fn release(&self, key: String, owner: String) -> bool {
        self.inner.release_now(&key, &owner)
    }

    #[napi]
    pub fn extend(&self, key: String, owner: String, ttl_ms: f64) -> napi::Result<bool> {
        Ok(self.inner.extend_now(&key, &owner, check_ttl(ttl_ms)?))
    }

    #[napi]
    pub fn is_locked(&self, key: String) -> bool {
        self.inner.is_locked_now(&key)
    }

    #[napi]
    pub fn remaining_time(&self, key: String) -> Option<f64> {
        self.inner.remaining_time_now(&key).map(|ms| ms as f64)
    }

    /// The live holder of the plain lock `key` (an election's leader), or `null`.
    #[napi]
    pub fn holder(&self, key: String) -> Option<StoreHolder> {
        self.inner.holder(&key).map(StoreHolder::from)
    }

    /// Keeps `value` with `owner`'s live hold of `key` unless it keeps a newer one.
    #[napi]
    pub fn proclaim(&self, key: String, owner: String, value: String, seq: f64) -> napi::Result<bool> {
        Ok(self.inner.proclaim(&key, &owner, &value, check_seq(seq)?))
    }

    /// Keys in the map, expired ones not yet swept included.
    #[napi]
    pub fn entry_count(&self) -> u32 {
        u32::try_from(self.inner.entry_count()).unwrap_or(u32::MAX)
    }

    #[napi]
    pub fn sweep(&self) {
        self.inner.sweep();
    }

    #[napi]
    pub fn clear(&self) {
        self.inner.clear();
    }

    /// A store on a test kit clock, answering calls one at a time (`answer`): the test
    /// kit's store is a JS store over it. Its waiters poll; expired holds go when their
    /// key is next touched.
    #[napi(factory)]
    pub fn on_clock(clock: &VirtualClock) -> Self {
        Self { inner: Arc::new(MemoryStore::new(clock.clock()).without_release_signals()) }
    }

    /// The JS store contract's call `op`, answered now (`MemoryStore::answer`); absent
    /// arguments are an empty owner or kind, a NaN TTL, 0 permits.
    #[napi]
    #[allow(clippy::too_many_arguments)] // the contract call's fields, as the JS side passes them
    pub fn answer(
        &self,
        op: String,
        key: String,
        owner: String,
        ttl_ms: f64,
        kind: String,
        limit: f64,
        permits: u32,
    ) -> napi::Result<serde_json::Value> {
        let ttl_ms = if ttl_ms.is_nan() { None } else { Some(check_ttl(ttl_ms)?) };
        let kind = if kind.is_empty() {
            None
        } else {
            Some(locksmith_core::validate::js::kind(&kind, Some(limit)).napi()?)
        };
        let owner = (!owner.is_empty()).then_some(owner.as_str());
        let answer =
            self.inner.answer(&op, &key, owner, ttl_ms, kind, (permits > 0).then_some(permits)).napi()?;
        Ok(match answer {
            Answer::Bool(b) => serde_json::Value::Bool(b),
            Answer::Number(n) => {
                serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
            }
            _ => serde_json::Value::Null,
        })
    }

    /// `acquireAll(keys, owner, ttlMs)`, answered now: each key's token, or `null` when one is held.
    #[napi]
    pub fn answer_all(
        &self,
        keys: Vec<String>,
        owner: String,
        ttl_ms: f64,
    ) -> napi::Result<Option<Vec<f64>>> {
        let grants = self.inner.answer_all(&keys, &owner, check_ttl(ttl_ms)?);
        Ok(grants.map(|tokens| tokens.into_iter().map(|t| t as f64).collect()))
    }

    /// Ends every hold of `key` now (a failover that lost them): `true` if there was one.
    #[napi]
    pub fn end_holds(&self, key: String) -> bool {
        self.inner.end_holds(&key)
    }
}
