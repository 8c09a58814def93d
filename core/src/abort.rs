//! Cancelling a waiting acquire from outside it: the host's `AbortSignal` fires an
//! [`Abort`], and [`Lock::acquire_abortable`](crate::Lock::acquire_abortable) stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use event_listener::Event;

/// A one-shot cancellation, shared between the caller that fires it and the acquires
/// that watch it. Cheap to clone; firing it again does nothing.
#[derive(Clone, Default)]
pub struct Abort {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    fired: AtomicBool,
    event: Event,
}

impl std::fmt::Debug for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Abort").field("fired", &self.is_aborted()).finish()
    }
}

impl Abort {
    /// A cancellation not yet fired.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires it: every acquire watching it stops.
    pub fn abort(&self) {
        if !self.inner.fired.swap(true, Ordering::SeqCst) {
            self.inner.event.notify(usize::MAX);
        }
    }

    /// Whether it has fired.
    #[must_use]
    pub fn is_aborted(&self) -> bool {
        self.inner.fired.load(Ordering::SeqCst)
    }

    /// Resolves once it has fired.
    pub async fn aborted(&self) {
        loop {
            if self.is_aborted() {
                return;
            }
            let listener = self.inner.event.listen();
            if self.is_aborted() {
                return;
            }
            listener.await;
        }
    }
}
