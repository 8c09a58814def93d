#![allow(clippy::many_single_char_names)]

use super::*;

fn engine() -> Engine {
    Engine::new(EngineOptions { key_prefix: "p:".into(), command_timeout_ms: 100, fencing: true })
}

fn feed(engine: &mut Engine, bytes: &[u8]) -> Vec<Completion> {
    let mut done = Vec::new();
    engine.feed(bytes, 0, &mut done).unwrap();
    done
}

#[test]
fn acquire_is_an_evalsha_on_the_lock_its_fence_and_its_fair_mark() {
    let mut e = engine();
    e.acquire("k", "owner", 500, 0);
    let out = String::from_utf8(e.take_output()).unwrap();
    let sha = ACQUIRE.sha();
    assert_eq!(sha.len(), 40);
    let expected = format!(
        "*9\r\n$7\r\nEVALSHA\r\n$40\r\n{sha}\r\n$1\r\n3\r\n$5\r\np:{{k}}\r\n$11\r\np:{{k}}:fence\r\n$10\r\np:{{k}}:fair\r\n$5\r\nowner\r\n$3\r\n500\r\n$4\r\n1500\r\n"
    );
    assert_eq!(out, expected);
    assert!(!e.has_output());
}

#[test]
fn a_fair_attempt_and_release_send_the_queue_places_and_mark() {
    let mut e = engine();
    let id = e.fair_acquire("k", "owner", 500, HoldKind::Exclusive, 1, true, 0);
    let keys = ["p:{k}", "p:{k}:fence", "p:{k}:queue", "p:{k}:places", "p:{k}:fair"];
    let mut parts = vec!["5"];
    parts.extend(keys);
    parts.extend(["owner", "500", "1500", "1"]);
    assert_eq!(String::from_utf8(e.take_output()).unwrap(), evalsha(&FAIR_ACQUIRE, &parts));
    // -1: held by a handle that is not fair.
    let done = feed(&mut e, b":-1\r\n");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].id, id);
    assert!(matches!(&done[0].result, Err(LockError::InvalidArgument(m)) if m.contains("not fair")));
    e.fair_release("k", "owner", 0);
    let release = ["4", "p:{k}", "p:{k}:queue", "p:{k}:places", "p:{k}:fair", "owner"];
    assert_eq!(String::from_utf8(e.take_output()).unwrap(), evalsha(&FAIR_RELEASE, &release));
    e.fair_extend("k", "owner", 500, 0);
    let extend = ["3", "p:{k}", "p:{k}:fence", "p:{k}:fair", "owner", "500", "1500", "fair"];
    assert_eq!(String::from_utf8(e.take_output()).unwrap(), evalsha(&EXTEND, &extend));
}

#[test]
fn a_fair_semaphore_attempt_sends_its_queue_and_reads_its_refusals() {
    let mut e = engine();
    let kind = HoldKind::Permit { limit: 3 };
    let holders = "p:{k}:semaphore";
    let keys = ["p:{k}:semaphore:limit", "p:{k}:semaphore:fence", "p:{k}:semaphore:weights"];
    let fair = ["p:{k}:semaphore:queue", "p:{k}:semaphore:places", "p:{k}:semaphore:fair"];
    let id = e.fair_acquire("k", "owner", 500, kind, 2, true, 0);
    let mut parts = vec!["7", holders];
    parts.extend(keys);
    parts.extend(fair);
    parts.extend(["owner", "500", "3", "1000", "2", "1"]);
    assert_eq!(String::from_utf8(e.take_output()).unwrap(), evalsha(&FAIR_SEMAPHORE_ACQUIRE, &parts));
    // Nil: handles that are not fair hold it.
    let done = feed(&mut e, b"$-1\r\n");
    assert_eq!(done[0].id, id);
    assert!(
        matches!(&done[0].result, Err(LockError::InvalidArgument(m)) if m.contains("held by a handle that is not fair"))
    );
    // -L: held with another limit.
    e.fair_acquire("k", "owner", 500, kind, 1, false, 0);
    e.take_output();
    let done = feed(&mut e, b":-5\r\n");
    assert!(
        matches!(&done[0].result, Err(LockError::InvalidArgument(m)) if m.contains("held with limit 5; this handle asks for 3"))
    );
    // A plain attempt sends the mark, and nil is its refusal; a release sends the queue.
    e.acquire_permit("k", "plain", 500, kind, 1, 0);
    let mut parts = vec!["5", holders];
    parts.extend(keys);
    parts.push(fair[2]);
    parts.extend(["plain", "500", "3", "1000", "1"]);
    assert_eq!(String::from_utf8(e.take_output()).unwrap(), evalsha(&SEMAPHORE_ACQUIRE, &parts));
    let done = feed(&mut e, b"$-1\r\n");
    assert!(
        matches!(&done[0].result, Err(LockError::InvalidArgument(m)) if m.contains("is fair (fair handles hold it or wait for it)"))
    );
    e.release_permit("k", "plain", kind, 0);
    let mut parts = vec!["6", holders, keys[0], keys[2]];
    parts.extend(fair);
    parts.push("plain");
    assert_eq!(String::from_utf8(e.take_output()).unwrap(), evalsha(&SEMAPHORE_RELEASE, &parts));
}

/// The RESP of `EVALSHA` with `script`'s sha and `parts` (the key count, the keys, the arguments).
fn evalsha(script: &Script, parts: &[&str]) -> String {
    let mut out = format!("*{}\r\n$7\r\nEVALSHA\r\n$40\r\n{}\r\n", parts.len() + 2, script.sha());
    for part in parts {
        out.push('$');
        out.push_str(&part.len().to_string());
        out.push_str("\r\n");
        out.push_str(part);
        out.push_str("\r\n");
    }
    out
}

#[test]
fn an_elections_extend_and_release_take_its_value_along_and_a_plain_locks_send_what_they_did() {
    let mut e = engine();
    e.extend("k", "o", 500, 0);
    e.release("k", "o", 0);
    let plain = String::from_utf8(e.take_output()).unwrap();
    assert_eq!(
        plain,
        evalsha(&EXTEND, &["2", "p:{k}", "p:{k}:fence", "o", "500", "1500"])
            + &evalsha(&RELEASE, &["1", "p:{k}", "o"])
    );
    let key = format!("{}e", locksmith_core::validate::ELECTION_KEY_PREFIX);
    e.extend(&key, "o", 500, 0);
    e.release(&key, "o", 0);
    let election = String::from_utf8(e.take_output()).unwrap();
    let lock = format!("p:{{{key}}}");
    let (fence, value) = (format!("{lock}:fence"), format!("{lock}:value"));
    assert_eq!(
        election,
        evalsha(&EXTEND, &["3", &lock, &fence, &value, "o", "500", "1500"])
            + &evalsha(&RELEASE, &["2", &lock, &value, "o"])
    );
}

#[test]
fn replies_settle_requests_in_order_across_chunk_boundaries() {
    let mut e = engine();
    let a = e.acquire("a", "o", 1000, 0);
    let b = e.release("a", "o", 0);
    let c = e.remaining_time("a", 0);
    let d = e.is_held_by("a", "o", 0);
    let bytes = b":1700000000000001\r\n:1\r\n:-2\r\n$1\r\no\r\n";
    let mut done = Vec::new();
    for chunk in bytes.chunks(3) {
        e.feed(chunk, 0, &mut done).unwrap();
    }
    let got: Vec<_> = done.into_iter().map(|c| (c.id, c.result.unwrap())).collect();
    assert_eq!(
        got,
        vec![
            (a, Value::Acquired(Some(1_700_000_000_000_001))),
            (b, Value::Flag(true)),
            (c, Value::Millis(None)),
            (d, Value::Flag(true)),
        ]
    );
    assert_eq!(e.pending(), 0);
}

#[test]
fn noscript_resends_the_call_as_eval() {
    let mut e = engine();
    let id = e.release("k", "o", 0);
    e.take_output();
    assert!(feed(&mut e, b"-NOSCRIPT No matching script.\r\n").is_empty());
    let again = String::from_utf8(e.take_output()).unwrap();
    assert!(again.starts_with("*5\r\n$4\r\nEVAL\r\n"), "{again}");
    assert!(again.contains(RELEASE.source));
    let done = feed(&mut e, b":0\r\n");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].id, id);
    assert_eq!(done[0].result.as_ref().unwrap(), &Value::Flag(false));
}

#[test]
fn server_errors_keep_their_text_and_transient_ones_are_unavailable() {
    let mut e = engine();
    e.acquire("k", "o", 10, 0);
    e.acquire("k", "o", 10, 0);
    let done =
        feed(&mut e, b"-WRONGTYPE key p:{k} holds a hash, not a lock\r\n-LOADING Redis is loading\r\n");
    let first = done[0].result.as_ref().unwrap_err();
    assert_eq!(first.code(), "STORE_ERROR");
    assert!(first.to_string().contains("holds a hash"), "{first}");
    assert_eq!(done[1].result.as_ref().unwrap_err().code(), "STORE_UNAVAILABLE");
}

#[test]
fn a_late_reply_fails_its_request_and_is_dropped_when_it_comes() {
    let mut e = engine();
    let a = e.acquire("k", "o", 10, 0);
    let b = e.is_locked("k", 50);
    let mut done = Vec::new();
    assert!(!e.expire(99, &mut done));
    assert!(done.is_empty());
    assert!(!e.expire(100, &mut done));
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].id, a);
    assert_eq!(done[0].result.as_ref().unwrap_err().code(), "STORE_UNAVAILABLE");
    // The connection stays; the late reply is read and dropped, the next one settles b.
    let later = feed(&mut e, b":0\r\n:1\r\n");
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].id, b);
    assert_eq!(later[0].result.as_ref().unwrap(), &Value::Flag(true));
}

#[test]
fn a_reply_overdue_for_long_resets_the_connection() {
    let mut e = engine();
    let a = e.acquire("k", "o", 10, 0);
    let b = e.is_locked("k", 5_000);
    let mut done = Vec::new();
    assert!(!e.expire(100, &mut done));
    assert_eq!(done.len(), 1);
    assert!(!e.expire(100 + RESET_AFTER_MS - 1, &mut done));
    assert_eq!(done.len(), 2, "b is past its own deadline by now");
    assert!(e.expire(100 + RESET_AFTER_MS, &mut done));
    let ids: Vec<_> = done.iter().map(|c| c.id).collect();
    assert_eq!(ids, vec![a, b], "each request fails once");
    assert_eq!(e.pending(), 0);
    assert!(!e.has_output());
}

#[test]
fn the_handshake_goes_first_and_settles_once() {
    let mut e = engine();
    let user = e.is_locked("k", 0);
    let hs = e.handshake(&Handshake { auth: Some((Some("u".into()), "pw".into())), db: 2 }, 0);
    let out = String::from_utf8(e.take_output()).unwrap();
    assert!(
        out.starts_with("*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$2\r\npw\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n"),
        "{out}"
    );
    assert!(out.ends_with("*2\r\n$6\r\nEXISTS\r\n$5\r\np:{k}\r\n"), "{out}");
    let sha = format!("$40\r\n{}\r\n", ACQUIRE.sha());
    let shas = sha.repeat(scripts::ALL.len());
    let replies = format!("+OK\r\n+OK\r\n$22\r\nredis_version:7.0.15\r\n\r\n{shas}:0\r\n");
    let done = feed(&mut e, replies.as_bytes());
    let got: Vec<_> = done.into_iter().map(|c| (c.id, c.result.unwrap())).collect();
    assert_eq!(got, vec![(hs, Value::Done), (user, Value::Flag(false))]);
}

#[test]
fn a_refused_login_or_an_old_server_fails_the_handshake_once() {
    let mut e = engine();
    e.handshake(&Handshake { auth: Some((None, "bad".into())), db: 0 }, 0);
    // AUTH, then INFO and every SCRIPT LOAD refused.
    let replies = format!(
        "-WRONGPASS invalid username-password pair\r\n{}",
        "-NOAUTH x\r\n".repeat(1 + scripts::ALL.len())
    );
    let done = feed(&mut e, replies.as_bytes());
    assert_eq!(done.len(), 1);
    assert!(done[0].result.as_ref().unwrap_err().to_string().contains("refused the credentials"));
    assert_eq!(e.pending(), 0);

    let mut e = engine();
    e.handshake(&Handshake::default(), 0);
    let replies = format!("$21\r\nredis_version:6.2.1\r\n\r\n{}", "$1\r\nx\r\n".repeat(scripts::ALL.len()));
    let done = feed(&mut e, replies.as_bytes());
    assert_eq!(done.len(), 1);
    assert!(done[0].result.as_ref().unwrap_err().to_string().contains("needs Redis 7.0"));
}

#[test]
fn bytes_that_are_not_resp_are_an_error() {
    let mut e = engine();
    e.is_locked("k", 0);
    let mut done = Vec::new();
    assert!(e.feed(b"HTTP/1.1 400 Bad Request\r\n", 0, &mut done).is_err());
}

#[test]
fn min_replicas_waits_after_grants_and_fails_those_too_few_replicas_acknowledged() {
    let mut e = engine();
    e.set_min_replicas(1, 50);
    let a = e.acquire("k", "o", 1000, 0);
    let out = String::from_utf8(e.take_output()).unwrap();
    assert!(out.contains("EVALSHA") && out.ends_with("*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$2\r\n50\r\n"), "{out}");
    // The grant is held back until WAIT answers; no replica acknowledged it: a failure.
    assert!(feed(&mut e, b":42\r\n").is_empty());
    let done = feed(&mut e, b":0\r\n");
    assert_eq!(done.len(), 1);
    assert!(
        matches!(&done[0], Completion { id, result: Err(LockError::StoreUnavailable(m)) } if *id == a && m.contains("0 of the 1"))
    );
    // One did: the token.
    let b = e.acquire("k", "o", 1000, 0);
    let done = feed(&mut e, b":43\r\n:1\r\n");
    assert!(matches!(&done[..], [Completion { id, result: Ok(Value::Acquired(Some(43))) }] if *id == b));
    // WAIT refused (the master was demoted under the write): unavailable, not a store error.
    let w = e.acquire("k", "o", 1000, 0);
    let done = feed(&mut e, b":44\r\n-ERR WAIT cannot be used with replica instances\r\n");
    assert!(
        matches!(&done[..], [Completion { id, result: Err(LockError::StoreUnavailable(_)) }] if *id == w),
        "{done:?}"
    );
    // Nothing granted: nothing to fail, whatever WAIT says.
    let c = e.acquire("k", "o", 1000, 0);
    let done = feed(&mut e, b":0\r\n:0\r\n");
    assert!(matches!(&done[..], [Completion { id, result: Ok(Value::Acquired(None)) }] if *id == c));
    // Reads and releases send no WAIT.
    e.take_output();
    e.release("k", "o", 0);
    e.is_locked("k", 0);
    assert!(!String::from_utf8(e.take_output()).unwrap().contains("WAIT"));
    // A script reloaded after NOSCRIPT waits too; the first WAIT's answer is dropped.
    feed(&mut e, b":1\r\n:1\r\n");
    let d = e.extend("k", "o", 1000, 0);
    e.take_output();
    assert!(feed(&mut e, b"-NOSCRIPT No matching script\r\n:0\r\n").is_empty());
    let out = String::from_utf8(e.take_output()).unwrap();
    assert!(out.starts_with("*8\r\n$4\r\nEVAL\r\n") && out.contains("WAIT"), "{out}");
    let done = feed(&mut e, b":1\r\n:1\r\n");
    assert!(matches!(&done[..], [Completion { id, result: Ok(Value::Flag(true)) }] if *id == d));
}

#[test]
fn an_unfenced_acquire_is_one_plain_set_and_its_hold_has_no_token() {
    let mut e =
        Engine::new(EngineOptions { key_prefix: "p:".into(), command_timeout_ms: 100, fencing: false });
    let taken = e.acquire("k", "owner", 500, 0);
    let held = e.acquire("k", "other", 500, 0);
    let out = String::from_utf8(e.take_output()).unwrap();
    let set = "*6\r\n$3\r\nSET\r\n$5\r\np:{k}\r\n$5\r\nowner\r\n$2\r\nNX\r\n$2\r\nPX\r\n$3\r\n500\r\n";
    assert!(out.starts_with(set), "{out}");
    assert!(!out.contains("EVALSHA") && !out.contains("fence"), "{out}");
    let got: Vec<_> =
        feed(&mut e, b"+OK\r\n$-1\r\n").into_iter().map(|c| (c.id, c.result.unwrap())).collect();
    assert_eq!(got, vec![(taken, Value::Taken(true)), (held, Value::Taken(false))]);
    // Release and extend keep their scripts (and extend keeps the counter alive).
    e.release("k", "owner", 0);
    e.extend("k", "owner", 500, 0);
    let out = String::from_utf8(e.take_output()).unwrap();
    assert!(out.contains(RELEASE.sha()) && out.contains(EXTEND.sha()), "{out}");
}

#[test]
fn an_unfenced_acquire_that_min_replicas_did_not_reach_fails() {
    let mut e =
        Engine::new(EngineOptions { key_prefix: "p:".into(), command_timeout_ms: 100, fencing: false });
    e.set_min_replicas(1, 50);
    let id = e.acquire("k", "owner", 500, 0);
    let out = String::from_utf8(e.take_output()).unwrap();
    assert!(out.contains("SET") && out.contains("WAIT"), "{out}");
    let done = feed(&mut e, b"+OK\r\n:0\r\n");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].id, id);
    assert!(matches!(done[0].result, Err(LockError::StoreUnavailable(_))), "{:?}", done[0].result);
}
