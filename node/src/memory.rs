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
}
