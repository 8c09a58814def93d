//! The sans-I/O engine against a real `redis-server`, driven over a tokio socket by a
//! small host loop written for these tests (in Node the host is `js/redis-engine.cjs`):
//! the store conformance suite, the key layout shared with the redis-rs store, the
//! EVAL fallback after `SCRIPT FLUSH`, and release notifications on a second socket.

mod server;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use locksmith_core::conformance::Harness;
use std::sync::Mutex;

use locksmith_core::{AcquireOptions, BoxFuture, Clock, Grant, Lock, LockStore, MonotonicClock, Result};
use locksmith_redis::engine::{EngineOptions, EngineStore, Handshake, Subscriber};
use locksmith_redis::{RedisOptions, RedisStore, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    })
}

/// Drives `store`'s main connection: writes its output every millisecond, feeds what
/// arrives, fails requests past their deadline.
async fn drive(store: Arc<EngineStore>, port: u16) {
    let mut socket = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    socket.set_nodelay(true).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    loop {
        tokio::select! {
            read = socket.read(&mut buf) => match read {
                Ok(0) | Err(_) => {
                    store.connection_lost("closed");
                    return;
                }
                Ok(n) => store.feed(&buf[..n]).expect("in step"),
            },
            _ = tick.tick() => {
                store.expire();
                if let Some(out) = store.take_output() {
                    socket.write_all(&out).await.unwrap();
                }
            }
        }
    }
}

/// Drives the subscriber connection the same way; `delay_ms` holds back each write (a
/// slow subscriber connection).
async fn drive_subscriber(subscriber: Subscriber, port: u16, clock: Arc<dyn Clock>, delay_ms: u64) {
    while !subscriber.wants_connection() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut socket = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    subscriber.connected(None, clock.now_ms());
    let mut buf = vec![0u8; 4096];
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    loop {
        tokio::select! {
            read = socket.read(&mut buf) => match read {
                Ok(0) | Err(_) => return subscriber.connection_lost(),
                Ok(n) => subscriber.feed(&buf[..n], clock.now_ms()).expect("in step"),
            },
            _ = tick.tick() => {
                subscriber.tick(clock.now_ms());
                if let Some(out) = subscriber.take_output() {
                    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                    socket.write_all(&out).await.unwrap();
                }
            }
        }
    }
}

fn connect(port: u16, notify: bool) -> Arc<EngineStore> {
    connect_with(port, notify, 0)
}

fn connect_with(port: u16, notify: bool, subscriber_delay_ms: u64) -> Arc<EngineStore> {
    let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
    let subscriber = notify.then(|| Subscriber::new(2_000));
    let options = EngineOptions { key_prefix: "locksmith:".into(), command_timeout_ms: 2_000 };
    let store = Arc::new(EngineStore::new(options, clock.clone(), subscriber.clone()));
    runtime().spawn(drive(store.clone(), port));
    if let Some(subscriber) = subscriber {
        runtime().spawn(drive_subscriber(subscriber, port, clock, subscriber_delay_ms));
    }
    runtime().block_on(store.handshake(&Handshake::default())).expect("handshake");
    store
}

fn harness() -> Harness {
    let server = server::shared();
    Harness {
        store: connect(server.port, true),
        timer: Arc::new(TokioTimer::default()),
        runner: Arc::new(|future| runtime().block_on(future)),
        fencing: true,
        exact_ownership: true,
        permits: true,
        slack_ms: 100,
    }
}

locksmith_core::store_conformance_suite!(harness());

#[test]
fn locks_taken_by_the_redis_rs_store_are_the_engines_to_see_and_free() {
    let server = server::shared();
    let engine = connect(server.port, false);
    let rs = runtime().block_on(RedisStore::connect(RedisOptions::new(server.url()))).unwrap();
    runtime().block_on(async {
        assert!(rs.acquire("shared-layout", "owner-a", 5_000).await.unwrap());
        assert!(engine.is_locked("shared-layout").await.unwrap());
        assert_eq!(engine.is_held_by("shared-layout", "owner-a").await.unwrap(), Some(true));
        assert!(!engine.acquire("shared-layout", "owner-b", 5_000).await.unwrap());
        assert!(engine.release("shared-layout", "owner-a").await.unwrap());
        let token = engine.acquire_with_grant("shared-layout", "owner-b", 5_000).await.unwrap().unwrap();
        assert!(token.fencing_token.is_some());
        assert!(!rs.release("shared-layout", "owner-a").await.unwrap());
        assert!(rs.release("shared-layout", "owner-b").await.unwrap());
    });
}

#[test]
fn scripts_are_sent_again_after_script_flush() {
    let server = server::shared();
    let engine = connect(server.port, false);
    runtime().block_on(async {
        assert!(engine.acquire("flushed", "me", 5_000).await.unwrap());
        let mut admin = TcpStream::connect(("127.0.0.1", server.port)).await.unwrap();
        admin.write_all(b"SCRIPT FLUSH\r\n").await.unwrap();
        let mut reply = [0u8; 5];
        admin.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply, b"+OK\r\n");
        assert!(engine.extend("flushed", "me", 5_000).await.unwrap());
        assert!(engine.release("flushed", "me").await.unwrap());
    });
}

#[test]
fn a_waiter_wakes_on_release_not_at_its_retry_delay() {
    let server = server::shared();
    let store = connect(server.port, true);
    let timer = Arc::new(TokioTimer::default());
    let holder = Lock::new("notified", 10_000, store.clone(), timer.clone()).unwrap();
    let waiter = Lock::new("notified", 10_000, store.clone(), timer).unwrap();
    runtime().block_on(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let started = std::time::Instant::now();
        let wait =
            waiter.acquire(AcquireOptions::default().with_timeout_ms(8_000).with_retry_delay_ms(5_000));
        let release = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(holder.release().await.unwrap());
        };
        let (acquired, ()) = tokio::join!(wait, release);
        assert!(acquired.unwrap());
        assert!(started.elapsed() < Duration::from_millis(1_500), "woke after {:?}", started.elapsed());
    });
}

/// A store that, right after a failed acquire attempt and before answering it, lets the
/// holder release: the release lands between the waiter's attempt and its wait.
struct ReleasesAfterAFailedAttempt {
    inner: Arc<EngineStore>,
    holder: Mutex<Option<Arc<Lock>>>,
}

#[async_trait::async_trait]
impl LockStore for ReleasesAfterAFailedAttempt {
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

#[test]
fn a_release_right_after_a_failed_attempt_wakes_the_waiter() {
    let server = server::shared();
    // The subscriber connection is slow, so its SUBSCRIBE reaches Redis after the release.
    let inner = connect_with(server.port, true, 100);
    let direct = connect(server.port, false);
    let store = Arc::new(ReleasesAfterAFailedAttempt { inner, holder: Mutex::new(None) });
    let timer = Arc::new(TokioTimer::default());
    runtime().block_on(async {
        for round in 0..5 {
            let key = format!("engine-right-after-{round}");
            let holder = Arc::new(Lock::new(&key, 30_000, direct.clone(), timer.clone()).unwrap());
            assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
            *store.holder.lock().unwrap() = Some(holder);
            let waiter = Lock::new(&key, 30_000, store.clone(), timer.clone()).unwrap();
            let start = std::time::Instant::now();
            assert!(waiter
                .acquire(AcquireOptions::default().with_timeout_ms(10_000).with_retry_delay_ms(5_000))
                .await
                .unwrap());
            let slept = start.elapsed();
            assert!(slept < Duration::from_secs(1), "round {round}: the waiter slept {slept:?}");
            assert!(waiter.release().await.unwrap());
        }
    });
}
