//! The Redis engine for the WebAssembly build: `locksmith_redis::engine` (commands,
//! replies, scripts, key layout, fencing, release notifications) as a second wasm module,
//! loaded only where `RedisLockStore` is used. The runtime's own socket carries the bytes
//! (the one driver, `js/redis/driver.mjs`: `connect()` from `cloudflare:sockets`, `Deno.connect`, `node:net`).
//!
//! The module is a store, not a lock: it answers the JS store contract (`acquire` with a
//! fencing token, `release`, `extend`, `isLocked`, `remainingTime`, `isHeldBy`,
//! `onRelease`), and the main module's lock logic uses it through its JS-store bridge.
//!
//! Calls run as tasks polled on the JS thread, as in the Node addon: a call starts its
//! task and polls it once (which queues its command); the driver writes
//! `WasmRedisEngine::take_output` once per turn and hands every chunk the
//! socket reads to `WasmRedisEngine::feed`. Finished calls come back from
//! `WasmRedisEngine::turn` in the driver's `Float64Array` (`useOutcomes`), as in the
//! Node addon: `[-1, id, value, id, value, ...]`,
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
    /// `acquireAll`: each key's fencing token, or the index of a key found held.
    All(locksmith_core::AllGrant),
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
/// Cluster, one of each per node: every driver-facing method takes the connection).
#[wasm_bindgen]
pub struct WasmRedisEngine {
    store: Arc<EngineStore>,
    clock: Arc<JsClock>,
    tasks: Executor<Result<Outcome>>,
    finished: Vec<(u32, Result<Outcome>)>,
    errors: Vec<String>,
    subscriptions: std::collections::HashMap<u32, Rc<RefCell<CancelState>>>,
    /// The driver's outcome array (see `turn`).
    outcomes: Option<js_sys::Float64Array>,
}

#[wasm_bindgen]
impl WasmRedisEngine {
    /// An engine with nothing pending; `notify_releases` gives it a subscriber; `fencing`
    /// false makes a lock's acquire one plain `SET NX PX`, its hold without a token.
    #[wasm_bindgen(constructor)]
    pub fn new(
        key_prefix: String,
        command_timeout_ms: f64,
        notify_releases: bool,
        fencing: Option<bool>,
    ) -> std::result::Result<WasmRedisEngine, JsError> {
        let command_timeout_ms =
            validate::js::positive_ms("commandTimeoutMs", command_timeout_ms).map_err(|e| js_error(&e))?;
        let clock = Arc::new(JsClock);
        let subscriber = notify_releases.then(|| Subscriber::new(command_timeout_ms));
        let options = EngineOptions { key_prefix, command_timeout_ms, fencing: fencing.unwrap_or(true) };
        Ok(Self {
            store: Arc::new(EngineStore::new(options, clock.clone(), subscriber)),
            clock,
            tasks: Executor::default(),
            finished: Vec::new(),
            errors: Vec::new(),
            subscriptions: std::collections::HashMap::new(),
            outcomes: None,
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

    // The host API the driver (js/redis/driver.mjs) uses, the same as the Node addon's
    // (node/src/redis_engine.rs): connection-indexed (connection 0 is the server, or a
    // cluster's first node), each call's outcome reported by `turn()`.

    /// Call `id`: queues connection `conn`'s handshake in front of everything else.
    pub fn handshake(&mut self, id: u32, conn: u32, user: Option<String>, password: Option<String>, db: u32) {
        let store = self.store.clone();
        let handshake = Handshake { auth: password.map(|password| (user, password)), db };
        self.start(id, async move {
            store.handshake_on(conn as usize, &handshake).await.map(|()| Outcome::Nothing)
        });
    }

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

    /// Connection `conn`'s node, `host:port` (`undefined` off a cluster).
    pub fn address(&self, conn: u32) -> Option<String> {
        self.store.address(conn as usize)
    }

    /// Whether the slot map should be read again (a `MOVED`, a lost node).
    #[wasm_bindgen(js_name = takeTopologyStale)]
    pub fn take_topology_stale(&self) -> bool {
        self.store.take_topology_stale()
    }

    /// Whether a reply said `READONLY` (the server is a replica now) since the last call.
    #[wasm_bindgen(js_name = takeReplicaSeen)]
    pub fn take_replica_seen(&self) -> bool {
        self.store.take_replica_seen()
    }

    /// The bytes to write on connection `conn` now, or `undefined`.
    #[wasm_bindgen(js_name = takeOutput)]
    pub fn take_output(&self, conn: u32) -> Option<Vec<u8>> {
        self.store.take_output_on(conn as usize)
    }

    /// Whether connection `conn` has requests waiting or bytes to write.
    pub fn busy(&self, conn: u32) -> bool {
        self.store.pending_on(conn as usize) > 0 || self.store.has_output_on(conn as usize)
    }

    /// Settles every reply in connection `conn`'s `chunk` and runs what it woke: a
    /// `turn()`. Throws when the bytes are out of step: the driver then drops the
    /// connection (what the chunk finished is reported by the next turn).
    pub fn feed(&mut self, conn: u32, chunk: &[u8]) -> std::result::Result<u32, JsError> {
        self.store.feed_on(conn as usize, chunk).map_err(|e| js_error(&e))?;
        Ok(self.turn())
    }

    /// A `turn()` (the engine sleeps on nothing here: its locks are the main module's).
    pub fn fire(&mut self) -> u32 {
        self.turn()
    }

    /// Fails requests past their deadline (and sends again those a cluster asked to
    /// retry); the connections the driver must drop.
    pub fn expire(&self) -> Vec<u32> {
        self.store.expire_all().into_iter().map(|conn| conn as u32).collect()
    }

    /// Connection `conn` is gone: its pending requests fail with `STORE_UNAVAILABLE`.
    #[wasm_bindgen(js_name = connectionLost)]
    pub fn connection_lost(&self, conn: u32, why: &str) {
        self.store.connection_lost_on(conn as usize, why);
    }

    /// Writes that grant or extend a hold wait for `replicas` replicas (`WAIT`, at most
    /// `timeout_ms`); fewer fail with `STORE_UNAVAILABLE`. 0 turns it off.
    #[wasm_bindgen(js_name = setMinReplicas)]
    pub fn set_min_replicas(&self, replicas: u32, timeout_ms: u32) {
        self.store.set_min_replicas(replicas, u64::from(timeout_ms));
    }

    /// Later calls fail with `STORE_CLOSED`; pending ones fail now.
    pub fn close(&self) {
        self.store.close();
    }

    /// Where finished calls are reported from now on (at least 3 numbers long).
    #[wasm_bindgen(js_name = useOutcomes)]
    pub fn use_outcomes(&mut self, outcomes: js_sys::Float64Array) -> std::result::Result<(), JsError> {
        if outcomes.length() < 3 {
            return Err(JsError::new("INVALID_ARGUMENT locksmith: the outcome array is too short"));
        }
        self.outcomes = Some(outcomes);
        Ok(())
    }

    /// Runs woken tasks and writes what finished into the outcome array, `[-1 (no
    /// sleep), id, value, id, value, ...]`. Answers `4 * n + wants`: `n` numbers written
    /// (0: nothing to report), `wants` what the driver has to do now (bit 0: write; bit
    /// 1: see to a subscriber; `EngineStore::host_wants`). Calls that do not fit are
    /// reported by the next turn.
    pub fn turn(&mut self) -> u32 {
        let count = self.report();
        (count << 2) | self.store.host_wants()
    }

    /// `turn()`'s work: how many numbers it wrote into the outcome array.
    fn report(&mut self) -> u32 {
        let mut finished = std::mem::take(&mut self.finished);
        self.tasks.run_ready(&mut finished);
        let Some(array) = self.outcomes.as_ref() else {
            self.finished = finished;
            return 0;
        };
        if finished.is_empty() {
            self.finished = finished;
            return 0;
        }
        self.errors.clear();
        let fit = ((array.length() as usize).saturating_sub(1)) / 2;
        let reported = finished.len().min(fit);
        let mut out = Vec::with_capacity(1 + 2 * reported);
        out.push(-1.0);
        for (id, outcome) in finished.drain(..reported) {
            out.push(f64::from(id));
            out.push(match outcome {
                // Taken: the tokens go beside the errors (`=` and one per key, `-` for
                // none), which no error message starts with; refused: the index held.
                Ok(Outcome::All(locksmith_core::AllGrant::Granted(grants))) => {
                    let tokens: Vec<String> = grants
                        .iter()
                        .map(|g| g.fencing_token.map_or_else(|| "-".to_owned(), |t| t.to_string()))
                        .collect();
                    self.errors.push(format!("={}", tokens.join(" ")));
                    -1.0 - self.errors.len() as f64
                }
                Ok(Outcome::All(locksmith_core::AllGrant::Busy(held))) => held.map_or(-1.0, |at| at as f64),
                // (-1 below, for Nothing: not in one step.)
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
        array.subarray(0, out.len() as u32).copy_from(&out);
        self.finished = finished;
        out.len() as u32
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

    // Subscribers (release notifications): one per connection on a cluster (sharded
    // pub/sub), else connection 0's.

    /// Whether connection `conn`'s subscriber wants a socket that it does not have.
    #[wasm_bindgen(js_name = subscriberWanted)]
    pub fn subscriber_wanted(&self, conn: u32) -> bool {
        self.store.subscriber_on(conn as usize).is_some_and(|s| s.wants_connection())
    }

    /// Connection `conn`'s subscriber socket is up: queues AUTH and the wanted SUBSCRIBEs.
    #[wasm_bindgen(js_name = subscriberConnected)]
    #[allow(clippy::needless_pass_by_value)] // wasm-bindgen hands optional strings over owned
    pub fn subscriber_connected(&self, conn: u32, user: Option<String>, password: Option<String>) {
        if let Some(subscriber) = self.store.subscriber_on(conn as usize) {
            let auth = password.as_deref().map(|password| (user.as_deref(), password));
            subscriber.connected(auth, self.clock.now_ms());
        }
    }

    /// Connection `conn`'s subscriber bytes to write now, or `undefined`.
    #[wasm_bindgen(js_name = subscriberOutput)]
    pub fn subscriber_output(&self, conn: u32) -> Option<Vec<u8>> {
        self.store.subscriber_on(conn as usize).and_then(|s| s.take_output())
    }

    /// Reads confirmations and releases on connection `conn`'s subscriber and runs the
    /// waiters they woke: a `turn()`. Throws when the subscriber socket must be dropped.
    #[wasm_bindgen(js_name = subscriberFeed)]
    pub fn subscriber_feed(&mut self, conn: u32, chunk: &[u8]) -> std::result::Result<u32, JsError> {
        let now = self.clock.now_ms();
        self.store
            .subscriber_on(conn as usize)
            .map_or(Ok(()), |s| s.feed(chunk, now))
            .map_err(|e| js_error(&e))?;
        Ok(self.turn())
    }

    /// Unsubscribes idle channels and pings, on every subscriber: the connections whose
    /// subscriber socket must be dropped.
    #[wasm_bindgen(js_name = subscriberTick)]
    pub fn subscriber_tick(&self) -> Vec<u32> {
        let now = self.clock.now_ms();
        (0..self.store.connections())
            .filter(|&conn| self.store.subscriber_on(conn).is_some_and(|s| s.tick(now)))
            .map(|conn| conn as u32)
            .collect()
    }

    /// Connection `conn`'s subscriber socket is gone.
    #[wasm_bindgen(js_name = subscriberLost)]
    pub fn subscriber_lost(&self, conn: u32) {
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

    /// Call `id`: takes every one of `keys` (one per line, distinct, in canonical order)
    /// for `owner`, or none: one script where the keys share a slot, else in order.
    #[wasm_bindgen(js_name = acquireAll)]
    pub fn acquire_all(
        &mut self,
        id: u32,
        keys: &str,
        owner: String,
        ttl_ms: f64,
    ) -> std::result::Result<(), JsError> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).map_err(|e| js_error(&e))?;
        let keys = validate::keys(keys.split('\n').map(str::to_owned).collect()).map_err(|e| js_error(&e))?;
        let store = self.store.clone();
        // Keys across a cluster's slots: `null`, and the lock takes them one at a time
        // through the one-key calls (each with its own deadline, and cancellable).
        self.start(id, async move {
            match store.acquire_all(&keys, &owner, ttl_ms) {
                Some(at_once) => at_once.await.map(Outcome::All),
                None => Ok(Outcome::Nothing),
            }
        });
        Ok(())
    }

    /// Call `id`: frees `key` if `owner` holds it.
    pub fn release(&mut self, id: u32, key: String, owner: String) {
        let store = self.store.clone();
        self.start(id, async move { store.release(&key, &owner).await.map(Outcome::Flag) });
    }

    /// Call `id`: a fair lock's release: frees `key` if `owner` holds it, or gives up its place.
    #[wasm_bindgen(js_name = releaseFair)]
    pub fn release_fair(&mut self, id: u32, key: String, owner: String) {
        let store = self.store.clone();
        self.start(id, async move { store.release_fair(&key, &owner).await.map(Outcome::Flag) });
    }

    /// Call `id`: a fair hold's extend (its fair mark kept at least as long).
    #[wasm_bindgen(js_name = extendFair)]
    pub fn extend_fair(
        &mut self,
        id: u32,
        key: String,
        owner: String,
        ttl_ms: f64,
    ) -> std::result::Result<(), JsError> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).map_err(|e| js_error(&e))?;
        let store = self.store.clone();
        self.start(id, async move { store.extend_fair(&key, &owner, ttl_ms).await.map(Outcome::Flag) });
        Ok(())
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

    /// Call `id`: takes a hold of `key` of `kind` (`semaphore` with `limit` and
    /// `permits` of its permits, default 1; `read`, `write`) for `owner`; finishes like
    /// `acquire`.
    #[wasm_bindgen(js_name = acquirePermit)]
    #[allow(clippy::too_many_arguments)] // the JS store contract's arguments, and the call id
    pub fn acquire_permit(
        &mut self,
        id: u32,
        key: String,
        owner: String,
        ttl_ms: f64,
        kind: &str,
        limit: Option<f64>,
        permits: Option<f64>,
    ) -> std::result::Result<(), JsError> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).map_err(|e| js_error(&e))?;
        let kind = validate::js::kind(kind, limit).map_err(|e| js_error(&e))?;
        let permits = permits.map_or(Ok(1), validate::js::permits).map_err(|e| js_error(&e))?;
        let store = self.store.clone();
        self.start(id, async move {
            store.acquire_permits(&key, &owner, ttl_ms, kind, permits).await.map(granted)
        });
        Ok(())
    }

    /// Call `id`: a fair handle's attempt (the JS store contract's `acquireFair`) on a lock
    /// (`kind` "lock") or a semaphore's `permits` of `limit`; finishes as `acquirePermit`.
    #[wasm_bindgen(js_name = acquireFair)]
    #[allow(clippy::too_many_arguments)] // the JS store contract's arguments, and the call id
    pub fn acquire_fair(
        &mut self,
        id: u32,
        key: String,
        owner: String,
        ttl_ms: f64,
        kind: &str,
        limit: Option<f64>,
        permits: Option<f64>,
        waits: bool,
    ) -> std::result::Result<(), JsError> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).map_err(|e| js_error(&e))?;
        let kind = validate::js::kind(kind, limit).map_err(|e| js_error(&e))?;
        let permits = permits.map_or(Ok(1), validate::js::permits).map_err(|e| js_error(&e))?;
        let store = self.store.clone();
        self.start(id, async move {
            store.acquire_fair(&key, &owner, ttl_ms, kind, permits, waits).await.map(granted)
        });
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

/// The defaults and limits the JS side keeps in js/api/defaults.mjs, as
/// `[defaultTtlMs, maxMs, fenceGraceMs, maxLimit]` and the key prefix (checked by
/// js-tests/defaults.test.mjs).
#[wasm_bindgen]
#[must_use]
pub fn constants() -> js_sys::Array {
    js_sys::Array::of5(
        &JsValue::from_f64(locksmith_core::validate::DEFAULT_TTL_MS as f64),
        &JsValue::from_f64(locksmith_core::validate::MAX_TTL_MS as f64),
        &JsValue::from_f64(locksmith_redis::FENCE_GRACE_MS as f64),
        &JsValue::from_f64(f64::from(u32::MAX)),
        &JsValue::from_str(locksmith_redis::engine::DEFAULT_KEY_PREFIX),
    )
}

/// The test kit's time (`locksmith-js/testing`), set by its JS clock.
struct SetClock {
    now: std::cell::Cell<u64>,
    unix_start_ms: u64,
}

impl Clock for SetClock {
    fn now_ms(&self) -> u64 {
        self.now.get()
    }

    fn unix_time_ms(&self) -> Option<u64> {
        Some(self.unix_start_ms + self.now.get())
    }
}

/// The memory store of the test kit's `TestStore`, on the kit's clock: it answers the JS
/// store contract's calls one at a time, and the `TestStore` (a JS store) injects its
/// faults before them. It lives in this second module so that the main module, which
/// every user loads, does not carry it.
#[wasm_bindgen]
pub struct WasmTestMemory {
    inner: locksmith_core::MemoryStore,
    clock: Arc<SetClock>,
}

#[wasm_bindgen]
impl WasmTestMemory {
    /// A store at time `now_ms`, whose wall clock reads `unix_start_ms` at time 0.
    #[wasm_bindgen(constructor)]
    #[must_use]
    pub fn new(now_ms: f64, unix_start_ms: f64) -> Self {
        let clock = Arc::new(SetClock {
            now: std::cell::Cell::new(now_ms as u64),
            unix_start_ms: unix_start_ms as u64,
        });
        Self { inner: locksmith_core::MemoryStore::new(clock.clone()).without_release_signals(), clock }
    }

    /// Sets the time (the JS clock only moves it forward).
    pub fn set(&self, now_ms: f64) {
        self.clock.now.set(now_ms as u64);
    }

    /// The JS store contract's call `op`, answered now (`MemoryStore::answer`); absent
    /// arguments are an empty owner or kind, a NaN TTL, 0 permits.
    #[allow(clippy::too_many_arguments)] // the contract call's fields, as the JS side passes them
    pub fn answer(
        &self,
        op: &str,
        key: &str,
        owner: &str,
        ttl_ms: f64,
        kind: &str,
        limit: f64,
        permits: u32,
    ) -> std::result::Result<JsValue, JsError> {
        let answer = (|| {
            let ttl_ms = if ttl_ms.is_nan() { None } else { Some(validate::js::ttl_ms(ttl_ms)?) };
            let kind = if kind.is_empty() { None } else { Some(validate::js::kind(kind, Some(limit))?) };
            let owner = (!owner.is_empty()).then_some(owner);
            self.inner.answer(op, key, owner, ttl_ms, kind, (permits > 0).then_some(permits))
        })()
        .map_err(|err| js_error(&err))?;
        Ok(match answer {
            locksmith_core::contract::Answer::Bool(b) => JsValue::from_bool(b),
            locksmith_core::contract::Answer::Number(n) => JsValue::from_f64(n),
            _ => JsValue::NULL,
        })
    }

    /// `acquireAll(keys, owner, ttlMs)`, answered now: each key's token, or `undefined`
    /// when one is held.
    #[wasm_bindgen(js_name = answerAll)]
    #[allow(clippy::needless_pass_by_value)] // wasm-bindgen hands arrays over owned
    pub fn answer_all(
        &self,
        keys: Vec<String>,
        owner: &str,
        ttl_ms: f64,
    ) -> std::result::Result<Option<Vec<f64>>, JsError> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).map_err(|err| js_error(&err))?;
        Ok(self
            .inner
            .answer_all(&keys, owner, ttl_ms)
            .map(|tokens| tokens.into_iter().map(|t| t as f64).collect()))
    }

    /// The live holder of the plain lock `key` as `[owner, fencingToken, remainingMs,
    /// value]` (`value` `null` when it proclaimed none), or an empty array.
    pub fn holder(&self, key: &str) -> Vec<JsValue> {
        self.inner.holder(key).map_or_else(Vec::new, |h| {
            vec![
                h.owner.into(),
                JsValue::from_f64(h.fencing_token as f64),
                JsValue::from_f64(h.remaining_ms as f64),
                h.value.map_or(JsValue::NULL, JsValue::from),
            ]
        })
    }

    /// Keeps `value` with `owner`'s live hold of `key` unless it keeps a newer one (`seq`:
    /// a positive safe integer, checked by the `TestStore`).
    pub fn proclaim(&self, key: &str, owner: &str, value: &str, seq: f64) -> bool {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // checked by the caller
        self.inner.proclaim(key, owner, value, seq as u64)
    }

    /// Ends every hold of `key` now (a failover that lost them): `true` if there was one.
    #[wasm_bindgen(js_name = endHolds)]
    pub fn end_holds(&self, key: &str) -> bool {
        self.inner.end_holds(key)
    }
}
