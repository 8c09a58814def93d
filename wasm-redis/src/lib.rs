//! The Redis engine for the WebAssembly build: `locksmith_redis::engine` (commands,
//! replies, scripts, key layout, fencing, release notifications) as a second wasm module,
//! loaded only where `RedisLockStore` is used. The runtime's own socket carries the bytes
//! (`js/redis-wasm.mjs`: `connect()` from `cloudflare:sockets`, `Deno.connect`, `node:net`).
//!
//! The module is a store, not a lock: it answers the JS store contract (`acquire` with a
//! fencing token, `release`, `extend`, `isLocked`, `remainingTime`, `isHeldBy`,
//! `onRelease`), and the main module's lock logic uses it through its JS-store bridge.
//!
//! Calls run as tasks polled on the JS thread, as in the Node addon: a call starts its
//! task and polls it once (which queues its command); the driver writes
//! `WasmRedisEngine::take_output` once per turn and hands every chunk the
//! socket reads to `WasmRedisEngine::feed`. Finished calls come back from
//! `WasmRedisEngine::turn` as one `Float64Array`: `[id, value, id, value, ...]`,
//! a value being 1/0 for a flag, the fencing token (0: not taken; -1: taken without one)
//! for an acquire,
//! milliseconds (or -1 for none) for a number, -1 for nothing, `-2 - i` for the i-th
//! message of `WasmRedisEngine::errors` (`CODE message`), and -1e300 for a
//! release subscription that was cancelled (nothing to report).

// Core shares stores as `Arc`s on every target; on wasm32 there is one thread.
#![allow(clippy::arc_with_non_send_sync)]
// Everything here is for wasm32; on other targets the crate is empty, so
// `cargo build --workspace` on the host passes over it.
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use locksmith_core::{validate, BoxFuture, Clock, Grant, HoldKind, LockError, LockStore, Result};
use locksmith_redis::engine::local::Executor;
use locksmith_redis::engine::{reply, EngineOptions, EngineStore, Handshake, Subscriber};
use locksmith_redis::{check_url_settings, RedisOptions};
use wasm_bindgen::prelude::*;

#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// `performance.now()`: command deadlines and the subscriber's pings.
struct JsClock;

impl Clock for JsClock {
    fn now_ms(&self) -> u64 {
        performance_now() as u64
    }
}

fn js_error(err: &LockError) -> JsError {
    JsError::new(&format!("{} {err}", err.code()))
}

/// An acquire's outcome: the fencing token, or taken without one, or not taken.
fn granted(grant: Option<Grant>) -> Outcome {
    match grant {
        None => Outcome::Token(None),
        Some(grant) => grant.fencing_token.map_or(Outcome::Nothing, |t| Outcome::Token(Some(t))),
    }
}

/// A hold's kind as the JS store contract names it. Only `acquirePermit` is given a
/// semaphore's limit; the other calls find the hold by its key, so any valid limit does.
fn hold_kind(kind: &str, limit: Option<f64>) -> std::result::Result<HoldKind, JsError> {
    validate::js::kind(kind, Some(limit.unwrap_or(1.0))).map_err(|e| js_error(&e))
}

/// What a finished call hands back.
enum Outcome {
    Flag(bool),
    Token(Option<u64>),
    Millis(Option<u64>),
    Count(u64),
    Nothing,
    /// A release subscription ended by its waiter: nothing to report.
    Cancelled,
}

/// The value marking a cancelled subscription in `turn()`'s output.
const CANCELLED: f64 = -1e300;

#[derive(Default)]
struct CancelState {
    cancelled: bool,
    waker: Option<Waker>,
}

/// A release subscription that its waiter can end: dropping the engine's future
/// unsubscribes its waiter.
struct Cancellable {
    inner: Option<BoxFuture<'static, ()>>,
    state: Rc<RefCell<CancelState>>,
}

impl Future for Cancellable {
    type Output = Result<Outcome>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Outcome>> {
        if self.state.borrow().cancelled {
            self.inner = None;
            return Poll::Ready(Ok(Outcome::Cancelled));
        }
        self.state.borrow_mut().waker = Some(cx.waker().clone());
        match self.inner.as_mut().map(|inner| inner.as_mut().poll(cx)) {
            Some(Poll::Pending) => Poll::Pending,
            _ => Poll::Ready(Ok(Outcome::Nothing)),
        }
    }
}

/// Checks the URL against the TLS settings as the native store does (no fragment;
/// `tlsInsecure` only with `rediss://` and without a CA).
#[wasm_bindgen(js_name = checkUrlSettings)]
pub fn check_url_settings_js(
    url: String,
    tls_insecure: bool,
    has_ca: bool,
) -> std::result::Result<(), JsError> {
    let mut options = RedisOptions::new(url);
    options.tls_insecure = tls_insecure;
    options.tls_ca_cert_pem = has_ca.then(String::new);
    check_url_settings(&options).map_err(|e| js_error(&e))
}

/// One Redis store's engine: its command connection and its subscriber (on Redis
/// Cluster, one of each per node, by connection number: the `*On` methods).
#[wasm_bindgen]
pub struct WasmRedisEngine {
    store: Arc<EngineStore>,
    clock: Arc<JsClock>,
    tasks: Executor<Result<Outcome>>,
    finished: Vec<(u32, Result<Outcome>)>,
    errors: Vec<String>,
    subscriptions: std::collections::HashMap<u32, Rc<RefCell<CancelState>>>,
}

#[wasm_bindgen]
impl WasmRedisEngine {
    /// An engine with nothing pending; `notify_releases` gives it a subscriber.
    #[wasm_bindgen(constructor)]
    pub fn new(
        key_prefix: String,
        command_timeout_ms: f64,
        notify_releases: bool,
    ) -> std::result::Result<WasmRedisEngine, JsError> {
        let command_timeout_ms =
            validate::js::positive_ms("commandTimeoutMs", command_timeout_ms).map_err(|e| js_error(&e))?;
        let clock = Arc::new(JsClock);
        let subscriber = notify_releases.then(|| Subscriber::new(command_timeout_ms));
        let options = EngineOptions { key_prefix, command_timeout_ms };
        Ok(Self {
            store: Arc::new(EngineStore::new(options, clock.clone(), subscriber)),
            clock,
            tasks: Executor::default(),
            finished: Vec::new(),
            errors: Vec::new(),
            subscriptions: std::collections::HashMap::new(),
        })
    }

    /// The prefix put before every key.
    #[wasm_bindgen(getter, js_name = keyPrefix)]
    pub fn key_prefix(&self) -> String {
        self.store.key_prefix()
    }

    fn start(&mut self, id: u32, work: impl Future<Output = Result<Outcome>> + 'static) {
        if let Some(outcome) = self.tasks.spawn(id, Box::pin(work)) {
            self.finished.push((id, outcome));
        }
    }

    /// Queues the handshake of a new connection in front of everything else.
    pub fn handshake(&mut self, id: u32, user: Option<String>, password: Option<String>, db: u32) {
        let store = self.store.clone();
        let handshake = Handshake { auth: password.map(|password| (user, password)), db };
        self.start(id, async move { store.handshake(&handshake).await.map(|()| Outcome::Nothing) });
    }

    /// `handshake` on connection `conn` (a cluster node; database 0).
    #[wasm_bindgen(js_name = handshakeOn)]
    pub fn handshake_on(&mut self, id: u32, conn: u32, user: Option<String>, password: Option<String>) {
        let store = self.store.clone();
        let handshake = Handshake { auth: password.map(|password| (user, password)), db: 0 };
        self.start(id, async move {
            store.handshake_on(conn as usize, &handshake).await.map(|()| Outcome::Nothing)
        });
    }

    // Redis Cluster: one connection per node, requests routed by their key's slot.

    /// Routes by hash slot from now on; connection 0 is the seed at `address`.
    #[wasm_bindgen(js_name = enableCluster)]
    pub fn enable_cluster(&self, address: &str) {
        self.store.enable_cluster(address);
    }

    /// The masters' slot ranges: `firsts[i]..=lasts[i]` is served at `addresses[i]`.
    #[wasm_bindgen(js_name = setSlots)]
    #[allow(clippy::needless_pass_by_value)] // wasm-bindgen hands arrays over owned
    pub fn set_slots(&self, firsts: Vec<u32>, lasts: Vec<u32>, addresses: Vec<String>) {
        let clamp = |n: u32| u16::try_from(n).unwrap_or(u16::MAX);
        let ranges: Vec<(u16, u16, String)> = firsts
            .iter()
            .zip(&lasts)
            .zip(addresses)
            .map(|((first, last), address)| (clamp(*first), clamp(*last), address))
            .collect();
        self.store.set_slots(&ranges);
    }

    /// How many connections the store has.
    #[wasm_bindgen(getter)]
    pub fn connections(&self) -> u32 {
        self.store.connections() as u32
    }

    /// Connection `conn`'s node, `host:port`.
    pub fn address(&self, conn: u32) -> Option<String> {
        self.store.address(conn as usize)
    }

    /// Whether the slot map should be read again (a `MOVED`, a lost node).
    #[wasm_bindgen(js_name = takeTopologyStale)]
    pub fn take_topology_stale(&self) -> bool {
        self.store.take_topology_stale()
    }

    /// The bytes to write on connection `conn` now, or `undefined`.
    #[wasm_bindgen(js_name = takeOutputOn)]
    pub fn take_output_on(&self, conn: u32) -> Option<Vec<u8>> {
        self.store.take_output_on(conn as usize)
    }

    /// Whether connection `conn` has requests waiting or bytes to write.
    #[wasm_bindgen(js_name = busyOn)]
    pub fn busy_on(&self, conn: u32) -> bool {
        self.store.pending_on(conn as usize) > 0 || self.store.has_output_on(conn as usize)
    }

    /// `feed` for connection `conn`.
    #[wasm_bindgen(js_name = feedOn)]
    pub fn feed_on(&self, conn: u32, chunk: &[u8]) -> std::result::Result<(), JsError> {
        self.store.feed_on(conn as usize, chunk).map_err(|e| js_error(&e))
    }

    /// Fails requests past their deadline on every connection; the connections to drop.
    #[wasm_bindgen(js_name = expireAll)]
    pub fn expire_all(&self) -> Vec<u32> {
        self.store.expire_all().into_iter().map(|conn| conn as u32).collect()
    }

    /// Connection `conn` is gone: its pending requests fail with `STORE_UNAVAILABLE`.
    #[wasm_bindgen(js_name = connectionLostOn)]
    pub fn connection_lost_on(&self, conn: u32, why: &str) {
        self.store.connection_lost_on(conn as usize, why);
    }

    // Cluster: one subscriber connection per node (sharded pub/sub), by connection.

    /// Whether connection `conn`'s subscriber wants a socket that it does not have.
    #[wasm_bindgen(js_name = subscriberWantedOn)]
    pub fn subscriber_wanted_on(&self, conn: u32) -> bool {
        self.store.subscriber_on(conn as usize).is_some_and(|s| s.wants_connection())
    }

    /// Connection `conn`'s subscriber socket is up.
    #[wasm_bindgen(js_name = subscriberConnectedOn)]
    #[allow(clippy::needless_pass_by_value)] // wasm-bindgen hands optional strings over owned
    pub fn subscriber_connected_on(&self, conn: u32, user: Option<String>, password: Option<String>) {
        if let Some(subscriber) = self.store.subscriber_on(conn as usize) {
            let auth = password.as_deref().map(|password| (user.as_deref(), password));
            subscriber.connected(auth, self.clock.now_ms());
        }
    }

    /// Connection `conn`'s subscriber bytes to write now, or `undefined`.
    #[wasm_bindgen(js_name = subscriberOutputOn)]
    pub fn subscriber_output_on(&self, conn: u32) -> Option<Vec<u8>> {
        self.store.subscriber_on(conn as usize).and_then(|s| s.take_output())
    }

    /// `subscriberFeed` for connection `conn`'s subscriber.
    #[wasm_bindgen(js_name = subscriberFeedOn)]
    pub fn subscriber_feed_on(&self, conn: u32, chunk: &[u8]) -> std::result::Result<(), JsError> {
        let now = self.clock.now_ms();
        self.store
            .subscriber_on(conn as usize)
            .map_or(Ok(()), |s| s.feed(chunk, now))
            .map_err(|e| js_error(&e))
    }

    /// `subscriberTick` for connection `conn`'s subscriber.
    #[wasm_bindgen(js_name = subscriberTickOn)]
    pub fn subscriber_tick_on(&self, conn: u32) -> bool {
        let now = self.clock.now_ms();
        self.store.subscriber_on(conn as usize).is_some_and(|s| s.tick(now))
    }

    /// Connection `conn`'s subscriber socket is gone.
    #[wasm_bindgen(js_name = subscriberLostOn)]
    pub fn subscriber_lost_on(&self, conn: u32) {
        if let Some(subscriber) = self.store.subscriber_on(conn as usize) {
            subscriber.connection_lost();
        }
    }

    /// Call `id`: takes `key` for `owner` if it is free; finishes with the fencing token, or 0.
    pub fn acquire(
        &mut self,
        id: u32,
        key: String,
        owner: String,
        ttl_ms: f64,
    ) -> std::result::Result<(), JsError> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).map_err(|e| js_error(&e))?;
        let store = self.store.clone();
        self.start(id, async move { store.acquire_with_grant(&key, &owner, ttl_ms).await.map(granted) });
        Ok(())
    }

    /// Call `id`: frees `key` if `owner` holds it.
    pub fn release(&mut self, id: u32, key: String, owner: String) {
        let store = self.store.clone();
        self.start(id, async move { store.release(&key, &owner).await.map(Outcome::Flag) });
    }

    /// Call `id`: pushes `key`'s expiry `ttl_ms` from now if `owner` holds it.
    pub fn extend(
        &mut self,
        id: u32,
        key: String,
        owner: String,
        ttl_ms: f64,
    ) -> std::result::Result<(), JsError> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).map_err(|e| js_error(&e))?;
        let store = self.store.clone();
        self.start(id, async move { store.extend(&key, &owner, ttl_ms).await.map(Outcome::Flag) });
        Ok(())
    }

    /// Call `id`: whether anyone holds `key`.
    #[wasm_bindgen(js_name = isLocked)]
    pub fn is_locked(&mut self, id: u32, key: String) {
        let store = self.store.clone();
        self.start(id, async move { store.is_locked(&key).await.map(Outcome::Flag) });
    }

    /// Call `id`: whether `owner` holds `key`.
    #[wasm_bindgen(js_name = isHeldBy)]
    pub fn is_held_by(&mut self, id: u32, key: String, owner: String) {
        let store = self.store.clone();
        self.start(id, async move {
            store.is_held_by(&key, &owner).await.map(|held| Outcome::Flag(held == Some(true)))
        });
    }

    /// Call `id`: milliseconds left on `owner`'s own hold of `key`, or -1 when `owner`
    /// does not hold it (one script: a hold's due check).
    #[wasm_bindgen(js_name = ownerRemainingTime)]
    pub fn owner_remaining_time(&mut self, id: u32, key: String, owner: String) {
        let store = self.store.clone();
        self.start(id, async move {
            store.owner_remaining_time(&key, &owner).await.map(|check| {
                Outcome::Millis(match check {
                    locksmith_core::HoldCheck::Held { remaining_ms } => Some(remaining_ms),
                    _ => None,
                })
            })
        });
    }

    /// Call `id`: milliseconds until `key`'s hold expires, or -1 when nobody holds it.
    #[wasm_bindgen(js_name = remainingTime)]
    pub fn remaining_time(&mut self, id: u32, key: String) {
        let store = self.store.clone();
        self.start(id, async move { store.remaining_time(&key).await.map(Outcome::Millis) });
    }

    /// Call `id`: takes a hold of `key` of `kind` (`semaphore` with `limit`, `read`,
    /// `write`) for `owner`; finishes like `acquire`.
    #[wasm_bindgen(js_name = acquirePermit)]
    pub fn acquire_permit(
        &mut self,
        id: u32,
        key: String,
        owner: String,
        ttl_ms: f64,
        kind: &str,
        limit: Option<f64>,
    ) -> std::result::Result<(), JsError> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).map_err(|e| js_error(&e))?;
        let kind = validate::js::kind(kind, limit).map_err(|e| js_error(&e))?;
        let store = self.store.clone();
        self.start(id, async move { store.acquire_permit(&key, &owner, ttl_ms, kind).await.map(granted) });
        Ok(())
    }

    /// Call `id`: gives back `owner`'s hold of `key`.
    #[wasm_bindgen(js_name = releasePermit)]
    pub fn release_permit(
        &mut self,
        id: u32,
        key: String,
        owner: String,
        kind: &str,
    ) -> std::result::Result<(), JsError> {
        let kind = hold_kind(kind, None)?;
        let store = self.store.clone();
        self.start(id, async move { store.release_permit(&key, &owner, kind).await.map(Outcome::Flag) });
        Ok(())
    }

    /// Call `id`: pushes the expiry of `owner`'s hold of `key` `ttl_ms` from now.
    #[wasm_bindgen(js_name = extendPermit)]
    pub fn extend_permit(
        &mut self,
        id: u32,
        key: String,
        owner: String,
        ttl_ms: f64,
        kind: &str,
    ) -> std::result::Result<(), JsError> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).map_err(|e| js_error(&e))?;
        let kind = hold_kind(kind, None)?;
        let store = self.store.clone();
        self.start(
            id,
            async move { store.extend_permit(&key, &owner, ttl_ms, kind).await.map(Outcome::Flag) },
        );
        Ok(())
    }

    /// Call `id`: how many holds of `key` are live.
    #[wasm_bindgen(js_name = countPermits)]
    pub fn count_permits(&mut self, id: u32, key: String, kind: &str) -> std::result::Result<(), JsError> {
        let kind = hold_kind(kind, None)?;
        let store = self.store.clone();
        self.start(id, async move { store.permit_count(&key, kind).await.map(Outcome::Count) });
        Ok(())
    }

    /// Call `id`: milliseconds until `owner`'s hold of `key` expires, or -1 without one.
    #[wasm_bindgen(js_name = permitRemainingTime)]
    pub fn permit_remaining_time(
        &mut self,
        id: u32,
        key: String,
        owner: String,
        kind: &str,
    ) -> std::result::Result<(), JsError> {
        let kind = hold_kind(kind, None)?;
        let store = self.store.clone();
        self.start(
            id,
            async move { store.permit_remaining_time(&key, &owner, kind).await.map(Outcome::Millis) },
        );
        Ok(())
    }

    /// Whether locks of this process wait for `key`'s release (see
    /// `LockStore::has_local_waiters`).
    #[wasm_bindgen(js_name = hasWaiters)]
    #[must_use]
    pub fn has_waiters(&self, key: &str) -> bool {
        self.store.has_local_waiters(key)
    }

    /// Waits for a release of `key` — of its holds of `kind` when given — (or for the
    /// subscription that will carry one to be confirmed); `false` when the store has no
    /// release notifications.
    #[wasm_bindgen(js_name = onRelease)]
    #[allow(clippy::needless_pass_by_value)] // wasm-bindgen hands optional strings over owned
    pub fn on_release(
        &mut self,
        id: u32,
        key: &str,
        kind: Option<String>,
    ) -> std::result::Result<bool, JsError> {
        let signal = match kind.as_deref() {
            None | Some("lock") => self.store.release_signal(key),
            Some(kind) => self.store.permit_release_signal(key, hold_kind(kind, None)?),
        };
        let Some(signal) = signal else { return Ok(false) };
        let state = Rc::new(RefCell::new(CancelState::default()));
        self.subscriptions.insert(id, state.clone());
        self.start(id, Cancellable { inner: Some(signal), state });
        Ok(true)
    }

    /// Ends the release subscription `id`; it finishes as cancelled on the next turn.
    #[wasm_bindgen(js_name = offRelease)]
    pub fn off_release(&mut self, id: u32) {
        if let Some(state) = self.subscriptions.remove(&id) {
            let waker = {
                let mut state = state.borrow_mut();
                state.cancelled = true;
                state.waker.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }

    // Driving.

    /// The bytes to write now, or `undefined`.
    #[wasm_bindgen(js_name = takeOutput)]
    pub fn take_output(&self) -> Option<Vec<u8>> {
        self.store.take_output()
    }

    /// Settles every reply in `chunk` and runs what it woke (collect it with `turn()`).
    /// Throws when the bytes are out of step: the driver then drops the connection.
    pub fn feed(&self, chunk: &[u8]) -> std::result::Result<(), JsError> {
        self.store.feed(chunk).map_err(|e| js_error(&e))
    }

    /// Fails requests past their deadline; `true` when the driver must drop the connection.
    pub fn expire(&self) -> bool {
        self.store.expire()
    }

    /// Whether a reply said `READONLY` (the server is a replica now) since the last call.
    #[wasm_bindgen(js_name = takeReplicaSeen)]
    pub fn take_replica_seen(&self) -> bool {
        self.store.take_replica_seen()
    }

    /// Writes that grant or extend a hold wait for `replicas` replicas (`WAIT`, at most
    /// `timeout_ms`); fewer fail with `STORE_UNAVAILABLE`. 0 turns it off.
    #[wasm_bindgen(js_name = setMinReplicas)]
    pub fn set_min_replicas(&self, replicas: u32, timeout_ms: u32) {
        self.store.set_min_replicas(replicas, u64::from(timeout_ms));
    }

    /// The connection is gone: pending requests fail with `STORE_UNAVAILABLE`.
    #[wasm_bindgen(js_name = connectionLost)]
    pub fn connection_lost(&self, why: &str) {
        self.store.connection_lost(why);
    }

    /// Later calls fail with `STORE_CLOSED`; pending ones fail now.
    pub fn close(&self) {
        self.store.close();
    }

    /// Runs woken tasks; what finished, or `undefined`.
    pub fn turn(&mut self) -> Option<Vec<f64>> {
        let mut finished = std::mem::take(&mut self.finished);
        self.tasks.run_ready(&mut finished);
        if finished.is_empty() {
            self.finished = finished;
            return None;
        }
        self.errors.clear();
        let mut out = Vec::with_capacity(finished.len() * 2);
        for (id, outcome) in finished.drain(..) {
            out.push(f64::from(id));
            out.push(match outcome {
                Ok(Outcome::Flag(flag)) => f64::from(u8::from(flag)),
                Ok(Outcome::Token(token)) => token.map_or(0.0, |t| t as f64),
                Ok(Outcome::Millis(Some(ms))) => ms as f64,
                Ok(Outcome::Count(n)) => n as f64,
                Ok(Outcome::Millis(None) | Outcome::Nothing) => -1.0,
                Ok(Outcome::Cancelled) => CANCELLED,
                Err(err) => {
                    self.errors.push(format!("{} {err}", err.code()));
                    -1.0 - self.errors.len() as f64
                }
            });
            self.subscriptions.remove(&id);
        }
        self.finished = finished;
        Some(out)
    }

    /// The messages that the last `turn()`'s error values point at.
    pub fn errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }

    /// Requests waiting for a reply, and calls waiting (release subscriptions included).
    #[wasm_bindgen(getter)]
    pub fn pending(&self) -> u32 {
        (self.store.pending() + self.tasks.len()) as u32
    }

    // The subscriber connection (release notifications).

    /// Whether the subscriber wants a connection that it does not have.
    #[wasm_bindgen(getter, js_name = subscriberWanted)]
    pub fn subscriber_wanted(&self) -> bool {
        self.store.subscriber().is_some_and(Subscriber::wants_connection)
    }

    /// The subscriber's socket is up: queues AUTH and the wanted SUBSCRIBEs.
    #[wasm_bindgen(js_name = subscriberConnected)]
    #[allow(clippy::needless_pass_by_value)] // wasm-bindgen hands optional strings over owned
    pub fn subscriber_connected(&self, user: Option<String>, password: Option<String>) {
        if let Some(subscriber) = self.store.subscriber() {
            let auth = password.as_deref().map(|password| (user.as_deref(), password));
            subscriber.connected(auth, self.clock.now_ms());
        }
    }

    /// The subscriber's bytes to write now, or `undefined`.
    #[wasm_bindgen(js_name = subscriberOutput)]
    pub fn subscriber_output(&self) -> Option<Vec<u8>> {
        self.store.subscriber().and_then(Subscriber::take_output)
    }

    /// Reads confirmations and releases (collect the woken calls with `turn()`). Throws
    /// when the connection must be dropped.
    #[wasm_bindgen(js_name = subscriberFeed)]
    pub fn subscriber_feed(&self, chunk: &[u8]) -> std::result::Result<(), JsError> {
        let now = self.clock.now_ms();
        self.store.subscriber().map_or(Ok(()), |s| s.feed(chunk, now)).map_err(|e| js_error(&e))
    }

    /// Unsubscribes idle channels and pings; `true` when the subscriber connection must
    /// be dropped.
    #[wasm_bindgen(js_name = subscriberTick)]
    pub fn subscriber_tick(&self) -> bool {
        let now = self.clock.now_ms();
        self.store.subscriber().is_some_and(|s| s.tick(now))
    }

    /// The subscriber connection is gone.
    #[wasm_bindgen(js_name = subscriberLost)]
    pub fn subscriber_lost(&self) {
        if let Some(subscriber) = self.store.subscriber() {
            subscriber.connection_lost();
        }
    }
}

/// `args` as one RESP command, for the driver's own short exchanges (Sentinel, `ROLE`).
#[wasm_bindgen(js_name = redisCommand)]
#[must_use]
#[allow(clippy::needless_pass_by_value)] // wasm-bindgen hands arrays of strings over owned
pub fn redis_command(args: Vec<String>) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(String::as_bytes).collect();
    reply::encode_command(&args)
}

/// The first whole reply in `chunk` as `[value, bytes used]`, or `undefined` when more
/// bytes are needed. A value is `null`, a number, a string, an array, or `{ error }`.
/// Throws on bytes that are not RESP.
#[wasm_bindgen(js_name = redisDecode)]
pub fn redis_decode(chunk: &[u8]) -> std::result::Result<Option<js_sys::Array>, JsError> {
    fn js(value: reply::ReplyValue) -> JsValue {
        match value {
            reply::ReplyValue::Nil => JsValue::NULL,
            reply::ReplyValue::Integer(n) => JsValue::from_f64(n as f64),
            reply::ReplyValue::Text(text) => JsValue::from_str(&text),
            reply::ReplyValue::Error(message) => {
                let error = js_sys::Object::new();
                // Setting a property on a fresh plain object cannot fail.
                let _ =
                    js_sys::Reflect::set(&error, &JsValue::from_str("error"), &JsValue::from_str(&message));
                error.into()
            }
            reply::ReplyValue::Array(items) => items.into_iter().map(js).collect::<js_sys::Array>().into(),
        }
    }
    let decoded = reply::decode(chunk).map_err(|e| js_error(&e))?;
    Ok(decoded.map(|(value, used)| js_sys::Array::of2(&js(value), &JsValue::from_f64(used as f64))))
}
