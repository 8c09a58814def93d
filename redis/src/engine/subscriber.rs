//! Release notifications, sans I/O: the subscriber connection's engine.
//!
//! The release script publishes on `<lock key>:released`. A waiter's
//! [`signal`](Subscriber::signal) (made before an acquire attempt, polled only after
//! that attempt failed) subscribes its channel, waits for Redis to confirm, and then
//! completes, so the waiter tries again with the subscription in place: a release
//! before the confirmation is seen by that attempt, one after it by the listener.
//! One subscription per channel, shared by the waiters on it; a release wakes one
//! local waiter (the others stay asleep unless it fails and its retry goes on).
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

use event_listener::Event;
use locksmith_core::{BoxFuture, LockError, Result};
use redis_protocol::resp2::types::RangeFrame;

use super::resp;

/// How long a channel stays subscribed after its last waiter left, in milliseconds.
pub const IDLE_UNSUBSCRIBE_AFTER_MS: u64 = 1_000;

struct Channel {
    waiters: usize,
    released: Event,
    subscribed: bool,
    /// SUBSCRIBE sent on the current connection, not yet confirmed.
    requested: bool,
    confirmed: Event,
    idle_since_ms: Option<u64>,
}

impl Channel {
    fn new() -> Self {
        Self {
            waiters: 0,
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
        let mut args: Vec<&[u8]> = vec![b"SUBSCRIBE"];
        args.extend(wanted.iter().map(|name| name.as_bytes()));
        let names: Vec<String> = wanted.into_iter().cloned().collect();
        resp::command(&mut self.output, &args);
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

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A future that completes when `channel` may carry a release (see the module docs).
    #[must_use]
    pub fn signal(&self, channel: String) -> BoxFuture<'static, ()> {
        {
            let mut state = self.state();
            if let Some(entry) = state.channels.get_mut(&channel).filter(|c| c.subscribed) {
                entry.waiters += 1;
                entry.idle_since_ms = None;
                let listener = entry.released.listen();
                drop(state);
                let waiting = Waiting { subscriber: self.clone(), channel };
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
                entry.idle_since_ms = None;
                let confirmed = (!entry.subscribed).then(|| entry.confirmed.listen());
                state.subscribe_wanted();
                confirmed
            };
            let _waiting = Waiting { subscriber, channel };
            if let Some(confirmed) = confirmed {
                confirmed.await;
            }
        })
    }

    /// Whether channels are wanted and no connection is up: the host should open one.
    #[must_use]
    pub fn wants_connection(&self) -> bool {
        let state = self.state();
        !state.connected && !state.channels.is_empty()
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

    /// Reads confirmations and messages; wakes one waiter per release.
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
            RangeFrame::Error(r) => Err(LockError::StoreUnavailable(format!(
                "redis subscriber: {}",
                String::from_utf8_lossy(&buf[r.0..r.1])
            ))),
            RangeFrame::Array(parts) => {
                let kind = parts.first().and_then(text).unwrap_or_default();
                let channel = parts.get(1).and_then(text).map(String::from_utf8_lossy);
                match (kind, channel) {
                    (b"message", Some(channel)) => {
                        if let Some(entry) = state.channels.get(channel.as_ref()) {
                            entry.released.notify(1);
                        }
                    }
                    (b"subscribe", Some(channel)) => {
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
        if !idle.is_empty() {
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

    /// Channels with an entry (for tests).
    #[must_use]
    pub fn channels(&self) -> usize {
        self.state().channels.len()
    }
}

/// Counts one waiter on a channel while it lives.
struct Waiting {
    subscriber: Subscriber,
    channel: String,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut state = self.subscriber.state();
        let now = state.now_ms;
        if let Some(entry) = state.channels.get_mut(&self.channel) {
            entry.waiters -= 1;
            if entry.waiters == 0 {
                entry.idle_since_ms = Some(now);
            }
        }
    }
}
