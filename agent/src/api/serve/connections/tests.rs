use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

const LIMITS: Limits = Limits { total: 4, per_ip: 2 };

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

#[test]
fn each_address_gets_its_share_and_no_more() {
    let mut c = Connections::new(LIMITS);
    assert!(c.add(ip(1)));
    assert!(c.add(ip(1)));
    assert!(!c.add(ip(1)), "per-address cap");
    assert!(c.add(ip(2)));
    assert!(c.add(ip(2)));
    assert!(!c.add(ip(3)), "total cap, though ip 3 has none");
    c.remove(ip(1));
    assert!(c.add(ip(3)), "a freed place is free for anyone");
    assert!(!c.add(ip(1)));
    assert_eq!(c.total(), 4);
}

#[test]
fn an_ipv4_mapped_address_counts_as_its_ipv4_address() {
    let mut c = Connections::new(LIMITS);
    let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
    assert!(c.add(ip(1)));
    assert!(c.add(mapped));
    assert!(!c.add(ip(1)));
    assert!(c.add(IpAddr::V6(Ipv6Addr::LOCALHOST)));
}

#[test]
fn removing_what_was_never_added_changes_nothing() {
    let mut c = Connections::new(LIMITS);
    c.remove(ip(9));
    assert_eq!(c.total(), 0);
}

#[test]
fn slots_give_their_place_back_when_dropped() {
    let connections = Arc::new(Mutex::new(Connections::new(LIMITS)));
    let a = Slot::take(&connections, ip(1)).unwrap();
    let b = Slot::take(&connections, ip(1)).unwrap();
    assert!(Slot::take(&connections, ip(1)).is_none());
    drop(a);
    let c = Slot::take(&connections, ip(1));
    assert!(c.is_some());
    drop((b, c));
    assert_eq!(connections.lock().unwrap().total(), 0);
}

proptest! {
    /// Whatever the order of connections and disconnections, the counts stay within
    /// the caps and go back to zero when everything is closed.
    #[test]
    fn counts_stay_within_the_caps(ops in proptest::collection::vec((0u8..4, any::<bool>()), 0..200)) {
        let mut c = Connections::new(LIMITS);
        let mut open: Vec<IpAddr> = Vec::new();
        for (last, connect) in ops {
            if connect {
                if c.add(ip(last)) {
                    open.push(ip(last));
                }
            } else if let Some(pos) = open.iter().position(|o| *o == ip(last)) {
                c.remove(open.swap_remove(pos));
            }
            prop_assert!(c.total() <= LIMITS.total);
            prop_assert_eq!(c.total(), open.len());
            for a in 0..4 {
                prop_assert!(open.iter().filter(|o| **o == ip(a)).count() <= LIMITS.per_ip);
            }
        }
        for o in open.drain(..) {
            c.remove(o);
        }
        prop_assert_eq!(c.total(), 0);
    }
}
