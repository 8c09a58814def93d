//! Running futures on the host's own thread: a small executor whose tasks are woken by
//! [`EngineStore::feed`](super::EngineStore::feed) and by a timer that the host fires.
//!
//! The host (a JS event loop) calls [`Executor::run_ready`] after each chunk it fed and
//! after each timer it fired, and arms its own timer for [`LocalTimer::next_deadline_ms`].
//! Nothing here blocks or spawns a thread.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use locksmith_core::{BoxFuture, Clock, Timer};

/// Task ids: the host's call ids.
pub type TaskId = u32;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Default)]
struct ReadyQueue(Mutex<Vec<TaskId>>);

struct TaskWaker {
    id: TaskId,
    ready: Arc<ReadyQueue>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        lock(&self.ready.0).push(self.id);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        lock(&self.ready.0).push(self.id);
    }
}

/// Tasks that run when woken; each finishes with a `T` for its host.
pub struct Executor<T> {
    tasks: Mutex<HashMap<TaskId, BoxFuture<'static, T>>>,
    ready: Arc<ReadyQueue>,
}

impl<T> Default for Executor<T> {
    fn default() -> Self {
        Self { tasks: Mutex::new(HashMap::new()), ready: Arc::new(ReadyQueue::default()) }
    }
}

impl<T> std::fmt::Debug for Executor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor").field("tasks", &lock(&self.tasks).len()).finish_non_exhaustive()
    }
}

impl<T> Executor<T> {
    /// Polls `task` once now: its output if it finished, else it waits to be woken.
    pub fn spawn(&self, id: TaskId, mut task: BoxFuture<'static, T>) -> Option<T> {
        match self.poll(id, &mut task) {
            Poll::Ready(out) => Some(out),
            Poll::Pending => {
                lock(&self.tasks).insert(id, task);
                None
            }
        }
    }

    fn poll(&self, id: TaskId, task: &mut BoxFuture<'static, T>) -> Poll<T> {
        let waker = Waker::from(Arc::new(TaskWaker { id, ready: self.ready.clone() }));
        task.as_mut().poll(&mut Context::from_waker(&waker))
    }

    /// Polls every woken task (and those they wake) until none is; pushes the outputs of
    /// those that finished.
    pub fn run_ready(&self, finished: &mut Vec<(TaskId, T)>) {
        loop {
            let woken = std::mem::take(&mut *lock(&self.ready.0));
            if woken.is_empty() {
                return;
            }
            for id in woken {
                // Taken out while it runs: a task may wake itself or spawn another.
                let Some(mut task) = lock(&self.tasks).remove(&id) else { continue };
                match self.poll(id, &mut task) {
                    Poll::Ready(out) => finished.push((id, out)),
                    Poll::Pending => {
                        lock(&self.tasks).insert(id, task);
                    }
                }
            }
        }
    }

    /// How many tasks wait.
    #[must_use]
    pub fn len(&self) -> usize {
        lock(&self.tasks).len()
    }

    /// Whether no task waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Sleeps on the host's timer. The host arms one timer for
/// [`next_deadline_ms`](Self::next_deadline_ms) and calls [`fire`](Self::fire) when it
/// goes off.
pub struct LocalTimer {
    clock: Arc<dyn Clock>,
    sleeps: Arc<Mutex<Sleeps>>,
    background: Executor<()>,
}

#[derive(Default)]
struct Sleeps {
    next: u64,
    /// (deadline, sequence) -> the state of that sleep.
    waiting: BTreeMap<(u64, u64), Arc<Mutex<SleepState>>>,
}

#[derive(Default)]
struct SleepState {
    done: bool,
    waker: Option<Waker>,
}

impl std::fmt::Debug for LocalTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalTimer")
            .field("sleeps", &lock(&self.sleeps).waiting.len())
            .finish_non_exhaustive()
    }
}

impl LocalTimer {
    /// A timer on `clock`.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self { clock, sleeps: Arc::new(Mutex::new(Sleeps::default())), background: Executor::default() }
    }

    /// How many sleeps wait.
    #[must_use]
    pub fn sleeping(&self) -> usize {
        lock(&self.sleeps).waiting.len()
    }

    /// When the earliest sleep ends, on the clock's scale.
    #[must_use]
    pub fn next_deadline_ms(&self) -> Option<u64> {
        lock(&self.sleeps).waiting.keys().next().map(|(deadline, _)| *deadline)
    }

    /// Ends every sleep whose time has come (waking its task) and runs background tasks
    /// that are ready.
    pub fn fire(&self) {
        self.end_sleeps(self.clock.now_ms());
    }

    /// Ends every sleep now, due or not (its store was closed: the tasks should find
    /// out rather than wait).
    pub fn wake_all(&self) {
        self.end_sleeps(u64::MAX - 1);
    }

    fn end_sleeps(&self, now: u64) {
        let due: Vec<_> = {
            let mut sleeps = lock(&self.sleeps);
            let later = sleeps.waiting.split_off(&(now + 1, 0));
            std::mem::replace(&mut sleeps.waiting, later).into_values().collect()
        };
        for sleep in due {
            let waker = {
                let mut state = lock(&sleep);
                state.done = true;
                state.waker.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        }
        self.run_background();
    }

    /// Runs background tasks (see [`Timer::spawn`]) that were woken.
    pub fn run_background(&self) {
        let mut finished = Vec::new();
        self.background.run_ready(&mut finished);
    }
}

struct Sleep {
    state: Arc<Mutex<SleepState>>,
    /// Where the sleep waits, to take it off when it is dropped before its time (a
    /// hold's watch ended by its release): a cancelled sleep frees its entry at once.
    sleeps: std::sync::Weak<Mutex<Sleeps>>,
    key: (u64, u64),
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if lock(&self.state).done {
            return;
        }
        if let Some(sleeps) = self.sleeps.upgrade() {
            lock(&sleeps).waiting.remove(&self.key);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = lock(&self.state);
        if state.done {
            Poll::Ready(())
        } else {
            state.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

impl Clock for LocalTimer {
    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    fn unix_time_ms(&self) -> Option<u64> {
        self.clock.unix_time_ms()
    }
}

impl Timer for LocalTimer {
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        let state = Arc::new(Mutex::new(SleepState::default()));
        let key = {
            let mut sleeps = lock(&self.sleeps);
            let seq = sleeps.next;
            sleeps.next += 1;
            let key = (self.clock.now_ms().saturating_add(ms), seq);
            sleeps.waiting.insert(key, state.clone());
            key
        };
        Box::pin(Sleep { state, sleeps: Arc::downgrade(&self.sleeps), key })
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> bool {
        // Background tasks get ids from the top of the range, apart from the host's.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let id = u32::MAX - (NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % (1 << 20));
        self.background.spawn(id, task);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct FakeClock(AtomicU64);

    impl Clock for FakeClock {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn a_sleep_dropped_before_its_time_frees_its_entry() {
        let clock = Arc::new(FakeClock(AtomicU64::new(0)));
        let timer = LocalTimer::new(clock.clone());
        let kept = timer.sleep(10);
        for _ in 0..1000 {
            drop(timer.sleep(3_600_000));
        }
        assert_eq!(timer.sleeping(), 1, "cancelled sleeps are gone at once");
        assert_eq!(timer.next_deadline_ms(), Some(10));
        clock.0.store(10, Ordering::Relaxed);
        timer.fire();
        assert_eq!(timer.sleeping(), 0);
        drop(kept);
        assert_eq!(timer.sleeping(), 0);
    }
}
