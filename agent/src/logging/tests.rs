use super::*;

#[test]
fn a_filter_turns_kube_clients_builder_logs_off_unless_it_names_kube_client() {
    let filter = parse("debug").unwrap().to_string();
    assert!(filter.contains("kube_client::client::builder=off"), "{filter}");
    let filter = parse("kube_client=debug,info").unwrap().to_string();
    assert!(!filter.contains("builder=off"), "{filter}");
}

#[test]
fn a_bad_filter_is_an_error_naming_it() {
    let error = parse("outpost=loud").unwrap_err().to_string();
    assert!(error.contains("outpost=loud") && error.contains("EnvFilter"), "{error}");
}

#[test]
fn the_handle_replaces_the_filter_of_its_layer() {
    let (layer, handle) = reload::Layer::<EnvFilter, Registry>::new(parse("info").unwrap());
    let level = LogLevel { handle };
    assert!(level.current().unwrap().contains("info"));
    let set = level.set(" outpost=debug,warn\n").unwrap();
    assert!(set.contains("outpost=debug"), "{set}");
    assert_eq!(level.current().unwrap(), set);
    assert!(level.set("outpost=loud").is_err());
    assert_eq!(level.current().unwrap(), set, "a bad filter changes nothing");
    drop(layer);
    assert!(matches!(level.set("info"), Err(Error::Reload(_))));
}
