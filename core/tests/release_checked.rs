//! `Lock::release_checked_now`: `run()`'s end on a synchronous store in one call, saying
//! what `live_generation` asked just before the release would, and recording a loss the
//! same way.

mod common;

use std::sync::Arc;

use locksmith_core::{FakeTimer, HoldEnd, Lock};

use common::memory;

fn lost_reason(l: &Lock, timer: &FakeTimer) -> String {
    match timer.run(l.hold_ended()) {
        HoldEnd::Lost(err) => err.to_string(),
        HoldEnd::Released => panic!("lost, not released"),
    }
}

#[test]
fn a_live_hold_is_released_and_not_lost() {
    let timer = FakeTimer::new();
    let l = Lock::new("k", 100, memory(&timer), Arc::new(timer.clone())).unwrap();
    assert_eq!(l.release_checked_now(), Some((false, false)), "nothing held");
    assert!(l.try_acquire_now().unwrap().unwrap());
    timer.advance(99);
    assert_eq!(l.release_checked_now(), Some((true, false)));
    assert!(!l.has_owner());
    assert!(matches!(timer.run(l.hold_ended()), HoldEnd::Released));
}

#[test]
fn a_hold_past_its_ttl_is_lost_as_live_generation_records_it() {
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let checked = Lock::new("a", 100, store.clone(), Arc::new(timer.clone())).unwrap();
    let asked = Lock::new("b", 100, store.clone(), Arc::new(timer.clone())).unwrap();
    assert!(checked.try_acquire_now().unwrap().unwrap());
    assert!(asked.try_acquire_now().unwrap().unwrap());
    timer.advance(100);
    // Taken by someone else meanwhile: the release leaves that hold alone.
    let other = Lock::new("a", 1_000, store, Arc::new(timer.clone())).unwrap();
    assert!(other.try_acquire_now().unwrap().unwrap());
    assert_eq!(checked.release_checked_now(), Some((false, true)));
    // The two-step way: the same loss, for the same reason.
    assert_eq!(asked.live_generation(), None);
    assert_eq!(asked.release_now(), Some(false));
    assert_eq!(lost_reason(&checked, &timer), lost_reason(&asked, &timer).replace("\"b\"", "\"a\""));
    assert!(lost_reason(&checked, &timer).contains("its TTL passed without an extend"));
    assert_eq!(other.release_now(), Some(true), "the other hold was left alone");
}
