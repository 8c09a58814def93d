//! The store conformance suite against `MemoryStore` on a fake clock.

use std::sync::Arc;

use locksmith_core::conformance::Harness;
use locksmith_core::{FakeTimer, MemoryStore};

fn harness() -> Harness {
    let timer = FakeTimer::new();
    Harness {
        store: Arc::new(MemoryStore::new(Arc::new(timer.clone()))),
        timer: Arc::new(timer.clone()),
        runner: timer.runner(),
        fencing: true,
        exact_ownership: true,
        permits: true,
        slack_ms: 0,
    }
}

locksmith_core::store_conformance_suite!(harness());
