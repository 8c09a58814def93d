//! Async results without a promise per call on the Rust side. napi's `async fn` makes a
//! promise and a threadsafe function (a libuv handle) for every call; a lock call is
//! too small for that. Instead each async call is spawned on tokio with an id, and its
//! outcome travels back through one threadsafe function per JS environment; the JS side
//! keeps the promises. Node drains many outcomes per wake-up.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;

use napi::bindgen_prelude::Unknown;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;

/// The outcome of one async call.
#[napi(object)]
pub struct Done {
    pub id: u32,
    pub flag: Option<bool>,
    pub number: Option<f64>,
    /// `CODE message`, as errors thrown by the addon.
    pub error: Option<String>,
}

/// What a call resolves to.
pub enum Outcome {
    Flag(bool),
    Number(Option<f64>),
    Nothing,
}

/// Not error-first, weak: the JS side keeps the process alive while calls are pending.
type Handler = ThreadsafeFunction<Done, Unknown<'static>, Done, Status, false, true>;

#[napi]
pub struct Completions {
    handler: Arc<Handler>,
    /// The outcome of the call that just finished on the JS thread (`Runner::inline`),
    /// until the JS side takes it.
    inline: std::sync::Mutex<Option<Done>>,
}

#[napi]
impl Completions {
    #[napi(constructor)]
    pub fn new(handler: Handler) -> Self {
        Self { handler: Arc::new(handler), inline: std::sync::Mutex::new(None) }
    }

    /// The outcome of the call whose `*_start` answered that it finished at once.
    #[napi]
    pub fn take_inline(&self) -> Option<Done> {
        self.inline.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }
}

/// What a finished call reports, as `Done`.
pub fn report(id: u32, outcome: Result<locksmith_core::Result<Outcome>, ()>) -> Done {
    let mut done = Done { id, flag: None, number: None, error: None };
    match outcome {
        Ok(Ok(Outcome::Flag(flag))) => done.flag = Some(flag),
        Ok(Ok(Outcome::Number(number))) => done.number = number,
        Ok(Ok(Outcome::Nothing)) => {}
        Ok(Err(err)) => done.error = Some(crate::error::reason(&err)),
        Err(()) => {
            done.error = Some("INTERNAL_ERROR locksmith: internal error (a panic) in an async call".into());
        }
    }
    done
}

impl Completions {
    /// Keeps the outcome of a call that finished at once, for `take_inline`.
    pub fn settle_inline(&self, id: u32, outcome: Result<locksmith_core::Result<Outcome>, ()>) {
        *self.inline.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(report(id, outcome));
    }

    /// Delivers an outcome that is already in hand, on a later turn of the event loop.
    pub fn deliver(&self, id: u32, outcome: locksmith_core::Result<Outcome>) {
        self.handler.call(report(id, Ok(outcome)), ThreadsafeFunctionCallMode::NonBlocking);
    }

    /// Runs `work` on tokio and delivers its outcome under `id`.
    /// `tracked`: counted while awake, and its outcome until it reaches the JS thread,
    /// in its clock's work (a lock over a test kit clock, `virtual_clock.rs`).
    pub fn spawn<F>(&self, id: u32, work: F, tracked: Option<crate::virtual_clock::WorkCount>)
    where
        F: Future<Output = locksmith_core::Result<Outcome>> + Send + 'static,
    {
        let handler = self.handler.clone();
        let counted = tracked.clone();
        let task = async move {
            // A panic must still settle the caller's promise, or its process would wait forever.
            let outcome = AssertUnwindSafe(work).catch_unwind().await.map_err(|_| ());
            crate::virtual_clock::queued_on(counted.as_deref());
            let arriving = counted.clone();
            let status = handler.call_with_return_value(
                report(id, outcome),
                ThreadsafeFunctionCallMode::NonBlocking,
                move |_, _| {
                    crate::virtual_clock::arrived_on(arriving.as_deref());
                    Ok(())
                },
            );
            if status != Status::Ok {
                crate::virtual_clock::arrived_on(counted.as_deref());
            }
        };
        match tracked {
            Some(work) => drop(napi::bindgen_prelude::spawn(crate::virtual_clock::Tracked::new(task, work))),
            None => drop(napi::bindgen_prelude::spawn(task)),
        }
    }
}
