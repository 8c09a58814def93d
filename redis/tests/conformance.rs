//! The store conformance suite against `RedisStore` and a real `redis-server`.

mod server;

use std::sync::{Arc, OnceLock};

use locksmith_core::conformance::Harness;
use locksmith_redis::{RedisOptions, RedisStore, TokioTimer};
use tokio::runtime::Runtime;

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    })
}

fn harness() -> Harness {
    let server = server::shared();
    let store = runtime().block_on(RedisStore::connect(RedisOptions::new(server.url()))).expect("connect");
    Harness {
        store: Arc::new(store),
        timer: Arc::new(TokioTimer::default()),
        runner: Arc::new(|future| runtime().block_on(future)),
        fencing: true,
        exact_ownership: true,
        // The redis-rs store has no permit scripts (the engine has; its harness in
        // engine.rs runs the permit cases): here the suite checks they say UNSUPPORTED.
        permits: false,
        // Timers on tokio and a loopback round trip on a busy 2-core machine.
        slack_ms: 100,
    }
}

locksmith_core::store_conformance_suite!(harness());
