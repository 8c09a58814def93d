//! The sans-I/O engine against a real `redis-server`, driven over a tokio socket by a
//! small host loop written for these tests (in Node the host is `js/redis-engine.cjs`):
//! the store conformance suite, the key layout shared with the redis-rs store, the
//! EVAL fallback after `SCRIPT FLUSH`, release notifications on a second socket, and the
//! keys of semaphores and read-write locks (where they live, and that they go).

mod race;
mod server;
use race::ReleasesAfterAFailedAttempt;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use locksmith_core::conformance::Harness;

use locksmith_core::{AcquireOptions, Clock, HoldKind, Lock, LockStore, MonotonicClock};
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
        // The permit scripts too, each on its first call after the flush.
        let sem = HoldKind::Permit { limit: 2 };
        assert!(engine.acquire_permit("flushed", "me", 5_000, sem).await.unwrap().is_some());
        assert_eq!(engine.permit_count("flushed", sem).await.unwrap(), 1);
        assert!(engine.permit_remaining_time("flushed", "me", sem).await.unwrap().is_some());
        assert!(engine.extend_permit("flushed", "me", 5_000, sem).await.unwrap());
        assert!(engine.release_permit("flushed", "me", sem).await.unwrap());
        assert!(engine.acquire_permit("flushed", "me", 5_000, HoldKind::Write).await.unwrap().is_some());
        assert!(engine.release_permit("flushed", "me", HoldKind::Write).await.unwrap());
    });
}

/// An admin connection for looking at keys directly.
async fn admin(port: u16) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// `PTTL` of each key: -2 when it does not exist, -1 when it has no expiry.
async fn pttls(admin: &mut redis::aio::MultiplexedConnection, keys: &[String]) -> Vec<i64> {
    let mut out = Vec::new();
    for key in keys {
        out.push(redis::cmd("PTTL").arg(key).query_async(admin).await.unwrap());
    }
    out
}

#[test]
fn permit_keys_share_the_lock_slot_expire_with_their_holds_and_go_on_release() {
    let server = server::shared();
    let engine = connect(server.port, false);
    let grace = i64::try_from(locksmith_redis::FENCE_GRACE_MS).unwrap();
    runtime().block_on(async {
        let mut admin = admin(server.port).await;
        let sem = HoldKind::Permit { limit: 2 };
        let holders = "locksmith:{keys}:semaphore".to_owned();
        let keys = [holders.clone(), format!("{holders}:limit"), format!("{holders}:fence")];
        assert!(engine.acquire_permit("keys", "a", 300, sem).await.unwrap().is_some());
        assert!(engine.acquire_permit("keys", "b", 400, sem).await.unwrap().is_some());
        for (key, ttl) in keys.iter().zip(pttls(&mut admin, &keys).await) {
            // The latest permit's TTL plus the bound, no more.
            assert!(ttl > 300 && ttl <= 400 + grace, "{key}: PTTL {ttl}");
        }
        for key in &keys {
            // Redis Cluster hashes the first `{...}`: the lock key's own.
            assert!(key.starts_with("locksmith:{keys}:"), "{key} hashes with the lock key");
        }
        assert!(engine.release_permit("keys", "a", sem).await.unwrap());
        assert!(engine.release_permit("keys", "b", sem).await.unwrap());
        let left = pttls(&mut admin, &keys).await;
        assert_eq!(&left[..2], &[-2, -2], "the holders and the limit go with the last holder");
        assert!(left[2] > 0 && left[2] <= 400 + grace, "the fencing counter expires soon after");

        let rw = "locksmith:{keys}:rw".to_owned();
        let rw_keys = [rw.clone(), format!("{rw}:writer"), format!("{rw}:claim"), format!("{rw}:fence")];
        assert!(engine.acquire_permit("keys", "r", 200, HoldKind::Read).await.unwrap().is_some());
        assert!(engine.acquire_permit("keys", "w", 200, HoldKind::Write).await.unwrap().is_none());
        let held = pttls(&mut admin, &rw_keys).await;
        assert!(held[0] > 0 && held[0] <= 200 + grace, "{held:?}");
        assert_eq!(held[1], -2, "no writer");
        assert!(held[2] > 0 && held[2] <= 200, "the refused writer's claim expires with its TTL: {held:?}");
        assert!(!engine.release_permit("keys", "w", HoldKind::Write).await.unwrap(), "a claim is no hold");
        assert!(engine.acquire_permit("keys", "w2", 200, HoldKind::Write).await.unwrap().is_none());
        // Nobody releases: every key is gone once the holds and the bound have passed.
        tokio::time::sleep(Duration::from_millis(400 + 1_000 + 100)).await;
        assert_eq!(pttls(&mut admin, &rw_keys).await, [-2, -2, -2, -2]);
        assert_eq!(pttls(&mut admin, &keys).await, [-2, -2, -2]);

        assert!(engine.acquire_permit("keys", "w3", 5_000, HoldKind::Write).await.unwrap().is_some());
        let held = pttls(&mut admin, &rw_keys).await;
        assert!(held[1] > 5_000 && held[1] <= 5_000 + grace, "the writer lives as its hold: {held:?}");
        // A reader refused meanwhile waits in `:readers`, expiring with its TTL; the
        // writer's release makes it the readers' turn (`:turn`), gone when it gives up.
        let waits = [format!("{rw}:readers"), format!("{rw}:turn")];
        assert!(engine.acquire_permit("keys", "r2", 300, HoldKind::Read).await.unwrap().is_none());
        let waiting = pttls(&mut admin, &waits).await;
        assert!(waiting[0] > 0 && waiting[0] <= 300, "a waiting reader expires with its TTL: {waiting:?}");
        assert!(engine.release_permit("keys", "w3", HoldKind::Write).await.unwrap());
        assert_eq!(&pttls(&mut admin, &rw_keys).await[..3], &[-2, -2, -2]);
        let turn = pttls(&mut admin, &waits).await;
        assert!(turn[0] == -2 && turn[1] > 0 && turn[1] <= 300, "the readers' turn, bounded: {turn:?}");
        assert!(!engine.release_permit("keys", "r2", HoldKind::Read).await.unwrap(), "a wait is no hold");
        assert_eq!(pttls(&mut admin, &waits).await, [-2, -2], "nothing left of the wait");
    });
}

#[test]
fn permit_fencing_tokens_grow() {
    let server = server::shared();
    let engine = connect(server.port, false);
    runtime().block_on(async {
        for kind in [HoldKind::Permit { limit: 2 }, HoldKind::Read, HoldKind::Write] {
            let mut last = 0;
            for owner in ["a", "b", "c"] {
                let token = engine.acquire_permit("tokens", owner, 5_000, kind).await.unwrap();
                let token = token.and_then(|g| g.fencing_token).expect("a token");
                assert!(token > last, "{kind:?}: {token} after {last}");
                last = token;
                assert!(engine.release_permit("tokens", owner, kind).await.unwrap());
            }
        }
    });
}

#[test]
fn permit_waiters_wake_on_release_not_at_their_retry_delay() {
    let server = server::shared();
    let store = connect(server.port, true);
    let timer = Arc::new(TokioTimer::default());
    let handle = |kind| Lock::of_kind("permit-notified", 10_000, kind, store.clone(), timer.clone()).unwrap();
    let wait = AcquireOptions::default().with_timeout_ms(8_000).with_retry_delay_ms(5_000);
    runtime().block_on(async {
        // One release of a writer lets every waiting reader in: all of them wake.
        let writer = handle(HoldKind::Write);
        let readers = [handle(HoldKind::Read), handle(HoldKind::Read), handle(HoldKind::Read)];
        assert!(writer.acquire(AcquireOptions::default()).await.unwrap());
        let started = std::time::Instant::now();
        let release = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(writer.release().await.unwrap());
        };
        let (got, ()) =
            tokio::join!(futures_util::future::join_all(readers.iter().map(|r| r.acquire(wait))), release);
        assert!(got.into_iter().all(|r| r.unwrap()));
        assert!(started.elapsed() < Duration::from_millis(1_500), "woke after {:?}", started.elapsed());
        for reader in &readers {
            assert!(reader.release().await.unwrap());
        }
        // A semaphore's permit given back wakes its waiter.
        let sem = HoldKind::Permit { limit: 1 };
        let (holder, waiter) = (handle(sem), handle(sem));
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let started = std::time::Instant::now();
        let release = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(holder.release().await.unwrap());
        };
        let (got, ()) = tokio::join!(waiter.acquire(wait), release);
        assert!(got.unwrap());
        assert!(started.elapsed() < Duration::from_millis(1_500), "woke after {:?}", started.elapsed());
        assert!(waiter.release().await.unwrap());
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

#[test]
fn a_release_right_after_a_failed_attempt_wakes_the_waiter() {
    let server = server::shared();
    // The subscriber connection is slow, so its SUBSCRIBE reaches Redis after the release.
    let inner = connect_with(server.port, true, 100);
    let direct = connect(server.port, false);
    let store = Arc::new(ReleasesAfterAFailedAttempt::new(inner));
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
