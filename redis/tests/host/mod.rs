//! The tests' host for the sans-I/O engine: plain tokio sockets to a real
//! `redis-server` (in Node the host is `js/redis/driver.mjs`). It writes what the engine
//! asks for, feeds what arrives, calls the deadline and subscriber ticks, and gives up
//! (and, for the subscriber, replaces) a connection the engine says is dead. Also a
//! timer on tokio for the locks, and an admin connection for looking at keys directly.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use locksmith_core::{BoxFuture, Clock, MonotonicClock, Result, Timer};
use locksmith_redis::engine::reply::{decode, encode_command, ReplyValue};
use locksmith_redis::engine::{EngineOptions, EngineStore, Handshake, Subscriber};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

/// The command timeout of every store the host makes, in milliseconds.
pub const COMMAND_TIMEOUT_MS: u64 = 2_000;

/// How often the subscriber is ticked (idle channels unsubscribed, a ping sent, an
/// overdue reply noticed), as the Node driver does: a quarter of the command timeout,
/// 10 to 250 ms. Output is written, and deadlines checked, every millisecond.
const SUBSCRIBER_TICK_MS: u64 = 250;

pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    })
}

/// `Instant` for the clock, tokio for sleeping.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioTimer(MonotonicClock);

impl Clock for TokioTimer {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }

    fn unix_time_ms(&self) -> Option<u64> {
        self.0.unix_time_ms()
    }
}

impl Timer for TokioTimer {
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        // The sleep is created on first poll, inside the runtime.
        Box::pin(async move { tokio::time::sleep(Duration::from_millis(ms)).await })
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> bool {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                drop(runtime.spawn(task));
                true
            }
            Err(_) => false,
        }
    }
}

/// How a store connects.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// A subscriber connection, so waiters wake on release.
    pub notify: bool,
    /// `AUTH [user] password` on both connections.
    pub auth: Option<(Option<String>, String)>,
    /// Where the subscriber connects, when not to the server itself (a proxy).
    pub subscriber_port: Option<u16>,
    /// Held back before each write of the subscriber connection (a slow connection).
    pub subscriber_delay_ms: u64,
    /// Acquire without fencing tokens (`EngineOptions::fencing` false).
    pub unfenced: bool,
}

/// A store on `port`, with release notifications when `notify`.
pub fn connect(port: u16, notify: bool) -> Arc<EngineStore> {
    connect_with(port, &Settings { notify, ..Settings::default() }).expect("handshake")
}

/// A store on `port`; the handshake's outcome is the result. The host's tasks end when
/// the store is dropped (or its main connection closes).
pub fn connect_with(port: u16, settings: &Settings) -> Result<Arc<EngineStore>> {
    let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
    let subscriber = settings.notify.then(|| Subscriber::new(COMMAND_TIMEOUT_MS));
    let options = EngineOptions {
        key_prefix: "locksmith:".into(),
        command_timeout_ms: COMMAND_TIMEOUT_MS,
        fencing: !settings.unfenced,
    };
    let store = Arc::new(EngineStore::new(options, clock.clone(), subscriber.clone()));
    let socket = runtime().block_on(TcpStream::connect(("127.0.0.1", port))).expect("connect");
    runtime().spawn(drive(Arc::downgrade(&store), socket));
    if let Some(subscriber) = subscriber {
        let port = settings.subscriber_port.unwrap_or(port);
        runtime().spawn(drive_subscriber(Arc::downgrade(&store), subscriber, port, clock, settings.clone()));
    }
    let handshake = Handshake { auth: settings.auth.clone(), db: 0 };
    runtime().block_on(store.handshake(&handshake))?;
    Ok(store)
}

/// Drives `store`'s main connection: writes its output every millisecond, feeds what
/// arrives, fails requests past their deadline. A lost connection fails what is pending
/// and is not replaced (the Node driver's reconnects are tested from JS).
async fn drive(store: Weak<EngineStore>, mut socket: TcpStream) {
    socket.set_nodelay(true).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    loop {
        tokio::select! {
            read = socket.read(&mut buf) => {
                let Some(store) = store.upgrade() else { return };
                match read {
                    Ok(0) | Err(_) => return store.connection_lost("closed"),
                    Ok(n) => store.feed(&buf[..n]).expect("in step"),
                }
            }
            _ = tick.tick() => {
                let Some(store) = store.upgrade() else { return };
                if store.expire() {
                    return store.connection_lost("no reply");
                }
                if let Some(out) = store.take_output() {
                    if socket.write_all(&out).await.is_err() {
                        return store.connection_lost("closed");
                    }
                }
            }
        }
    }
}

/// Drives the subscriber connection: opens it when the subscriber wants one, and after a
/// failure (a refused command, a reply overdue, a closed socket) opens another.
async fn drive_subscriber(
    store: Weak<EngineStore>,
    subscriber: Subscriber,
    port: u16,
    clock: Arc<dyn Clock>,
    settings: Settings,
) {
    let auth = settings.auth.as_ref().map(|(user, password)| (user.as_deref(), password.as_str()));
    let mut buf = vec![0u8; 4096];
    loop {
        // Idle channels go while no connection is up too.
        while !subscriber.wants_connection() {
            if store.strong_count() == 0 {
                return;
            }
            subscriber.tick(clock.now_ms());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let Ok(mut socket) = TcpStream::connect(("127.0.0.1", port)).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        subscriber.connected(auth, clock.now_ms());
        let mut write = tokio::time::interval(Duration::from_millis(1));
        let mut tick = tokio::time::interval(Duration::from_millis(SUBSCRIBER_TICK_MS));
        loop {
            tokio::select! {
                read = socket.read(&mut buf) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if subscriber.feed(&buf[..n], clock.now_ms()).is_err() {
                            break;
                        }
                    }
                },
                _ = write.tick() => {
                    if store.strong_count() == 0 {
                        return;
                    }
                    if let Some(out) = subscriber.take_output() {
                        tokio::time::sleep(Duration::from_millis(settings.subscriber_delay_ms)).await;
                        if socket.write_all(&out).await.is_err() {
                            break;
                        }
                    }
                }
                _ = tick.tick() => {
                    if subscriber.tick(clock.now_ms()) {
                        break;
                    }
                }
            }
        }
        subscriber.connection_lost();
        // A connection refused at once is not redialled in a tight loop.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A plain connection for looking at the server directly.
pub struct Admin {
    socket: TcpStream,
    input: Vec<u8>,
}

impl Admin {
    pub async fn connect(port: u16) -> Self {
        Self { socket: TcpStream::connect(("127.0.0.1", port)).await.expect("connect"), input: Vec::new() }
    }

    /// Sends `args` and reads the reply (an error reply is a value too).
    pub async fn command(&mut self, args: &[&str]) -> ReplyValue {
        let args: Vec<&[u8]> = args.iter().map(|arg| arg.as_bytes()).collect();
        self.socket.write_all(&encode_command(&args)).await.unwrap();
        let mut buf = [0u8; 4096];
        loop {
            if let Some((value, used)) = decode(&self.input).unwrap() {
                self.input.drain(..used);
                return value;
            }
            let n = self.socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "the server closed the admin connection");
            self.input.extend_from_slice(&buf[..n]);
        }
    }

    /// `PTTL` of each key: -2 when it does not exist, -1 when it has no expiry.
    pub async fn pttls(&mut self, keys: &[String]) -> Vec<i64> {
        let mut out = Vec::new();
        for key in keys {
            match self.command(&["PTTL", key]).await {
                ReplyValue::Integer(ms) => out.push(ms),
                other => panic!("PTTL {key}: {other:?}"),
            }
        }
        out
    }

    /// A field of `INFO <section>`.
    pub async fn info_field(&mut self, section: &str, field: &str) -> Option<String> {
        let ReplyValue::Text(text) = self.command(&["INFO", section]).await else { return None };
        let prefix = format!("{field}:");
        text.lines().find_map(|line| line.strip_prefix(&prefix).map(|value| value.trim().to_owned()))
    }
}
