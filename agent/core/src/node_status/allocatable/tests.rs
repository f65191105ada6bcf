use super::*;

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;

fn capacity() -> Capacity {
    Capacity {
        cpu_milli: 2000,
        memory: Some(8 * GI),
        ephemeral_storage: Some(100 * GI),
        pids: Some(4_194_304),
    }
}

#[test]
fn reservations_parse_kubelets_resources() {
    let reserved = Reserved::parse([
        ("cpu", "100m"),
        ("memory", "100Mi"),
        ("ephemeral-storage", "1Gi"),
        ("pid", "1000"),
    ])
    .unwrap();
    assert_eq!(
        reserved,
        Reserved { cpu_milli: 100, memory: 100 * MI, ephemeral_storage: GI, pids: 1000 }
    );
    assert_eq!(Reserved::parse([("cpu", "1.5")]).unwrap().cpu_milli, 1500);
    let e = Reserved::parse([("gpu", "1")]).unwrap_err();
    assert!(e.to_string().contains("gpu: cannot be reserved"), "{e}");
    let e = Reserved::parse([("memory", "lots")]).unwrap_err();
    assert!(e.to_string().starts_with("memory=lots: "), "{e}");
}

#[test]
fn allocatable_is_capacity_less_reservations_and_hard_thresholds() {
    let reservation = Reservation {
        system_reserved: Reserved {
            cpu_milli: 100,
            memory: 200 * MI,
            ephemeral_storage: GI,
            pids: 0,
        },
        kube_reserved: Reserved { cpu_milli: 150, memory: 300 * MI, ..Reserved::default() },
        eviction_hard: HardEviction::default(),
    };
    let allocatable = reservation.allocatable(&capacity());
    assert_eq!(allocatable.cpu_milli, 1750);
    assert_eq!(allocatable.memory, Some(8 * GI - 500 * MI - 100 * MI));
    assert_eq!(allocatable.ephemeral_storage, Some(100 * GI - GI - 10 * GI));
    // No thresholds: the reservations alone.
    let none =
        HardEviction { memory_available: None, nodefs_available: Some(Threshold::Bytes(GI)) };
    let allocatable = Reservation { eviction_hard: none, ..reservation }.allocatable(&capacity());
    assert_eq!(allocatable.memory, Some(8 * GI - 500 * MI));
    assert_eq!(allocatable.ephemeral_storage, Some(98 * GI));
    // More reserved than there is: nothing, not a wrap-around.
    let greedy = Reservation {
        system_reserved: Reserved { cpu_milli: 5000, memory: 16 * GI, ..Reserved::default() },
        ..Reservation::default()
    };
    let allocatable = greedy.allocatable(&capacity());
    assert_eq!((allocatable.cpu_milli, allocatable.memory), (0, Some(0)));
    let unknown = Capacity { memory: None, ephemeral_storage: None, ..capacity() };
    assert_eq!(Reservation::default().allocatable(&unknown).memory, None);
}

#[test]
fn the_pods_cgroup_is_limited_to_capacity_less_reservations_when_enforced() {
    let reservation = Reservation {
        system_reserved: Reserved { cpu_milli: 500, memory: GI, pids: 1000, ..Reserved::default() },
        kube_reserved: Reserved { memory: 512 * MI, ..Reserved::default() },
        eviction_hard: HardEviction::default(),
    };
    let enforced = reservation.pods_cgroup(&capacity(), true);
    assert_eq!(enforced.cpu_shares, milli_cpu_to_shares(1500));
    assert_eq!(
        enforced.memory_limit,
        Some((8 * GI - GI - 512 * MI) as i64),
        "no eviction threshold"
    );
    assert_eq!(enforced.pids_limit, Some(4_194_304 - 1000));
    assert_eq!(enforced.cpu_quota, None);
    let free = reservation.pods_cgroup(&capacity(), false);
    assert_eq!(free, ResourceConfig::unlimited(2048));
}

#[test]
fn percentages_take_their_share_of_the_capacity() {
    assert_eq!(Threshold::Percentage(10.0).amount(1000), 100);
    assert_eq!(Threshold::Percentage(5.5).amount(1000), 55);
    assert_eq!(Threshold::Percentage(250.0).amount(1000), 1000);
    assert_eq!(Threshold::Bytes(7).amount(1000), 7);
}
