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
#[derive(Clone, Default)]
pub struct FakeTimer {
    shared: Arc<Mutex<FakeState>>,
}

#[derive(Default)]
struct FakeState {
    now: u64,
    sleepers: Vec<(u64, Waker)>,
}

impl FakeTimer {
    /// A clock at 0.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
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
            if !woken.0.swap(false, Ordering::SeqCst) {
                assert!(self.advance_to_next_sleeper(), "deadlock: pending with no sleeper and no wake-up");
            }
        }
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
}
