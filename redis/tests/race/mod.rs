//! A store wrapper for the wake-up race: right after a failed acquire attempt, and before
//! answering it, the holder releases — the release lands between the waiter's attempt and
//! its wait.

use std::sync::{Arc, Mutex};

use locksmith_core::{BoxFuture, Grant, Lock, LockStore, Result};

pub struct ReleasesAfterAFailedAttempt<S> {
    pub inner: Arc<S>,
    pub holder: Mutex<Option<Arc<Lock>>>,
}

impl<S> ReleasesAfterAFailedAttempt<S> {
    pub fn new(inner: Arc<S>) -> Self {
        Self { inner, holder: Mutex::new(None) }
    }
}

#[async_trait::async_trait]
impl<S: LockStore> LockStore for ReleasesAfterAFailedAttempt<S> {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.acquire_with_grant(key, owner, ttl_ms).await?.is_some())
    }
    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        let grant = self.inner.acquire_with_grant(key, owner, ttl_ms).await?;
        if grant.is_none() {
            let holder = self.holder.lock().unwrap().take();
            if let Some(holder) = holder {
                assert!(holder.release().await.unwrap());
            }
        }
        Ok(grant)
    }
    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        self.inner.release(key, owner).await
    }
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        self.inner.extend(key, owner, ttl_ms).await
    }
    async fn is_locked(&self, key: &str) -> Result<bool> {
        self.inner.is_locked(key).await
    }
    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        self.inner.remaining_time(key).await
    }
    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        self.inner.is_held_by(key, owner).await
    }
    fn release_signal(&self, key: &str) -> Option<BoxFuture<'static, ()>> {
        self.inner.release_signal(key)
    }
}
