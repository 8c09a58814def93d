//! locksmith-redis: locksmith's Redis engine, sans I/O.
//!
//! The [`engine`] encodes commands, reads replies and runs the lock scripts, but owns
//! no socket, no thread and no clock: its host writes what it asks for, feeds it what
//! arrives and tells it the time. [`EngineStore`](engine::EngineStore) is a
//! [`LockStore`](locksmith_core::LockStore) over it. Its hosts are the Node addon
//! (Node's own sockets, through `js/redis/driver.mjs`), the WebAssembly build's second
//! module (`wasm-redis/`, over the runtime's sockets) and, in this crate's tests, a
//! small tokio socket loop.
//!
//! * Acquire is `SET key owner PX ttl NX GET` inside a script that also mints the
//!   fencing token (Redis 7 or newer); release and extend are compare-and-act scripts.
//!   Scripts are called by SHA and sent again as `EVAL` after `SCRIPT FLUSH` or a
//!   restart. Keys and values travel only in `KEYS`/`ARGV`.
//! * Semaphores and read-write locks keep a sorted set of holders per key
//!   ([`permit_key`]) in the lock key's hash slot ([`lock_key`]).
//! * Release notifications come over a second, subscriber connection
//!   ([`Subscriber`](engine::Subscriber)), so waiters wake on release instead of polling.
//! * No tokio, no TLS, no DNS: the crate builds for wasm32. Connecting, TLS,
//!   reconnecting and finding a Sentinel's master or a Cluster's nodes are the host's;
//!   the crate checks the URL's TLS settings ([`check_url_settings`]) and the server's
//!   version ([`check_redis_version`]) for it.

pub mod engine;

use locksmith_core::{LockError, Result};

/// How much longer than its lock a fencing counter lives: each acquire and extend sets
/// the counter's expiry to the lock's TTL plus this. Once it has gone, the next counter
/// starts from a later reading of the server's clock, so tokens keep growing.
pub const FENCE_GRACE_MS: u64 = 1_000;

/// The oldest Redis that locksmith works with: `SET … NX GET` came in 7.0.
pub const MIN_REDIS_VERSION: (u32, u32) = (7, 0);

/// A Redis URL and its TLS settings, as a host takes them from the user and
/// [`check_url_settings`] checks them before it connects.
///
/// `Debug` prints the URL without its password.
#[derive(Clone)]
#[non_exhaustive]
pub struct RedisOptions {
    /// `redis://[user:password@]host:port[/db]` or `rediss://` for TLS. A URL fragment
    /// (such as `#insecure`, which some clients read as a setting) is refused: see
    /// [`tls_insecure`](Self::tls_insecure).
    pub url: String,
    /// For `rediss://`: the certificate authority to trust, in PEM, instead of the
    /// system's roots (a private CA, a self-signed server).
    pub tls_ca_cert_pem: Option<String>,
    /// For `rediss://`: skip certificate and host name checks. Anyone on the path can
    /// then read and change the traffic, owner tokens included: for development only.
    pub tls_insecure: bool,
}

impl RedisOptions {
    /// `url` with the system's roots and certificate checks on.
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), tls_ca_cert_pem: None, tls_insecure: false }
    }
}

impl std::fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisOptions")
            .field("url", &redact_url(&self.url))
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

/// A fair lock's keys: the lock key, its queue (owners by arrival), its places' ends
/// (owners by when their place runs out) and its fair mark (see `fair_acquire.lua`), in
/// the lock key's hash slot.
#[must_use]
pub fn fair_keys(prefix: &str, key: &str) -> [String; 4] {
    let lock_key = lock_key(prefix, key);
    let [queue, places, mark] = fair_companions(&lock_key);
    [lock_key, queue, places, mark]
}

/// The keys of the fair queue of `base` (a lock key, or a semaphore's holders key,
/// [`permit_key`]): its queue, its places' ends and its fair mark (`<base>:queue`,
/// `<base>:places`, `<base>:fair`; see `fair_acquire.lua`, `fair_semaphore_acquire.lua`).
#[must_use]
pub fn fair_companions(base: &str) -> [String; 3] {
    [format!("{base}:queue"), format!("{base}:places"), format!("{base}:fair")]
}

/// Refuses, on a Redis Cluster, a key whose lock key has an empty hash tag: with `key`
/// starting with `}` (or a prefix holding `{}`), `<prefix>{<key>}` closes its tag at
/// once, so Redis hashes each whole name and the lock key and its companions fall in
/// different slots (`CROSSSLOT`). On one server such a key keeps this layout, which
/// every release has used, so all versions exclude each other on it.
pub fn check_cluster_key(prefix: &str, key: &str) -> Result<()> {
    let lock_key = lock_key(prefix, key);
    // The tag is what lies between the first `{` and the first `}` after it.
    let open = lock_key.find('{').unwrap_or(0);
    if !lock_key[open + 1..].starts_with('}') {
        return Ok(());
    }
    Err(LockError::InvalidArgument(format!(
        "on a Redis Cluster, key {} cannot be locked: its Redis key {lock_key} has an empty hash tag (\"{{}}\"), so the lock's keys would fall in different hash slots; use a key that does not start with \"}}\" and a keyPrefix without \"{{}}\" (on a single server it works as it is)",
        locksmith_core::validate::quote(key)
    )))
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

/// Server error codes of states that pass: a replica not (yet) promoted, a server still
/// loading its data set, a primary that lost its own, a busy script, a cluster moving slots.
pub(crate) const TRANSIENT_CODES: [&str; 6] =
    ["READONLY", "LOADING", "MASTERDOWN", "BUSY", "TRYAGAIN", "CLUSTERDOWN"];

/// Checks the URL against the TLS settings: no fragment, and `tls_insecure` only with
/// `rediss://` and without a CA. Every host checks before it connects.
pub fn check_url_settings(options: &RedisOptions) -> Result<()> {
    if options.url.contains('#') {
        return Err(LockError::InvalidArgument(format!(
            "the Redis URL {} has a fragment; locksmith takes no settings from it. To skip TLS certificate checks (development only), set tlsInsecure: true (tls_insecure in Rust)",
            redact_url(&options.url)
        )));
    }
    if !options.tls_insecure {
        return Ok(());
    }
    if !options.url.starts_with("rediss://") {
        return Err(LockError::InvalidArgument("tlsInsecure needs a rediss:// URL".into()));
    }
    if options.tls_ca_cert_pem.is_some() {
        return Err(LockError::InvalidArgument(
            "tlsInsecure skips certificate checks, so a tlsCaCert with it would not be used; pass one of them".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_with_an_empty_hash_tag_are_refused_for_a_cluster() {
        for (prefix, key) in [("locksmith:", "}x"), ("locksmith:", "}"), ("", "}}"), ("p{}", "k")] {
            let err = check_cluster_key(prefix, key).unwrap_err();
            assert_eq!(err.code(), "INVALID_ARGUMENT", "{prefix} {key}");
            assert!(err.to_string().starts_with("locksmith: on a Redis Cluster, key "), "{err}");
            assert!(err.to_string().contains("empty hash tag"), "{err}");
        }
        let err = check_cluster_key("locksmith:", "}x").unwrap_err().to_string();
        assert!(err.contains("key \"}x\" cannot be locked: its Redis key locksmith:{}x} has"), "{err}");
        assert!(err.contains("does not start with \"}\""), "{err}");
        assert!(check_cluster_key("p{}", "k").unwrap_err().to_string().contains("keyPrefix"));
        // Any other `}` leaves a tag that is not empty: one slot for the lock's keys.
        for (prefix, key) in
            [("locksmith:", "x}"), ("locksmith:", "a}b"), ("", "x"), ("p{", "}k"), ("p{t}", "}k")]
        {
            check_cluster_key(prefix, key).unwrap();
            let lock = lock_key(prefix, key);
            let slot = engine::reply::key_slot(lock.as_bytes());
            assert_eq!(engine::reply::key_slot(format!("{lock}:fence").as_bytes()), slot, "{lock}");
        }
        let lock = lock_key("locksmith:", "}x");
        assert_ne!(
            engine::reply::key_slot(lock.as_bytes()),
            engine::reply::key_slot(format!("{lock}:fence").as_bytes()),
            "the reason"
        );
    }

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
    fn certificate_checks_are_skipped_only_when_asked_by_name() {
        let checked = |url: &str, insecure: bool, ca: bool| {
            let mut options = RedisOptions::new(url);
            options.tls_insecure = insecure;
            options.tls_ca_cert_pem = ca.then(String::new);
            check_url_settings(&options)
        };
        // A fragment such as `#insecure` is refused, not honoured, and the password in
        // the URL is not echoed.
        let err = checked("rediss://:pw@127.0.0.1:1/#insecure", false, false).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "{err}");
        assert!(err.to_string().contains("tlsInsecure"), "{err}");
        assert!(!err.to_string().contains("pw@"), "{err}");
        let err = checked("redis://127.0.0.1:6379", true, false).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "tlsInsecure without TLS: {err}");
        let err = checked("rediss://127.0.0.1:6379", true, true).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "tlsInsecure beside a CA: {err}");
        checked("rediss://127.0.0.1:6379", true, false).unwrap();
        checked("rediss://127.0.0.1:6379", false, true).unwrap();
        checked("redis://:s3cret@127.0.0.1:6379/2", false, false).unwrap();
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
