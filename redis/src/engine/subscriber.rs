//! Release notifications, sans I/O: the subscriber connection's engine.
//!
//! The release script publishes on `<lock key>:released`. A waiter's
//! [`signal`](Subscriber::signal) (made before an acquire attempt, polled only after
//! that attempt failed) subscribes its channel, waits for Redis to confirm, and then
//! completes, so the waiter tries again with the subscription in place: a release
//! before the confirmation is seen by that attempt, one after it by the listener.
//! One subscription per channel, shared by the waiters on it; a release wakes one
//! local waiter (the others stay asleep unless it fails and its retry goes on). The
//! channels of semaphores and read-write locks ([`signal_all`](Subscriber::signal_all))
//! wake every local waiter instead: one release can admit several readers, and each
//! waiter checks for itself.
//! An uncontended acquire never polls its signal, so it sends no SUBSCRIBE.
//!
//! The host opens the subscriber socket when [`wants_connection`](Subscriber::wants_connection)
//! says so, writes [`take_output`](Subscriber::take_output), feeds what it reads, calls
//! [`tick`](Subscriber::tick) now and then (idle channels are unsubscribed, a
//! subscribed connection is pinged, and one that does not answer is to be dropped),
//! and reports a lost connection; waiters then fall back to their retry delay, and are
//! woken once after the next confirmation, since a release may have been missed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use event_listener::{Event, IntoNotification};
use locksmith_core::{BoxFuture, LockError, Result};
use redis_protocol::resp2::types::RangeFrame;

use super::resp;

/// How long a channel stays subscribed after its last waiter left, in milliseconds.
pub const IDLE_UNSUBSCRIBE_AFTER_MS: u64 = 1_000;

struct Channel {
    waiters: usize,
    /// A release wakes every waiter, not one.
    wake_all: bool,
    released: Event,
    subscribed: bool,
    /// SUBSCRIBE sent on the current connection, not yet confirmed.
    requested: bool,
    confirmed: Event,
    idle_since_ms: Option<u64>,
    /// Which entry this is for its name: a channel given up (its slot moved) and asked
    /// for again is a new entry, and the waiters of the old one do not count on it.
    generation: u64,
}

impl Channel {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Self {
            generation: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            waiters: 0,
            wake_all: false,
            released: Event::new(),
            subscribed: false,
            requested: false,
            confirmed: Event::new(),
            idle_since_ms: None,
        }
    }
}

#[derive(Default)]
struct State {
    channels: HashMap<String, Channel>,
    connected: bool,
    output: Vec<u8>,
    input: Vec<u8>,
    /// Replies owed by the server (a confirmation per channel, a PONG per PING), and
    /// since when the oldest is owed.
    owed: usize,
    owed_since_ms: Option<u64>,
    /// Time, from the host's clock, as of its last call.
    now_ms: u64,
    /// Sharded pub/sub (Redis Cluster): `SSUBSCRIBE`, one channel per command (a
    /// command's channels must share a slot), and `smessage`s.
    sharded: bool,
    /// A `MOVED` or `ASK` answered an `SSUBSCRIBE` since the host last asked: its slot is
    /// served elsewhere now (see [`Subscriber::take_moved`]).
    moved: bool,
}

/// The subscriber connection's engine. Cheap to share: clones see the same state.
#[derive(Clone)]
pub struct Subscriber {
    state: Arc<Mutex<State>>,
    command_timeout_ms: u64,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber").field("channels", &self.state().channels.len()).finish_non_exhaustive()
    }
}

impl State {
    fn owe(&mut self, replies: usize) {
        if self.owed == 0 {
            self.owed_since_ms = Some(self.now_ms);
        }
        self.owed += replies;
    }

    fn paid(&mut self) {
        self.owed = self.owed.saturating_sub(1);
        self.owed_since_ms = (self.owed > 0).then_some(self.now_ms);
    }

    /// SUBSCRIBE, in one command, every channel with an entry and no request yet.
    fn subscribe_wanted(&mut self) {
        if !self.connected {
            return;
        }
        let mut wanted: Vec<&String> = self
            .channels
            .iter()
            .filter(|(_, c)| !c.subscribed && !c.requested)
            .map(|(name, _)| name)
            .collect();
        if wanted.is_empty() {
            return;
        }
        wanted.sort_unstable();
        let names: Vec<String> = wanted.into_iter().cloned().collect();
        if self.sharded {
            for name in &names {
                resp::command(&mut self.output, &[b"SSUBSCRIBE", name.as_bytes()]);
            }
        } else {
            let mut args: Vec<&[u8]> = vec![b"SUBSCRIBE"];
            args.extend(names.iter().map(String::as_bytes));
            resp::command(&mut self.output, &args);
        }
        for name in &names {
            if let Some(channel) = self.channels.get_mut(name) {
                channel.requested = true;
            }
        }
        self.owe(names.len());
    }
}

impl Subscriber {
    /// A subscriber with no channel and no connection.
    #[must_use]
    pub fn new(command_timeout_ms: u64) -> Self {
        Self { state: Arc::default(), command_timeout_ms }
    }

    /// Sharded pub/sub from now on (Redis Cluster, where the release scripts
    /// `SPUBLISH` on the key's shard): `SSUBSCRIBE`, `SUNSUBSCRIBE`, `smessage`. A
    /// channel the server unsubscribes by itself (its slot moved to another node)
    /// wakes its waiters, who try again and subscribe where the key is now.
    pub fn set_sharded(&self) {
        self.state().sharded = true;
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A future that completes when `channel` may carry a release (see the module docs).
    #[must_use]
    pub fn signal(&self, channel: String) -> BoxFuture<'static, ()> {
        self.signal_with(channel, false)
    }

    /// [`signal`](Self::signal) on a channel where a release wakes every waiter: a
    /// semaphore's or a read-write lock's.
    #[must_use]
    pub fn signal_all(&self, channel: String) -> BoxFuture<'static, ()> {
        self.signal_with(channel, true)
    }

    fn signal_with(&self, channel: String, wake_all: bool) -> BoxFuture<'static, ()> {
        {
            let mut state = self.state();
            if let Some(entry) = state.channels.get_mut(&channel).filter(|c| c.subscribed) {
                entry.waiters += 1;
                entry.wake_all |= wake_all;
                entry.idle_since_ms = None;
                let listener = entry.released.listen();
                let generation = entry.generation;
                drop(state);
                let waiting = Waiting { subscriber: self.clone(), channel, generation };
                return Box::pin(async move {
                    let _waiting = waiting;
                    listener.await;
                });
            }
        }
        let subscriber = self.clone();
        Box::pin(async move {
            let confirmed = {
                let mut state = subscriber.state();
                let entry = state.channels.entry(channel.clone()).or_insert_with(Channel::new);
                entry.waiters += 1;
                entry.wake_all |= wake_all;
                entry.idle_since_ms = None;
                let confirmed = (!entry.subscribed).then(|| entry.confirmed.listen());
                let generation = entry.generation;
                state.subscribe_wanted();
                (confirmed, generation)
            };
            let (confirmed, generation) = confirmed;
            let _waiting = Waiting { subscriber, channel, generation };
            if let Some(confirmed) = confirmed {
                confirmed.await;
            }
        })
    }

    /// Wakes one waiter of `channel` (unless one is woken already): what a release would
    /// have done for a key that a refused attempt woken by its release left free (a
    /// lock on several keys that found another of them held).
    pub fn pass_on(&self, channel: &str) {
        let state = self.state();
        if let Some(entry) = state.channels.get(channel).filter(|c| c.subscribed && c.waiters > 0) {
            entry.released.notify(1);
        }
    }

    /// Whether a waiter of this process waits on `channel` where a release would wake
    /// it: the subscription confirmed on a live connection. (While it is not, waiters
    /// poll, and a newcomer should try at once too.)
    #[must_use]
    pub fn has_waiters(&self, channel: &str) -> bool {
        let state = self.state();
        state.connected
            && state.channels.get(channel).is_some_and(|entry| entry.subscribed && entry.waiters > 0)
    }

    /// Whether channels are wanted and no connection is up: the host should open one.
    #[must_use]
    pub fn wants_connection(&self) -> bool {
        let state = self.state();
        !state.connected && !state.channels.is_empty()
    }

    /// Whether the host has something to do for this subscriber: open a socket
    /// ([`wants_connection`](Self::wants_connection)) or write on the one it has.
    #[must_use]
    pub fn wants_attention(&self) -> bool {
        let state = self.state();
        if state.connected {
            !state.output.is_empty()
        } else {
            !state.channels.is_empty()
        }
    }

    /// The host's socket is up. `auth` is `AUTH`'s arguments, if the server wants them;
    /// every wanted channel is subscribed in one command after it.
    pub fn connected(&self, auth: Option<(Option<&str>, &str)>, now_ms: u64) {
        let mut state = self.state();
        state.now_ms = now_ms;
        state.connected = true;
        state.output.clear();
        state.input.clear();
        state.owed = 0;
        state.owed_since_ms = None;
        if let Some((user, password)) = auth {
            let mut args: Vec<&[u8]> = vec![b"AUTH"];
            args.extend(user.map(str::as_bytes));
            args.push(password.as_bytes());
            resp::command(&mut state.output, &args);
            state.owe(1);
        }
        state.subscribe_wanted();
    }

    /// The connection is gone: subscriptions are lost; waiters fall back to their
    /// retry delay until the next connection confirms them.
    pub fn connection_lost(&self) {
        let mut state = self.state();
        state.connected = false;
        state.output.clear();
        state.input.clear();
        state.owed = 0;
        state.owed_since_ms = None;
        for channel in state.channels.values_mut() {
            channel.subscribed = false;
            channel.requested = false;
        }
    }

    /// The bytes to write now, if connected and any.
    #[must_use]
    pub fn take_output(&self) -> Option<Vec<u8>> {
        let mut state = self.state();
        (state.connected && !state.output.is_empty()).then(|| std::mem::take(&mut state.output))
    }

    /// Reads confirmations and messages; wakes one waiter per release (every waiter on
    /// the channels of [`signal_all`](Self::signal_all)).
    ///
    /// # Errors
    /// Bytes that are not RESP, or an error reply (a refused AUTH): drop the connection.
    pub fn feed(&self, bytes: &[u8], now_ms: u64) -> Result<()> {
        let mut state = self.state();
        state.now_ms = now_ms;
        let mut input = std::mem::take(&mut state.input);
        input.extend_from_slice(bytes);
        let mut at = 0;
        let mut failure = None;
        while at < input.len() {
            let decoded = match redis_protocol::resp2::decode::decode_range(&input[at..]) {
                Ok(decoded) => decoded,
                Err(e) => {
                    failure =
                        Some(LockError::StoreUnavailable(format!("redis subscriber: unreadable reply: {e}")));
                    break;
                }
            };
            let Some((frame, used)) = decoded else { break };
            let buf = &input[at..at + used];
            at += used;
            if let Err(err) = Self::on_frame(&mut state, buf, &frame) {
                failure = Some(err);
                break;
            }
        }
        input.drain(..at);
        state.input = input;
        failure.map_or(Ok(()), Err)
    }

    fn on_frame(state: &mut State, buf: &[u8], frame: &RangeFrame) -> Result<()> {
        let text = |frame: &RangeFrame| match frame {
            RangeFrame::BulkString(r) | RangeFrame::SimpleString(r) => Some(&buf[r.0..r.1]),
            _ => None,
        };
        match frame {
            RangeFrame::Error(r) => {
                let message = String::from_utf8_lossy(&buf[r.0..r.1]);
                // Cluster: a channel's slot moved (a reshard). The connection is fine;
                // that channel's waiters go back to their attempts (whose own MOVED
                // points the store at the new node) and subscribe there next time.
                if state.sharded {
                    if let Some(slot) = redirected_slot(&message) {
                        state.paid();
                        state.moved = true;
                        let gone: Vec<String> = state
                            .channels
                            .iter()
                            .filter(|(name, c)| {
                                c.requested
                                    && !c.subscribed
                                    && super::reply::key_slot(name.as_bytes()) == slot
                            })
                            .map(|(name, _)| name.clone())
                            .collect();
                        for name in gone {
                            if let Some(entry) = state.channels.remove(&name) {
                                entry.confirmed.notify(usize::MAX);
                                entry.released.notify(usize::MAX);
                            }
                        }
                        return Ok(());
                    }
                }
                Err(LockError::StoreUnavailable(format!("redis subscriber: {message}")))
            }
            RangeFrame::Array(parts) => {
                let kind = parts.first().and_then(text).unwrap_or_default();
                let channel = parts.get(1).and_then(text).map(String::from_utf8_lossy);
                match (kind, channel) {
                    (b"message" | b"smessage", Some(channel)) => {
                        if let Some(entry) = state.channels.get(channel.as_ref()) {
                            if entry.wake_all {
                                entry.released.notify(usize::MAX);
                            } else {
                                // One more waiter per release: two releases in one chunk
                                // wake two (a plain `notify(1)` counts the one woken by
                                // the first, not yet run, and wakes nobody new).
                                entry.released.notify(1.additional());
                            }
                        }
                    }
                    (b"subscribe" | b"ssubscribe", Some(channel)) => {
                        state.paid();
                        if let Some(entry) = state.channels.get_mut(channel.as_ref()) {
                            entry.subscribed = true;
                            entry.requested = false;
                            entry.confirmed.notify(usize::MAX);
                            // Waiters that listened on an earlier connection may have
                            // missed a release.
                            entry.released.notify(usize::MAX);
                        }
                    }
                    // UNSUBSCRIBE replies are not counted as owed.
                    (b"unsubscribe", _) => {}
                    // The channels this side gave up are gone already: one still here
                    // was dropped by the server (its slot moved). Its waiters try again.
                    (b"sunsubscribe", Some(channel)) => {
                        if let Some(entry) = state.channels.get_mut(channel.as_ref()) {
                            entry.subscribed = false;
                            entry.requested = false;
                            entry.released.notify(usize::MAX);
                        }
                    }
                    _ => state.paid(), // ["pong", ""]
                }
                Ok(())
            }
            // +OK to AUTH, +PONG outside subscribe mode.
            _ => {
                state.paid();
                Ok(())
            }
        }
    }

    /// Unsubscribes channels idle for [`IDLE_UNSUBSCRIBE_AFTER_MS`] and pings a
    /// connection that carries subscriptions. `true` when a reply is overdue by the
    /// command timeout: the host must drop the connection.
    pub fn tick(&self, now_ms: u64) -> bool {
        let mut state = self.state();
        state.now_ms = now_ms;
        if state.owed_since_ms.is_some_and(|since| now_ms.saturating_sub(since) >= self.command_timeout_ms) {
            return true;
        }
        let idle: Vec<String> = state
            .channels
            .iter()
            .filter(|(_, c)| {
                c.waiters == 0
                    && c.idle_since_ms.is_some_and(|t| now_ms.saturating_sub(t) >= IDLE_UNSUBSCRIBE_AFTER_MS)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in &idle {
            state.channels.remove(name);
        }
        if !state.connected {
            return false;
        }
        if !idle.is_empty() && state.sharded {
            for name in &idle {
                resp::command(&mut state.output, &[b"SUNSUBSCRIBE", name.as_bytes()]);
            }
        } else if !idle.is_empty() {
            let mut args: Vec<&[u8]> = vec![b"UNSUBSCRIBE"];
            args.extend(idle.iter().map(String::as_bytes));
            resp::command(&mut state.output, &args);
        }
        if state.owed == 0 && state.channels.values().any(|c| c.subscribed) {
            resp::command(&mut state.output, &[b"PING"]);
            state.owe(1);
        }
        false
    }

    /// Whether an `SSUBSCRIBE` was redirected since the last call: the host should
    /// read the cluster's slot map again.
    #[must_use]
    pub fn take_moved(&self) -> bool {
        std::mem::take(&mut self.state().moved)
    }

    /// Channels with an entry (for tests).
    #[must_use]
    pub fn channels(&self) -> usize {
        self.state().channels.len()
    }
}

/// The slot of a `MOVED <slot> <address>` or `ASK <slot> <address>` error.
fn redirected_slot(message: &str) -> Option<u16> {
    let mut parts = message.split(' ');
    matches!(parts.next(), Some("MOVED" | "ASK")).then_some(())?;
    parts.next()?.parse().ok()
}

/// Counts one waiter on a channel while it lives.
struct Waiting {
    subscriber: Subscriber,
    channel: String,
    generation: u64,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut state = self.subscriber.state();
        let now = state.now_ms;
        if let Some(entry) = state.channels.get_mut(&self.channel).filter(|c| c.generation == self.generation)
        {
            // The generation check makes this waiter one of the entry's: never below zero.
            debug_assert!(entry.waiters > 0, "a channel's waiter count went below zero");
            entry.waiters = entry.waiters.saturating_sub(1);
            if entry.waiters == 0 {
                entry.idle_since_ms = Some(now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn poll(future: &mut BoxFuture<'static, ()>) -> Poll<()> {
        future.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    fn output(subscriber: &Subscriber) -> String {
        String::from_utf8(subscriber.take_output().unwrap_or_default()).unwrap()
    }

    const CONFIRM: &[u8] = b"*3\r\n$9\r\nsubscribe\r\n$3\r\nk:r\r\n:1\r\n";
    const MESSAGE: &[u8] = b"*3\r\n$7\r\nmessage\r\n$3\r\nk:r\r\n$0\r\n\r\n";

    #[test]
    fn waiters_of_a_channel_given_up_on_a_move_do_not_count_on_its_next_entry() {
        let sub = Subscriber::new(100);
        sub.set_sharded();
        sub.connected(None, 0);
        let channel = "{k}:released";
        let mut stale = sub.signal(channel.into());
        assert!(poll(&mut stale).is_pending());
        output(&sub);
        let slot = super::super::reply::key_slot(channel.as_bytes());
        sub.feed(format!("-MOVED {slot} 127.0.0.1:7001\r\n").as_bytes(), 1).unwrap();
        // Its waiter is busy with an attempt and keeps the signal, not polled again, while
        // another waiter asks for the channel anew: a new entry.
        let mut again = sub.signal(channel.into());
        assert!(poll(&mut again).is_pending());
        sub.feed(b"*3\r\n$10\r\nssubscribe\r\n$12\r\n{k}:released\r\n:1\r\n", 2).unwrap();
        assert!(poll(&mut again).is_ready(), "confirmed");
        // A waiter on the new, subscribed entry; then the stale guard goes.
        let mut waiter = sub.signal(channel.into());
        assert!(poll(&mut waiter).is_pending());
        drop(stale);
        assert_eq!(sub.channels(), 1);
        assert!(!sub.tick(10_000));
        assert_eq!(sub.channels(), 1, "the new entry keeps its waiter: still wanted");
        drop(waiter);
        drop(again);
    }

    #[test]
    fn two_releases_in_one_chunk_wake_two_waiters() {
        let sub = Subscriber::new(100);
        sub.connected(None, 0);
        let mut first = sub.signal("k:r".into());
        let mut second = sub.signal("k:r".into());
        assert!(poll(&mut first).is_pending());
        assert!(poll(&mut second).is_pending());
        sub.feed(CONFIRM, 0).unwrap();
        // Confirmed: both complete once (a release may have been missed); wait again.
        assert!(poll(&mut first).is_ready());
        assert!(poll(&mut second).is_ready());
        let mut first = sub.signal("k:r".into());
        let mut second = sub.signal("k:r".into());
        assert!(poll(&mut first).is_pending());
        assert!(poll(&mut second).is_pending());
        let two = [MESSAGE, MESSAGE].concat();
        sub.feed(&two, 1).unwrap();
        assert!(poll(&mut first).is_ready(), "the first release wakes one waiter");
        assert!(poll(&mut second).is_ready(), "the second release wakes the other");
    }

    #[test]
    fn a_moved_ssubscribe_sends_its_waiters_back_and_keeps_the_connection() {
        let sub = Subscriber::new(100);
        sub.set_sharded();
        sub.connected(None, 0);
        let mut waiter = sub.signal("{k}:released".into());
        assert!(poll(&mut waiter).is_pending());
        assert!(output(&sub).contains("SSUBSCRIBE"));
        let slot = super::super::reply::key_slot(b"{k}:released");
        let moved = format!("-MOVED {slot} 127.0.0.1:7001\r\n");
        sub.feed(moved.as_bytes(), 1).expect("a redirect is not a broken connection");
        assert!(poll(&mut waiter).is_ready(), "the waiter goes back to its attempt");
        assert!(sub.take_moved(), "the host is told to read the slot map again");
        assert!(!sub.take_moved());
        assert_eq!(sub.channels(), 0, "the channel is no longer asked for here");
        assert!(!sub.tick(50), "nothing is owed: no reason to drop the connection");
        assert!(sub.feed(b"-ERR something else\r\n", 2).is_err(), "other errors still drop it");
    }

    #[test]
    fn a_signal_subscribes_once_polled_and_completes_on_the_confirmation() {
        let sub = Subscriber::new(100);
        let unpolled = sub.signal("k:r".into());
        assert!(!sub.wants_connection(), "a signal never polled wants nothing");
        let mut first = sub.signal("k:r".into());
        let mut second = sub.signal("k:r".into());
        assert!(poll(&mut first).is_pending());
        assert!(poll(&mut second).is_pending());
        assert!(sub.wants_connection());
        assert!(sub.take_output().is_none(), "nothing is written before the connection is up");
        sub.connected(Some((Some("u"), "pw")), 0);
        let out = output(&sub);
        assert_eq!(out.matches("SUBSCRIBE").count(), 1, "one subscription for both waiters: {out}");
        assert!(out.starts_with("*3\r\n$4\r\nAUTH\r\n"), "{out}");
        sub.feed(b"+OK\r\n", 1).unwrap();
        assert!(poll(&mut first).is_pending());
        sub.feed(CONFIRM, 2).unwrap();
        assert!(poll(&mut first).is_ready());
        assert!(poll(&mut second).is_ready());
        drop(unpolled);
    }

    #[test]
    fn a_release_wakes_one_listener() {
        let sub = Subscriber::new(100);
        sub.connected(None, 0);
        let mut first = sub.signal("k:r".into());
        assert!(poll(&mut first).is_pending());
        sub.feed(CONFIRM, 1).unwrap();
        assert!(poll(&mut first).is_ready());
        // Subscribed now: new signals listen for releases.
        let mut a = sub.signal("k:r".into());
        let mut b = sub.signal("k:r".into());
        assert!(poll(&mut a).is_pending() && poll(&mut b).is_pending());
        sub.feed(MESSAGE, 2).unwrap();
        let woken = [poll(&mut a).is_ready(), poll(&mut b).is_ready()];
        assert_eq!(woken.iter().filter(|w| **w).count(), 1, "one release wakes one waiter: {woken:?}");
        let mut rest = if woken[0] { b } else { a };
        sub.feed(MESSAGE, 3).unwrap();
        assert!(poll(&mut rest).is_ready(), "the next release wakes the other");
    }

    #[test]
    fn a_release_on_a_permit_channel_wakes_every_listener() {
        let sub = Subscriber::new(100);
        sub.connected(None, 0);
        let mut first = sub.signal_all("k:r".into());
        assert!(poll(&mut first).is_pending());
        sub.feed(CONFIRM, 1).unwrap();
        assert!(poll(&mut first).is_ready());
        let mut waiting: Vec<_> = (0..3).map(|_| sub.signal_all("k:r".into())).collect();
        assert!(waiting.iter_mut().all(|s| poll(s).is_pending()));
        sub.feed(MESSAGE, 2).unwrap();
        assert!(waiting.iter_mut().all(|s| poll(s).is_ready()), "one release wakes them all");
    }

    #[test]
    fn sharded_channels_are_subscribed_one_by_one_and_a_moved_slot_wakes_its_waiters() {
        let sub = Subscriber::new(100);
        sub.set_sharded();
        sub.connected(None, 0);
        let mut a = sub.signal("a:r".into());
        let mut b = sub.signal("k:r".into());
        assert!(poll(&mut a).is_pending() && poll(&mut b).is_pending());
        let out = output(&sub);
        assert_eq!(out.matches("SSUBSCRIBE").count(), 2, "one channel per command: {out}");
        sub.feed(b"*3\r\n$10\r\nssubscribe\r\n$3\r\nk:r\r\n:1\r\n", 1).unwrap();
        assert!(poll(&mut b).is_ready());
        let mut waiting = sub.signal("k:r".into());
        assert!(poll(&mut waiting).is_pending());
        sub.feed(b"*3\r\n$8\r\nsmessage\r\n$3\r\nk:r\r\n$0\r\n\r\n", 2).unwrap();
        assert!(poll(&mut waiting).is_ready(), "an smessage wakes a waiter");
        let mut waiting = sub.signal("k:r".into());
        assert!(poll(&mut waiting).is_pending());
        sub.feed(b"*3\r\n$12\r\nsunsubscribe\r\n$3\r\nk:r\r\n:0\r\n", 3).unwrap();
        assert!(poll(&mut waiting).is_ready(), "the server dropped the channel: its waiters try again");
        drop(waiting);
        let mut again = sub.signal("k:r".into());
        assert!(poll(&mut again).is_pending());
        assert!(output(&sub).contains("SSUBSCRIBE"), "and subscribe again");
    }

    #[test]
    fn idle_channels_are_unsubscribed_and_a_silent_connection_is_given_up() {
        let sub = Subscriber::new(100);
        sub.connected(None, 0);
        let mut signal = sub.signal("k:r".into());
        assert!(poll(&mut signal).is_pending());
        output(&sub);
        sub.feed(CONFIRM, 10).unwrap();
        assert!(poll(&mut signal).is_ready());
        // While subscribed, a tick pings; an answer keeps the connection.
        assert!(!sub.tick(20));
        assert!(output(&sub).contains("PING"));
        sub.feed(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n", 30).unwrap();
        assert!(!sub.tick(40));
        assert!(output(&sub).contains("PING"));
        assert!(!sub.tick(139), "the ping is not overdue yet");
        assert!(sub.tick(140), "no pong within the command timeout");
        // A new connection subscribes the channel again. Its waiter stopped waiting when
        // its signal completed at 10 ms: the channel goes a second after that.
        sub.connection_lost();
        sub.connected(None, 200);
        assert!(output(&sub).contains("SUBSCRIBE"), "the wanted channel is subscribed again");
        sub.feed(CONFIRM, 200).unwrap();
        drop(signal);
        assert!(!sub.tick(1_000));
        assert_eq!(sub.channels(), 1);
        assert!(!sub.tick(1_010));
        assert_eq!(sub.channels(), 0);
        assert!(output(&sub).contains("UNSUBSCRIBE"));
    }
}
