//! `NativeRedisStore`: `locksmith_redis::RedisStore` for JS.

use std::sync::Arc;
use std::time::Duration;

use locksmith_core::{validate, LockError, LockStore};
use locksmith_redis::{RedisOptions, RedisStore};
use napi_derive::napi;

use crate::error::IntoNapi;
use crate::lock::{new_lock, restore_lock, NativeLock};

/// What `RedisLockStore.connect()` takes.
#[napi(object)]
pub struct RedisConnectOptions {
    pub url: String,
    pub key_prefix: Option<String>,
    pub connect_timeout_ms: Option<f64>,
    pub command_timeout_ms: Option<f64>,
    pub reconnect_retries: Option<u32>,
    pub reconnect_max_delay_ms: Option<f64>,
    pub notify_releases: Option<bool>,
    pub tls_ca_cert: Option<String>,
    pub tls_insecure: Option<bool>,
}

/// A duration option in milliseconds: a whole number from 1 to 2^31 - 1, named in the
/// message by its JS name.
fn millis(name: &str, value: Option<f64>, default: Duration) -> napi::Result<Duration> {
    let Some(ms) = value else {
        return Ok(default);
    };
    if !ms.is_finite() || ms < 1.0 || ms.fract() != 0.0 || ms > validate::MAX_TTL_MS as f64 {
        return Err::<Duration, _>(LockError::InvalidArgument(format!(
            "{name} must be a whole number of milliseconds from 1 to {}; got {}",
            validate::MAX_TTL_MS,
            validate::show(ms)
        )))
        .napi();
    }
    Ok(Duration::from_millis(ms as u64))
}

impl RedisConnectOptions {
    fn into_options(self) -> napi::Result<RedisOptions> {
        let mut options = RedisOptions::new(self.url);
        if let Some(prefix) = self.key_prefix {
            options.key_prefix = prefix;
        }
        options.connect_timeout =
            millis("connectTimeoutMs", self.connect_timeout_ms, options.connect_timeout)?;
        options.command_timeout =
            millis("commandTimeoutMs", self.command_timeout_ms, options.command_timeout)?;
        options.reconnect_max_delay =
            millis("reconnectMaxDelayMs", self.reconnect_max_delay_ms, options.reconnect_max_delay)?;
        if let Some(retries) = self.reconnect_retries {
            options.reconnect_retries = retries as usize;
        }
        if let Some(notify) = self.notify_releases {
            options.notify_releases = notify;
        }
        options.tls_ca_cert_pem = self.tls_ca_cert;
        options.tls_insecure = self.tls_insecure.unwrap_or(false);
        Ok(options)
    }
}

/// `RedisConnectOptions` checked, with defaults filled in, for the engine's driver.
#[napi(object)]
pub struct CheckedRedisOptions {
    pub url: String,
    pub key_prefix: String,
    pub connect_timeout_ms: f64,
    pub command_timeout_ms: f64,
    pub reconnect_retries: u32,
    pub reconnect_max_delay_ms: f64,
    pub notify_releases: bool,
    pub tls_ca_cert: Option<String>,
    pub tls_insecure: bool,
}

/// Checks `RedisLockStore.connect()`'s options as the redis-rs store does, and fills in
/// the defaults.
#[napi]
pub fn check_redis_options(options: RedisConnectOptions) -> napi::Result<CheckedRedisOptions> {
    let options = options.into_options()?;
    locksmith_redis::check_url_settings(&options).napi()?;
    Ok(CheckedRedisOptions {
        key_prefix: options.key_prefix.clone(),
        connect_timeout_ms: options.connect_timeout.as_millis() as f64,
        command_timeout_ms: options.command_timeout.as_millis() as f64,
        reconnect_retries: u32::try_from(options.reconnect_retries).unwrap_or(u32::MAX),
        reconnect_max_delay_ms: options.reconnect_max_delay.as_millis() as f64,
        notify_releases: options.notify_releases,
        tls_insecure: options.tls_insecure,
        tls_ca_cert: options.tls_ca_cert_pem,
        url: options.url,
    })
}

#[napi]
pub struct NativeRedisStore {
    inner: Arc<RedisStore>,
}

#[napi]
pub async fn connect_redis(options: RedisConnectOptions) -> napi::Result<NativeRedisStore> {
    let store = RedisStore::connect(options.into_options()?).await.napi()?;
    Ok(NativeRedisStore { inner: Arc::new(store) })
}

#[napi]
impl NativeRedisStore {
    #[napi]
    pub fn lock(&self, key: String, ttl_ms: f64) -> napi::Result<NativeLock> {
        new_lock(self.inner.clone() as Arc<dyn LockStore>, &key, ttl_ms)
    }

    #[napi]
    pub fn restore(&self, serialized: String) -> napi::Result<NativeLock> {
        restore_lock(self.inner.clone() as Arc<dyn LockStore>, &serialized)
    }

    #[napi(getter)]
    pub fn key_prefix(&self) -> String {
        self.inner.options().key_prefix.clone()
    }

    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }

    // The plain `LockStore` interface.

    #[napi]
    pub async fn acquire(&self, key: String, owner: String, ttl_ms: f64) -> napi::Result<bool> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).napi()?;
        self.inner.clone().acquire(&key, &owner, ttl_ms).await.napi()
    }

    #[napi]
    pub async fn release(&self, key: String, owner: String) -> napi::Result<bool> {
        self.inner.clone().release(&key, &owner).await.napi()
    }

    #[napi]
    pub async fn extend(&self, key: String, owner: String, ttl_ms: f64) -> napi::Result<bool> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).napi()?;
        self.inner.clone().extend(&key, &owner, ttl_ms).await.napi()
    }

    #[napi]
    pub async fn is_locked(&self, key: String) -> napi::Result<bool> {
        self.inner.clone().is_locked(&key).await.napi()
    }

    #[napi]
    pub async fn remaining_time(&self, key: String) -> napi::Result<Option<f64>> {
        Ok(self.inner.clone().remaining_time(&key).await.napi()?.map(|ms| ms as f64))
    }
}
