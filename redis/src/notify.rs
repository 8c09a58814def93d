//! Release notifications: the release script publishes on `<lock key>:released`; a
//! subscriber connection listens on the channels that local waiters care about and
//! wakes one waiter per release. If the subscriber connection is lost, waiters fall
//! back to polling at their retry delay until it is back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use event_listener::Event;
use futures_util::StreamExt;
use locksmith_core::BoxFuture;
use tokio::sync::mpsc;

enum Command {
    Subscribe(String),
    Unsubscribe(String),
}

struct Channel {
    waiters: usize,
    event: Arc<Event>,
}

#[derive(Default)]
struct Channels(Mutex<HashMap<String, Channel>>);

impl Channels {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Channel>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub struct ReleaseNotifier {
    channels: Arc<Channels>,
    commands: mpsc::UnboundedSender<Command>,
    task: tokio::task::AbortHandle,
}

/// Keeps a channel subscribed while a waiter may still be woken through it.
struct Waiting {
    channels: Arc<Channels>,
    commands: mpsc::UnboundedSender<Command>,
    channel: String,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut channels = self.channels.lock();
        if let Some(entry) = channels.get_mut(&self.channel) {
            entry.waiters -= 1;
            if entry.waiters == 0 {
                channels.remove(&self.channel);
                let _ = self.commands.send(Command::Unsubscribe(std::mem::take(&mut self.channel)));
            }
        }
    }
}

impl ReleaseNotifier {
    /// Starts the subscriber task on the current tokio runtime.
    pub fn start(client: redis::Client) -> Self {
        let channels = Arc::new(Channels::default());
        let (commands, receiver) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(client, channels.clone(), receiver)).abort_handle();
        Self { channels, commands, task }
    }

    pub fn stop(&self) {
        self.task.abort();
    }

    /// A future that completes when `channel` carries a release.
    pub fn signal(&self, channel: String) -> BoxFuture<'static, ()> {
        let listener = {
            let mut channels = self.channels.lock();
            let entry = channels.entry(channel.clone()).or_insert_with(|| {
                let _ = self.commands.send(Command::Subscribe(channel.clone()));
                Channel { waiters: 0, event: Arc::new(Event::new()) }
            });
            entry.waiters += 1;
            entry.event.listen()
        };
        let waiting = Waiting { channels: self.channels.clone(), commands: self.commands.clone(), channel };
        Box::pin(async move {
            let _waiting = waiting;
            listener.await;
        })
    }
}

impl Drop for ReleaseNotifier {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn run(client: redis::Client, channels: Arc<Channels>, mut commands: mpsc::UnboundedReceiver<Command>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let connected = tokio::time::timeout(Duration::from_secs(5), client.get_async_pubsub()).await;
        let Ok(Ok(pubsub)) = connected else {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
            continue;
        };
        backoff = Duration::from_millis(100);
        let (mut sink, mut stream) = pubsub.split();
        let wanted: Vec<String> = channels.lock().keys().cloned().collect();
        let mut healthy = true;
        for channel in wanted {
            healthy &= sink.subscribe(channel).await.is_ok();
        }
        while healthy {
            tokio::select! {
                command = commands.recv() => match command {
                    None => return,
                    Some(Command::Subscribe(channel)) => healthy = sink.subscribe(channel).await.is_ok(),
                    Some(Command::Unsubscribe(channel)) => {
                        let still_wanted = channels.lock().contains_key(&channel);
                        if !still_wanted {
                            healthy = sink.unsubscribe(channel).await.is_ok();
                        }
                    }
                },
                message = stream.next() => match message {
                    None => healthy = false,
                    Some(message) => {
                        if let Some(channel) = channels.lock().get(message.get_channel_name()) {
                            channel.event.notify(1);
                        }
                    }
                },
            }
        }
    }
}
