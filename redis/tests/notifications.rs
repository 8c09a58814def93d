//! Release notifications against a real `redis-server`: what they cost an uncontended
//! acquire, whether a release right after a failed attempt is seen, and what a stalled
//! subscriber connection does to waiters.

mod race;
mod server;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use locksmith_core::{AcquireOptions, Lock, LockStore};
use locksmith_redis::{RedisOptions, RedisStore, TokioTimer};
use race::ReleasesAfterAFailedAttempt;
use server::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn options(url: String) -> RedisOptions {
    let mut o = RedisOptions::new(url);
    o.connect_timeout = Duration::from_millis(500);
    o.command_timeout = Duration::from_millis(500);
    o.reconnect_retries = 1;
    o.reconnect_max_delay = Duration::from_millis(100);
    o
}

fn lock(store: Arc<dyn LockStore>, key: &str, ttl: u64) -> Lock {
    Lock::new(key, ttl, store, Arc::new(TokioTimer::default())).unwrap()
}

/// `cmdstat_<name>`'s `calls` from `INFO commandstats`.
async fn calls(url: &str, command: &str) -> u64 {
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut c).await.unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_acquire_with_a_timeout_sends_no_subscribe() {
    let server = RedisServer::start();
    let store: Arc<dyn LockStore> = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    for i in 0..20 {
        let l = lock(store.clone(), &format!("free-{i}"), 5_000);
        assert!(l
            .acquire(AcquireOptions::default().with_timeout_ms(2_000).with_retry_delay_ms(50))
            .await
            .unwrap());
        assert!(l.release().await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(calls(&server.url(), "subscribe").await, 0, "no SUBSCRIBE for locks that were free");
    assert_eq!(calls(&server.url(), "unsubscribe").await, 0);

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
    assert_eq!(calls(&server.url(), "subscribe").await, 1);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(calls(&server.url(), "unsubscribe").await, 1, "an idle channel is unsubscribed");
}

/// A TCP proxy to a Redis server. Its first connection (the store's command connection)
/// passes straight through; later ones (the subscriber connection) can be slowed down
/// or stalled.
struct Proxy {
    port: u16,
    state: Arc<ProxyState>,
}

#[derive(Default)]
struct ProxyState {
    accepted: AtomicUsize,
    /// Added to every chunk of later connections, both ways.
    delay_ms: AtomicU64,
    /// While set, later connections stop passing data, for good.
    stall: AtomicBool,
}

impl Proxy {
    async fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(ProxyState::default());
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let first = shared.accepted.fetch_add(1, Ordering::SeqCst) == 0;
                let upstream = TcpStream::connect(("127.0.0.1", target)).await.unwrap();
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = upstream.into_split();
                let stalled = Arc::new(AtomicBool::new(false));
                for (read, write) in [
                    (
                        Box::new(client_read) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
                        Box::new(server_write) as Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
                    ),
                    (Box::new(server_read), Box::new(client_write)),
                ] {
                    tokio::spawn(pump(read, write, (!first).then(|| (shared.clone(), stalled.clone()))));
                }
            }
        });
        Self { port, state }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

async fn pump(
    mut read: Box<dyn tokio::io::AsyncRead + Unpin + Send>,
    mut write: Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
    faults: Option<(Arc<ProxyState>, Arc<AtomicBool>)>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let Ok(n) = read.read(&mut buffer).await else { return };
        if n == 0 {
            return;
        }
        if let Some((state, stalled)) = &faults {
            if state.stall.load(Ordering::SeqCst) || stalled.load(Ordering::SeqCst) {
                stalled.store(true, Ordering::SeqCst);
                // Keep both sockets open and pass nothing, ever.
                std::future::pending::<()>().await;
            }
            let delay = state.delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
        }
        if write.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_right_after_a_failed_attempt_wakes_the_waiter() {
    let server = server::shared();
    let proxy = Proxy::start(server.port).await;
    // The subscriber connection is slow, so a SUBSCRIBE sent alongside the attempt
    // reaches Redis after the release.
    proxy.state.delay_ms.store(100, Ordering::SeqCst);
    let inner = Arc::new(RedisStore::connect(options(proxy.url())).await.unwrap());
    let direct: Arc<dyn LockStore> = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    let store = Arc::new(ReleasesAfterAFailedAttempt::new(inner));
    for round in 0..10 {
        let key = format!("right-after-{round}");
        let holder = Arc::new(lock(direct.clone(), &key, 30_000));
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        *store.holder.lock().unwrap() = Some(holder);
        let waiter = lock(store.clone(), &key, 30_000);
        let start = Instant::now();
        assert!(waiter
            .acquire(AcquireOptions::default().with_timeout_ms(10_000).with_retry_delay_ms(5_000))
            .await
            .unwrap());
        let slept = start.elapsed();
        assert!(slept < Duration::from_secs(1), "round {round}: the waiter slept {slept:?}");
        assert!(waiter.release().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_subscriber_neither_blocks_waiters_nor_stays_stalled() {
    let server = server::shared();
    let proxy = Proxy::start(server.port).await;
    let store: Arc<dyn LockStore> = Arc::new(RedisStore::connect(options(proxy.url())).await.unwrap());
    let direct: Arc<dyn LockStore> = Arc::new(RedisStore::connect(options(server.url())).await.unwrap());
    proxy.state.stall.store(true, Ordering::SeqCst);

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

    // Once new connections pass again, notifications come back: the stalled connection
    // was given up and replaced.
    proxy.state.stall.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let holder = lock(direct.clone(), "stalled-b", 30_000);
    assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
    let waiter = lock(store.clone(), "stalled-b", 30_000);
    let start = Instant::now();
    let (got, ()) = tokio::join!(
        waiter.acquire(AcquireOptions::default().with_timeout_ms(10_000).with_retry_delay_ms(5_000)),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(holder.release().await.unwrap());
        }
    );
    assert!(got.unwrap());
    let woken = start.elapsed();
    assert!(woken < Duration::from_millis(1_500), "woken after {woken:?}, not on release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_is_refused_keeps_nothing_for_keys_no_longer_waited_on() {
    let server = RedisServer::start();
    let admin = redis::Client::open(server.url()).unwrap();
    let mut c = admin.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "nosub", "on", ">pw", "~*", "&*", "+@all", "-subscribe"])
        .query_async(&mut c)
        .await
        .unwrap();
    let url = server.url().replace("redis://", "redis://nosub:pw@");
    let store = Arc::new(RedisStore::connect(options(url)).await.unwrap());
    let dyn_store: Arc<dyn LockStore> = store.clone();
    for i in 0..30 {
        let key = format!("refused-{i}");
        let holder = lock(dyn_store.clone(), &key, 5_000);
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let waiter = lock(dyn_store.clone(), &key, 5_000);
        let wait = AcquireOptions::default().with_timeout_ms(30).with_retry_delay_ms(10);
        assert!(!waiter.acquire(wait).await.unwrap(), "held: the waiter gives up at its timeout");
        assert!(holder.release().await.unwrap());
    }
    // Every waiter is gone; the subscriber keeps failing. What it holds must go.
    let deadline = Instant::now() + Duration::from_secs(6);
    while store.notification_channels() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(store.notification_channels(), 0, "channels kept for keys nobody waits on");
}
