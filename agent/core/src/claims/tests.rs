use std::collections::BTreeSet;

use proptest::prelude::*;

use super::{Action, Claims};

fn keys(names: &[&'static str]) -> BTreeSet<&'static str> {
    names.iter().copied().collect()
}

#[test]
fn the_first_claimant_starts_a_key_and_the_last_stops_it() {
    let mut claims = Claims::default();
    assert_eq!(claims.claim("a", keys(&["cm"])), vec![Action::Start("cm")]);
    assert_eq!(claims.claim("b", keys(&["cm"])), vec![], "already watched");
    assert_eq!(claims.claimants(&"cm").collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(claims.release("a"), vec![], "b still claims it");
    assert_eq!(claims.release("b"), vec![Action::Stop("cm")]);
    assert!(!claims.is_claimed(&"cm"));
    assert_eq!(claims.release("b"), vec![], "a second release changes nothing");
}

#[test]
fn a_changed_claim_starts_what_is_new_and_stops_what_it_dropped() {
    let mut claims = Claims::default();
    claims.claim("a", keys(&["one", "two"]));
    claims.claim("b", keys(&["two"]));
    let actions = claims.claim("a", keys(&["two", "three"]));
    assert_eq!(actions, vec![Action::Start("three"), Action::Stop("one")]);
    assert_eq!(claims.claim("a", keys(&["two", "three"])), vec![], "unchanged");
    assert_eq!(claims.keys("a"), Some(&keys(&["two", "three"])));
}

#[test]
fn an_empty_claim_is_no_claim() {
    let mut claims = Claims::default();
    claims.claim("a", keys(&["cm"]));
    assert_eq!(claims.claim("a", keys(&[])), vec![Action::Stop("cm")]);
    assert!(!claims.has_claim("a"));
    assert_eq!(claims.claimed().count(), 0);
}

#[derive(Debug, Clone)]
enum Op {
    Claim(u8, BTreeSet<u8>),
    Release(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4u8, proptest::collection::btree_set(0..6u8, 0..4)).prop_map(|(u, k)| Op::Claim(u, k)),
        (0..4u8).prop_map(Op::Release),
    ]
}

proptest! {
    /// Whatever the claims and releases, the keys started and not stopped since are
    /// exactly the claimed ones, each started once at a time, and each pod's claim is
    /// what it last claimed.
    #[test]
    fn the_watched_keys_are_always_the_claimed_ones(ops in proptest::collection::vec(op(), 0..40)) {
        let mut claims = Claims::default();
        let mut watched = BTreeSet::new();
        let mut expected: std::collections::HashMap<String, BTreeSet<u8>> = Default::default();
        for op in ops {
            let actions = match op {
                Op::Claim(uid, keys) => {
                    let uid = uid.to_string();
                    if keys.is_empty() { expected.remove(&uid); } else { expected.insert(uid.clone(), keys.clone()); }
                    claims.claim(&uid, keys)
                }
                Op::Release(uid) => {
                    expected.remove(&uid.to_string());
                    claims.release(&uid.to_string())
                }
            };
            for action in actions {
                match action {
                    Action::Start(key) => prop_assert!(watched.insert(key), "started twice"),
                    Action::Stop(key) => prop_assert!(watched.remove(&key), "stopped unwatched"),
                }
            }
            let claimed: BTreeSet<u8> = expected.values().flatten().copied().collect();
            prop_assert_eq!(&watched, &claimed);
            prop_assert_eq!(claims.claimed().copied().collect::<BTreeSet<u8>>(), claimed);
            for (uid, keys) in &expected {
                prop_assert_eq!(claims.keys(uid), Some(keys));
            }
        }
    }
}
