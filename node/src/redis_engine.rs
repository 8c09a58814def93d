//! `NativeEngineStore`: the sans-I/O Redis engine (`locksmith_redis::engine`) driven by
//! Node's own sockets (the one driver, `js/redis/driver.mjs`). No tokio and no thread hop: a lock's
//! calls run as tasks polled on the JS thread; their commands collect in the engine until
//! the driver writes a turn's worth at once; `feed(chunk)` settles every reply in a
//! chunk and runs the tasks it woke.
//!
//! Finished calls travel back in one `Float64Array` whose bytes the driver hands over
//! once (`useOutcomes`) and the store fills on each chunk: `[next timer in ms (-1: none), id,
//! value, id, value, ...]`; the calls that fill it answer `4 * n + wants`: `n` numbers
//! written (0: nothing to report), and in `wants` what the driver has to do now (bit 0:
//! write, bit 1: see to a subscriber). A value is 1/0 for a flag, milliseconds (or -1 for none) for a
//! number, -1 for nothing, and `-2 - i` for the i-th message of `errors()` (`CODE
//! message`). Calls that do not fit stay for the next `turn()`: a full array tells the
//! driver to ask again. Output is copied into the driver's buffer the same way
//! (`takeOutputInto`). Reusing the two arrays spares an external buffer (and its
//! finalizer) per write and per chunk.

use std::sync::Arc;

use locksmith_core::{validate, Clock, LockStore, MonotonicClock};
use locksmith_redis::engine::local::LocalTimer;
use locksmith_redis::engine::{reply, EngineOptions, EngineStore, Handshake, Subscriber};
use napi::bindgen_prelude::{Buffer, BufferSlice};
use napi_derive::napi;

use crate::completion::Outcome;
use crate::error::IntoNapi;
use crate::lock::{
    new_handle_on, new_lock_on, restore_lock_on, LocalTasks, NativeLock, Runner, SerializedArgs,
};

#[napi]
pub struct NativeEngineStore {
    store: Arc<EngineStore>,
    timer: Arc<LocalTimer>,
    tasks: Arc<LocalTasks>,
    finished: Vec<(u32, locksmith_core::Result<Outcome>)>,
    errors: Vec<String>,
    /// The driver's outcome array (see the module docs): the bytes of a `Float64Array`.
    outcomes: Option<Buffer>,
}

#[napi]
impl NativeEngineStore {
    #[napi(constructor)]
    /// `fencing` false: a lock's acquire is one plain `SET NX PX` and its hold has no
    /// fencing token (see `EngineOptions::fencing`); absent: true.
    pub fn new(
        key_prefix: String,
        command_timeout_ms: f64,
        notify_releases: bool,
        fencing: Option<bool>,
    ) -> napi::Result<Self> {
        let command_timeout_ms = validate::js::positive_ms("commandTimeoutMs", command_timeout_ms).napi()?;
        let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
        let subscriber = notify_releases.then(|| Subscriber::new(command_timeout_ms));
        let options = EngineOptions { key_prefix, command_timeout_ms, fencing: fencing.unwrap_or(true) };
        Ok(Self {
            store: Arc::new(EngineStore::new(options, clock.clone(), subscriber)),
            timer: Arc::new(LocalTimer::new(clock)),
            tasks: Arc::new(LocalTasks::default()),
            finished: Vec::new(),
            errors: Vec::new(),
            outcomes: None,
        })
    }

    fn runner(&self) -> Runner {
        Runner { timer: self.timer.clone(), local: Some(self.tasks.clone()), inline: false, tracked: None }
    }

    #[napi]
    pub fn lock(&self, key: String, ttl_ms: f64) -> napi::Result<NativeLock> {
        new_lock_on(self.store.clone() as Arc<dyn LockStore>, self.runner(), &key, ttl_ms)
    }

    /// A semaphore or read-write handle (`kind` is `semaphore`, `read` or `write`), on the
    /// engine's permit scripts: a sorted set of holders per key in Redis.
    #[napi]
    pub fn handle(
        &self,
        key: String,
        ttl_ms: f64,
        kind: String,
        limit: Option<f64>,
    ) -> napi::Result<NativeLock> {
        new_handle_on(self.store.clone() as Arc<dyn LockStore>, self.runner(), &key, ttl_ms, &kind, limit)
    }

    #[napi]
    pub fn restore(&self, fields: SerializedArgs) -> napi::Result<NativeLock> {
        restore_lock_on(self.store.clone() as Arc<dyn LockStore>, self.runner(), fields)
    }

    #[napi(getter)]
    pub fn key_prefix(&self) -> String {
        self.store.key_prefix()
    }

    fn start<F>(&mut self, id: u32, work: F)
    where
        F: std::future::Future<Output = locksmith_core::Result<Outcome>> + Send + 'static,
    {
        if let Some(outcome) = self.tasks.spawn(id, Box::pin(work)) {
            // Reported by the next `turn()`, which the driver runs once the call is on record.
            self.finished.push((id, outcome));
        }
    }

    // The host API the driver (js/redis/driver.mjs) uses, the same in wasm-redis/:
    // connection-indexed (connection 0 is the server, or a cluster's first node), each
    // call's outcome reported by `turn()` into the outcome array.

    /// Call `id`: queues connection `conn`'s handshake in front of everything else; it
    /// finishes when the server has answered all of it.
    #[napi]
    pub fn handshake(&mut self, id: u32, conn: u32, user: Option<String>, password: Option<String>, db: u32) {
        let store = self.store.clone();
        let handshake = Handshake { auth: password.map(|password| (user, password)), db };
        self.start(id, async move {
            store.handshake_on(conn as usize, &handshake).await.map(|()| Outcome::Nothing)
        });
    }

    /// Writes that grant or extend a hold wait for `replicas` replicas (`WAIT`, at most
    /// `timeout_ms`); fewer fail with `STORE_UNAVAILABLE`. 0 turns it off.
    #[napi]
    pub fn set_min_replicas(&self, replicas: u32, timeout_ms: u32) {
        self.store.set_min_replicas(replicas, u64::from(timeout_ms));
    }

    /// Routes by hash slot from now on; connection 0 is the seed at `address`.
    #[napi]
    pub fn enable_cluster(&self, address: String) {
        self.store.enable_cluster(&address);
    }

    /// The masters' slot ranges: `firsts[i]..=lasts[i]` is served at `addresses[i]`.
    #[napi]
    pub fn set_slots(&self, firsts: Vec<u32>, lasts: Vec<u32>, addresses: Vec<String>) {
        let clamp = |n: u32| u16::try_from(n).unwrap_or(u16::MAX);
        let ranges: Vec<(u16, u16, String)> = firsts
            .into_iter()
            .zip(lasts)
            .zip(addresses)
            .map(|((first, last), address)| (clamp(first), clamp(last), address))
            .collect();
        self.store.set_slots(&ranges);
    }

    /// How many connections the store has.
    #[napi(getter)]
    pub fn connections(&self) -> u32 {
        self.store.connections() as u32
    }

    /// Connection `conn`'s node, `host:port` (`null` off a cluster).
    #[napi]
    pub fn address(&self, conn: u32) -> Option<String> {
        self.store.address(conn as usize)
    }

    /// Whether the slot map should be read again (a `MOVED`, a lost node).
    #[napi]
    pub fn take_topology_stale(&self) -> bool {
        self.store.take_topology_stale()
    }

    /// Whether a reply said `READONLY` (the server is a replica now) since the last call.
    #[napi]
    pub fn take_replica_seen(&self) -> bool {
        self.store.take_replica_seen()
    }

    /// The bytes to write on connection `conn` now, or `null`.
    #[napi]
    pub fn take_output(&self, conn: u32) -> Option<Buffer> {
        self.store.take_output_on(conn as usize).map(Buffer::from)
    }

    /// Connection `conn`'s bytes to write now, copied into `out`: how many (0: none), or
    /// -1 when they do not fit (then `takeOutput(conn)` has them).
    #[napi]
    pub fn take_output_into(&self, conn: u32, mut out: BufferSlice<'_>) -> i32 {
        self.store.take_output_into(conn as usize, &mut out).map_or(-1, |n| i32::try_from(n).unwrap_or(-1))
    }

    /// Whether connection `conn` has requests waiting or bytes to write.
    #[napi]
    pub fn busy(&self, conn: u32) -> bool {
        self.store.pending_on(conn as usize) > 0 || self.store.has_output_on(conn as usize)
    }

    /// Settles every reply in connection `conn`'s `chunk` and runs what it woke: a
    /// `turn()`. Throws when the bytes are out of step: the driver then drops the
    /// connection (what the chunk finished is reported by the next turn).
    #[napi]
    pub fn feed(&mut self, conn: u32, chunk: BufferSlice<'_>) -> napi::Result<u32> {
        self.store.feed_on(conn as usize, &chunk).napi()?;
        Ok(self.turn())
    }

    /// Ends the sleeps that are due and runs what they woke: a `turn()`.
    #[napi]
    pub fn fire(&mut self) -> u32 {
        self.timer.fire();
        self.turn()
    }

    /// Fails requests past their deadline (and sends again those a cluster asked to
    /// retry); the connections the driver must drop. Their callers settle on the next turn.
    #[napi]
    pub fn expire(&self) -> Vec<u32> {
        self.store.expire_all().into_iter().map(|conn| conn as u32).collect()
    }

    /// Connection `conn` is gone: its pending requests fail with `STORE_UNAVAILABLE`.
    #[napi]
    pub fn connection_lost(&self, conn: u32, why: String) {
        self.store.connection_lost_on(conn as usize, &why);
    }

    /// Later calls fail with `STORE_CLOSED`; pending ones fail now, and waiting locks
    /// wake to find out.
    #[napi]
    pub fn close(&self) {
        self.store.close();
        self.timer.wake_all();
    }

    /// Where finished calls are reported from now on: the bytes under a `Float64Array`
    /// (in the platform's byte order, as typed arrays are), at least 3 numbers long.
    #[napi]
    pub fn use_outcomes(&mut self, outcomes: Buffer) -> napi::Result<()> {
        if outcomes.len() < 3 * 8 {
            return Err(napi::Error::from_reason(
                "INVALID_ARGUMENT locksmith: the outcome array is too short",
            ));
        }
        self.outcomes = Some(outcomes);
        Ok(())
    }

    /// Runs woken tasks and writes what finished, and when the next sleep ends, into the
    /// outcome array. Answers `4 * n + wants`: `n` numbers written (0: nothing to report),
    /// `wants` what the driver has to do now (`EngineStore::host_wants`: 1, write; 2, see
    /// to a subscriber), so a turn that leaves nothing to write costs no more crossings.
    #[napi]
    pub fn turn(&mut self) -> u32 {
        let count = self.report();
        (count << 2) | self.store.host_wants()
    }

    /// `turn()`'s work: how many numbers it wrote into the outcome array.
    fn report(&mut self) -> u32 {
        self.timer.run_background();
        let mut finished = std::mem::take(&mut self.finished);
        self.tasks.run_ready(&mut finished);
        self.timer.run_background();
        let next = self.timer.next_deadline_ms().map(|at| at.saturating_sub(self.timer.now_ms()));
        let Some(out) = self.outcomes.as_mut() else {
            self.finished = finished;
            return 0;
        };
        if finished.is_empty() && next.is_none() {
            self.finished = finished;
            return 0;
        }
        self.errors.clear();
        let out: &mut [u8] = out;
        let fit = (out.len() / 8 - 1) / 2;
        let mut put = |at: usize, value: f64| out[8 * at..8 * at + 8].copy_from_slice(&value.to_ne_bytes());
        put(0, next.map_or(-1.0, |ms| ms as f64));
        let taken = finished.len().min(fit);
        for (i, (id, outcome)) in finished.drain(..taken).enumerate() {
            put(1 + 2 * i, f64::from(id));
            put(
                2 + 2 * i,
                match outcome {
                    Ok(Outcome::Flag(flag)) => f64::from(u8::from(flag)),
                    Ok(Outcome::Number(Some(ms))) => ms,
                    Ok(Outcome::Number(None) | Outcome::Nothing) => -1.0,
                    Err(err) => {
                        self.errors.push(crate::error::reason(&err));
                        -1.0 - self.errors.len() as f64
                    }
                },
            );
        }
        self.finished = finished;
        (1 + 2 * taken) as u32
    }

    /// The messages that the last `turn()`'s error values point at.
    #[napi]
    pub fn errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }

    /// Requests waiting for a reply, and tasks waiting.
    #[napi(getter)]
    pub fn pending(&self) -> u32 {
        (self.store.pending() + self.tasks.len()) as u32
    }

    // Subscribers (release notifications): one per connection on a cluster (sharded
    // pub/sub), else connection 0's.

    /// Whether connection `conn`'s subscriber wants a socket that it does not have.
    #[napi]
    pub fn subscriber_wanted(&self, conn: u32) -> bool {
        self.store.subscriber_on(conn as usize).is_some_and(|s| s.wants_connection())
    }

    /// Connection `conn`'s subscriber socket is up: queues AUTH and the wanted SUBSCRIBEs.
    #[napi]
    pub fn subscriber_connected(&self, conn: u32, user: Option<String>, password: Option<String>) {
        if let Some(subscriber) = self.store.subscriber_on(conn as usize) {
            let auth = password.as_deref().map(|password| (user.as_deref(), password));
            subscriber.connected(auth, self.timer.now_ms());
        }
    }

    /// Connection `conn`'s subscriber bytes to write now, or `null`.
    #[napi]
    pub fn subscriber_output(&self, conn: u32) -> Option<Buffer> {
        self.store.subscriber_on(conn as usize).and_then(|s| s.take_output()).map(Buffer::from)
    }

    /// Reads confirmations and releases on connection `conn`'s subscriber and runs the
    /// waiters they woke: a `turn()`. Throws when the subscriber socket must be dropped.
    #[napi]
    pub fn subscriber_feed(&mut self, conn: u32, chunk: BufferSlice<'_>) -> napi::Result<u32> {
        let now = self.timer.now_ms();
        let fed = self.store.subscriber_on(conn as usize).map_or(Ok(()), |s| s.feed(&chunk, now));
        fed.napi()?;
        Ok(self.turn())
    }

    /// Unsubscribes idle channels and pings, on every subscriber: the connections whose
    /// subscriber socket must be dropped.
    #[napi]
    pub fn subscriber_tick(&self) -> Vec<u32> {
        let now = self.timer.now_ms();
        (0..self.store.connections())
            .filter(|&conn| self.store.subscriber_on(conn).is_some_and(|s| s.tick(now)))
            .map(|conn| conn as u32)
            .collect()
    }

    /// Connection `conn`'s subscriber socket is gone.
    #[napi]
    pub fn subscriber_lost(&self, conn: u32) {
        if let Some(subscriber) = self.store.subscriber_on(conn as usize) {
            subscriber.connection_lost();
        }
    }

    // The plain `LockStore` interface, as local tasks (a call answered at once is
    // reported by the next turn too).

    #[napi]
    pub fn acquire(&mut self, id: u32, key: String, owner: String, ttl_ms: f64) -> napi::Result<()> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).napi()?;
        let store = self.store.clone();
        self.start(id, async move { store.acquire(&key, &owner, ttl_ms).await.map(Outcome::Flag) });
        Ok(())
    }

    #[napi]
    pub fn release(&mut self, id: u32, key: String, owner: String) {
        let store = self.store.clone();
        self.start(id, async move { store.release(&key, &owner).await.map(Outcome::Flag) });
    }

    #[napi]
    pub fn extend(&mut self, id: u32, key: String, owner: String, ttl_ms: f64) -> napi::Result<()> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).napi()?;
        let store = self.store.clone();
        self.start(id, async move { store.extend(&key, &owner, ttl_ms).await.map(Outcome::Flag) });
        Ok(())
    }

    #[napi]
    pub fn is_locked(&mut self, id: u32, key: String) {
        let store = self.store.clone();
        self.start(id, async move { store.is_locked(&key).await.map(Outcome::Flag) });
    }

    #[napi]
    pub fn remaining_time(&mut self, id: u32, key: String) {
        let store = self.store.clone();
        self.start(id, async move {
            store.remaining_time(&key).await.map(|ms| Outcome::Number(ms.map(|ms| ms as f64)))
        });
    }
}

/// `args` as one RESP command, for the driver's own short exchanges (Sentinel, `ROLE`,
/// `CLUSTER SLOTS`).
#[napi]
pub fn redis_command(args: Vec<String>) -> Buffer {
    let args: Vec<&[u8]> = args.iter().map(String::as_bytes).collect();
    Buffer::from(reply::encode_command(&args))
}

/// The first whole reply in `chunk` as `[value, bytes used]`, or `null` when more bytes
/// are needed. A value is `null`, a number, a string, an array, or `{ error }`. Throws
/// on bytes that are not RESP.
#[napi]
pub fn redis_decode(chunk: BufferSlice<'_>) -> napi::Result<Option<serde_json::Value>> {
    fn json(value: reply::ReplyValue) -> serde_json::Value {
        match value {
            reply::ReplyValue::Nil => serde_json::Value::Null,
            reply::ReplyValue::Integer(n) => n.into(),
            reply::ReplyValue::Text(text) => text.into(),
            reply::ReplyValue::Error(message) => serde_json::json!({ "error": message }),
            reply::ReplyValue::Array(items) => items.into_iter().map(json).collect(),
        }
    }
    Ok(reply::decode(&chunk).napi()?.map(|(value, used)| serde_json::json!([json(value), used])))
}

/// The Redis Cluster hash slot of `key`.
#[napi]
pub fn redis_key_slot(key: String) -> u32 {
    u32::from(reply::key_slot(key.as_bytes()))
}

/// Checks the URL against the TLS settings (no fragment; `tlsInsecure` only with
/// `rediss://` and without a CA), as the WebAssembly engine's `checkUrlSettings` does.
#[napi]
pub fn check_url_settings(url: String, tls_insecure: bool, has_ca: bool) -> napi::Result<()> {
    let mut options = locksmith_redis::RedisOptions::new(url);
    options.tls_insecure = tls_insecure;
    options.tls_ca_cert_pem = has_ca.then(String::new);
    locksmith_redis::check_url_settings(&options).napi()
}

/// The defaults and limits the JS side keeps in js/api/defaults.mjs (checked against these
/// by js-tests/defaults.test.mjs).
#[napi(object)]
pub struct Constants {
    pub default_ttl_ms: f64,
    pub max_ms: f64,
    pub fence_grace_ms: f64,
    pub default_key_prefix: String,
    pub max_limit: f64,
}

#[napi]
pub fn constants() -> Constants {
    Constants {
        default_ttl_ms: locksmith_core::validate::DEFAULT_TTL_MS as f64,
        max_ms: locksmith_core::validate::MAX_TTL_MS as f64,
        fence_grace_ms: locksmith_redis::FENCE_GRACE_MS as f64,
        default_key_prefix: locksmith_redis::engine::DEFAULT_KEY_PREFIX.to_owned(),
        max_limit: f64::from(u32::MAX),
    }
}
