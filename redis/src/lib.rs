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
//! * Semaphores and read-write locks are the sans-I/O [`engine`]'s
//!   ([`EngineStore`](engine::EngineStore)); this redis-rs store does not implement the
//!   permit methods, so their handles on it fail with `UNSUPPORTED`.
//! * TLS (`rediss://`) needs a rustls crypto provider. The redis crate builds its rustls
//!   configuration with the process-wide default provider and offers no way to pass
//!   one, so when none is installed at the first TLS connect, this crate installs
//!   *ring* as the process default. An application that wants another provider
//!   installs it before connecting.

pub mod engine;
#[cfg(feature = "client")]
mod notify;
#[cfg(feature = "client")]
mod timer;

#[cfg(feature = "client")]
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

#[cfg(feature = "client")]
use locksmith_core::{BoxFuture, Grant, LockStore};
use locksmith_core::{LockError, Result};
#[cfg(feature = "client")]
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
#[cfg(feature = "client")]
use redis::{RedisError, Script};

#[cfg(feature = "client")]
pub use timer::TokioTimer;

/// How much longer than its lock a fencing counter lives: each acquire and extend sets
/// the counter's expiry to the lock's TTL plus this. Once it has gone, the next counter
/// starts from a later reading of the server's clock, so tokens keep growing.
pub const FENCE_GRACE_MS: u64 = 1_000;

/// The oldest Redis that locksmith works with: `SET … NX GET` came in 7.0.
pub const MIN_REDIS_VERSION: (u32, u32) = (7, 0);

/// How to reach Redis and how patient to be.
///
/// `Debug` prints the URL without its password.
#[derive(Clone)]
#[non_exhaustive]
pub struct RedisOptions {
    /// `redis://[user:password@]host:port[/db]` or `rediss://` for TLS. A URL fragment
    /// (such as redis-rs' `#insecure`) is refused: see [`tls_insecure`](Self::tls_insecure).
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
    /// For `rediss://`: skip certificate and host name checks. Anyone on the path can
    /// then read and change the traffic, owner tokens included: for development only.
    pub tls_insecure: bool,
}

impl std::fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisOptions")
            .field("url", &redact_url(&self.url))
            .field("key_prefix", &self.key_prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("reconnect_retries", &self.reconnect_retries)
            .field("reconnect_max_delay", &self.reconnect_max_delay)
            .field("notify_releases", &self.notify_releases)
            .field("tls_ca_cert_pem", &self.tls_ca_cert_pem.as_ref().map(|_| "<pem>"))
            .field("tls_insecure", &self.tls_insecure)
            .finish()
    }
}

/// `url` with the password of its user info replaced by `***`.
#[must_use]
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    // The last `@` ends the credentials, even when an unencoded password holds `/`,
    // `?` or `#` (generated passwords often do). A URL with an `@` only in its path or
    // query is redacted too much, never too little.
    let Some(at) = rest.rfind('@') else {
        return url.to_owned();
    };
    let user = rest[..at].split(':').next().unwrap_or("");
    format!("{}{user}:***{}", &url[..scheme_end], &rest[at..])
}

/// The Redis key of a lock: `<prefix>{<key>}`. The braces make it a hash tag, so the
/// lock and its companions (`…:fence`, `…:released`) share a cluster slot.
#[must_use]
pub fn lock_key(prefix: &str, key: &str) -> String {
    format!("{prefix}{{{key}}}")
}

/// The Redis key of a semaphore's holders (`<prefix>{<key>}:semaphore`) or a read-write
/// lock's (`<prefix>{<key>}:rw`): a sorted set of owner tokens scored by expiry. Its
/// companions (`…:limit`, `…:writer`, `…:claim`, `…:readers`, `…:turn`, `…:fence`, `…:released`) add a suffix;
/// all share the lock key's hash tag, and none is a lock key (those end in `}`).
#[must_use]
pub fn permit_key(prefix: &str, key: &str, kind: locksmith_core::HoldKind) -> String {
    let lock_key = lock_key(prefix, key);
    match kind {
        locksmith_core::HoldKind::Permit { .. } => format!("{lock_key}:semaphore"),
        _ => format!("{lock_key}:rw"),
    }
}

/// `(major, minor)` of `redis_version:` in the text of `INFO server`.
#[must_use]
pub fn parse_redis_version(info: &str) -> Option<(u32, u32)> {
    let version = info.lines().find_map(|line| line.trim().strip_prefix("redis_version:"))?;
    let mut parts = version.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |m| m.parse().ok())?;
    Some((major, minor))
}

/// Refuses a server older than [`MIN_REDIS_VERSION`], given its `INFO server` text.
/// A text without a version (a proxy that hides it) passes.
pub fn check_redis_version(info: &str) -> Result<()> {
    match parse_redis_version(info) {
        Some(version) if version < MIN_REDIS_VERSION => Err(LockError::StoreError(format!(
            "this server is Redis {}.{}; locksmith needs Redis {}.{} or newer (it uses SET … NX GET)",
            version.0, version.1, MIN_REDIS_VERSION.0, MIN_REDIS_VERSION.1
        ))),
        _ => Ok(()),
    }
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
            tls_insecure: false,
        }
    }
}

/// Locks in Redis.
#[cfg(feature = "client")]
pub struct RedisStore {
    connection: Mutex<Option<ConnectionManager>>,
    options: RedisOptions,
    scripts: Scripts,
    notifier: Option<notify::ReleaseNotifier>,
}

#[cfg(feature = "client")]
struct Scripts {
    acquire: Script,
    release: Script,
    extend: Script,
}

#[cfg(feature = "client")]
impl Scripts {
    fn new() -> Self {
        Self {
            acquire: Script::new(include_str!("lua/acquire.lua")),
            release: Script::new(include_str!("lua/release.lua")),
            extend: Script::new(include_str!("lua/extend.lua")),
        }
    }
}

/// Server error codes of states that pass: a replica not (yet) promoted, a server still
/// loading its data set, a primary that lost its own, a busy script, a cluster moving slots.
pub(crate) const TRANSIENT_CODES: [&str; 6] =
    ["READONLY", "LOADING", "MASTERDOWN", "BUSY", "TRYAGAIN", "CLUSTERDOWN"];

/// Maps a Redis failure to a locksmith error.
#[cfg(feature = "client")]
fn store_error(err: &RedisError) -> LockError {
    if err.code().is_some_and(|code| TRANSIENT_CODES.contains(&code)) {
        LockError::StoreUnavailable(format!("redis: {err}"))
    } else if err.kind() == redis::ErrorKind::AuthenticationFailed {
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

/// Makes sure rustls has a crypto provider before a TLS connection is made.
///
/// redis 1.8 builds its rustls `ClientConfig` itself, with `ClientConfig::builder()`,
/// which takes the process-wide default provider; it has no way to pass a config or a
/// provider (and `ConnectionManager` no way to supply our own TLS stream). So for TLS
/// only, and only when no provider is installed yet, install ring as the default: that
/// is what rustls itself does when ring is its only provider, and it keeps a build that
/// also enables aws-lc-rs from panicking. An application that wants its own provider
/// installs it before connecting, and it is used. In the Node addon the rustls copy is
/// private to the addon, so nothing outside locksmith sees it.
#[cfg(feature = "client")]
fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // An error only means another thread installed one first.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Checks the URL against the TLS settings (no fragment; `tls_insecure` only with
/// `rediss://` and without a CA), as [`RedisStore::connect`] does.
pub fn check_url_settings(options: &RedisOptions) -> Result<()> {
    client_url(options).map(drop)
}

/// The URL handed to redis-rs: the user's, checked, with `#insecure` added when
/// `tls_insecure` asks for it (the only way redis-rs takes that setting from a URL).
fn client_url(options: &RedisOptions) -> Result<String> {
    if options.url.contains('#') {
        return Err(LockError::InvalidArgument(format!(
            "the Redis URL {} has a fragment; locksmith takes no settings from it. To skip TLS certificate checks (development only), set tlsInsecure: true (tls_insecure in Rust)",
            redact_url(&options.url)
        )));
    }
    let tls = options.url.starts_with("rediss://");
    if !options.tls_insecure {
        return Ok(options.url.clone());
    }
    if !tls {
        return Err(LockError::InvalidArgument("tlsInsecure needs a rediss:// URL".into()));
    }
    if options.tls_ca_cert_pem.is_some() {
        return Err(LockError::InvalidArgument(
            "tlsInsecure skips certificate checks, so a tlsCaCert with it would not be used; pass one of them".into(),
        ));
    }
    Ok(format!("{}#insecure", options.url))
}

#[cfg(feature = "client")]
impl RedisStore {
    /// Connects, failing with `STORE_UNAVAILABLE` within the connect timeout when the
    /// server cannot be reached.
    pub async fn connect(options: RedisOptions) -> Result<Self> {
        let url = client_url(&options)?;
        if url.starts_with("rediss://") {
            ensure_crypto_provider();
        }
        let opened = match &options.tls_ca_cert_pem {
            None => redis::Client::open(url.as_str()),
            Some(pem) => redis::Client::build_with_tls(
                url.as_str(),
                redis::TlsCertificates { client_tls: None, root_cert: Some(pem.clone().into_bytes()) },
            ),
        };
        let client = opened.map_err(|e| {
            let why = e.to_string().replace(&url, "<url>").replace(&options.url, "<url>");
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
        // `SET … NX GET` needs Redis 7: say so now rather than fail each acquire. A
        // server that refuses INFO (an ACL without it) is taken as it is.
        let mut check = connection.clone();
        match redis::cmd("INFO").arg("server").query_async::<String>(&mut check).await {
            Ok(info) => check_redis_version(&info)?,
            Err(e) if e.code().is_some() && !e.code().is_some_and(|code| TRANSIENT_CODES.contains(&code)) => {
            }
            Err(e) => return Err(store_error(&e)),
        }
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

    /// How many channels the release notifier keeps an entry for (subscribed or
    /// waiting to be): for tests of what the notifier holds on to.
    #[doc(hidden)]
    #[must_use]
    pub fn notification_channels(&self) -> usize {
        self.notifier.as_ref().map_or(0, notify::ReleaseNotifier::entries)
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
        lock_key(&self.options.key_prefix, key)
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

#[cfg(feature = "client")]
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
                    .arg(ttl_ms.saturating_add(FENCE_GRACE_MS))
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(u64::try_from(token).ok().filter(|t| *t > 0).map(Grant::with_fencing_token))
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
        let fence_key = format!("{lock_key}:fence");
        let extended: i64 = self
            .run(|mut c| async move {
                self.scripts
                    .extend
                    .key(&lock_key)
                    .key(&fence_key)
                    .arg(owner)
                    .arg(ttl_ms)
                    .arg(ttl_ms.saturating_add(FENCE_GRACE_MS))
                    .invoke_async(&mut c)
                    .await
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

#[cfg(feature = "client")]
impl Drop for RedisStore {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_versions_are_read_from_info_server() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n";
        assert_eq!(parse_redis_version(info), Some((7, 0)));
        assert_eq!(parse_redis_version("redis_version:6.2.14\n"), Some((6, 2)));
        assert_eq!(parse_redis_version("redis_version:8\n"), Some((8, 0)));
        assert_eq!(parse_redis_version("# Server\nredis_mode:standalone\n"), None);
        assert_eq!(parse_redis_version("redis_version:unknown\n"), None);
    }

    #[test]
    fn servers_older_than_7_are_refused_with_a_clear_error() {
        let err = check_redis_version("redis_version:6.2.14\r\n").unwrap_err();
        assert_eq!(err.code(), "STORE_ERROR");
        assert!(err.to_string().contains("Redis 6.2; locksmith needs Redis 7.0 or newer"), "{err}");
        assert!(check_redis_version("redis_version:5.0.7\n").is_err());
        check_redis_version("redis_version:7.0.0\n").unwrap();
        check_redis_version("redis_version:7.2.4\n").unwrap();
        check_redis_version("redis_version:10.0.0\n").unwrap();
        check_redis_version("# no version here\n").unwrap();
    }

    #[test]
    fn debug_output_hides_the_password() {
        let options = RedisOptions::new("redis://locker:s3cret@db.internal:6380/2");
        let shown = format!("{options:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("redis://locker:***@db.internal:6380/2"), "{shown}");
        assert_eq!(redact_url("rediss://:pw@host"), "rediss://:***@host");
        assert_eq!(redact_url("redis://host:6379/0"), "redis://host:6379/0");
        assert_eq!(redact_url("redis://u:p@ss@host/0"), "redis://u:***@host/0");
        // Unencoded `#`, `/` and `?` in a password must not end the credentials early.
        for url in ["redis://app:Xk#9pQ@db.internal:6379/0", "redis://app:a/b?c@db:6379", "rediss://:p#w@h"] {
            let redacted = redact_url(url);
            assert!(
                !redacted.contains("Xk") && !redacted.contains("a/b") && !redacted.contains("p#w"),
                "{redacted}"
            );
        }
    }
}
