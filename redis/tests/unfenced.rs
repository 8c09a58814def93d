//! The engine with fencing off (`EngineOptions::fencing` false) against a real
//! `redis-server`: the store conformance suite without tokens, an acquire that is one
//! plain `SET … NX PX` (no script), and fenced and unfenced stores sharing keys — they
//! exclude each other, and the fenced ones' tokens still grow.

mod host;
mod server;
use host::{connect, connect_with, runtime, Admin, Settings, TokioTimer};

use std::sync::Arc;

use locksmith_core::conformance::Harness;
use locksmith_core::LockStore;
use locksmith_redis::engine::EngineStore;

fn unfenced(port: u16) -> Arc<EngineStore> {
    connect_with(port, &Settings { notify: true, unfenced: true, ..Settings::default() }).expect("handshake")
}

fn harness() -> Harness {
    let server = server::shared();
    Harness {
        store: unfenced(server.port),
        timer: Arc::new(TokioTimer::default()),
        runner: Arc::new(|future| runtime().block_on(future)),
        fencing: false,
        exact_ownership: true,
        permits: true,
        slack_ms: 100,
    }
}

locksmith_core::store_conformance_suite!(harness());

/// `calls` of `INFO commandstats` for `command` (lowercase).
async fn calls(admin: &mut Admin, command: &str) -> u64 {
    admin.info_field("commandstats", &format!("cmdstat_{command}")).await.map_or(0, |stats| {
        stats
            .split(',')
            .find_map(|part| part.strip_prefix("calls="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    })
}

#[test]
fn an_unfenced_acquire_is_a_plain_set_and_runs_no_script() {
    let server = server::RedisServer::start();
    let store = unfenced(server.port);
    runtime().block_on(async {
        let mut admin = Admin::connect(server.port).await;
        let (sets, scripts) = (calls(&mut admin, "set").await, calls(&mut admin, "evalsha").await);
        let grant = store.acquire_with_grant("plain", "owner-a", 5_000).await.unwrap().expect("taken");
        assert_eq!(grant.fencing_token, None, "no token without fencing");
        assert!(store.acquire_with_grant("plain", "owner-b", 5_000).await.unwrap().is_none(), "held");
        assert_eq!(calls(&mut admin, "set").await, sets + 2);
        assert_eq!(calls(&mut admin, "evalsha").await, scripts, "no script ran for the acquires");
        let ttl = admin.pttls(&["locksmith:{plain}".to_owned(), "locksmith:{plain}:fence".to_owned()]).await;
        assert!(
            ttl[0] > 4_000 && ttl[0] <= 5_000 && ttl[1] == -2,
            "the lock with its TTL, no counter: {ttl:?}"
        );
        assert!(store.extend("plain", "owner-a", 8_000).await.unwrap());
        assert!(store.release("plain", "owner-a").await.unwrap());
        assert_eq!(calls(&mut admin, "evalsha").await, scripts + 2, "extend and release keep their scripts");
    });
}

#[test]
fn fenced_and_unfenced_stores_exclude_each_other_and_fenced_tokens_still_grow() {
    let server = server::shared();
    let fenced = connect(server.port, true);
    let plain = unfenced(server.port);
    runtime().block_on(async {
        let key = "mixed";
        let mut last = 0;
        for round in 0..20 {
            let (holder, other) = if round % 2 == 0 { (&plain, &fenced) } else { (&fenced, &plain) };
            let grant = holder.acquire_with_grant(key, "holder", 5_000).await.unwrap().expect("free");
            assert!(
                other.acquire_with_grant(key, "other", 5_000).await.unwrap().is_none(),
                "round {round}: excluded"
            );
            match grant.fencing_token {
                Some(token) => {
                    assert!(round % 2 == 1 && token > last, "round {round}: token {token} after {last}");
                    last = token;
                }
                None => assert_eq!(round % 2, 0, "round {round}: the unfenced hold has no token"),
            }
            assert!(!other.release(key, "holder-not").await.unwrap());
            assert!(
                other.release(key, "holder").await.unwrap(),
                "ownership is the key's value: either frees it"
            );
        }
    });
}
