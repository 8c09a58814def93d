//! A fake clock with an executor that jumps time forward when everything is asleep:
//! TTL and timeout logic runs in virtual time, exactly and instantly.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use crate::store::{BoxFuture, Clock, Timer};

/// A clock that moves only when told, or when [`run`](FakeTimer::run) finds every
/// task asleep.
#[derive(Clone)]
pub struct FakeTimer {
    shared: Arc<Mutex<FakeState>>,
}

#[derive(Default)]
struct FakeState {
    now: u64,
    /// What `unix_time_ms` adds to `now`.
    unix_offset_ms: u64,
    sleepers: Vec<(u64, Waker)>,
    /// Tasks handed to [`Timer::spawn`], polled by [`FakeTimer::run`].
    spawned: Vec<BoxFuture<'static, ()>>,
}

/// Where the fake wall clock stands at fake time 0: 2026-01-01T00:00:00Z.
const UNIX_START_MS: u64 = 1_767_225_600_000;

impl FakeTimer {
    /// A clock at 0, whose wall clock reads 2026-01-01T00:00:00Z.
    #[must_use]
    pub fn new() -> Self {
        let state = FakeState { unix_offset_ms: UNIX_START_MS, ..FakeState::default() };
        Self { shared: Arc::new(Mutex::new(state)) }
    }

    /// Sets the wall clock (`unix_time_ms`) to `ms` now, without moving the monotonic
    /// clock: another host's clock, for tests of what travels between hosts.
    pub fn set_unix_time_ms(&self, ms: u64) {
        let mut state = self.state();
        state.unix_offset_ms = ms.saturating_sub(state.now);
    }

    /// How many tasks handed to `spawn` have not finished.
    #[must_use]
    pub fn spawned_tasks(&self) -> usize {
        self.state().spawned.len()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the clock forward by `ms`, waking sleepers that are due.
    pub fn advance(&self, ms: u64) {
        let due = {
            let mut state = self.state();
            state.now += ms;
            let now = state.now;
            let (due, waiting) =
                std::mem::take(&mut state.sleepers).into_iter().partition(|(at, _)| *at <= now);
            state.sleepers = waiting;
            due
        };
        for (_, waker) in due {
            waker.wake();
        }
    }

    /// Moves the clock to the earliest sleeper's deadline. `false` if nobody sleeps.
    fn advance_to_next_sleeper(&self) -> bool {
        let next = {
            let state = self.state();
            state.sleepers.iter().map(|(at, _)| *at).min().map(|at| at.saturating_sub(state.now))
        };
        next.map(|ms| self.advance(ms)).is_some()
    }

    /// Runs `future` to completion on this thread. When it is pending and nothing
    /// woke it, time jumps to the next sleeper's deadline.
    ///
    /// # Panics
    /// When the future is pending with nothing asleep and nothing woken: a deadlock.
    pub fn run<F: Future>(&self, future: F) -> F::Output {
        let woken = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
            self.poll_spawned(&mut cx);
            if !woken.0.swap(false, Ordering::SeqCst) {
                assert!(self.advance_to_next_sleeper(), "deadlock: pending with no sleeper and no wake-up");
            }
        }
    }

    /// Polls every spawned task once, keeping those that are still pending.
    fn poll_spawned(&self, cx: &mut Context<'_>) {
        let tasks = std::mem::take(&mut self.state().spawned);
        let mut pending: Vec<_> = tasks
            .into_iter()
            .filter_map(|mut task| task.as_mut().poll(cx).is_pending().then_some(task))
            .collect();
        let mut state = self.state();
        pending.append(&mut state.spawned);
        state.spawned = pending;
    }

    /// The clock's reading, in milliseconds.
    #[must_use]
    pub fn now(&self) -> u64 {
        self.state().now
    }

    /// Sleeps `ms` on this clock (the same as [`Timer::sleep`], without the box).
    #[must_use]
    pub fn sleep_for_test(&self, ms: u64) -> BoxFuture<'static, ()> {
        Timer::sleep(self, ms)
    }

    /// A runner for [`crate::conformance::Harness`].
    #[must_use]
    pub fn runner(&self) -> crate::conformance::Runner {
        let timer = self.clone();
        Arc::new(move |future| timer.run(future))
    }
}

impl Default for FakeTimer {
    fn default() -> Self {
        Self::new()
    }
}

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Clock for FakeTimer {
    fn now_ms(&self) -> u64 {
        self.state().now
    }

    fn unix_time_ms(&self) -> Option<u64> {
        let state = self.state();
        Some(state.now + state.unix_offset_ms)
    }
}

impl Timer for FakeTimer {
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        let timer = self.clone();
        let deadline = self.now_ms().saturating_add(ms);
        Box::pin(std::future::poll_fn(move |cx| {
            let mut state = timer.state();
            if state.now >= deadline {
                Poll::Ready(())
            } else {
                state.sleepers.push((deadline, cx.waker().clone()));
                Poll::Pending
            }
        }))
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> bool {
        self.state().spawned.push(task);
        true
    }
}
