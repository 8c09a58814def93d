//! Helpers the integration tests share (each test file is its own crate: `mod common;`).
#![allow(dead_code)] // each file uses some of them

use std::sync::Arc;

use locksmith_core::{AcquireOptions, FakeTimer, Lock, MemoryStore};

/// Options for a waiting acquire.
pub fn waiting(timeout_ms: u64, retry_delay_ms: u64) -> AcquireOptions {
    AcquireOptions::default().with_timeout_ms(timeout_ms).with_retry_delay_ms(retry_delay_ms)
}

/// A memory store on `timer`.
pub fn memory(timer: &FakeTimer) -> Arc<MemoryStore> {
    Arc::new(MemoryStore::new(Arc::new(timer.clone())))
}

/// The owner token `l` holds its key with, from its serialized form.
pub fn owner_of(l: &Lock) -> String {
    let v: serde_json::Value = serde_json::from_str(&l.serialize().unwrap()).unwrap();
    v["owner"].as_str().unwrap().to_owned()
}
