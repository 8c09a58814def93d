//! The engine's release notifications against a real `redis-server`: what they cost an
//! uncontended acquire, what a stalled subscriber connection does to waiters, and what
//! a subscriber that the server refuses keeps. (Waking on release, and a release right
//! after a failed attempt, are in engine.rs.)

mod host;
mod server;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use host::{connect, connect_with, runtime, Admin, Settings, TokioTimer, COMMAND_TIMEOUT_MS};
use locksmith_core::{AcquireOptions, Lock, LockStore};
use locksmith_redis::engine::reply::ReplyValue;
use locksmith_redis::engine::EngineStore;
use server::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn lock(store: Arc<dyn LockStore>, key: &str, ttl: u64) -> Lock {
    Lock::new(key, ttl, store, Arc::new(TokioTimer::default())).unwrap()
}

/// `cmdstat_<name>`'s `calls` from `INFO commandstats`.
async fn calls(admin: &mut Admin, command: &str) -> u64 {
    admin
        .info_field("commandstats", &format!("cmdstat_{command}"))
        .await
        .and_then(|stats| stats.strip_prefix("calls=")?.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn an_uncontended_acquire_with_a_timeout_sends_no_subscribe() {
    let server = RedisServer::start();
    let store: Arc<dyn LockStore> = connect(server.port, true);
    runtime().block_on(async {
        let mut admin = Admin::connect(server.port).await;
        for i in 0..20 {
            let l = lock(store.clone(), &format!("free-{i}"), 5_000);
            assert!(l
                .acquire(AcquireOptions::default().with_timeout_ms(2_000).with_retry_delay_ms(50))
                .await
                .unwrap());
            assert!(l.release().await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(calls(&mut admin, "subscribe").await, 0, "no SUBSCRIBE for locks that were free");
        assert_eq!(calls(&mut admin, "unsubscribe").await, 0);

        // A contended one subscribes once, and the subscription goes once idle.
        let holder = lock(store.clone(), "busy", 5_000);
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let waiter = lock(store.clone(), "busy", 5_000);
        let (got, ()) = tokio::join!(
            waiter.acquire(AcquireOptions::default().with_timeout_ms(5_000).with_retry_delay_ms(5_000)),
            async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                assert!(holder.release().await.unwrap());
            }
        );
        assert!(got.unwrap());
        assert_eq!(calls(&mut admin, "subscribe").await, 1);
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        assert_eq!(calls(&mut admin, "unsubscribe").await, 1, "an idle channel is unsubscribed");
    });
}

/// A TCP proxy to a Redis server, for the subscriber connection: it passes what it
/// gets until told to stall, then passes nothing more on the connections it has.
struct Proxy {
    port: u16,
    stall: Arc<AtomicBool>,
}

impl Proxy {
    async fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let stall = Arc::new(AtomicBool::new(false));
        let shared = stall.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let upstream = TcpStream::connect(("127.0.0.1", target)).await.unwrap();
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = upstream.into_split();
                let stalled = Arc::new(AtomicBool::new(false));
                tokio::spawn(pump(client_read, server_write, shared.clone(), stalled.clone()));
                tokio::spawn(pump(server_read, client_write, shared.clone(), stalled));
            }
        });
        Self { port, stall }
    }
}

/// Copies `read` to `write`; once the proxy stalls, this connection passes nothing, ever,
/// and keeps both sockets open.
async fn pump(
    mut read: impl tokio::io::AsyncRead + Unpin,
    mut write: impl tokio::io::AsyncWrite + Unpin,
    stall: Arc<AtomicBool>,
    stalled: Arc<AtomicBool>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let Ok(n) = read.read(&mut buffer).await else { return };
        if n == 0 {
            return;
        }
        if stall.load(Ordering::SeqCst) || stalled.load(Ordering::SeqCst) {
            stalled.store(true, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        if write.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

#[test]
fn a_stalled_subscriber_neither_blocks_waiters_nor_stays_stalled() {
    let server = server::shared();
    let proxy = runtime().block_on(Proxy::start(server.port));
    let through_proxy = Settings { notify: true, subscriber_port: Some(proxy.port), ..Settings::default() };
    let store: Arc<dyn LockStore> = connect_with(server.port, &through_proxy).unwrap();
    let direct: Arc<dyn LockStore> = connect(server.port, false);
    proxy.stall.store(true, Ordering::SeqCst);
    runtime().block_on(async {
        // While the subscriber connection is stalled, a waiter gives up at its timeout...
        let holder = lock(direct.clone(), "stalled-a", 30_000);
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let start = Instant::now();
        let waiter = lock(store.clone(), "stalled-a", 30_000);
        assert!(!waiter
            .acquire(AcquireOptions::default().with_timeout_ms(1_000).with_retry_delay_ms(100))
            .await
            .unwrap());
        let gave_up = start.elapsed();
        assert!(gave_up < Duration::from_millis(1_000 + 500), "gave up after {gave_up:?}");
        // ...and takes a released lock at its retry delay.
        let start = Instant::now();
        let (got, ()) = tokio::join!(
            waiter.acquire(AcquireOptions::default().with_timeout_ms(3_000).with_retry_delay_ms(100)),
            async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                assert!(holder.release().await.unwrap());
            }
        );
        assert!(got.unwrap());
        assert!(start.elapsed() < Duration::from_millis(300 + 100 + 500), "took {:?}", start.elapsed());
        assert!(waiter.release().await.unwrap());

        // A new waiter meanwhile: its SUBSCRIBE goes on the stalled connection too.
        let holder = lock(direct.clone(), "stalled-b", 30_000);
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let waiter = lock(store.clone(), "stalled-b", 30_000);
        let pending =
            waiter.acquire(AcquireOptions::default().with_timeout_ms(15_000).with_retry_delay_ms(10_000));
        // Once new connections pass again, the engine gives the stalled one up when its
        // replies are a command timeout overdue, and the host connects again: the waiter
        // is subscribed and wakes on the release, long before its retry delay.
        proxy.stall.store(false, Ordering::SeqCst);
        let start = Instant::now();
        let (got, ()) = tokio::join!(pending, async {
            tokio::time::sleep(Duration::from_millis(COMMAND_TIMEOUT_MS + 1_000)).await;
            assert!(holder.release().await.unwrap());
        });
        assert!(got.unwrap());
        let woken = start.elapsed();
        assert!(
            woken < Duration::from_millis(COMMAND_TIMEOUT_MS + 2_500),
            "woken after {woken:?}, not on release"
        );
    });
}

#[test]
fn a_subscriber_that_is_refused_keeps_nothing_for_keys_no_longer_waited_on() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let mut admin = Admin::connect(server.port).await;
        let created =
            admin.command(&["ACL", "SETUSER", "nosub", "on", ">pw", "~*", "&*", "+@all", "-subscribe"]);
        assert_eq!(created.await, ReplyValue::Text("OK".into()));
    });
    let settings =
        Settings { notify: true, auth: Some((Some("nosub".into()), "pw".into())), ..Settings::default() };
    let store: Arc<EngineStore> = connect_with(server.port, &settings).unwrap();
    let dyn_store: Arc<dyn LockStore> = store.clone();
    runtime().block_on(async {
        for i in 0..30 {
            let key = format!("refused-{i}");
            let holder = lock(dyn_store.clone(), &key, 5_000);
            assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
            let waiter = lock(dyn_store.clone(), &key, 5_000);
            let wait = AcquireOptions::default().with_timeout_ms(30).with_retry_delay_ms(10);
            assert!(!waiter.acquire(wait).await.unwrap(), "held: the waiter gives up at its timeout");
            assert!(holder.release().await.unwrap());
        }
        // Every waiter is gone; the subscriber keeps being refused. What it holds must go.
        let subscriber = store.subscriber().unwrap();
        let deadline = Instant::now() + Duration::from_secs(6);
        while subscriber.channels() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(subscriber.channels(), 0, "channels kept for keys nobody waits on");
    });
}
