//! `RedisStore` against servers that go away, come back, forget scripts, refuse
//! credentials, or hold keys of the wrong type.

mod server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use locksmith_core::{AcquireOptions, Lock, LockStore};
use locksmith_redis::{RedisOptions, RedisStore, TokioTimer};
use server::RedisServer;

fn options(url: String) -> RedisOptions {
    let mut o = RedisOptions::new(url);
    o.connect_timeout = Duration::from_millis(500);
    o.command_timeout = Duration::from_millis(500);
    o.reconnect_retries = 1;
    o.reconnect_max_delay = Duration::from_millis(100);
    o
}

fn lock(store: &Arc<RedisStore>, key: &str, ttl: u64) -> Lock {
    Lock::new(key, ttl, store.clone(), Arc::new(TokioTimer::default())).unwrap()
}

async fn redis_cmd(url: &str, args: &[&str]) -> redis::Value {
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut c).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_fails_fast_with_store_unavailable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let start = Instant::now();
    let err = RedisStore::connect(options(format!("redis://127.0.0.1:{port}"))).await.err().unwrap();
    assert_eq!(err.code(), "STORE_UNAVAILABLE", "{err}");
    assert!(start.elapsed() < Duration::from_secs(3), "took {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_urls_are_invalid_arguments() {
    for url in ["http://localhost", "not a url", "redis://:notaport"] {
        let err = RedisStore::connect(options(url.into())).await.err().unwrap();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "{url}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_checks_are_skipped_only_when_asked_by_name() {
    // redis-rs' `#insecure` fragment is refused, not honoured.
    let err = RedisStore::connect(options("rediss://:pw@127.0.0.1:1/#insecure".into())).await.err().unwrap();
    assert_eq!(err.code(), "INVALID_ARGUMENT", "{err}");
    assert!(err.to_string().contains("tlsInsecure"), "{err}");
    assert!(!err.to_string().contains("pw@"), "{err}");
    let mut insecure = options(server::shared().url());
    insecure.tls_insecure = true;
    let err = RedisStore::connect(insecure).await.err().unwrap();
    assert_eq!(err.code(), "INVALID_ARGUMENT", "tlsInsecure without TLS: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_a_server_restart() {
    let server = RedisServer::start();
    let store = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    let l = lock(&store, "restart", 10_000);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());

    server.kill();
    let start = Instant::now();
    let err = l.is_locked().await.unwrap_err();
    assert_eq!(err.code(), "STORE_UNAVAILABLE", "{err}");
    assert!(start.elapsed() < Duration::from_secs(2), "took {:?}", start.elapsed());

    server.restart();
    // The server came back empty: the lost hold reads as lost, and the key is free again.
    let mut last = None;
    for _ in 0..40 {
        match l.is_expired().await {
            Ok(expired) => {
                last = Some(expired);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert_eq!(last, Some(true), "the store reconnected by itself");
    assert_eq!(l.extend(None).await.unwrap_err().code(), "LOCK_NOT_HELD");
    assert!(lock(&store, "restart", 1_000).acquire(AcquireOptions::default()).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_reload_after_script_flush() {
    let server = server::shared();
    let store = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    let l = lock(&store, "flush", 10_000);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    redis_cmd(&server.url(), &["SCRIPT", "FLUSH"]).await;
    l.extend(None).await.unwrap();
    assert!(l.release().await.unwrap());
    redis_cmd(&server.url(), &["SCRIPT", "FLUSH"]).await;
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    assert!(l.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_the_wrong_type_is_a_clear_error() {
    let server = server::shared();
    let store = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    redis_cmd(&server.url(), &["HSET", &store.lock_key("wrongtype"), "field", "1"]).await;
    let err = lock(&store, "wrongtype", 1_000).acquire(AcquireOptions::default()).await.unwrap_err();
    assert_eq!(err.code(), "STORE_ERROR");
    assert!(err.to_string().contains("holds a hash, not a lock"), "{err}");
    let err = store.release("wrongtype", "owner").await.unwrap_err();
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_checked() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let bad = RedisStore::connect(options(format!("redis://:wrong@127.0.0.1:{}", server.port)))
        .await
        .err()
        .unwrap();
    assert_eq!(bad.code(), "STORE_ERROR", "{bad}");
    assert!(!bad.to_string().contains("wrong@"), "the URL's password is not echoed: {bad}");
    // Without credentials, connecting already fails: the scripts are loaded at connect.
    let none = RedisStore::connect(options(server.url())).await.err().unwrap();
    assert_eq!(none.code(), "STORE_ERROR", "{none}");
    assert!(none.to_string().contains("NOAUTH"), "{none}");
    let good = Arc::new(
        RedisStore::connect(options(format!("redis://:s3cret@127.0.0.1:{}", server.port))).await.unwrap(),
    );
    assert!(lock(&good, "auth", 1_000).acquire(AcquireOptions::default()).await.unwrap());
    // An ACL user.
    redis_cmd(
        &format!("redis://:s3cret@127.0.0.1:{}", server.port),
        &["ACL", "SETUSER", "locker", "on", ">pw", "~locksmith:*", "&*", "+@all"],
    )
    .await;
    let user = Arc::new(
        RedisStore::connect(options(format!("redis://locker:pw@127.0.0.1:{}", server.port))).await.unwrap(),
    );
    assert!(lock(&user, "acl", 1_000).acquire(AcquireOptions::default()).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_wake_on_release_not_on_their_retry_delay() {
    let server = server::shared();
    let store = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    let holder = lock(&store, "wake", 30_000);
    assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
    let waiter = lock(&store, "wake", 30_000);
    let start = Instant::now();
    let (got, ()) = tokio::join!(
        waiter.acquire(AcquireOptions::default().with_timeout_ms(10_000).with_retry_delay_ms(5_000)),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(holder.release().await.unwrap());
        }
    );
    assert!(got.unwrap());
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(2), "waited {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_full_of_lua_and_quotes_are_just_keys() {
    let server = server::shared();
    let store = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    for key in ["') redis.call('FLUSHALL') --", "\"]] .. KEYS[2] .. [[", "{hash}tag}", "end return 1 --"] {
        let l = lock(&store, key, 5_000);
        assert!(l.acquire(AcquireOptions::default()).await.unwrap(), "{key}");
        assert!(!lock(&store, key, 5_000).acquire(AcquireOptions::default()).await.unwrap());
        assert!(l.is_locked().await.unwrap());
        assert!(l.release().await.unwrap());
    }
    let canary = lock(&store, "canary", 5_000);
    assert!(canary.acquire(AcquireOptions::default()).await.unwrap());
    assert!(canary.is_locked().await.unwrap(), "nothing was flushed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_store_says_so() {
    let server = server::shared();
    let store = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    store.close();
    assert_eq!(store.is_locked("k").await.unwrap_err().code(), "STORE_CLOSED");
}

async fn info_field(url: &str, section: &str, field: &str) -> Option<String> {
    let text: String = redis::from_redis_value(redis_cmd(url, &["INFO", section]).await).unwrap();
    let prefix = format!("{field}:");
    text.lines().find_map(|line| line.strip_prefix(&prefix).map(|value| value.trim().to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_of_a_lock_outlives_its_ttl_by_more_than_a_small_bound() {
    let server = RedisServer::start();
    let store = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    let l = lock(&store, "leaves-nothing", 300);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    let first = l.fencing_token().unwrap();
    l.extend(Some(500)).await.unwrap();
    // Released and taken again at once: a larger token.
    assert!(l.release().await.unwrap());
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    let second = l.fencing_token().unwrap();
    assert!(second > first, "{second} after {first}");
    l.extend(Some(500)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500 + locksmith_redis::FENCE_GRACE_MS + 300)).await;
    let keys = redis_cmd(&server.url(), &["KEYS", "*"]).await;
    assert_eq!(keys, redis::Value::Array(vec![]), "keys left behind");
    assert_eq!(redis_cmd(&server.url(), &["DBSIZE"]).await, redis::Value::Int(0));
    // A new counter starts from a later clock reading: tokens still grow.
    let again = lock(&store, "leaves-nothing", 300);
    assert!(again.acquire(AcquireOptions::default()).await.unwrap());
    assert!(again.fencing_token().unwrap() > second, "{:?} after {second}", again.fencing_token());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_memory_is_a_store_error_with_the_servers_message() {
    let server = RedisServer::start_with(&["--maxmemory", "1", "--maxmemory-policy", "noeviction"]);
    let store = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    let err = lock(&store, "oom", 1_000).acquire(AcquireOptions::default()).await.unwrap_err();
    assert_eq!(err.code(), "STORE_ERROR", "{err}");
    assert!(err.to_string().contains("OOM"), "{err}");
    assert!(!err.to_string().contains("WRONGTYPE"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_replica_is_unavailable_not_a_wrong_type() {
    // A primary of its own, and a replica that writes what it receives under /tmp.
    let dir = std::env::temp_dir();
    let dir = dir.to_str().unwrap();
    let primary = RedisServer::start_with(&["--dir", dir]);
    let port = primary.port.to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port, "--dir", dir]);
    for _ in 0..100 {
        if info_field(&replica.url(), "replication", "master_link_status").await.as_deref() == Some("up") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let store = Arc::new(RedisStore::connect(options(replica.url())).await.unwrap());
    let err = lock(&store, "replica", 1_000).acquire(AcquireOptions::default()).await.unwrap_err();
    assert_eq!(err.code(), "STORE_UNAVAILABLE", "{err}");
    assert!(err.to_string().contains("read only replica"), "{err}");
    let err = store.extend("replica", "owner", 1_000).await;
    assert!(matches!(err, Ok(false)), "nothing to extend on the replica: {err:?}");
}
