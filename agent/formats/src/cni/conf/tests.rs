use proptest::prelude::*;

use super::*;

fn parse(name: &str, text: &str) -> Result<NetworkList> {
    NetworkList::parse(Path::new(name), text.as_bytes())
}

const LIST: &str = r#"{
    "cniVersion": "1.0.0", "name": "net",
    "plugins": [
        {"type": "bridge", "bridge": "br0"},
        {"type": "portmap", "capabilities": {"portMappings": true}}
    ]
}"#;

#[test]
fn a_conflist_keeps_its_plugins_in_order() {
    let list = parse("/d/10.conflist", LIST).unwrap();
    assert_eq!(list.name, "net");
    assert_eq!(list.cni_version, "1.0.0");
    assert_eq!(list.file, Path::new("/d/10.conflist"));
    let kinds: Vec<_> = list.plugins.iter().map(|p| p.kind.as_str()).collect();
    assert_eq!(kinds, ["bridge", "portmap"]);
    assert_eq!(list.plugins[0].conf["bridge"], "br0");
    assert!(list.plugins[1].has_capability("portMappings"));
    assert!(!list.plugins[0].has_capability("portMappings"));
}

#[test]
fn a_conf_is_wrapped_into_a_list_of_one() {
    for name in ["/d/10.conf", "/d/10.json"] {
        let list =
            parse(name, r#"{"cniVersion": "0.4.0", "name": "n", "type": "ptp", "mtu": 1400}"#)
                .unwrap();
        assert_eq!(list.name, "n");
        assert_eq!(list.cni_version, "0.4.0");
        assert_eq!(list.plugins.len(), 1);
        assert_eq!(list.plugins[0].kind, "ptp");
        assert_eq!(list.plugins[0].conf["mtu"], 1400);
    }
}

#[test]
fn every_supported_version_is_accepted_and_others_are_not() {
    for version in SUPPORTED_VERSIONS {
        let text = LIST.replace("1.0.0", version);
        assert_eq!(parse("a.conflist", &text).unwrap().cni_version, version);
    }
    for version in ["0.2.0", "1.1.0", "", "1.0"] {
        let text = LIST.replace("1.0.0", version);
        let error = parse("a.conflist", &text).unwrap_err();
        assert!(matches!(error, Error::Version { .. }), "{version}: {error}");
        assert!(error.to_string().contains("0.3.1, 0.4.0, 1.0.0"), "{error}");
    }
    let error = parse("a.conflist", r#"{"name": "n", "plugins": [{"type": "x"}]}"#).unwrap_err();
    assert!(matches!(error, Error::Version { .. }));
}

#[test]
fn broken_configs_name_the_file_and_the_fix() {
    type Expected = fn(&Error) -> bool;
    let cases: [(&str, Expected); 8] = [
        ("{", |e| matches!(e, Error::Json { .. })),
        ("[]", |e| matches!(e, Error::NotObject { .. })),
        (r#"{"cniVersion": "1.0.0", "plugins": [{"type": "x"}]}"#, |e| {
            matches!(e, Error::NoName { .. })
        }),
        (r#"{"cniVersion": "1.0.0", "name": "n"}"#, |e| matches!(e, Error::NoPlugins { .. })),
        (r#"{"cniVersion": "1.0.0", "name": "n", "plugins": []}"#, |e| {
            matches!(e, Error::NoPlugins { .. })
        }),
        (r#"{"cniVersion": "1.0.0", "name": "n", "plugins": [3]}"#, |e| {
            matches!(e, Error::PluginType { index: 0, .. })
        }),
        (r#"{"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "a"}, {}]}"#, |e| {
            matches!(e, Error::PluginType { index: 1, .. })
        }),
        (r#"{"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "../bin/sh"}]}"#, |e| {
            matches!(e, Error::PluginName { index: 0, .. })
        }),
    ];
    for (text, expected) in cases {
        let error = parse("/etc/cni/net.d/bad.conflist", text).unwrap_err();
        assert!(expected(&error), "{text}: {error:?}");
        assert!(error.to_string().contains("/etc/cni/net.d/bad.conflist"), "{error}");
    }
}

#[test]
fn a_conf_without_type_is_refused() {
    let error = parse("a.conf", r#"{"cniVersion": "1.0.0", "name": "n"}"#).unwrap_err();
    assert!(matches!(error, Error::PluginType { index: 0, .. }), "{error:?}");
}

#[test]
fn to_conflist_round_trips_lists_and_wrapped_confs() {
    for (name, text) in
        [("a.conflist", LIST), ("b.conf", r#"{"cniVersion": "0.3.1", "name": "n", "type": "ptp"}"#)]
    {
        let list = parse(name, text).unwrap();
        let document = serde_json::to_vec(&list.to_conflist()).unwrap();
        let again = NetworkList::parse(Path::new("x.conflist"), &document).unwrap();
        assert_eq!(NetworkList { file: list.file.clone(), ..again }, list);
    }
}

#[test]
fn prev_result_on_del_starts_with_0_4_0() {
    for (version, expected) in
        [("0.3.0", false), ("0.3.1", false), ("0.4.0", true), ("1.0.0", true)]
    {
        let list = parse("a.conflist", &LIST.replace("1.0.0", version)).unwrap();
        assert_eq!(list.del_takes_prev_result(), expected, "{version}");
    }
}

#[test]
fn pick_takes_the_lexically_first_config() {
    assert_eq!(pick(["20-b.conf", "10-a.conflist", "05-z.json"]), Some("05-z.json"));
    assert_eq!(pick(["README", "99.conf", "notes.txt", ".00.conflist.tmp"]), Some("99.conf"));
    assert_eq!(pick(["README", ".hidden.conflist", "x.conflist.bak"]), None);
    assert_eq!(pick([]), None);
}

#[test]
fn the_default_network_parses_and_uses_the_cache_dir() {
    let network = DefaultNetwork::new(Path::new("/var/lib/outpost/cni"));
    let text = serde_json::to_vec(&network.conflist()).unwrap();
    let list = NetworkList::parse(Path::new(DEFAULT_FILE), &text).unwrap();
    assert_eq!(list.name, "outpost");
    assert_eq!(list.cni_version, "1.0.0");
    let kinds: Vec<_> = list.plugins.iter().map(|p| p.kind.as_str()).collect();
    assert_eq!(kinds, ["bridge", "portmap"]);
    let bridge = &list.plugins[0].conf;
    assert_eq!(bridge["bridge"], "outpost0");
    assert_eq!(bridge["isGateway"], true);
    assert_eq!(bridge["ipMasq"], true);
    assert_eq!(bridge["ipam"]["type"], "host-local");
    assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], "10.42.0.0/16");
    assert_eq!(bridge["ipam"]["dataDir"], "/var/lib/outpost/cni/ipam");
    assert!(list.plugins[1].has_capability("portMappings"));
    assert_eq!(list.plugins[1].conf["snat"], true);
}

proptest! {
    #[test]
    fn pick_is_the_minimum_config_name(names in proptest::collection::vec("[a-z0-9.]{0,8}\\.(conf|conflist|json|txt)", 0..8)) {
        let picked = pick(names.iter().map(String::as_str));
        let configs: Vec<&String> = names.iter().filter(|n| is_config_name(n)).collect();
        prop_assert_eq!(picked.is_some(), !configs.is_empty());
        if let Some(picked) = picked {
            prop_assert!(configs.iter().all(|n| picked <= n.as_str()));
        }
    }

    #[test]
    fn parsing_never_panics(text in "\\PC{0,64}") {
        let _ = NetworkList::parse(Path::new("a.conflist"), text.as_bytes());
        let _ = NetworkList::parse(Path::new("a.conf"), text.as_bytes());
    }
}
