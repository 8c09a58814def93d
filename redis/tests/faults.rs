//! The engine against servers that refuse credentials, hold keys of the wrong type, run
//! out of memory or are read-only replicas, and with keys that look like Lua. (Servers
//! that go away and come back are the host's to handle: js-tests/redis.test.mjs and
//! reliability.test.mjs test the Node driver's reconnects.)

mod host;
mod server;

use std::sync::Arc;
use std::time::Duration;

use host::{connect, connect_with, runtime, Admin, Settings, TokioTimer};
use locksmith_core::{AcquireOptions, Lock, LockStore};
use locksmith_redis::engine::reply::ReplyValue;
use locksmith_redis::engine::EngineStore;
use server::RedisServer;

fn lock(store: &Arc<EngineStore>, key: &str, ttl: u64) -> Lock {
    Lock::new(key, ttl, store.clone(), Arc::new(TokioTimer::default())).unwrap()
}

fn logged_in(port: u16, user: Option<&str>, password: &str) -> locksmith_core::Result<Arc<EngineStore>> {
    let auth = Some((user.map(str::to_owned), password.to_owned()));
    connect_with(port, &Settings { auth, ..Settings::default() })
}

#[test]
fn credentials_are_checked() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let bad = logged_in(server.port, None, "n0t-th3-pa55").err().unwrap();
    assert_eq!(bad.code(), "STORE_ERROR", "{bad}");
    assert!(bad.to_string().contains("refused the credentials"), "{bad}");
    assert!(!bad.to_string().contains("n0t-th3-pa55"), "the password is not echoed: {bad}");
    // Without credentials the handshake already fails: its version check and scripts.
    let none = connect_with(server.port, &Settings::default()).err().unwrap();
    assert_eq!(none.code(), "STORE_ERROR", "{none}");
    assert!(none.to_string().contains("NOAUTH"), "{none}");
    let good = logged_in(server.port, None, "s3cret").unwrap();
    runtime().block_on(async {
        assert!(lock(&good, "auth", 1_000).acquire(AcquireOptions::default()).await.unwrap());
        // An ACL user.
        let mut admin = Admin::connect(server.port).await;
        admin.command(&["AUTH", "s3cret"]).await;
        let created =
            admin.command(&["ACL", "SETUSER", "locker", "on", ">pw", "~locksmith:*", "&*", "+@all"]);
        assert_eq!(created.await, ReplyValue::Text("OK".into()));
    });
    let user = logged_in(server.port, Some("locker"), "pw").unwrap();
    runtime().block_on(async {
        assert!(lock(&user, "acl", 1_000).acquire(AcquireOptions::default()).await.unwrap());
    });
}

#[test]
fn a_key_of_the_wrong_type_is_a_clear_error() {
    let server = server::shared();
    let store = connect(server.port, false);
    runtime().block_on(async {
        let mut admin = Admin::connect(server.port).await;
        admin.command(&["HSET", "locksmith:{wrongtype}", "field", "1"]).await;
        let err = lock(&store, "wrongtype", 1_000).acquire(AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "STORE_ERROR");
        assert!(err.to_string().contains("holds a hash, not a lock"), "{err}");
        let err = store.release("wrongtype", "owner").await.unwrap_err();
        assert!(err.to_string().contains("WRONGTYPE"), "{err}");
    });
}

#[test]
fn keys_full_of_lua_and_quotes_are_just_keys() {
    let server = server::shared();
    let store = connect(server.port, false);
    runtime().block_on(async {
        for key in ["') redis.call('FLUSHALL') --", "\"]] .. KEYS[2] .. [[", "{hash}tag}", "end return 1 --"]
        {
            let l = lock(&store, key, 5_000);
            assert!(l.acquire(AcquireOptions::default()).await.unwrap(), "{key}");
            assert!(!lock(&store, key, 5_000).acquire(AcquireOptions::default()).await.unwrap());
            assert!(l.is_locked().await.unwrap());
            assert!(l.release().await.unwrap());
        }
        let canary = lock(&store, "canary", 5_000);
        assert!(canary.acquire(AcquireOptions::default()).await.unwrap());
        assert!(canary.is_locked().await.unwrap(), "nothing was flushed");
        assert!(canary.release().await.unwrap());
    });
}

#[test]
fn a_closed_store_says_so() {
    let server = server::shared();
    let store = connect(server.port, false);
    store.close();
    runtime().block_on(async {
        assert_eq!(store.is_locked("k").await.unwrap_err().code(), "STORE_CLOSED");
        let err = lock(&store, "k", 1_000).acquire(AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "STORE_CLOSED");
    });
}

#[test]
fn nothing_of_a_lock_outlives_its_ttl_by_more_than_a_small_bound() {
    let server = RedisServer::start();
    let store = connect(server.port, false);
    runtime().block_on(async {
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
        let mut admin = Admin::connect(server.port).await;
        assert_eq!(admin.command(&["KEYS", "*"]).await, ReplyValue::Array(vec![]), "keys left behind");
        assert_eq!(admin.command(&["DBSIZE"]).await, ReplyValue::Integer(0));
        // A new counter starts from a later clock reading: tokens still grow.
        let again = lock(&store, "leaves-nothing", 300);
        assert!(again.acquire(AcquireOptions::default()).await.unwrap());
        assert!(again.fencing_token().unwrap() > second, "{:?} after {second}", again.fencing_token());
    });
}

#[test]
fn out_of_memory_is_a_store_error_with_the_servers_message() {
    let server = RedisServer::start_with(&["--maxmemory", "1", "--maxmemory-policy", "noeviction"]);
    let store = connect(server.port, false);
    runtime().block_on(async {
        let err = lock(&store, "oom", 1_000).acquire(AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "STORE_ERROR", "{err}");
        assert!(err.to_string().contains("OOM"), "{err}");
        assert!(!err.to_string().contains("WRONGTYPE"), "{err}");
    });
}

#[test]
fn a_read_only_replica_is_unavailable_not_a_wrong_type() {
    // A primary of its own, and a replica that writes what it receives under /tmp.
    let dir = std::env::temp_dir();
    let dir = dir.to_str().unwrap();
    let primary = RedisServer::start_with(&["--dir", dir]);
    let port = primary.port.to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port, "--dir", dir]);
    runtime().block_on(async {
        let mut admin = Admin::connect(replica.port).await;
        for _ in 0..100 {
            if admin.info_field("replication", "master_link_status").await.as_deref() == Some("up") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let store = connect(replica.port, false);
    runtime().block_on(async {
        let err = lock(&store, "replica", 1_000).acquire(AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "STORE_UNAVAILABLE", "{err}");
        assert!(err.to_string().contains("read only replica"), "{err}");
        let extended = store.extend("replica", "owner", 1_000).await;
        assert!(matches!(extended, Ok(false)), "nothing to extend on the replica: {extended:?}");
    });
    assert!(store.take_replica_seen(), "the host is told, to look for the master");
}
