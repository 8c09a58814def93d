//! `NativeEngineStore`: the sans-I/O Redis engine (`locksmith_redis::engine`) driven by
//! Node's own sockets (`js/redis-engine.cjs`). No tokio and no thread hop: a lock's
//! calls run as tasks polled on the JS thread; their commands collect in the engine until
//! the driver writes a turn's worth at once; `feed(chunk)` settles every reply in a
//! chunk and runs the tasks it woke.
//!
//! Finished calls travel back in one `Float64Array` whose bytes the driver hands over
//! once (`useOutcomes`) and the store fills on each chunk: `[next timer in ms (-1: none), id,
//! value, id, value, ...]`; the calls that fill it answer how many numbers they wrote (0:
//! nothing to report). A value is 1/0 for a flag, milliseconds (or -1 for none) for a
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

use crate::completion::{Completions, Outcome};
use crate::error::IntoNapi;
use crate::lock::{new_handle_on, new_lock_on, restore_lock_on, LocalTasks, NativeLock, Runner};

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
    pub fn new(key_prefix: String, command_timeout_ms: f64, notify_releases: bool) -> napi::Result<Self> {
        let command_timeout_ms = validate::js::positive_ms("commandTimeoutMs", command_timeout_ms).napi()?;
        let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
        let subscriber = notify_releases.then(|| Subscriber::new(command_timeout_ms));
        let options = EngineOptions { key_prefix, command_timeout_ms };
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
        Runner { timer: self.timer.clone(), local: Some(self.tasks.clone()) }
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
    pub fn restore(&self, serialized: String) -> napi::Result<NativeLock> {
        restore_lock_on(self.store.clone() as Arc<dyn LockStore>, self.runner(), &serialized)
    }

    #[napi(getter)]
    pub fn key_prefix(&self) -> String {
        self.store.key_prefix()
    }

    fn start<F>(&self, done: &Completions, id: u32, work: F)
    where
        F: std::future::Future<Output = locksmith_core::Result<Outcome>> + Send + 'static,
    {
        if let Some(outcome) = self.tasks.spawn(id, Box::pin(work)) {
            done.deliver(id, outcome);
        }
    }

    /// Queues the handshake of a new connection in front of everything else; call id
    /// `id` settles when the server has answered it.
    #[napi]
    pub fn handshake_start(
        &self,
        done: &Completions,
        id: u32,
        user: Option<String>,
        password: Option<String>,
        db: u32,
    ) {
        let store = self.store.clone();
        let handshake = Handshake { auth: password.map(|password| (user, password)), db };
        self.start(done, id, async move { store.handshake(&handshake).await.map(|()| Outcome::Nothing) });
    }

    /// `handshake_start` on connection `conn` (a cluster node).
    #[napi]
    pub fn handshake_start_on(
        &self,
        done: &Completions,
        id: u32,
        conn: u32,
        user: Option<String>,
        password: Option<String>,
    ) {
        let store = self.store.clone();
        let handshake = Handshake { auth: password.map(|password| (user, password)), db: 0 };
        self.start(done, id, async move {
            store.handshake_on(conn as usize, &handshake).await.map(|()| Outcome::Nothing)
        });
    }

    /// Writes that grant or extend a hold wait for `replicas` replicas (`WAIT`, at most
    /// `timeout_ms`); fewer fail with `STORE_UNAVAILABLE`. 0 turns it off.
    #[napi]
    pub fn set_min_replicas(&self, replicas: u32, timeout_ms: u32) {
        self.store.set_min_replicas(replicas, u64::from(timeout_ms));
    }

    // Redis Cluster: one connection per node, requests routed by their key's slot.

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

    /// Connection `conn`'s node, `host:port`.
    #[napi]
    pub fn address(&self, conn: u32) -> Option<String> {
        self.store.address(conn as usize)
    }

    /// Whether the slot map should be read again (a `MOVED`, a lost node).
    #[napi]
    pub fn take_topology_stale(&self) -> bool {
        self.store.take_topology_stale()
    }

    /// The bytes to write on connection `conn` now, or `null`.
    #[napi]
    pub fn take_output_on(&self, conn: u32) -> Option<Buffer> {
        self.store.take_output_on(conn as usize).map(Buffer::from)
    }

    /// Whether connection `conn` has requests waiting or bytes to write.
    #[napi]
    pub fn busy_on(&self, conn: u32) -> bool {
        self.store.pending_on(conn as usize) > 0 || self.store.has_output_on(conn as usize)
    }

    /// `feed` for connection `conn`.
    #[napi]
    pub fn feed_on(&mut self, conn: u32, chunk: BufferSlice<'_>) -> napi::Result<u32> {
        let fed = self.store.feed_on(conn as usize, &chunk);
        // On an error the driver drops the connection; what this chunk finished settles
        // in the turn after it (calls are not reported into a throw).
        fed.napi()?;
        Ok(self.turn())
    }

    /// Fails requests past their deadline on every connection; the connections to drop.
    #[napi]
    pub fn expire_all(&self) -> Vec<u32> {
        self.store.expire_all().into_iter().map(|conn| conn as u32).collect()
    }

    /// Connection `conn` is gone: its pending requests fail with `STORE_UNAVAILABLE`.
    #[napi]
    pub fn connection_lost_on(&self, conn: u32, why: String) {
        self.store.connection_lost_on(conn as usize, &why);
    }

    // The plain `LockStore` interface, as local tasks.

    #[napi]
    pub fn acquire_start(
        &self,
        done: &Completions,
        id: u32,
        key: String,
        owner: String,
        ttl_ms: f64,
    ) -> napi::Result<()> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).napi()?;
        let store = self.store.clone();
        self.start(done, id, async move { store.acquire(&key, &owner, ttl_ms).await.map(Outcome::Flag) });
        Ok(())
    }

    #[napi]
    pub fn release_start(&self, done: &Completions, id: u32, key: String, owner: String) {
        let store = self.store.clone();
        self.start(done, id, async move { store.release(&key, &owner).await.map(Outcome::Flag) });
    }

    #[napi]
    pub fn extend_start(
        &self,
        done: &Completions,
        id: u32,
        key: String,
        owner: String,
        ttl_ms: f64,
    ) -> napi::Result<()> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).napi()?;
        let store = self.store.clone();
        self.start(done, id, async move { store.extend(&key, &owner, ttl_ms).await.map(Outcome::Flag) });
        Ok(())
    }

    #[napi]
    pub fn is_locked_start(&self, done: &Completions, id: u32, key: String) {
        let store = self.store.clone();
        self.start(done, id, async move { store.is_locked(&key).await.map(Outcome::Flag) });
    }

    #[napi]
    pub fn remaining_time_start(&self, done: &Completions, id: u32, key: String) {
        let store = self.store.clone();
        self.start(done, id, async move {
            store.remaining_time(&key).await.map(|ms| Outcome::Number(ms.map(|ms| ms as f64)))
        });
    }

    // Driving.

    /// The bytes to write now, or `null`.
    #[napi]
    pub fn take_output(&self) -> Option<Buffer> {
        self.store.take_output().map(Buffer::from)
    }

    /// The bytes to write now, copied into `out`: how many (0: none), or -1 when they do
    /// not fit (then `takeOutput()` has them).
    #[napi]
    pub fn take_output_into(&self, mut out: BufferSlice<'_>) -> i32 {
        self.store.take_output_into(&mut out).map_or(-1, |n| i32::try_from(n).unwrap_or(-1))
    }

    /// Settles every reply in `chunk` and runs what it woke. Throws when the bytes are
    /// out of step: the driver then drops the connection.
    #[napi]
    pub fn feed(&mut self, chunk: BufferSlice<'_>) -> napi::Result<u32> {
        let fed = self.store.feed(&chunk);
        // On an error the driver drops the connection; what this chunk finished settles
        // in the turn after it (calls are not reported into a throw).
        fed.napi()?;
        Ok(self.turn())
    }

    /// Ends the sleeps that are due and runs what they woke.
    #[napi]
    pub fn fire(&mut self) -> u32 {
        self.timer.fire();
        self.turn()
    }

    /// Fails requests past their deadline; `true` when the driver must drop the
    /// connection. Their callers settle on the next `turn()`.
    #[napi]
    pub fn expire(&self) -> bool {
        self.store.expire()
    }

    /// Whether a reply said `READONLY` (the server is a replica now) since the last call.
    #[napi]
    pub fn take_replica_seen(&self) -> bool {
        self.store.take_replica_seen()
    }

    /// The connection is gone: pending requests fail with `STORE_UNAVAILABLE`.
    #[napi]
    pub fn connection_lost(&self, why: String) {
        self.store.connection_lost(&why);
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
    /// outcome array: how many numbers (0: nothing to report).
    #[napi]
    pub fn turn(&mut self) -> u32 {
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
                        self.errors.push(format!("{} {err}", err.code()));
                        -1.0 - self.errors.len() as f64
                    }
                },
            );
        }
        self.finished = finished;
        (1 + 2 * taken) as u32
    }

    // The subscriber connection (release notifications).

    /// Whether the subscriber wants a connection that it does not have.
    #[napi(getter)]
    pub fn subscriber_wanted(&self) -> bool {
        self.store.subscriber().is_some_and(Subscriber::wants_connection)
    }

    /// The subscriber's socket is up: queues AUTH and the wanted SUBSCRIBEs.
    #[napi]
    pub fn subscriber_connected(&self, user: Option<String>, password: Option<String>) {
        if let Some(subscriber) = self.store.subscriber() {
            let auth = password.as_deref().map(|password| (user.as_deref(), password));
            subscriber.connected(auth, self.timer.now_ms());
        }
    }

    /// The subscriber's bytes to write now, or `null`.
    #[napi]
    pub fn subscriber_output(&self) -> Option<Buffer> {
        self.store.subscriber().and_then(Subscriber::take_output).map(Buffer::from)
    }

    /// Reads confirmations and releases, and runs the waiters they woke. Throws when
    /// the connection must be dropped.
    #[napi]
    pub fn subscriber_feed(&mut self, chunk: BufferSlice<'_>) -> napi::Result<u32> {
        let now = self.timer.now_ms();
        let fed = self.store.subscriber().map_or(Ok(()), |s| s.feed(&chunk, now));
        // On an error the driver drops the connection; what this chunk finished settles
        // in the turn after it (calls are not reported into a throw).
        fed.napi()?;
        Ok(self.turn())
    }

    /// Unsubscribes idle channels and pings; `true` when the subscriber connection
    /// must be dropped.
    #[napi]
    pub fn subscriber_tick(&self) -> bool {
        let now = self.timer.now_ms();
        self.store.subscriber().is_some_and(|s| s.tick(now))
    }

    /// The subscriber connection is gone.
    #[napi]
    pub fn subscriber_lost(&self) {
        if let Some(subscriber) = self.store.subscriber() {
            subscriber.connection_lost();
        }
    }

    // Cluster: one subscriber connection per node (sharded pub/sub), by connection.

    /// Whether connection `conn`'s subscriber wants a socket that it does not have.
    #[napi]
    pub fn subscriber_wanted_on(&self, conn: u32) -> bool {
        self.store.subscriber_on(conn as usize).is_some_and(|s| s.wants_connection())
    }

    /// Connection `conn`'s subscriber socket is up.
    #[napi]
    pub fn subscriber_connected_on(&self, conn: u32, user: Option<String>, password: Option<String>) {
        if let Some(subscriber) = self.store.subscriber_on(conn as usize) {
            let auth = password.as_deref().map(|password| (user.as_deref(), password));
            subscriber.connected(auth, self.timer.now_ms());
        }
    }

    /// Connection `conn`'s subscriber bytes to write now, or `null`.
    #[napi]
    pub fn subscriber_output_on(&self, conn: u32) -> Option<Buffer> {
        self.store.subscriber_on(conn as usize).and_then(|s| s.take_output()).map(Buffer::from)
    }

    /// `subscriber_feed` for connection `conn`'s subscriber.
    #[napi]
    pub fn subscriber_feed_on(&mut self, conn: u32, chunk: BufferSlice<'_>) -> napi::Result<u32> {
        let now = self.timer.now_ms();
        let fed = self.store.subscriber_on(conn as usize).map_or(Ok(()), |s| s.feed(&chunk, now));
        // On an error the driver drops the connection; what this chunk finished settles
        // in the turn after it (calls are not reported into a throw).
        fed.napi()?;
        Ok(self.turn())
    }

    /// `subscriber_tick` for connection `conn`'s subscriber.
    #[napi]
    pub fn subscriber_tick_on(&self, conn: u32) -> bool {
        let now = self.timer.now_ms();
        self.store.subscriber_on(conn as usize).is_some_and(|s| s.tick(now))
    }

    /// Connection `conn`'s subscriber socket is gone.
    #[napi]
    pub fn subscriber_lost_on(&self, conn: u32) {
        if let Some(subscriber) = self.store.subscriber_on(conn as usize) {
            subscriber.connection_lost();
        }
    }

    /// Requests waiting for a reply, and tasks waiting.
    #[napi(getter)]
    pub fn pending(&self) -> u32 {
        (self.store.pending() + self.tasks.len()) as u32
    }

    /// The messages that the last `turn()`'s error values point at.
    #[napi]
    pub fn errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
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
