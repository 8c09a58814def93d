//! Release notifications: the release script publishes on `<lock key>:released`; a
//! subscriber connection listens on the channels that local waiters care about and
//! wakes one waiter per release.
//!
//! * A channel is subscribed only once an acquire attempt on its key has failed: an
//!   uncontended `acquire({ timeout })` sends no SUBSCRIBE. The first failed attempt's
//!   signal subscribes, waits for Redis to confirm and then completes, so the waiter
//!   tries again at once: a release published before the confirmation is seen by that
//!   attempt, and one published after it by the listener registered before the attempt.
//!   The waiter's own retry delay and deadline bound that wait (core races the signal
//!   against them).
//! * One subscription per channel per store, shared by every waiter on it. A channel
//!   nobody has waited on for [`IDLE_UNSUBSCRIBE_AFTER`] is unsubscribed; the entry
//!   leaves the map before the UNSUBSCRIBE is sent, and the subscriber task runs its
//!   commands in order, so a new waiter's SUBSCRIBE always follows it.
//! * Every command on the subscriber connection is bounded by the command timeout, and
//!   the connection is pinged while it carries subscriptions. A subscriber that does not
//!   answer is dropped and reconnected; meanwhile waiters fall back to their retry delay.
//!   After a reconnect, waiters are woken once, since a release may have been missed.
//! * The subscriber connection is opened when the first channel is wanted, and kept.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use event_listener::Event;
use futures_util::StreamExt;
use locksmith_core::BoxFuture;
use redis::aio::PubSubSink;
use tokio::sync::mpsc;

/// How long a channel stays subscribed after its last waiter left. Longer than the gap
/// between two attempts of one waiter, so a waiter that keeps failing keeps its
/// subscription; short, so the subscriber does not collect channels of past contention.
pub const IDLE_UNSUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

/// What the subscriber task is asked to do.
enum Command {
    /// Subscribe to a channel that has an entry and no confirmed subscription.
    Subscribe(String),
}

struct Channel {
    /// Waiters holding a signal of this channel.
    waiters: usize,
    /// Notified once per release.
    released: Event,
    /// Whether Redis confirmed the subscription on the current subscriber connection.
    subscribed: bool,
    /// Notified when `subscribed` becomes true.
    confirmed: Event,
    /// When the last waiter left, while none has come since.
    idle_since: Option<Instant>,
}

impl Channel {
    fn new() -> Self {
        Self {
            waiters: 0,
            released: Event::new(),
            subscribed: false,
            confirmed: Event::new(),
            idle_since: None,
        }
    }
}

/// The timeouts the subscriber connection works with.
#[derive(Debug, Clone, Copy)]
pub struct NotifierTimeouts {
    /// How long connecting may take.
    pub connect: Duration,
    /// How long SUBSCRIBE, UNSUBSCRIBE and PING may take.
    pub command: Duration,
}

struct Shared {
    channels: Mutex<HashMap<String, Channel>>,
    commands: mpsc::UnboundedSender<Command>,
    timeouts: NotifierTimeouts,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Channel>> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a waiter on `channel`, creating the entry (and asking for its subscription)
    /// when there is none.
    fn join<'a>(&self, channels: &'a mut HashMap<String, Channel>, channel: &str) -> &'a mut Channel {
        let entry = channels.entry(channel.to_owned()).or_insert_with(|| {
            let _ = self.commands.send(Command::Subscribe(channel.to_owned()));
            Channel::new()
        });
        entry.waiters += 1;
        entry.idle_since = None;
        entry
    }
}

/// Counts one waiter on a channel while it lives.
struct Waiting {
    shared: Arc<Shared>,
    channel: String,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(entry) = self.shared.lock().get_mut(&self.channel) {
            entry.waiters -= 1;
            if entry.waiters == 0 {
                entry.idle_since = Some(Instant::now());
            }
        }
    }
}

pub struct ReleaseNotifier {
    shared: Arc<Shared>,
    task: tokio::task::AbortHandle,
}

impl ReleaseNotifier {
    /// Starts the subscriber task on the current tokio runtime. It connects when the
    /// first channel is wanted.
    pub fn start(client: redis::Client, timeouts: NotifierTimeouts) -> Self {
        let (commands, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared { channels: Mutex::default(), commands, timeouts });
        let task = tokio::spawn(run(client, shared.clone(), receiver)).abort_handle();
        Self { shared, task }
    }

    pub fn stop(&self) {
        self.task.abort();
    }

    /// A future that completes when `channel` may carry a release, made before an
    /// acquire attempt and polled only after that attempt failed.
    ///
    /// When the channel is subscribed already, it listens from now on. Otherwise it
    /// subscribes when first polled, and completes as soon as Redis confirmed the
    /// subscription, so the waiter tries again with the subscription in place. While the
    /// confirmation does not come (a subscriber that is stalled, down or reconnecting),
    /// the waiter sleeps its retry delay: core races this future against it.
    pub fn signal(&self, channel: String) -> BoxFuture<'static, ()> {
        let shared = self.shared.clone();
        {
            let mut channels = shared.lock();
            if let Some(entry) = channels.get_mut(&channel).filter(|entry| entry.subscribed) {
                entry.waiters += 1;
                entry.idle_since = None;
                let listener = entry.released.listen();
                drop(channels);
                let waiting = Waiting { shared, channel };
                return Box::pin(async move {
                    let _waiting = waiting;
                    listener.await;
                });
            }
        }
        Box::pin(async move {
            let confirmed = {
                let mut channels = shared.lock();
                let entry = shared.join(&mut channels, &channel);
                // Subscribed since this signal was made: the attempt that failed came
                // before any release this subscription will see, so try again now.
                (!entry.subscribed).then(|| entry.confirmed.listen())
            };
            let _waiting = Waiting { shared, channel };
            if let Some(confirmed) = confirmed {
                confirmed.await;
            }
        })
    }

    /// Channels with a subscription entry, subscribed or not.
    pub fn entries(&self) -> usize {
        self.shared.lock().len()
    }
}

impl Drop for ReleaseNotifier {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `future` within `limit`, an elapsed limit counting as a failure.
async fn bounded<T>(limit: Duration, future: impl Future<Output = redis::RedisResult<T>>) -> bool {
    matches!(tokio::time::timeout(limit, future).await, Ok(Ok(_)))
}

/// Subscribes, in one command, those of `channels` that still have an entry without a
/// confirmed subscription. `false` when the subscriber connection failed.
async fn subscribe(sink: &mut PubSubSink, shared: &Shared, mut channels: Vec<String>) -> bool {
    {
        let entries = shared.lock();
        channels.retain(|channel| entries.get(channel).is_some_and(|entry| !entry.subscribed));
    }
    channels.sort_unstable();
    channels.dedup();
    if channels.is_empty() {
        return true;
    }
    if !bounded(shared.timeouts.command, sink.subscribe(&channels)).await {
        return false;
    }
    let mut entries = shared.lock();
    for channel in &channels {
        if let Some(entry) = entries.get_mut(channel) {
            entry.subscribed = true;
            entry.confirmed.notify(usize::MAX);
            // Waiters that listened on an earlier connection may have missed a release.
            entry.released.notify(usize::MAX);
        }
    }
    true
}

/// Removes the channels idle for long enough and unsubscribes them. `false` when the
/// subscriber connection failed.
async fn unsubscribe_idle(sink: &mut PubSubSink, shared: &Shared) -> bool {
    let idle: Vec<String> = {
        let mut channels = shared.lock();
        let idle: Vec<String> = channels
            .iter()
            .filter(|(_, e)| {
                e.waiters == 0 && e.idle_since.is_some_and(|t| t.elapsed() >= IDLE_UNSUBSCRIBE_AFTER)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in &idle {
            channels.remove(name);
        }
        idle
    };
    idle.is_empty() || bounded(shared.timeouts.command, sink.unsubscribe(&idle)).await
}

/// Between connections: forgets the channels nobody waits on (there is no subscription
/// to keep for them) and the queued requests (the channels still wanted are in the map),
/// so a subscriber that keeps failing holds nothing for keys no longer contended.
fn forget_while_disconnected(shared: &Shared, commands: &mut mpsc::UnboundedReceiver<Command>) {
    while commands.try_recv().is_ok() {}
    shared.lock().retain(|_, entry| entry.waiters > 0);
}

async fn run(client: redis::Client, shared: Arc<Shared>, mut commands: mpsc::UnboundedReceiver<Command>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        forget_while_disconnected(&shared, &mut commands);
        // Connect only when some channel is wanted.
        while shared.lock().is_empty() {
            if commands.recv().await.is_none() {
                return;
            }
        }
        let connected = tokio::time::timeout(shared.timeouts.connect, client.get_async_pubsub()).await;
        let Ok(Ok(pubsub)) = connected else {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
            continue;
        };
        let (mut sink, mut stream) = pubsub.split();
        // Every channel wanted now; later ones arrive as commands (a channel subscribed
        // here and asked for again is skipped).
        let wanted: Vec<String> = shared.lock().keys().cloned().collect();
        let mut healthy = subscribe(&mut sink, &shared, wanted).await;
        if healthy {
            backoff = Duration::from_millis(100);
        }
        let mut tick = tokio::time::interval(IDLE_UNSUBSCRIBE_AFTER);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while healthy {
            tokio::select! {
                command = commands.recv() => match command {
                    None => return,
                    Some(Command::Subscribe(channel)) => {
                        // Everything asked for meanwhile goes in the same SUBSCRIBE.
                        let mut channels = vec![channel];
                        while let Ok(Command::Subscribe(more)) = commands.try_recv() {
                            channels.push(more);
                        }
                        healthy = subscribe(&mut sink, &shared, channels).await;
                    }
                },
                message = stream.next() => match message {
                    None => healthy = false,
                    Some(message) => {
                        if let Some(entry) = shared.lock().get(message.get_channel_name()) {
                            entry.released.notify(1);
                        }
                    }
                },
                _ = tick.tick() => {
                    // Idle channels go; a connection that carries subscriptions must
                    // answer a PING, or it is replaced.
                    healthy = unsubscribe_idle(&mut sink, &shared).await
                        && (shared.lock().is_empty() || bounded(shared.timeouts.command, sink.ping::<redis::Value>()).await);
                }
            }
        }
        for entry in shared.lock().values_mut() {
            entry.subscribed = false;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_signal_that_is_never_polled_subscribes_nothing() {
        // An unreachable server: nothing would answer anyway.
        let client = redis::Client::open("redis://127.0.0.1:1").unwrap();
        let timeouts =
            NotifierTimeouts { connect: Duration::from_millis(50), command: Duration::from_millis(50) };
        let notifier = ReleaseNotifier::start(client, timeouts);
        drop(notifier.signal("a:released".into()));
        assert_eq!(notifier.entries(), 0);
    }
}
