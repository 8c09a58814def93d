//! `NativeFileStore`: `locksmith_core::FileStore` for JS, a lock file every process of
//! the host opens. The JS class (js/api/api.mjs `FileLockStore`) watches the file and
//! calls `changed()` when another process writes it, so waiters wake without polling.

use std::sync::Arc;

use locksmith_core::{FileStore, LockStore};
use napi_derive::napi;

use crate::error::IntoNapi;
use crate::lock::{new_handle_on, new_lock_on, restore_lock_on, NativeLock, Runner};
use crate::timer::timer;

fn check_ttl(ttl_ms: f64) -> napi::Result<u64> {
    locksmith_core::validate::js::ttl_ms(ttl_ms).napi()
}

#[napi]
pub struct NativeFileStore {
    inner: Arc<FileStore>,
}

#[napi]
impl NativeFileStore {
    /// Opens (or makes) the lock file at `path`; `busy_timeout_ms`: how long an
    /// operation waits for another process to let go of the file.
    #[napi(factory)]
    pub fn open(path: String, busy_timeout_ms: Option<f64>) -> napi::Result<Self> {
        let mut store = FileStore::open(&path, timer()).napi()?;
        if let Some(ms) = busy_timeout_ms {
            store = store.with_busy_timeout_ms(locksmith_core::validate::js::ttl_ms(ms).napi()?);
        }
        Ok(Self { inner: Arc::new(store) })
    }

    #[napi]
    pub fn lock(&self, key: String, ttl_ms: f64) -> napi::Result<NativeLock> {
        new_lock_on(self.inner.clone() as Arc<dyn LockStore>, Runner::inline(), &key, ttl_ms)
    }

    #[napi]
    pub fn handle(
        &self,
        key: String,
        ttl_ms: f64,
        kind: String,
        limit: Option<f64>,
    ) -> napi::Result<NativeLock> {
        new_handle_on(self.inner.clone() as Arc<dyn LockStore>, Runner::inline(), &key, ttl_ms, &kind, limit)
    }

    #[napi]
    pub fn restore(&self, serialized: String) -> napi::Result<NativeLock> {
        restore_lock_on(self.inner.clone() as Arc<dyn LockStore>, Runner::inline(), &serialized)
    }

    // The plain `LockStore` interface: the JS class wraps each in its checks.

    #[napi]
    pub async fn acquire(&self, key: String, owner: String, ttl_ms: f64) -> napi::Result<bool> {
        let ttl = check_ttl(ttl_ms)?;
        self.inner.acquire(&key, &owner, ttl).await.napi()
    }

    #[napi]
    pub async fn release(&self, key: String, owner: String) -> napi::Result<bool> {
        self.inner.release(&key, &owner).await.napi()
    }

    #[napi]
    pub async fn extend(&self, key: String, owner: String, ttl_ms: f64) -> napi::Result<bool> {
        let ttl = check_ttl(ttl_ms)?;
        self.inner.extend(&key, &owner, ttl).await.napi()
    }

    #[napi]
    pub async fn is_locked(&self, key: String) -> napi::Result<bool> {
        self.inner.is_locked(&key).await.napi()
    }

    #[napi]
    pub async fn remaining_time(&self, key: String) -> napi::Result<Option<f64>> {
        Ok(self.inner.remaining_time(&key).await.napi()?.map(|ms| ms as f64))
    }

    /// Another process wrote the file: this process's waiters try again.
    #[napi]
    pub fn changed(&self) {
        self.inner.changed();
    }

    /// Later operations fail with `STORE_CLOSED`; waiters wake.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }
}
