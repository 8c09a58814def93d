//! `NativeFileStore`: `locksmith_core::FileStore` for JS, a lock file every process of
//! the host opens. The JS class (js/api/api.mjs `FileLockStore`) watches the file and
//! calls `changed()` when another process writes it, so waiters wake without polling.

use std::sync::Arc;

use locksmith_core::{FileStore, LockStore};
use napi_derive::napi;

use crate::error::IntoNapi;
use crate::lock::{new_handle_on, new_lock_on, restore_lock_on, NativeLock, Runner, SerializedArgs};
use crate::memory::{check_seq, StoreHolder};
use crate::timer::timer;

fn check_ttl(ttl_ms: f64) -> napi::Result<u64> {
    locksmith_core::validate::js::ttl_ms(ttl_ms).napi()
}

/// A hold in the file, for `locksmith list|inspect|watch|release` (the owner token in full:
/// the command shows a fingerprint of it).
#[napi(object)]
pub struct FileHold {
    pub key: String,
    pub kind: String,
    pub owner: String,
    pub remaining_ms: f64,
    pub fencing_token: f64,
    pub permits: u32,
    pub limit: Option<u32>,
    /// For a waiting writer or reader (not a hold): `true`.
    pub waiting: bool,
    /// What a plain lock's holder proclaimed (an election's leader), if anything.
    pub value: Option<String>,
}

fn hold_of(h: locksmith_core::HoldView) -> FileHold {
    FileHold {
        key: h.key,
        kind: h.kind.to_owned(),
        owner: h.owner,
        remaining_ms: h.remaining_ms as f64,
        fencing_token: h.fencing_token as f64,
        permits: h.permits,
        limit: h.limit,
        waiting: false,
        value: h.value,
    }
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

    /// `open` of a file that exists: a reader (the CLI) must not make one.
    #[napi(factory)]
    pub fn open_existing(path: String) -> napi::Result<Self> {
        Ok(Self { inner: Arc::new(FileStore::open_existing(&path, timer()).napi()?) })
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
    pub fn restore(&self, fields: SerializedArgs) -> napi::Result<NativeLock> {
        restore_lock_on(self.inner.clone() as Arc<dyn LockStore>, Runner::inline(), fields)
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

    /// The live holder of the plain lock `key` (an election's leader), or `null`.
    #[napi]
    pub async fn holder(&self, key: String) -> napi::Result<Option<StoreHolder>> {
        Ok(self.inner.holder(&key).await.napi()?.map(StoreHolder::from))
    }

    /// Keeps `value` with `owner`'s live hold of `key` unless it keeps a newer one.
    #[napi]
    pub async fn proclaim(&self, key: String, owner: String, value: String, seq: f64) -> napi::Result<bool> {
        let seq = check_seq(seq)?;
        self.inner.proclaim(&key, &owner, &value, seq).await.napi()
    }

    /// The holds in the file, then the read-write locks' waiting writers and readers
    /// (`waiting: true`).
    #[napi]
    pub async fn holds(&self) -> napi::Result<Vec<FileHold>> {
        let (holds, waiting) = self.inner.holds().await.napi()?;
        Ok(holds
            .into_iter()
            .map(hold_of)
            .chain(waiting.into_iter().map(|w| FileHold {
                key: w.key,
                kind: w.kind.to_owned(),
                owner: w.owner,
                remaining_ms: w.remaining_ms as f64,
                fencing_token: 0.0,
                permits: 1,
                limit: None,
                waiting: true,
                value: None,
            }))
            .collect())
    }

    /// Frees every hold of `key`, whoever holds it; what it freed.
    #[napi]
    pub async fn force_release(&self, key: String) -> napi::Result<Vec<FileHold>> {
        Ok(self.inner.force_release(&key).await.napi()?.into_iter().map(hold_of).collect())
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
