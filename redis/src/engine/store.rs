//! [`EngineStore`]: a [`LockStore`] whose futures the host completes by feeding the
//! engine the bytes its own socket received. Every future of the store is polled on the
//! host's thread (see [`local`](super::local)); the host writes
//! [`take_output`](EngineStore::take_output) once per turn.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use locksmith_core::{validate, BoxFuture, Clock, Grant, HoldKind, LockError, LockStore, Result};

use super::{
    Completion, Engine, EngineOptions, Handshake, Redirect, Redirection, RequestId, Subscriber, Value,
};

enum Slot {
    Waiting(Option<Waker>),
    Done(Result<Value>),
}

struct Shared {
    /// One engine per connection: the only one for a plain server (or Sentinel's
    /// master), one per node of a Redis Cluster (the first is the seed's).
    engines: Vec<Engine>,
    slots: HashMap<RequestId, Slot>,
    done: Vec<Completion>,
    cluster: Option<Cluster>,
    /// Cluster with release notifications: each connection's subscriber (sharded
    /// pub/sub on that node), the first the store's own.
    subscribers: Vec<Subscriber>,
    /// `WAIT` after writes (see [`Engine::set_min_replicas`]), for every connection.
    min_replicas: (u32, u64),
}

/// [`EngineStore::host_wants`]: some connection has bytes to write.
pub const WANTS_WRITE: u32 = 1;
/// [`EngineStore::host_wants`]: some subscriber wants a socket or has bytes to write.
pub const WANTS_SUBSCRIBER: u32 = 2;

/// How many hash slots a Redis Cluster has.
pub const CLUSTER_SLOTS: usize = 16_384;

/// The routing of a Redis Cluster: which connection serves each hash slot.
struct Cluster {
    /// Each slot's connection (an index in `engines`); [`UNKNOWN`] until the host's
    /// topology (or a `MOVED`) says.
    slots: Box<[u32]>,
    /// Each connection's `host:port`.
    addresses: Vec<String>,
    ids: Arc<AtomicU32>,
    /// A `MOVED` or a lost connection: the host should read the topology again.
    stale: bool,
    /// Requests answered `TRYAGAIN` or `CLUSTERDOWN`, sent again on the next `expire`.
    parked: Vec<Redirect>,
}

const UNKNOWN: u32 = u32::MAX;

impl Shared {
    fn engine(&mut self) -> &mut Engine {
        &mut self.engines[0]
    }

    /// The connection of `key`'s slot: the first one without a cluster, or where the
    /// slot's owner is not known.
    fn route(&self, key: &str) -> usize {
        let Some(cluster) = &self.cluster else { return 0 };
        let prefix = &self.engines[0].options().key_prefix;
        let slot = super::reply::key_slot(crate::lock_key(prefix, key).as_bytes());
        match cluster.slots[usize::from(slot)] {
            UNKNOWN => 0,
            conn => conn as usize,
        }
    }

    /// On a cluster, refuses a key whose lock's keys would not share a slot (see
    /// [`check_cluster_key`](crate::check_cluster_key)).
    fn check_key(&self, key: &str) -> Result<()> {
        match self.cluster {
            Some(_) => crate::check_cluster_key(&self.engines[0].options().key_prefix, key),
            None => Ok(()),
        }
    }

    /// A request that is not sent: settled at once with `error`, under an id of its own.
    fn refuse(&mut self, error: LockError) -> RequestId {
        let id = self.cluster.as_ref().map_or(0, |c| c.ids.fetch_add(1, Ordering::Relaxed));
        self.slots.insert(id, Slot::Done(Err(error)));
        id
    }

    /// Whether one script can take all of `keys`: on one server always, on a cluster
    /// when they share a hash slot (a refused key takes its own turn, to be refused).
    fn one_slot(&self, keys: &[String]) -> bool {
        if self.cluster.is_none() {
            return true;
        }
        if keys.iter().any(|key| self.check_key(key).is_err()) {
            return false;
        }
        let prefix = &self.engines[0].options().key_prefix;
        let mut slots =
            keys.iter().map(|key| super::reply::key_slot(crate::lock_key(prefix, key).as_bytes()));
        let first = slots.next();
        slots.all(|slot| Some(slot) == first)
    }

    /// The connection to `address`, made (with no socket yet) when there is none.
    fn connection_to(&mut self, address: &str) -> usize {
        let cluster = self.cluster.as_mut().expect("cluster routing");
        if let Some(conn) = cluster.addresses.iter().position(|a| a == address) {
            return conn;
        }
        let mut engine = Engine::new(self.engines[0].options().clone());
        engine.follow_redirects(cluster.ids.clone());
        engine.set_min_replicas(self.min_replicas.0, self.min_replicas.1);
        cluster.addresses.push(address.to_owned());
        if !self.subscribers.is_empty() {
            let subscriber = Subscriber::new(engine.options().command_timeout_ms);
            subscriber.set_sharded();
            self.subscribers.push(subscriber);
        }
        self.engines.push(engine);
        self.engines.len() - 1
    }

    /// Sends on the requests that `MOVED` and `ASK` replies redirected, and parks
    /// those to be tried again.
    fn redirect(&mut self) {
        if self.cluster.is_none() {
            return;
        }
        let redirects: Vec<Redirect> = self.engines.iter_mut().flat_map(Engine::take_redirects).collect();
        for redirect in redirects {
            match &redirect.to {
                Redirection::Moved { slot, address } => {
                    let conn = self.connection_to(address);
                    let cluster = self.cluster.as_mut().expect("cluster routing");
                    cluster.slots[usize::from(*slot) % CLUSTER_SLOTS] = conn as u32;
                    cluster.stale = true;
                    self.engines[conn].adopt(redirect);
                }
                Redirection::Ask { address } => {
                    let conn = self.connection_to(address);
                    self.engines[conn].adopt(redirect);
                }
                Redirection::Retry => self.cluster.as_mut().expect("cluster routing").parked.push(redirect),
            }
        }
    }

    /// Sends parked requests again (by the slot map as it is now), failing those past
    /// their deadline.
    fn unpark(&mut self, now_ms: u64) {
        let Some(cluster) = &mut self.cluster else { return };
        for redirect in std::mem::take(&mut cluster.parked) {
            if redirect.deadline_ms() <= now_ms {
                let timeout = self.engines[0].options().command_timeout_ms;
                let error = LockError::StoreUnavailable(format!(
                    "redis: the cluster could not serve the key within {timeout} ms (TRYAGAIN or CLUSTERDOWN)"
                ));
                self.done.push(Completion { id: redirect.id(), result: Err(error) });
                continue;
            }
            let conn = redirect.key().map_or(0, |key| self.route(key));
            self.engines[conn].adopt(redirect);
        }
    }
}

/// Locks in Redis over a connection that the host drives. See the module docs.
pub struct EngineStore {
    shared: Mutex<Shared>,
    clock: Arc<dyn Clock>,
    closed: AtomicBool,
    subscriber: Option<Subscriber>,
}

impl std::fmt::Debug for EngineStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineStore").field("engines", &self.shared().engines).finish_non_exhaustive()
    }
}

impl EngineStore {
    /// A store with nothing pending; `clock` stamps command deadlines. With a
    /// `subscriber`, waiters wake on release notifications.
    #[must_use]
    pub fn new(options: EngineOptions, clock: Arc<dyn Clock>, subscriber: Option<Subscriber>) -> Self {
        Self {
            subscriber,
            shared: Mutex::new(Shared {
                engines: vec![Engine::new(options)],
                slots: HashMap::new(),
                done: Vec::new(),
                cluster: None,
                subscribers: Vec::new(),
                min_replicas: (0, 0),
            }),
            clock,
            closed: AtomicBool::new(false),
        }
    }

    /// The release notifications' engine, when the store has one.
    #[must_use]
    pub fn subscriber(&self) -> Option<&Subscriber> {
        self.subscriber.as_ref()
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The prefix put before every key.
    #[must_use]
    pub fn key_prefix(&self) -> String {
        self.shared().engines[0].options().key_prefix.clone()
    }

    /// A request about `key`, on the connection of its slot; refused, with nothing sent,
    /// for a key a cluster cannot serve.
    fn request(&self, key: &str, make: impl FnOnce(&mut Engine, u64) -> RequestId) -> ReplyFuture<'_> {
        match self.connection_for(key) {
            Ok(conn) => self.request_on(conn, make),
            Err(refused) => ReplyFuture { store: self, id: Some(refused) },
        }
    }

    /// The connection of `key`'s slot, or the id of its request refused at once.
    #[inline(never)]
    fn connection_for(&self, key: &str) -> std::result::Result<usize, RequestId> {
        let mut shared = self.shared();
        match shared.check_key(key) {
            Ok(()) => Ok(shared.route(key)),
            Err(err) => Err(shared.refuse(err)),
        }
    }

    fn request_on(&self, conn: usize, make: impl FnOnce(&mut Engine, u64) -> RequestId) -> ReplyFuture<'_> {
        if self.closed.load(Ordering::Relaxed) {
            return ReplyFuture { store: self, id: None };
        }
        let now = self.clock.now_ms();
        let mut shared = self.shared();
        let Some(engine) = shared.engines.get_mut(conn) else {
            return ReplyFuture { store: self, id: Some(0) };
        };
        let id = make(engine, now);
        shared.slots.insert(id, Slot::Waiting(None));
        ReplyFuture { store: self, id: Some(id) }
    }

    /// Queues the handshake of a new connection in front of everything else (see
    /// [`Engine::handshake`]); the future ends when the server has answered all of it.
    pub fn handshake(&self, handshake: &Handshake) -> impl Future<Output = Result<()>> + '_ {
        self.handshake_on(0, handshake)
    }

    /// [`handshake`](Self::handshake) on connection `conn` (see [`enable_cluster`](Self::enable_cluster)).
    pub fn handshake_on(&self, conn: usize, handshake: &Handshake) -> impl Future<Output = Result<()>> + '_ {
        let reply = self.request_on(conn, |engine, now| engine.handshake(handshake, now));
        async move { reply.await.map(|_| ()) }
    }

    /// The bytes to write now, if any.
    pub fn take_output(&self) -> Option<Vec<u8>> {
        self.take_output_on(0)
    }

    /// The bytes to write now on connection `conn`, if any.
    pub fn take_output_on(&self, conn: usize) -> Option<Vec<u8>> {
        let mut shared = self.shared();
        let engine = shared.engines.get_mut(conn)?;
        engine.has_output().then(|| engine.take_output())
    }

    /// [`take_output_on`](Self::take_output_on) into `out`: how many bytes, or `None`
    /// (and nothing taken) when they do not fit.
    pub fn take_output_into(&self, conn: usize, out: &mut [u8]) -> Option<usize> {
        let mut shared = self.shared();
        shared.engines.get_mut(conn).map_or(Some(0), |engine| engine.take_output_into(out))
    }

    /// Redis Cluster: routes every request by its key's hash slot (all of a lock's keys
    /// share `{key}`), one engine per node, the first (connection 0) the seed's at
    /// `address` (`host:port`). `MOVED` replies update the slot map and send their
    /// request on, `ASK` replies send theirs on once after `ASKING`, `TRYAGAIN` and
    /// `CLUSTERDOWN` replies are sent again on the next [`expire`](Self::expire), all
    /// within the request's first deadline. The host opens a socket for each connection
    /// ([`connections`](Self::connections), [`address`](Self::address)), feeds each its
    /// own bytes, and reads the topology (`CLUSTER SLOTS`) into
    /// [`set_slots`](Self::set_slots) at the start and whenever
    /// [`take_topology_stale`](Self::take_topology_stale) says.
    pub fn enable_cluster(&self, address: &str) {
        let mut shared = self.shared();
        let ids = Arc::new(AtomicU32::new(1 << 31));
        shared.engine().follow_redirects(ids.clone());
        if let Some(subscriber) = &self.subscriber {
            subscriber.set_sharded();
            shared.subscribers = vec![subscriber.clone()];
        }
        shared.cluster = Some(Cluster {
            slots: vec![UNKNOWN; CLUSTER_SLOTS].into_boxed_slice(),
            addresses: vec![address.to_owned()],
            ids,
            stale: false,
            parked: Vec::new(),
        });
    }

    /// Every write that grants or extends a hold waits for `replicas` replicas (`WAIT`,
    /// at most `timeout_ms`) before it counts: see [`Engine::set_min_replicas`].
    pub fn set_min_replicas(&self, replicas: u32, timeout_ms: u64) {
        let mut shared = self.shared();
        shared.min_replicas = (replicas, timeout_ms);
        for engine in &mut shared.engines {
            engine.set_min_replicas(replicas, timeout_ms);
        }
    }

    /// Cluster: the slot ranges `(first, last, "host:port")` of the masters; a range's
    /// node gets a connection if it has none. Slots not listed keep their connection.
    pub fn set_slots(&self, ranges: &[(u16, u16, String)]) {
        let mut shared = self.shared();
        if shared.cluster.is_none() {
            return;
        }
        for (first, last, address) in ranges {
            let conn = shared.connection_to(address) as u32;
            if let Some(cluster) = shared.cluster.as_mut() {
                for slot in usize::from(*first)..=usize::from(*last).min(CLUSTER_SLOTS - 1) {
                    cluster.slots[slot] = conn;
                }
            }
        }
        if let Some(cluster) = shared.cluster.as_mut() {
            cluster.stale = false;
        }
    }

    /// Cluster: connection `conn`'s subscriber (sharded pub/sub on its node), when the
    /// store has release notifications. Connection 0's is [`subscriber`](Self::subscriber).
    #[must_use]
    pub fn subscriber_on(&self, conn: usize) -> Option<Subscriber> {
        if conn == 0 {
            return self.subscriber.clone();
        }
        self.shared().subscribers.get(conn).cloned()
    }

    /// The subscriber that hears `key`'s releases: on a cluster, its slot's node's.
    /// The channel a plain lock's release is published on.
    fn released_channel(&self, key: &str) -> String {
        format!("{}:released", crate::lock_key(&self.key_prefix(), key))
    }

    fn subscriber_for(&self, key: &str) -> Option<Subscriber> {
        let subscriber = self.subscriber.as_ref()?;
        let shared = self.shared();
        if shared.cluster.is_none() {
            return Some(subscriber.clone());
        }
        // A refused key is never held here: nothing to listen for.
        shared.check_key(key).ok()?;
        shared.subscribers.get(shared.route(key)).cloned()
    }

    /// How many connections the store has (sockets the host keeps).
    #[must_use]
    pub fn connections(&self) -> usize {
        self.shared().engines.len()
    }

    /// Cluster: connection `conn`'s node, `host:port`.
    #[must_use]
    pub fn address(&self, conn: usize) -> Option<String> {
        self.shared().cluster.as_ref().and_then(|c| c.addresses.get(conn).cloned())
    }

    /// Cluster: whether a `MOVED` or a lost connection made the slot map doubtful since
    /// the last call; the host should read the topology again.
    pub fn take_topology_stale(&self) -> bool {
        let mut shared = self.shared();
        let moved = shared.subscribers.iter().fold(false, |moved, s| s.take_moved() | moved);
        shared.cluster.as_mut().is_some_and(|c| std::mem::take(&mut c.stale)) | moved
    }

    /// What the host has to do now, as bits: [`WANTS_WRITE`] when some connection has
    /// bytes to write, [`WANTS_SUBSCRIBER`] when some subscriber wants a socket or has
    /// bytes to write. The engine's turns report it beside what finished, so a host that
    /// has nothing to do crosses no more (see `NativeEngineStore::turn`).
    #[must_use]
    pub fn host_wants(&self) -> u32 {
        let shared = self.shared();
        let mut wants = 0;
        if shared.engines.iter().any(Engine::has_output) {
            wants |= WANTS_WRITE;
        }
        // On a cluster `subscribers` holds connection 0's too.
        let subscribers =
            if shared.subscribers.is_empty() { self.subscriber.as_slice() } else { &shared.subscribers };
        if subscribers.iter().any(Subscriber::wants_attention) {
            wants |= WANTS_SUBSCRIBER;
        }
        wants
    }

    /// Whether connection `conn` has bytes to write.
    #[must_use]
    pub fn has_output_on(&self, conn: usize) -> bool {
        self.shared().engines.get(conn).is_some_and(Engine::has_output)
    }

    /// Requests waiting on connection `conn`.
    #[must_use]
    pub fn pending_on(&self, conn: usize) -> usize {
        self.shared().engines.get(conn).map_or(0, Engine::pending)
    }

    /// Hands the engine a chunk the socket received; wakes the futures it settles.
    ///
    /// # Errors
    /// The bytes are out of step: drop the connection, then call
    /// [`connection_lost`](Self::connection_lost).
    pub fn feed(&self, bytes: &[u8]) -> Result<()> {
        self.feed_on(0, bytes)
    }

    /// [`feed`](Self::feed) for connection `conn`.
    ///
    /// # Errors
    /// As [`feed`](Self::feed).
    pub fn feed_on(&self, conn: usize, bytes: &[u8]) -> Result<()> {
        let now = self.clock.now_ms();
        let (fed, wakers) = {
            let shared = &mut *self.shared();
            let fed = match shared.engines.get_mut(conn) {
                Some(engine) => engine.feed(bytes, now, &mut shared.done),
                None => Ok(()),
            };
            shared.redirect();
            (fed, Self::settle(shared))
        };
        wakers.into_iter().for_each(Waker::wake);
        fed
    }

    /// Whether a reply said `READONLY` since the last call (see [`Engine::take_replica_seen`]).
    pub fn take_replica_seen(&self) -> bool {
        self.shared().engine().take_replica_seen()
    }

    /// Fails requests past their deadline; `true` when the host must drop the connection.
    pub fn expire(&self) -> bool {
        self.expire_all().contains(&0)
    }

    /// Fails requests past their deadline on every connection (and sends again those a
    /// cluster asked to retry); the connections the host must drop.
    pub fn expire_all(&self) -> Vec<usize> {
        let now = self.clock.now_ms();
        let (reset, wakers) = {
            let shared = &mut *self.shared();
            let mut reset = Vec::new();
            for (conn, engine) in shared.engines.iter_mut().enumerate() {
                if engine.expire(now, &mut shared.done) {
                    reset.push(conn);
                }
            }
            shared.unpark(now);
            (reset, Self::settle(shared))
        };
        wakers.into_iter().for_each(Waker::wake);
        reset
    }

    /// The connection is gone: pending requests fail with `STORE_UNAVAILABLE`.
    pub fn connection_lost(&self, why: &str) {
        self.connection_lost_on(0, why);
    }

    /// [`connection_lost`](Self::connection_lost) for connection `conn`; on a cluster
    /// it also makes the topology stale.
    pub fn connection_lost_on(&self, conn: usize, why: &str) {
        let wakers = {
            let shared = &mut *self.shared();
            if let Some(engine) = shared.engines.get_mut(conn) {
                engine.connection_lost(why, &mut shared.done);
            }
            if let Some(cluster) = shared.cluster.as_mut() {
                cluster.stale = true;
            }
            Self::settle(shared)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// When the earliest pending request times out, on the clock's scale.
    #[must_use]
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.shared().engines.iter().filter_map(Engine::next_deadline_ms).min()
    }

    /// Requests waiting for a reply (on any connection, or to be sent again).
    #[must_use]
    pub fn pending(&self) -> usize {
        let shared = self.shared();
        shared.engines.iter().map(Engine::pending).sum::<usize>()
            + shared.cluster.as_ref().map_or(0, |c| c.parked.len())
    }

    /// Later operations fail with `STORE_CLOSED`; pending ones fail now.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        let wakers = {
            let shared = &mut *self.shared();
            let mut done = std::mem::take(&mut shared.done);
            for engine in &mut shared.engines {
                engine.connection_lost("the store was closed", &mut done);
            }
            if let Some(cluster) = shared.cluster.as_mut() {
                done.extend(
                    cluster.parked.drain(..).map(|r| Completion { id: r.id(), result: Ok(Value::Done) }),
                );
            }
            for completion in &mut done {
                completion.result = Err(LockError::StoreClosed);
            }
            shared.done = done;
            Self::settle(shared)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    fn settle(shared: &mut Shared) -> Vec<Waker> {
        let mut wakers = Vec::new();
        for Completion { id, result } in shared.done.drain(..) {
            if let Some(slot) = shared.slots.get_mut(&id) {
                if let Slot::Waiting(waker) = std::mem::replace(slot, Slot::Done(result)) {
                    wakers.extend(waker);
                }
            }
        }
        wakers
    }
}

/// The reply to one request.
struct ReplyFuture<'a> {
    store: &'a EngineStore,
    /// `None` when the store was closed.
    id: Option<RequestId>,
}

impl Future for ReplyFuture<'_> {
    type Output = Result<Value>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Value>> {
        let Some(id) = self.id else { return Poll::Ready(Err(LockError::StoreClosed)) };
        let mut shared = self.store.shared();
        match shared.slots.get_mut(&id) {
            Some(Slot::Waiting(waker)) => {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
            Some(Slot::Done(_)) => match shared.slots.remove(&id) {
                Some(Slot::Done(result)) => Poll::Ready(result),
                _ => unreachable!(),
            },
            None => Poll::Ready(Err(LockError::StoreUnavailable("redis: the request was lost".into()))),
        }
    }
}

impl Drop for ReplyFuture<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.store.shared().slots.remove(&id);
        }
    }
}

/// The kinds the permit scripts serve: a semaphore's (with a valid limit), read, write.
fn permit_kind(kind: HoldKind) -> Result<HoldKind> {
    match validate::kind(kind)? {
        kind @ (HoldKind::Permit { .. } | HoldKind::Read | HoldKind::Write) => Ok(kind),
        other => Err(LockError::InvalidArgument(format!(
            "a {} is not a semaphore or read-write lock",
            other.name()
        ))),
    }
}

fn unexpected(op: &str, value: &Value) -> LockError {
    LockError::StoreError(format!("redis engine: {op} got {value:?}"))
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
impl LockStore for EngineStore {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.acquire_with_grant(key, owner, ttl_ms).await?.is_some())
    }

    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        match self.request(key, |e, now| e.acquire(key, owner, ttl_ms, now)).await? {
            Value::Acquired(token) => Ok(token.map(Grant::with_fencing_token)),
            Value::Taken(taken) => Ok(taken.then(Grant::default)),
            other => Err(unexpected("acquire", &other)),
        }
    }

    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        match self.request(key, |e, now| e.release(key, owner, now)).await? {
            Value::Flag(flag) => Ok(flag),
            other => Err(unexpected("release", &other)),
        }
    }

    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        match self.request(key, |e, now| e.extend(key, owner, ttl_ms, now)).await? {
            Value::Flag(flag) => Ok(flag),
            other => Err(unexpected("extend", &other)),
        }
    }

    async fn is_locked(&self, key: &str) -> Result<bool> {
        match self.request(key, |e, now| e.is_locked(key, now)).await? {
            Value::Flag(flag) => Ok(flag),
            other => Err(unexpected("is_locked", &other)),
        }
    }

    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        match self.request(key, |e, now| e.remaining_time(key, now)).await? {
            Value::Millis(ms) => Ok(ms),
            other => Err(unexpected("remaining_time", &other)),
        }
    }

    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        match self.request(key, |e, now| e.is_held_by(key, owner, now)).await? {
            Value::Flag(flag) => Ok(Some(flag)),
            other => Err(unexpected("is_held_by", &other)),
        }
    }

    async fn owner_remaining_time(&self, key: &str, owner: &str) -> Result<locksmith_core::HoldCheck> {
        match self.request(key, |e, now| e.owner_remaining_time(key, owner, now)).await? {
            Value::Millis(Some(remaining_ms)) => Ok(locksmith_core::HoldCheck::Held { remaining_ms }),
            Value::Millis(None) => Ok(locksmith_core::HoldCheck::NotHeld),
            other => Err(unexpected("owner_remaining_time", &other)),
        }
    }

    fn acquire_all<'a>(
        &'a self,
        keys: &'a [String],
        owner: &'a str,
        ttl_ms: u64,
    ) -> Option<BoxFuture<'a, Result<locksmith_core::AllGrant>>> {
        // Across hash slots a cluster cannot run one script: the lock takes them in order.
        let first = keys.first()?;
        if !self.shared().one_slot(keys) {
            return None;
        }
        let reply = self.request(first, |e, now| e.acquire_all(keys, owner, ttl_ms, now));
        Some(Box::pin(async move {
            match reply.await? {
                Value::AcquiredAll(Ok(tokens)) => Ok(locksmith_core::AllGrant::Granted(
                    tokens.into_iter().map(Grant::with_fencing_token).collect(),
                )),
                Value::AcquiredAll(Err(held)) => {
                    // The keys before the held one were free: a release of one of them
                    // may have woken this attempt, and that wake-up goes on to the key's
                    // next waiter here, which may need nothing else.
                    for key in keys.iter().take(held) {
                        if let Some(subscriber) = self.subscriber_for(key) {
                            subscriber.pass_on(&self.released_channel(key));
                        }
                    }
                    Ok(locksmith_core::AllGrant::Busy(Some(held)))
                }
                other => Err(unexpected("acquire_all", &other)),
            }
        }))
    }

    /// Fair locks and semaphores (`fair: true`): one script per attempt
    /// (`fair_acquire.lua`, `fair_semaphore_acquire.lua`), a queue of owners by arrival
    /// and a lease per place, in the key's slot.
    async fn acquire_fair(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
        waits: bool,
    ) -> Result<Option<Grant>> {
        let permits = match kind {
            HoldKind::Exclusive => 1,
            HoldKind::Permit { .. } => locksmith_core::validate::permits(kind, permits)?,
            other => {
                return Err(LockError::InvalidArgument(format!(
                    "a {} has no fair queue: fair handles are locks and semaphores",
                    other.name()
                )))
            }
        };
        // `fencing: false` is the plain locks' (a semaphore's holds carry tokens either way).
        let fencing = self.shared().engines[0].options().fencing || kind != HoldKind::Exclusive;
        match self
            .request(key, |e, now| e.fair_acquire(key, owner, ttl_ms, kind, permits, waits, now))
            .await?
        {
            // Without fencing, a lock's holds carry no token (the script mints one all the same).
            Value::Acquired(token) => {
                Ok(token.map(|t| if fencing { Grant::with_fencing_token(t) } else { Grant::default() }))
            }
            other => Err(unexpected("acquire_fair", &other)),
        }
    }

    /// A fair lock's release (`fair_release.lua`): frees the hold, or gives up the
    /// owner's place; either way the mark goes with the last fair holder or waiter.
    fn release_fair<'a>(&'a self, key: &'a str, owner: &'a str) -> BoxFuture<'a, Result<bool>> {
        let reply = self.request(key, |e, now| e.fair_release(key, owner, now));
        Box::pin(async move {
            match reply.await? {
                Value::Flag(flag) => Ok(flag),
                other => Err(unexpected("release_fair", &other)),
            }
        })
    }

    /// A fair lock's extend: its fair mark is kept at least as long.
    fn extend_fair<'a>(&'a self, key: &'a str, owner: &'a str, ttl_ms: u64) -> BoxFuture<'a, Result<bool>> {
        let reply = self.request(key, |e, now| e.fair_extend(key, owner, ttl_ms, now));
        Box::pin(async move {
            match reply.await? {
                Value::Flag(flag) => Ok(flag),
                other => Err(unexpected("extend_fair", &other)),
            }
        })
    }

    fn release_signal(&self, key: &str) -> Option<BoxFuture<'static, ()>> {
        let subscriber = self.subscriber_for(key)?;
        Some(subscriber.signal(self.released_channel(key)))
    }

    fn has_local_waiters(&self, key: &str) -> bool {
        self.subscriber_for(key).is_some_and(|subscriber| subscriber.has_waiters(&self.released_channel(key)))
    }

    async fn acquire_permit(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
    ) -> Result<Option<Grant>> {
        self.acquire_permits(key, owner, ttl_ms, kind, 1).await
    }

    async fn acquire_permits(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
    ) -> Result<Option<Grant>> {
        let kind = permit_kind(kind)?;
        let permits = locksmith_core::validate::permits(kind, permits)?;
        match self.request(key, |e, now| e.acquire_permit(key, owner, ttl_ms, kind, permits, now)).await? {
            Value::Acquired(token) => Ok(token.map(Grant::with_fencing_token)),
            other => Err(unexpected("acquire_permit", &other)),
        }
    }

    async fn release_permit(&self, key: &str, owner: &str, kind: HoldKind) -> Result<bool> {
        let kind = permit_kind(kind)?;
        match self.request(key, |e, now| e.release_permit(key, owner, kind, now)).await? {
            Value::Flag(flag) => Ok(flag),
            other => Err(unexpected("release_permit", &other)),
        }
    }

    async fn extend_permit(&self, key: &str, owner: &str, ttl_ms: u64, kind: HoldKind) -> Result<bool> {
        let kind = permit_kind(kind)?;
        match self.request(key, |e, now| e.extend_permit(key, owner, ttl_ms, kind, now)).await? {
            Value::Flag(flag) => Ok(flag),
            other => Err(unexpected("extend_permit", &other)),
        }
    }

    async fn permit_count(&self, key: &str, kind: HoldKind) -> Result<u64> {
        let kind = permit_kind(kind)?;
        match self.request(key, |e, now| e.permit_count(key, kind, now)).await? {
            Value::Count(count) => Ok(count),
            other => Err(unexpected("permit_count", &other)),
        }
    }

    async fn permit_remaining_time(&self, key: &str, owner: &str, kind: HoldKind) -> Result<Option<u64>> {
        let kind = permit_kind(kind)?;
        match self.request(key, |e, now| e.permit_remaining_time(key, owner, kind, now)).await? {
            Value::Millis(ms) => Ok(ms),
            other => Err(unexpected("permit_remaining_time", &other)),
        }
    }

    fn permit_release_signal(&self, key: &str, kind: HoldKind) -> Option<BoxFuture<'static, ()>> {
        let subscriber = self.subscriber_for(key)?;
        if kind == HoldKind::Exclusive {
            // A fair lock's waiters: every one wakes, as only the first in line may go.
            return Some(subscriber.signal_all(self.released_channel(key)));
        }
        let channel = format!("{}:released", crate::permit_key(&self.key_prefix(), key, kind));
        Some(subscriber.signal_all(channel))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::engine::reply::key_slot;

    struct TestClock(AtomicU64);

    impl Clock for TestClock {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    fn poll<T>(future: &mut Pin<Box<dyn Future<Output = T> + Send + '_>>) -> Poll<T> {
        future.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    fn output(store: &EngineStore, conn: usize) -> String {
        String::from_utf8(store.take_output_on(conn).unwrap_or_default()).unwrap()
    }

    fn cluster() -> (Arc<TestClock>, EngineStore) {
        let clock = Arc::new(TestClock(AtomicU64::new(0)));
        let options = EngineOptions { key_prefix: "p:".into(), command_timeout_ms: 1_000, fencing: true };
        let store = EngineStore::new(options, clock.clone(), None);
        store.enable_cluster("a:1");
        (clock, store)
    }

    #[test]
    fn host_wants_says_what_the_host_has_to_do() {
        let clock = Arc::new(TestClock(AtomicU64::new(0)));
        let options = EngineOptions { key_prefix: "p:".into(), command_timeout_ms: 1_000, fencing: true };
        let store = EngineStore::new(options, clock, Some(Subscriber::new(1_000)));
        assert_eq!(store.host_wants(), 0, "idle: nothing to do");
        let mut locked = store.is_locked("k");
        assert!(poll(&mut locked).is_pending());
        assert_eq!(store.host_wants(), WANTS_WRITE, "a queued command");
        assert!(output(&store, 0).contains("EXISTS"));
        assert_eq!(store.host_wants(), 0, "written: waiting on the reply asks nothing");
        // A waiter listens for releases: the subscriber wants a socket, then has its
        // SUBSCRIBE to write once it has one, then nothing.
        let subscriber = store.subscriber().unwrap().clone();
        let mut signal = subscriber.signal("p:{k}:released".into());
        assert!(signal.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
        assert_eq!(store.host_wants(), WANTS_SUBSCRIBER, "a channel wanted and no socket");
        subscriber.connected(None, 0);
        assert_eq!(store.host_wants(), WANTS_SUBSCRIBER, "its SUBSCRIBE to write");
        assert!(subscriber.take_output().is_some());
        assert_eq!(store.host_wants(), 0);
        store.feed_on(0, b":0\r\n").unwrap();
        assert!(matches!(poll(&mut locked), Poll::Ready(Ok(false))));
    }

    #[test]
    fn a_cluster_routes_by_slot_and_follows_moved_and_ask() {
        let (_, store) = cluster();
        let slot = key_slot(b"p:{k}");
        store.set_slots(&[(0, 16_383, "b:2".into())]);
        assert_eq!((store.connections(), store.address(1).as_deref()), (2, Some("b:2")));
        let mut locked = store.is_locked("k");
        assert!(poll(&mut locked).is_pending());
        assert_eq!(output(&store, 0), "", "nothing for the seed, which serves no slot");
        assert!(output(&store, 1).contains("EXISTS\r\n$5\r\np:{k}"));
        // MOVED: the slot lives elsewhere now; the request follows, the map too.
        store.feed_on(1, format!("-MOVED {slot} c:3\r\n").as_bytes()).unwrap();
        assert!(poll(&mut locked).is_pending());
        assert_eq!(store.address(2).as_deref(), Some("c:3"));
        assert!(store.take_topology_stale());
        assert!(output(&store, 2).contains("EXISTS"));
        // ASK: once, after ASKING; the slot stays where MOVED put it.
        store.feed_on(2, format!("-ASK {slot} b:2\r\n").as_bytes()).unwrap();
        let asked = output(&store, 1);
        assert!(asked.starts_with("*1\r\n$6\r\nASKING\r\n") && asked.contains("EXISTS"), "{asked}");
        assert!(!store.take_topology_stale(), "ASK does not move the slot");
        store.feed_on(1, b"+OK\r\n:1\r\n").unwrap();
        assert!(matches!(poll(&mut locked), Poll::Ready(Ok(true))));
        let mut again = store.is_locked("k");
        assert!(poll(&mut again).is_pending());
        assert!(output(&store, 2).contains("EXISTS"), "the next request goes to the MOVED node");
        store.feed_on(2, b":0\r\n").unwrap();
        assert!(matches!(poll(&mut again), Poll::Ready(Ok(false))));
    }

    #[test]
    fn tryagain_and_clusterdown_are_sent_again_within_the_deadline() {
        let (clock, store) = cluster();
        let mut locked = store.is_locked("k");
        assert!(poll(&mut locked).is_pending());
        assert!(output(&store, 0).contains("EXISTS"), "no slot map yet: the seed");
        store.feed_on(0, b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n").unwrap();
        assert!(poll(&mut locked).is_pending());
        assert_eq!(output(&store, 0), "", "parked until the next expire");
        clock.0.store(100, Ordering::Relaxed);
        assert!(store.expire_all().is_empty());
        assert!(output(&store, 0).contains("EXISTS"), "sent again");
        store.feed_on(0, b"-CLUSTERDOWN The cluster is down\r\n").unwrap();
        clock.0.store(1_000, Ordering::Relaxed);
        store.expire_all();
        match poll(&mut locked) {
            Poll::Ready(Err(LockError::StoreUnavailable(message))) => {
                assert!(message.contains("1000 ms"), "{message}");
            }
            other => panic!("the deadline of the first send holds: {other:?}"),
        }
    }

    #[test]
    fn a_cluster_refuses_a_key_with_an_empty_hash_tag_and_sends_nothing() {
        fn refused<T: std::fmt::Debug>(result: Poll<Result<T>>) -> String {
            match result {
                Poll::Ready(Err(err @ LockError::InvalidArgument(_))) => err.to_string(),
                other => panic!("{other:?}"),
            }
        }
        let (_, store) = cluster();
        store.set_slots(&[(0, 16_383, "a:1".into())]);
        let mut acquire = store.acquire_with_grant("}k", "o", 1_000);
        assert!(refused(poll(&mut acquire)).contains("p:{}k} has an empty hash tag"));
        let mut permit = store.acquire_permit("}k", "o", 1_000, HoldKind::Write);
        refused(poll(&mut permit));
        let mut release = store.release("}k", "o");
        refused(poll(&mut release));
        let keys = ["}k".to_owned()];
        assert!(store.acquire_all(&keys, "o", 1_000).is_none(), "taken key by key, each refused");
        assert_eq!((output(&store, 0), store.pending()), (String::new(), 0), "nothing sent");
        // One server keeps the layout every release used.
        let options = EngineOptions { key_prefix: "p:".into(), command_timeout_ms: 1_000, fencing: true };
        let single = EngineStore::new(options, Arc::new(TestClock(AtomicU64::new(0))), None);
        let mut acquire = single.acquire_with_grant("}k", "o", 1_000);
        assert!(poll(&mut acquire).is_pending());
        assert!(output(&single, 0).contains("$6\r\np:{}k}\r\n$12\r\np:{}k}:fence"));
    }

    #[test]
    fn a_plain_server_fails_a_redirect() {
        let clock = Arc::new(TestClock(AtomicU64::new(0)));
        let options = EngineOptions { key_prefix: "p:".into(), command_timeout_ms: 1_000, fencing: true };
        let store = EngineStore::new(options, clock, None);
        let mut locked = store.is_locked("k");
        assert!(poll(&mut locked).is_pending());
        store.feed(b"-MOVED 1 c:3\r\n").unwrap();
        assert!(matches!(poll(&mut locked), Poll::Ready(Err(LockError::StoreError(_)))));
        assert_eq!(store.connections(), 1);
    }
}
