//! locksmith-redis: a [`LockStore`] on Redis.
//!
//! * Acquire is `SET key owner PX ttl NX GET` inside a script that also mints the
//!   fencing token (Redis 7 or newer); release and extend are compare-and-act scripts. Scripts are called by SHA
//!   and reloaded transparently after `SCRIPT FLUSH` or a restart. Keys and values
//!   travel only in `KEYS`/`ARGV`.
//! * All operations of a store share one multiplexed connection, so concurrent
//!   commands pipeline. Release notifications use a second, subscriber connection.
//! * A server that is down gives `STORE_UNAVAILABLE` within the configured timeouts;
//!   the store reconnects by itself when the server is back.

mod notify;
mod timer;

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use locksmith_core::{BoxFuture, Grant, LockError, LockStore, Result};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};

pub use timer::TokioTimer;

/// How long a fencing counter lives after its creation; the next one starts from a
/// later clock reading, so tokens keep growing.
const FENCE_LIFETIME_MS: u64 = 24 * 60 * 60 * 1000;

/// How to reach Redis and how patient to be.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// `redis://[user:password@]host:port[/db]` or `rediss://` for TLS.
    pub url: String,
    /// Put before every key. Default `locksmith:`.
    pub key_prefix: String,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long one command may take before it fails with `STORE_UNAVAILABLE`.
    pub command_timeout: Duration,
    /// Connection attempts per reconnect, after a failure.
    pub reconnect_retries: usize,
    /// The longest pause between reconnect attempts.
    pub reconnect_max_delay: Duration,
    /// Subscribe to release notifications so waiters wake on release instead of polling.
    pub notify_releases: bool,
    /// For `rediss://`: the certificate authority to trust, in PEM, instead of the
    /// system's roots (a private CA, a self-signed server).
    pub tls_ca_cert_pem: Option<String>,
}

impl RedisOptions {
    /// Defaults for `url`: prefix `locksmith:`, 2 s to connect, 2 s per command, two
    /// reconnect attempts at most 1 s apart, release notifications on.
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            key_prefix: "locksmith:".into(),
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_secs(2),
            reconnect_retries: 2,
            reconnect_max_delay: Duration::from_secs(1),
            notify_releases: true,
            tls_ca_cert_pem: None,
        }
    }
}

/// Locks in Redis.
pub struct RedisStore {
    connection: Mutex<Option<ConnectionManager>>,
    options: RedisOptions,
    scripts: Scripts,
    notifier: Option<notify::ReleaseNotifier>,
}

struct Scripts {
    acquire: Script,
    release: Script,
    extend: Script,
}

impl Scripts {
    fn new() -> Self {
        Self {
            acquire: Script::new(include_str!("lua/acquire.lua")),
            release: Script::new(include_str!("lua/release.lua")),
            extend: Script::new(include_str!("lua/extend.lua")),
        }
    }
}

/// Maps a Redis failure to a locksmith error.
fn store_error(err: &RedisError) -> LockError {
    if err.kind() == redis::ErrorKind::AuthenticationFailed {
        LockError::StoreError(format!("redis refused the credentials: {err}"))
    } else if err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_unrecoverable_error()
    {
        LockError::StoreUnavailable(format!("redis: {err}"))
    } else {
        LockError::StoreError(format!("redis: {err}"))
    }
}

fn install_crypto_provider() {
    // Idempotent: an error only means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl RedisStore {
    /// Connects, failing with `STORE_UNAVAILABLE` within the connect timeout when the
    /// server cannot be reached.
    pub async fn connect(options: RedisOptions) -> Result<Self> {
        install_crypto_provider();
        let opened = match &options.tls_ca_cert_pem {
            None => redis::Client::open(options.url.as_str()),
            Some(pem) => redis::Client::build_with_tls(
                options.url.as_str(),
                redis::TlsCertificates { client_tls: None, root_cert: Some(pem.clone().into_bytes()) },
            ),
        };
        let client = opened.map_err(|e| {
            let why = e.to_string().replace(&options.url, "<url>");
            LockError::InvalidArgument(format!("invalid Redis URL or TLS settings: {why}"))
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.command_timeout))
            .set_number_of_retries(options.reconnect_retries)
            .set_max_delay(options.reconnect_max_delay);
        let connection = tokio::time::timeout(
            options
                .connect_timeout
                .saturating_mul(u32::try_from(options.reconnect_retries + 1).unwrap_or(u32::MAX)),
            ConnectionManager::new_with_config(client.clone(), config),
        )
        .await
        .map_err(|_| LockError::StoreUnavailable("redis: connecting timed out".into()))?
        .map_err(|e| store_error(&e))?;
        let scripts = Scripts::new();
        // Load the scripts now, so the first EVALSHA of each does not need a second
        // round trip — which a call that times out would never make.
        let mut preload = connection.clone();
        for script in [&scripts.acquire, &scripts.release, &scripts.extend] {
            script.prepare_invoke().load_async(&mut preload).await.map_err(|e| store_error(&e))?;
        }
        let notifier = options.notify_releases.then(|| {
            let timeouts = notify::NotifierTimeouts {
                connect: options.connect_timeout,
                command: options.command_timeout,
            };
            notify::ReleaseNotifier::start(client, timeouts)
        });
        Ok(Self { connection: Mutex::new(Some(connection)), options, scripts, notifier })
    }

    /// Closes the connections. Later operations fail with `STORE_CLOSED`.
    pub fn close(&self) {
        self.connection.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(notifier) = &self.notifier {
            notifier.stop();
        }
    }

    /// The options this store was made with.
    #[must_use]
    pub fn options(&self) -> &RedisOptions {
        &self.options
    }

    /// The Redis key of a lock: `<prefix>{<key>}`. The braces make it a hash tag, so the
    /// lock and its fencing counter share a cluster slot.
    #[must_use]
    pub fn lock_key(&self, key: &str) -> String {
        format!("{}{{{key}}}", self.options.key_prefix)
    }

    fn connection(&self) -> Result<ConnectionManager> {
        self.connection.lock().unwrap_or_else(PoisonError::into_inner).clone().ok_or(LockError::StoreClosed)
    }

    /// Runs one command (or script) with the command timeout as an upper bound.
    async fn run<T, F>(&self, op: impl FnOnce(ConnectionManager) -> F) -> Result<T>
    where
        F: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let connection = self.connection()?;
        let bound = self.options.command_timeout + Duration::from_millis(100);
        match tokio::time::timeout(bound, op(connection)).await {
            Ok(result) => result.map_err(|e| store_error(&e)),
            Err(_) => Err(LockError::StoreUnavailable(format!(
                "redis did not answer within {} ms",
                self.options.command_timeout.as_millis()
            ))),
        }
    }
}

#[async_trait::async_trait]
impl LockStore for RedisStore {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.acquire_with_grant(key, owner, ttl_ms).await?.is_some())
    }

    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        let lock_key = self.lock_key(key);
        let fence_key = format!("{lock_key}:fence");
        let token: i64 = self
            .run(|mut c| async move {
                self.scripts
                    .acquire
                    .key(&lock_key)
                    .key(&fence_key)
                    .arg(owner)
                    .arg(ttl_ms)
                    .arg(FENCE_LIFETIME_MS)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(u64::try_from(token).ok().filter(|t| *t > 0).map(|t| Grant { fencing_token: Some(t) }))
    }

    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        let lock_key = self.lock_key(key);
        let released: i64 =
            self.run(|mut c| async move {
                self.scripts.release.key(&lock_key).arg(owner).invoke_async(&mut c).await
            })
            .await?;
        Ok(released == 1)
    }

    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        let lock_key = self.lock_key(key);
        let extended: i64 = self
            .run(|mut c| async move {
                self.scripts.extend.key(&lock_key).arg(owner).arg(ttl_ms).invoke_async(&mut c).await
            })
            .await?;
        Ok(extended == 1)
    }

    async fn is_locked(&self, key: &str) -> Result<bool> {
        let lock_key = self.lock_key(key);
        let n: i64 = self
            .run(|mut c| async move { redis::cmd("EXISTS").arg(&lock_key).query_async(&mut c).await })
            .await?;
        Ok(n == 1)
    }

    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        let lock_key = self.lock_key(key);
        let ms: i64 = self
            .run(|mut c| async move { redis::cmd("PTTL").arg(&lock_key).query_async(&mut c).await })
            .await?;
        match ms {
            -2 => Ok(None),
            -1 => Err(LockError::StoreError(format!(
                "redis key {} exists without an expiry: something other than locksmith wrote it",
                self.lock_key(key)
            ))),
            ms => Ok(Some(u64::try_from(ms).unwrap_or(0))),
        }
    }

    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        let lock_key = self.lock_key(key);
        let holder: Option<String> = self
            .run(|mut c| async move { redis::cmd("GET").arg(&lock_key).query_async(&mut c).await })
            .await?;
        Ok(Some(holder.as_deref() == Some(owner)))
    }

    fn release_signal(&self, key: &str) -> Option<BoxFuture<'static, ()>> {
        let channel = format!("{}:released", self.lock_key(key));
        self.notifier.as_ref().map(|n| n.signal(channel))
    }
}

impl Drop for RedisStore {
    fn drop(&mut self) {
        self.close();
    }
}
